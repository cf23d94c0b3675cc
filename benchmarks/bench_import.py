"""Import speed and memory vs bare parsers, measured in the same run.

Builds a large `--page raw` CSV (>= 2,000 kernels x ~2,240 full-set columns) and the matching `--page details`
CSV by replicating the real H200 oracle rows, then times in separate child processes (so peak memory is each
measurement's own):
  - bare pandas.read_csv and bare DuckDB read_csv of the same file (baselines),
  - the whole perfreport import (parse, unit normalization, derivation, JSON write),
  - .ncu-rep import of the same kernels vs the raw-CSV import of those kernels, and vs a bare ncu_report read
    of that report (load it, decode every action, read every metric value).
  - the same comparison at --kernels scale, reports replicated by kernel (rep_replicate.py), with the SHA-256 of
    each file alone: the provenance hash is the floor of any import of a 2.6 MB-a-kernel full-set report.
Prints MB/s, peak memory (VmHWM minus RSS before the step) and ratios against the fastest bare parse.

    .venv/bin/python benchmarks/bench_import.py [--kernels 2016] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / "tests" / "data" / "h200_oracle"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def build_raw(dst: Path, kernels: int, src: Path = ORACLE / "oracle_full-raw.csv") -> None:
    """Header + units row of a real raw export (`src`, .gz too), then its data rows repeated with fresh IDs."""
    lines = gzip.decompress(src.read_bytes()).decode().splitlines(keepends=True) if src.suffix == ".gz" \
        else _lines(src)
    header, units, rows = lines[0], lines[1], lines[2:]
    with dst.open("w", encoding="utf-8") as out:
        out.write(header)
        out.write(units)
        for i in range(kernels):
            row = rows[i % len(rows)]
            out.write(f'"{i}"' + row[row.index(","):])


def build_details(dst: Path, kernels: int) -> None:
    """The matching long export: every kernel's rows repeated with fresh IDs."""
    lines = _lines(ORACLE / "oracle_full-details.csv")
    header, body = lines[0], lines[1:]
    by_id: dict[str, list[str]] = {}
    for line in body:
        by_id.setdefault(line.split(",", 1)[0], []).append(line)
    groups = list(by_id.values())
    with dst.open("w", encoding="utf-8") as out:
        out.write(header)
        for i in range(kernels):
            for line in groups[i % len(groups)]:
                out.write(f'"{i}"' + line[line.index(","):])


CHILD = r'''
import json, sys, time
from pathlib import Path

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0

kind, path, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if kind == "pandas":
    import pandas as pd
    def run():
        return pd.read_csv(path, dtype=str, keep_default_na=False, low_memory=False)
elif kind == "pandas-skiprows":
    import pandas as pd
    def run():
        return pd.read_csv(path, dtype=str, keep_default_na=False, skiprows=[1], low_memory=False)
elif kind == "duckdb":
    import duckdb
    def run():
        con = duckdb.connect()
        return con.execute("SELECT * FROM read_csv(?, all_varchar=true, header=true, max_line_size=10000000)",
                           [str(path)]).fetchall()
elif kind == "stdlib-csv":
    import csv
    def run():
        with path.open(newline="") as fh:
            return list(csv.reader(fh))
elif kind == "ncu_report":  # the bare read of a .ncu-rep: load, decode every action, read every metric value
    import ncu_report
    def run():
        ctx = ncu_report.load_report(str(path))
        values = 0
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for i in range(rng.num_actions()):
                act = rng.action_by_idx(i)
                for name in act.metric_names():
                    act.metric_by_name(name).value()
                    values += 1
        return values
elif kind == "sha256":  # the provenance hash alone (one update over the mapped file): any import's floor
    import hashlib, mmap
    def run():
        if path.stat().st_size == 0:
            return hashlib.sha256(b"").hexdigest()
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return hashlib.sha256(mm).hexdigest()
elif kind in ("perfreport", "perfreport-nohash"):  # -nohash: the provenance hash taken out (the reader's own cost)
    from perfreport.ncu.importer import import_ncu
    import tempfile
    camp = Path(tempfile.mkdtemp(prefix="camp-", dir=work))  # a fresh cell per run: no earlier import to merge
    (camp / "config.yaml").write_text(
        "schema_version: 1\ncampaign: bench\nhardware: h200_sm90\nsol_rigor: L2\ncells:\n  - id: c\n")
    import ncu_report, perfreport.ncu.csv.read, perfreport.ncu.csv.fast  # noqa: F401,E401
    import perfreport.ncu.rep.reader, perfreport.ncu.aggregate  # noqa: F401,E401
    # (one-time module import cost kept out of the timed region for every reader alike)
    if kind == "perfreport-nohash":
        import perfreport.ncu.importer as importer_module
        class _NoHash:  # maps nothing either: the parse maps the report itself
            mapping = None
            def __init__(self, p): self.path = p
            def data(self): return None  # the reader then maps the report itself
            def result(self): return "0" * 64
            def close(self): pass
        perfreport.ncu.rep.reader.FileHash = importer_module.FileHash = _NoHash
    def run():
        return import_ncu(camp, "c", path)
else:
    raise SystemExit(f"unknown kind {kind}")
before = rss("VmRSS:")
t0 = time.perf_counter()
run()
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_delta_bytes": rss("VmHWM:") - before}))
'''


