"""Warehouse load time vs bare JSON readers, measured in the same run.

Builds a campaign of `--cells` cells x `--kernels` kernels by replicating the real ncu_kernels.json rows of
tests/golden/ (with per-launch data and stats, as import_ncu writes them), plus a kernel_times.json and a
kernel_samples.json per cell, then times (best of `--repeat`, a fresh connection each):
  - Python json.loads of every file (baseline),
  - bare DuckDB read_json with schema inference (read_json_auto) of the ncu files,
  - bare DuckDB read_json of the ncu files with the kernels left as one JSON column (the least DuckDB can do),
  - warehouse.open_campaign (config, every table with explicit types, aliases, views),
  - open_campaign plus a full scan of kernel_join (the views evaluated once).

    .venv/bin/python benchmarks/bench_warehouse.py [--cells 200] [--kernels 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from perfreport.files import write_json_atomic
from perfreport.warehouse.db import open_campaign

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"


def build(dst: Path, cells: int, kernels: int) -> None:
    """Write config.yaml and cells/<id>/{ncu_kernels,kernel_times,kernel_samples}.json."""
    rows = [k for f in sorted(GOLDEN.glob("*/ncu_kernels.json")) for k in json.loads(f.read_text())["kernels"]]
    header = json.loads((GOLDEN / "prefill_layer_full" / "ncu_kernels.json").read_text())
    ids = [f"c{i:03d}" for i in range(cells)]
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "config.yaml").write_text("schema_version: 1\ncampaign: bench\nhardware: h200_sm90\nsol_rigor: L2\n"
                                     "cells:\n" + "".join(f"  - id: {c}\n" for c in ids))
    for cell in ids:
        ks = []
        for j in range(kernels):
            k = copy.deepcopy(rows[j % len(rows)])
            k.update(id=f"k{j:03d}", name=f"{k['name']}_{j}", function=f"{k['function']}_{j}")
            ks.append(k)
        write_json_atomic(dst / "cells" / cell / "ncu_kernels.json", {**header, "cell_id": cell, "kernels": ks})
        total = sum(k["duration_ns"] * k["launches"] for k in ks)
        times = [{"name": k["name"], "function": k["function"], "source": "r.sqlite", "instances": k["launches"],
                  "total_ns": k["duration_ns"] * k["launches"], "avg_ns": k["duration_ns"], "min_ns": None,
                  "max_ns": None, "share_pct": 100 * k["duration_ns"] * k["launches"] / total} for k in ks]
        samples = [{"name": k["name"], "function": k["function"], "source": "p.csv", "samples": 10 * j + 1,
                    "share_pct": 100 / kernels} for j, k in enumerate(ks)]
        for name, data, fmt in (("kernel_times", times, "nsys-sqlite"), ("kernel_samples", samples, "csv")):
            src = data[0]["source"]
            write_json_atomic(dst / "cells" / cell / f"{name}.json", {
                "schema_version": 1, "campaign": "bench", "cell_id": cell,
                "sources": [{"id": src, "file": src, "format": fmt}], "kernels": data})


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--kernels", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        camp = Path(tmp) / "bench"
        build(camp, args.cells, args.kernels)
        files = sorted(camp.glob("cells/*/*.json"))
        ncu = [str(f) for f in files if f.name == "ncu_kernels.json"]
        mb = sum(f.stat().st_size for f in files) / 1e6
        ncu_mb = sum(Path(f).stat().st_size for f in ncu) / 1e6
        big = max(Path(f).stat().st_size for f in ncu) + 1
        steps: list[tuple[str, float, float]] = [
            ("python json.loads (all files)", mb, best(lambda: [json.loads(f.read_bytes()) for f in files],
                                                        args.repeat)),
            ("duckdb read_json_auto (ncu)", ncu_mb, best(lambda: duckdb.connect().execute(
                f"CREATE TABLE t AS SELECT * FROM read_json_auto(?, maximum_object_size={big})", [ncu]),
                args.repeat)),
            ("duckdb read_json kernels:JSON (ncu)", ncu_mb, best(lambda: duckdb.connect().execute(
                "CREATE TABLE t AS SELECT * FROM read_json(?, columns={'cell_id': 'VARCHAR', 'kernels': 'JSON'}, "
                f"maximum_object_size={big})", [ncu]), args.repeat)),
            ("warehouse.open_campaign (all files)", mb, best(lambda: open_campaign(camp), args.repeat)),
            ("open_campaign + scan kernel_join", mb, best(
                lambda: open_campaign(camp).execute("SELECT * FROM kernel_join").fetchall(), args.repeat)),
        ]
    print(f"{args.cells} cells x {args.kernels} kernels: {len(files)} files, {mb:.1f} MB "
          f"(ncu_kernels.json {ncu_mb:.1f} MB), best of {args.repeat}")
    base = steps[0][2]
    print(f"  {'step':38s} {'seconds':>8s} {'MB/s':>8s} {'x json.loads':>13s}")
    for label, size, secs in steps:
        print(f"  {label:38s} {secs:8.3f} {size / secs:8.1f} {secs / base:12.2f}x")


if __name__ == "__main__":
    main()
