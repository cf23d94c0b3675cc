"""Site render speed and page sizes on a synthetic campaign, next to DuckDB alone loading the same JSON.

Builds a campaign of 200 cells x 50 kernels in a temp folder: each cell's ncu_kernels.json samples real kernel
rows of tests/golden/*/ncu_kernels.json (H200 captures, --set full and --set basic) and perturbs their duration,
arithmetic intensity and throughput; each cell also gets a kernel_times.json (time shares). Then, in one run:
  - baseline: DuckDB alone, `read_json` over the 200 ncu_kernels.json files (count the kernel rows),
  - report_render of the whole site (warehouse load, gather, every page, every CSV/JSON download, writes),
    and separately the warehouse alone and the gather step,
  - page sizes (largest page besides the shared static files) and the roofline's point count and trace types,
  - the site's weight: every file under the site folder, the static files, and which plotly.js each page loads,
  - optionally (if playwright + Chromium are there): the roofline page opened in headless Chromium, time to
    draw and time of one zoom (Plotly.relayout), i.e. whether 10,000 points stay interactive.

    .venv/bin/python benchmarks/bench_render.py [--cells 200] [--kernels 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CHROMIUM = Path("/usr/bin/chromium")


def real_rows() -> list[dict[str, Any]]:
    rows = []
    for path in sorted(GOLDEN.glob("*/ncu_kernels.json")):
        data = json.loads(path.read_text())
        sets = {s["id"]: s for s in data["sources"]}
        rows += [{**k, "_source": sets[k["source"]]} for k in data["kernels"]]
    return rows


def _kernel(rng: random.Random, base: dict[str, Any], j: int) -> dict[str, Any]:
    k = {key: v for key, v in base.items() if key != "_source"}
    scale = rng.uniform(0.5, 2.0)
    fn = f"{base['function']}_v{j:02d}"
    k.update(id=f"k{j:03d}", function=fn, name=fn, source=base["_source"]["id"])
    k["duration_ns"] = round(base["duration_ns"] * scale, 1)
    k["launches"] = rng.choice((1, 1, 2, 4))
    if k["arithmetic_intensity"] is not None:  # move along x, slow down, and stay under the roof (H200 numbers)
        k["arithmetic_intensity"] *= rng.uniform(0.6, 1.6)
        peak = {"bf16": 989.5, "fp8": 1979.0}.get(k.get("tensor_dtype") or "", 67.0)
        roof = min(peak, k["arithmetic_intensity"] * 4.8)
        k["achieved_tflops"] = min(k["achieved_tflops"] / scale, 0.95 * roof)
        k["sol_pct"] = min(99.0, k["sol_pct"] / scale)
    k["sm_throughput_pct"] = min(99.0, (k["sm_throughput_pct"] or 1.0) * rng.uniform(0.7, 1.2))
    k.pop("per_launch", None)
    return k


def build(camp: Path, cells: int, kernels: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    rows = real_rows()
    cell_yaml = []
    for c in range(cells):
        cid = f"cell-{c:03d}"
        cell_yaml.append(f"  - id: {cid}\n    context:\n      workload:\n        isl: {128 * (1 + c // 10)}\n"
                         f"        concurrency: {1 + c % 10}\n")
        bases = [rng.choice(rows) for _ in range(kernels)]
        picked = [_kernel(rng, b, j) for j, b in enumerate(bases)]
        sources = sorted({b["_source"]["id"]: b["_source"] for b in bases}.values(), key=lambda s: s["id"])
        out = camp / "cells" / cid
        out.mkdir(parents=True)
        (out / "ncu_kernels.json").write_text(json.dumps({
            "schema_version": 1, "campaign": camp.name, "cell_id": cid, "hardware": "h200_sm90",
            "ceilings_sources": ["sol-ceilings.yaml"], "sources": sources,
            "kernels": picked,
        }))
        total = sum(k["duration_ns"] * k["launches"] * 20 for k in picked)
        times = [{"name": k["name"], "function": k["function"], "source": "trace.json.gz",
                  "instances": 20 * k["launches"],
                  "total_ns": int(k["duration_ns"] * k["launches"] * 20), "avg_ns": k["duration_ns"],
                  "min_ns": None, "max_ns": None,
                  "share_pct": 100.0 * k["duration_ns"] * k["launches"] * 20 / total} for k in picked]
        (out / "kernel_times.json").write_text(json.dumps({
            "schema_version": 1, "campaign": camp.name, "cell_id": cid,
            "sources": [{"id": "trace.json.gz", "file": "trace.json.gz", "format": "torch-trace",
                         "sha256": hashlib.sha256(cid.encode()).hexdigest(), "tool_version": None, "report": None,
                         "kernels": len(times), "warnings": []}],
            "kernels": times,
        }))
    (camp / "config.yaml").write_text(
        f"schema_version: 1\ncampaign: {camp.name}\nhardware: h200_sm90\nsol_rigor: L2\ncontext:\n"
        f"  identity:\n    model: synthetic\n  grounding:\n    trials: 3\ncells:\n" + "".join(cell_yaml))


def duckdb_alone(camp: Path) -> tuple[float, int]:
    files = sorted(str(p) for p in camp.glob("cells/*/ncu_kernels.json"))
    start = time.perf_counter()
    con = duckdb.connect(":memory:")
    n = con.execute("SELECT sum(len(kernels)) FROM read_json($1, format='auto', maximum_object_size=67108864)",
                    [files]).fetchone()
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed, int(n[0]) if n else 0


def stages(camp: Path) -> str:
    """Where render time goes: the warehouse alone (DuckDB load + views), then the whole gather step."""
    from perfreport.warehouse.db import open_campaign
    from perfreport.warehouse.gather import gather

    start = time.perf_counter()
    open_campaign(camp).close()
    warehouse = time.perf_counter() - start
    start = time.perf_counter()
    gather(camp).roofline  # noqa: B018 - the model is built on first use: timed with gather as before
    return (f"of which: warehouse.open_campaign {warehouse:.2f} s, gather (warehouse + queries + bundles + roofline "
            f"model) {time.perf_counter() - start:.2f} s; the rest builds, renders and writes the pages")


def render(camp: Path, site: Path) -> tuple[float, float, Any]:
    """(wall s, CPU s of this process, result): CPU time shows the work when other jobs share the 2 cores."""
    from perfreport.site.render import report_render

    shutil.rmtree(site, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    result = report_render(camp, site)
    return time.perf_counter() - start, time.process_time() - cpu, result


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def incremental(camp: Path, site: Path, cold_best: float) -> str:
    """One cell re-imported (its kernel_times.json changes), then report_render into the site of the last cold
    render: only that cell's pages (and pages 01-08) are built; the result must be byte-identical to a cold render."""
    from perfreport.site.render import report_render

    path = sorted((camp / "cells").iterdir())[len(list((camp / "cells").iterdir())) // 2] / "kernel_times.json"
    doc = json.loads(path.read_text())
    doc["kernels"][0]["total_ns"] = int(doc["kernels"][0]["total_ns"] * 1.5)
    path.write_text(json.dumps(doc))
    start = time.perf_counter()
    result = report_render(camp, site)
    wall = time.perf_counter() - start
    fresh = site.parent / "cold-site"
    shutil.rmtree(fresh, ignore_errors=True)
    report_render(camp, fresh)
    same = _tree(site) == _tree(fresh)
    return (f"incremental render after one cell changed ({path.parent.name}): {wall:.2f} s = {wall / cold_best:.2f}x "
            f"the best cold render (target <= 0.1x: {'met' if wall <= 0.1 * cold_best else 'NOT met'}); "
            f"{result.kept} of {len(result.pages)} pages kept; timing split: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items())
            + f"; byte-identical to a cold render of the same data: {'yes' if same else 'NO'}")


def weight(result: Any) -> str:
    """The site's weight on disk: every file (pages, downloads, static, index), and which plotly.js pages load."""
    files = [p for p in result.site_dir.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    static = sorted((p.name, p.stat().st_size) for p in files if p.parent.name == "static")
    loads: dict[str, int] = {}
    for page, _ in result.pages:
        html = page.read_text(encoding="utf-8")
        bundle = next((b for b in ("plotly-basic.min.js", "plotly.min.js") if f"static/{b}" in html), "none")
        loads[bundle] = loads.get(bundle, 0) + 1
    return (f"site weight: {total:,} bytes ({total / 2**20:.1f} MiB) in {len(files)} files (target < 60 MiB: "
            f"{'met' if total < 60 * 2**20 else 'NOT met'}); static "
            + ", ".join(f"{n} {b:,}" for n, b in static) + "; pages loading plotly.js: "
            + ", ".join(f"{k} {v}" for k, v in sorted(loads.items())))


def browser_check(page: Path) -> str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "browser: playwright not installed, skipped"
    if not CHROMIUM.is_file():
        return f"browser: {CHROMIUM} not found, skipped"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--enable-unsafe-swiftshader"])
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        start = time.perf_counter()
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function("document.querySelector('#roofline .main-svg') !== null", timeout=60000)
        drawn = time.perf_counter() - start
        zoom = tab.evaluate("""async () => { const gd = document.getElementById('roofline');
            const t = performance.now(); await Plotly.relayout(gd, {'xaxis.range': [-1, 2]});
            return performance.now() - t; }""")
        gl = tab.evaluate("document.querySelectorAll('#roofline canvas').length")
        types = tab.evaluate("document.getElementById('roofline').data.map(t => t.type || 'scatter')")
        bundle = tab.evaluate("Array.from(document.scripts).map(s => s.src.split('/').pop())"
                              ".filter(s => s.startsWith('plotly')).join(', ')")
        browser.close()
    kinds = ", ".join(f"{types.count(t)} {t}" for t in sorted(set(types)))
    return (f"browser: roofline page load + draw {drawn:.2f} s (target < 1.5 s: {'met' if drawn < 1.5 else 'NOT met'}; "
            f"load average {os.getloadavg()[0]:.1f}), one zoom (Plotly.relayout) {zoom:.0f} ms, {len(types)} traces "
            f"({kinds}) drawn by {bundle}, {gl} WebGL canvas(es), page errors: {len(errors)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--kernels", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        camp = Path(tmp) / "synthetic-campaign"
        build(camp, args.cells, args.kernels)
        size = sum(p.stat().st_size for p in camp.rglob("*.json"))
        print(f"campaign: {args.cells} cells x {args.kernels} kernels, kernel_times.json per cell, "
              f"{size / 2**20:.1f} MiB of JSON")
        base = [duckdb_alone(camp) for _ in range(args.repeat)]
        load = os.getloadavg()[0]
        runs = [render(camp, Path(tmp) / "site") for _ in range(args.repeat)]
        result = runs[-1][2]
        best_base, best_render = min(b[0] for b in base), min(r[0] for r in runs)
        print(f"DuckDB alone, read_json of the {args.cells} ncu_kernels.json ({base[0][1]} kernel rows): "
              f"best {best_base:.3f} s (runs: {', '.join(f'{b[0]:.3f}' for b in base)})")
        print(f"report_render (whole site): best {best_render:.2f} s, median "
              f"{statistics.median(r[0] for r in runs):.2f} s = {best_render / best_base:.1f}x DuckDB alone (target "
              f"<= 3x: {'met' if best_render <= 3 * best_base else 'NOT met'}); CPU "
              f"{min(r[1] for r in runs):.2f} s (includes DuckDB's threads); load average "
              f"{load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(stages(camp))
        best = min(runs, key=lambda r: r[0])[2]
        print(f"timing split of the best render ({best.jobs} worker process(es); build to write summed over them): "
              + ", ".join(f"{k} {v:.2f} s" for k, v in best.seconds.items()))
        kinds: dict[str, list[int]] = {}
        for page, size in result.pages:
            kind = next((p for p in ("cell-", "kernel-", "compare-") if page.name.startswith(p)), "campaign ")
            kinds.setdefault(kind, []).append(size)
        print("page weight by kind: " + ", ".join(f"{k}*.html x {len(v)} {sum(v) / 2**20:.1f} MiB"
                                                  for k, v in sorted(kinds.items())))
        pages = sorted(result.pages, key=lambda p: -p[1])
        shared = sum(p.stat().st_size for p in result.static)
        print(f"{len(pages)} pages, {sum(s for _, s in pages) / 2**20:.1f} MiB; {result.downloads} downloads "
              f"{result.download_bytes / 2**20:.1f} MiB; shared static files {shared / 2**20:.2f} MiB")
        print(weight(result))
        print("largest pages: " + ", ".join(f"{p.name} {s / 2**20:.2f} MiB" for p, s in pages[:4]))
        html = (result.campaign_site / "05-roofline.html").read_text()
        print(f"roofline: {html.count('scattergl')} Scattergl and {html.count(chr(34) + 'scatter' + chr(34))} SVG "
              f"scatter traces; target: every page < 2 MB (2,000,000 bytes): "
              f"{'met' if pages[0][1] < 2_000_000 else 'NOT met'}; render < 10 s: "
              f"{'met' if best_render < 10 else 'NOT met'}")
        print(browser_check(result.campaign_site / "05-roofline.html"))
        print(incremental(camp, result.site_dir, best_render))


if __name__ == "__main__":
    main()