def measure(kind: str, path: Path, work: Path, repeat: int) -> dict[str, float]:
    """Best time and its peak memory over `repeat` fresh child processes."""
    best: dict[str, float] | None = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, kind, str(path), str(work)], check=True,
                             capture_output=True, text=True, cwd=ROOT)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or got["seconds"] < best["seconds"]:
            best = got
    assert best is not None
    return best


def report(title: str, path: Path, results: dict[str, dict[str, float]], baseline_kinds: list[str]) -> dict:
    size = path.stat().st_size
    mb = size / 1e6
    fastest = min(results[k]["seconds"] for k in baseline_kinds)
    print(f"\n{title}: {path.name}, {mb:.1f} MB")
    print(f"  {'reader':<16}{'seconds':>9}{'MB/s':>9}{'peak MB':>10}{'peak/file':>11}{'time/fastest bare':>19}")
    rows = {}
    for kind, r in results.items():
        ratio = r["seconds"] / fastest
        peak = r["peak_delta_bytes"] / 1e6
        print(f"  {kind:<16}{r['seconds']:>9.2f}{mb / r['seconds']:>9.1f}{peak:>10.1f}{peak / mb:>11.2f}x"
              f"{ratio:>18.2f}x")
        rows[kind] = {"seconds": r["seconds"], "mb_per_s": mb / r["seconds"], "peak_mb": peak,
                      "peak_over_file": peak / mb, "time_over_fastest_bare": ratio}
    return {"file_mb": mb, "results": rows}


