"""`lake regressions` over 1,000 publications x 50 kernels (issue 31 target: < 2 s), vs a bare scan in the same run.

Publishes the example's decode cell once into a fresh lake (a real kernel_history table), then appends
--publications x the cell's kernel rows to that table in one Iceberg append: each publication's rows get their own
publication id and time, durations with 1% noise and a 7% step in one kernel from publication 600. Times, best of
--repeat: the bare pyiceberg scan of the columns the verb reads (baseline), and lake_regressions end to end (open,
scan, group, change points). Prints both and their ratio, and checks the step was found at publication 600.

    .venv/bin/python benchmarks/bench_regressions.py [--publications 1000] [--kernels 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def build(tmp: Path, publications: int, kernels: int) -> Path:
    from perfreport.lake.iceberg import load_tables, open_lake
    from perfreport.lake.rows import SCHEMAS
    from perfreport.lake.writer import publish_to_lake
    from perfreport.warehouse.campaign_import import import_campaign

    camp = tmp / "campaign"
    shutil.copytree(ROOT / "campaigns" / "h200-decoder-layer", camp, ignore=shutil.ignore_patterns("cells"))
    import_campaign(camp)
    lake = tmp / "lake"
    publish_to_lake(camp, lake=lake, who="bench", cell_ids=["decode-b16-kv2048"])
    _, catalog = open_lake(lake)
    table = load_tables(catalog, ["kernel_history"])["kernel_history"]
    seed = table.scan().to_arrow().to_pylist()
    template = [r for r in seed if r["duration_ns"] is not None]
    rng = np.random.default_rng(0)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for p in range(publications):
        pub = f"pub-bench{p:06d}"
        for k in range(kernels):
            r = dict(template[k % len(template)])
            r["name"] = f"{r['name']}__bench{k}"  # 50 distinct kernels
            step = 1.07 if k == 0 and p >= 600 else 1.0
            r["duration_ns"] = float(r["duration_ns"]) * step * (1 + 0.01 * rng.standard_normal())
            r["publication_id"], r["published_at"] = pub, start + timedelta(hours=p)
            rows.append(r)
    import pyarrow as pa

    table.append(pa.Table.from_pylist(rows, schema=SCHEMAS["kernel_history"]))
    return lake


def best(fn, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--publications", type=int, default=1000)
    ap.add_argument("--kernels", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from perfreport.lake.iceberg import load_tables, open_lake
    from perfreport.lake.regressions import lake_regressions

    with tempfile.TemporaryDirectory() as d:
        print(f"building a lake of {a.publications} publications x {a.kernels} kernels...", flush=True)
        lake = build(Path(d), a.publications, a.kernels)

        def scan() -> int:
            _, catalog = open_lake(lake)
            t = load_tables(catalog, ["kernel_history"])["kernel_history"]
            return t.scan(selected_fields=("campaign", "cell_id", "name", "duration_ns", "published_at")).to_arrow()\
                .num_rows

        base, n = best(scan, a.repeat)
        verb, result = best(lambda: lake_regressions(lake, "duration_ns"), a.repeat)
        found = [(r.kernel, r.publication_id, r.label) for r in result.rows  # type: ignore[attr-defined]
                 if r.label not in ("insufficient data",)]
        print(json.dumps({"rows": n, "series": result.series, "change_points": found[:5],  # type: ignore[attr-defined]
                          "bare_scan_s": round(base, 3), "lake_regressions_s": round(verb, 3),
                          "ratio": round(verb / base, 2), "target_s": 2.0, "met": verb < 2.0}, indent=1))
        ok = any(pub == "pub-bench000600" and label == "regression" for _, pub, label in found)
        print("the 7% step found at publication 600:", ok)
        return 0 if ok and verb < 2.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
