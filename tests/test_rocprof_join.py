"""A ROCm torch trace in an AMD cell: import_torch_trace of HTA's MI250 kineto trace, the warehouse join with the
cell's rocprof-compute rows, and kernel names as rocprof writes them (` [clone .kd]`) against a trace's spelling."""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_rocprof_cli import DATA
from test_rocprof_cli import campaign as amd_campaign

from perfreport.config.campaign import load_campaign
from perfreport.kernels.identity import normalize, simplify
from perfreport.warehouse.amd import scored
from perfreport.warehouse.db import open_loaded

TRACE = DATA / "hta-mi250-trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def campaign(tmp_path: Path) -> Path:
    """The AMD vcopy campaign of test_rocprof_cli with the MI200 workload imported."""
    root = amd_campaign(tmp_path)
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    return root


def trace_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    return events


def kernel_ns(events: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each kernel name's durations in ns, straight from the raw trace (complete events of category kernel)."""
    out: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            out[e["name"]].append(round(e["dur"] * 1000))
    return dict(out)


def pmc_dispatches(gpu: str = "MI200") -> list[dict[str, str]]:
    with (DATA / gpu / "pmc_perf.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def join(root: Path) -> list[dict[str, Any]]:
    con = open_loaded(*scored(load_campaign(root)))
    try:
        cur = con.execute("SELECT * FROM kernel_join ORDER BY kernel")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def test_the_mi250_trace_is_a_rocm_kineto_trace() -> None:
    events = trace_events()
    runtime = {e["name"] for e in events if e.get("cat") == "cuda_runtime"}
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= runtime  # HIP under kineto's "cuda_runtime"
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 14 and {e["args"]["device"] for e in kernels} == {2}
    assert {e["args"]["stream"] for e in kernels} == {0}


def test_import_torch_trace_into_the_amd_cell(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    run = run_cli("import_torch_trace", "--campaign", str(root), "--cell-id", "vcopy", str(TRACE), ok=True,
                  env={"COLUMNS": "250"})
    # the trace ran other kernels than vcopy: all its time matches no row, and the warning names AMD's profiler
    assert "100% of its kernel time (0.111 of 0.111 ms) matches no kernel rocprof-compute captured in cell vcopy" \
        in run.stdout
    assert "rocprof-compute profile --kernel NAME" in run.stdout and "ncu --kernel-name" not in run.stdout
    assert "2 gpu_memcpy event(s) are not kernels" in run.stdout
    data = json.loads((root / "cells" / "vcopy" / "kernel_times.json").read_text(encoding="utf-8"))
    (source,) = data["sources"]
    assert source["format"] == "torch-trace" and source["kernels"] == len(data["kernels"]) == 14
    expected = kernel_ns(trace_events())
    total = sum(sum(v) for v in expected.values())
    assert total == 110_881
    got: dict[str, dict[str, int]] = defaultdict(lambda: {"ns": 0, "n": 0})
    for row in data["kernels"]:
        got[row["name"]]["ns"] += row["total_ns"]
        got[row["name"]]["n"] += row["instances"]
        assert row["share_pct"] == pytest.approx(100 * row["total_ns"] / total, abs=1e-4)
        assert row["op"].startswith("aten::")  # recorded with shapes: the launching op, by External id
    assert {n: (g["ns"], g["n"]) for n, g in got.items()} == {n: (sum(v), len(v)) for n, v in expected.items()}


def test_kernel_join_of_the_amd_cell(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    run_cli("import_torch_trace", "--campaign", str(root), "--cell-id", "vcopy", str(TRACE), ok=True)
    rows = join(root)
    expected = kernel_ns(trace_events())
    total = sum(sum(v) for v in expected.values())
    times = [r for r in rows if r["matched_sources"] == "times"]
    assert sum(r["total_ms"] for r in times) == pytest.approx(total / 1e6)
    assert sum(r["time_share_pct"] for r in times) == pytest.approx(100.0, abs=1e-3)
    assert sum(r["instances"] for r in times) == sum(len(v) for v in expected.values()) == 14
    # the two Tensile GEMMs: one name each, so one row each with that name's time
    gemms = {r["name"]: r for r in times if r["function"].startswith("Cijk_")}
    assert len(gemms) == 2
    for name, r in gemms.items():
        assert r["total_ms"] == pytest.approx(sum(expected[name]) / 1e6)
        assert r["time_share_pct"] == pytest.approx(100 * sum(expected[name]) / total, abs=1e-3)
    (vcopy,) = [r for r in rows if r["function"] == "vecCopy"]
    cell = json.loads((root / "cells" / "vcopy" / "ncu_kernels.json").read_text(encoding="utf-8"))["kernels"][0]
    assert vcopy["matched_sources"] == "ncu" and vcopy["time_share_pct"] is None and vcopy["vendor"] == "amd"
    assert vcopy["ncu_launches"] == 3 and vcopy["sol_pct"] == pytest.approx(cell["sol_pct"])
    assert vcopy["ncu_duration_ns"] == pytest.approx(cell["duration_ns"])


REAL_NAMES = sorted({e["name"] for e in trace_events() if e.get("cat") == "kernel"})


# workload -> the suffix its pmc_perf.csv writes after the kernel's name (rocprof's spellings differ by version)
SUFFIXES = {"MI100": " [clone .kd]", "MI200": " [clone .kd]", "MI300A_A1": " (.kd)", "MI300X_A1": " (.kd)"}


@pytest.mark.parametrize("gpu", sorted(SUFFIXES))
def test_rocprof_kernel_names_key_as_their_demangled_spelling(gpu: str) -> None:
    names = {d["Kernel_Name"] for d in pmc_dispatches(gpu)}
    assert names == {"vecCopy(double*, double*, double*, int, int)" + SUFFIXES[gpu]}
    (name,) = names
    assert normalize(name) == normalize("vecCopy(double*, double*, double*, int, int)") == "vecCopy"
    assert simplify(name) == simplify("vecCopy(double*, double*, double*, int, int)") == "vecCopy"


@pytest.mark.parametrize("suffix", [" [clone .kd]", " (.kd)", ".kd"])
def test_the_code_object_suffix_leaves_the_keys_of_the_trace_names(suffix: str) -> None:
    # the trace's own kernel names (Tensile GEMMs without a parameter list, templated PyTorch kernels) with the
    # suffix rocprof appends to the kernel descriptor's symbol: the same function and instantiation keys
    for name in REAL_NAMES:
        assert normalize(name + suffix) == normalize(name), name
        assert simplify(name + suffix) == simplify(name), name
    assert normalize("_Z7vecCopyPdS_S_ii" + suffix) == "vecCopy"  # a mangled symbol's descriptor, too


def test_a_trace_spelling_the_kernel_as_rocprof_does_joins_its_counters(tmp_path: Path) -> None:
    """The MI250 trace with vcopy's 3 dispatches added as kernel events named exactly as pmc_perf.csv names them
    (` [clone .kd]` kept) and timed by its Start/End timestamps: the cell's rocprof row (name stripped) and these
    events are one kernel, so its counters meet its time share."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    dispatches = pmc_dispatches()
    last = max(e["ts"] + e["dur"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
    added = []
    for i, d in enumerate(dispatches):
        dur_us = (int(d["End_Timestamp"]) - int(d["Start_Timestamp"])) / 1000
        added.append({"ph": "X", "cat": "kernel", "name": d["Kernel_Name"], "pid": 2, "tid": 0,
                      "ts": last + 100.0 * (i + 1), "dur": dur_us,
                      "args": {"device": 2, "stream": 0, "kind": "Dispatch Kernel"}})
    doc["traceEvents"] += added
    path = tmp_path / "mi250_with_vcopy.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    root = campaign(tmp_path)
    run = run_cli("import_torch_trace", "--campaign", str(root), "--cell-id", "vcopy", str(path), ok=True)
    vcopy_ns = sum(round(e["dur"] * 1000) for e in added)
    others = sum(sum(v) for v in kernel_ns(trace_events()).values())
    total = vcopy_ns + others
    # only the trace's own kernels are unmatched now (the warning counts vcopy's time as matched)
    assert (f"{100 * others / total:.0f}% of its kernel time ({others / 1e6:.3f} of {total / 1e6:.3f} ms) matches no "
            f"kernel rocprof-compute captured") in " ".join(run.stdout.split())
    (row,) = [r for r in join(root) if r["function"] == "vecCopy"]
    assert row["matched_sources"] == "ncu,times" and row["vendor"] == "amd"
    assert row["instances"] == 3 and row["ncu_launches"] == 3
    assert row["total_ms"] == pytest.approx(vcopy_ns / 1e6)
    assert row["time_share_pct"] == pytest.approx(100 * vcopy_ns / total, abs=1e-3)
    assert row["sol_pct"] == pytest.approx(53.03, abs=0.01)
    assert row["amdahl_bound_pct"] is not None  # a measured share and a measured roof: a ranked kernel