def _plain(path: Path, work: Path) -> Path:
    """`path` itself, or its gunzipped copy in `work` (an import reads what ncu writes, not our fixtures' gzip)."""
    if path.suffix != ".gz":
        return path
    out = work / path.name[: -len(".gz")]
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def rep_vs_csv(rep_path: Path, csv_path: Path, label: str, work: Path, repeat: int, bare: bool = True) -> dict:
    """Whole .ncu-rep import vs whole raw-CSV import of the same kernels; the SHA-256 of each file alone (the
    provenance hash every import must compute); and a bare ncu_report read of the report (`bare`)."""
    rep, csv = _plain(rep_path, work), _plain(csv_path, work)
    n = sum(1 for _ in csv.open()) - 2  # header and units rows
    m_rep, m_csv, m_hrep, m_hcsv, m_nohash = (measure(kind, path, work, repeat) for kind, path in (
        ("perfreport", rep), ("perfreport", csv), ("sha256", rep), ("sha256", csv), ("perfreport-nohash", rep)))
    t_rep, t_csv, h_rep, h_csv, t_nohash = (m["seconds"] for m in (m_rep, m_csv, m_hrep, m_hcsv, m_nohash))
    peak_rep, peak_csv = m_rep["peak_delta_bytes"] / 1e6, m_csv["peak_delta_bytes"] / 1e6
    mb_rep, mb_csv = rep.stat().st_size / 1e6, csv.stat().st_size / 1e6
    print(f"\nsame {n} kernels ({label}): .ncu-rep {mb_rep:.1f} MB import {t_rep:.3f} s, raw CSV {mb_csv:.1f} MB "
          f"import {t_csv:.3f} s, rep/csv = {t_rep / t_csv:.2f}x; per kernel {t_rep / n * 1e3:.3f} ms (rep) vs "
          f"{t_csv / n * 1e3:.3f} ms (csv)")
    print(f"  SHA-256 alone (the provenance hash; the import runs it on the second core beside the parse): of the "
          f".ncu-rep {h_rep:.3f} s = {h_rep / t_csv:.2f}x the whole CSV import; of the CSV {h_csv:.4f} s")
    print(f"  the .ncu-rep import with the hash taken out: {t_nohash:.3f} s = {t_nohash / t_csv:.2f}x the CSV import")
    print(f"  peak memory (VmHWM minus RSS before; a mapped report's touched pages count): .ncu-rep import "
          f"{peak_rep:.1f} MB = {peak_rep / mb_rep:.2f}x its file, CSV import {peak_csv:.1f} MB = "
          f"{peak_csv / mb_csv:.2f}x its file")
    out = {"kernels": n, "rep_mb": mb_rep, "csv_mb": mb_csv, "rep_seconds": t_rep, "csv_seconds": t_csv,
           "ratio": t_rep / t_csv, "rep_sha256_seconds": h_rep, "csv_sha256_seconds": h_csv,
           "rep_without_hash_seconds": t_nohash, "rep_without_hash_ratio": t_nohash / t_csv,
           "rep_peak_mb": peak_rep, "csv_peak_mb": peak_csv}
    if bare:
        t_bare = measure("ncu_report", rep, work, repeat)["seconds"]
        print(f"  bare ncu_report read of that report (load, decode every action, read every metric value): "
              f"{t_bare:.3f} s; the .ncu-rep import = {t_rep / t_bare:.2f}x of it")
        out.update(bare_ncu_report_seconds=t_bare, rep_over_bare=t_rep / t_bare)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=2016)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    out: dict[str, object] = {"kernels": args.kernels}
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        work = Path(tmp)
        raw, details = work / "big-raw.csv", work / "big-details.csv"
        print(f"building {args.kernels}-kernel raw and details CSVs from {ORACLE.name} ...", flush=True)
        build_raw(raw, args.kernels)
        build_details(details, args.kernels)
        bare = ["pandas", "duckdb", "stdlib-csv"]
        for title, path in (("raw page (wide)", raw), ("details page (long)", details)):
            res = {k: measure(k, path, work, args.repeat) for k in [*bare, "perfreport"]}
            out[title] = report(title, path, res, bare)
        # .ncu-rep vs raw CSV of the same kernels (whole import each), the report as ncu writes it: the 6 oracle
        # kernels (full set), then 150 launches captured with --set basic (tests/data/h200_oracle/many/); small
        # imports are timed best of 7 (tens of ms, noisy on a shared machine)
        small = max(args.repeat, 7)
        out["rep_vs_csv_same_kernels"] = rep_vs_csv(ORACLE / "oracle_full.ncu-rep.gz", ORACLE / "oracle_full-raw.csv",
                                                    "6 H200 kernels, full set", work, small)
        out["rep_vs_csv_many_kernels"] = rep_vs_csv(ORACLE / "many" / "many_basic.ncu-rep.gz",
                                                    ORACLE / "many" / "many_basic-raw.csv.gz",
                                                    "150 H200 launches, basic set", work, small)
        layers = ROOT / "tests" / "data" / "h200_many_layers"
        out["rep_vs_csv_decode_layers"] = rep_vs_csv(layers / "layers16_basic.ncu-rep.gz",
                                                     layers / "layers16_basic-raw.csv.gz",
                                                     "16 decode layers on the H200, 224 launches, basic set", work,
                                                     small)
        # the same at --kernels scale: the reports replicated by kernel (benchmarks/rep_replicate.py), the raw
        # CSVs by row. The full-set one is the very kernels of the big raw CSV above (oracle_full, cycled).
        sys.path.insert(0, str(ROOT))  # run as a script: the repository root holds the benchmarks package
        from benchmarks.rep_replicate import write_replicated
        basic_csv = work / "basic-at-scale-raw.csv"
        build_raw(basic_csv, args.kernels, ORACLE / "many" / "many_basic-raw.csv.gz")
        for key, src_rep, big_csv, label in (
                ("rep_vs_csv_basic_at_scale", ORACLE / "many" / "many_basic.ncu-rep.gz", basic_csv, "basic set"),
                ("rep_vs_csv_full_at_scale", ORACLE / "oracle_full.ncu-rep.gz", raw,
                 "full set, the big raw CSV's kernels")):
            big_rep = work / f"{key}.ncu-rep"
            write_replicated(gzip.decompress(src_rep.read_bytes()), args.kernels, big_rep)
            out[key] = rep_vs_csv(big_rep, big_csv, f"{args.kernels} kernels replicated, {label}", work,
                                  args.repeat, bare=False)
            big_rep.unlink()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    t = time.perf_counter()
    rc = main()
    print(f"\nbench_import: {time.perf_counter() - t:.0f} s total")
    raise SystemExit(rc)
