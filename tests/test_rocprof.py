"""import_rocprof on rocprof-compute's own vcopy workloads (MI100, MI200, MI300A, MI300X), held to its own formulas."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import rocprof_oracle as oracle

from perfreport.errors import InputError
from perfreport.kernels.cells import FILE_NAME
from perfreport.rocprof import ceilings as amd
from perfreport.rocprof.importer import import_rocprof
from perfreport.rocprof.read import read_workload

DATA = Path(__file__).parent / "data" / "rocprof"
WORKLOADS = {"MI100": ("gfx908", "mi100_gfx908"), "MI200": ("gfx90a", "mi210_gfx90a"),
             "MI300A_A1": ("gfx942", "mi300a_gfx942"), "MI300X_A1": ("gfx942", "mi300x_gfx942")}
CONFIG = """schema_version: 1
campaign: amd-vcopy
hardware: {hardware}
sol_rigor: L2
ceilings_override: null
context: {{}}
cells:
  - id: vcopy
    description: rocprof-compute's vcopy test workload
    captures: []
"""


def campaign(tmp_path: Path, hardware: str = "from-capture") -> Path:
    root = tmp_path / "campaign"
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG.format(hardware=hardware), encoding="utf-8")
    return root


def imported(tmp_path: Path, gpu: str) -> dict[str, Any]:
    result = import_rocprof(campaign(tmp_path), "vcopy", DATA / gpu)
    assert len(result.kernels) == 1
    return result.kernels[0]


def same(ours: float | None, theirs: float) -> None:
    """Ours equals rocprof-compute's value; where it shows inf or NaN (nothing to show) ours is null."""
    if not math.isfinite(theirs):
        assert ours is None
    else:
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-9)


# (metric of rocprof-compute's analysis configs, normalization, our value from the kernel row)
ORACLE = [
    ("1100 Arithmetic Operations / FLOPs (Total)", "per_kernel", lambda k: (k["flops"] or {}).get("total")),
    ("1100 Arithmetic Operations / FLOPs (Total)", "per_second",
     lambda k: None if k["achieved_tflops"] is None else k["achieved_tflops"] * 1e12),
    ("1100 Arithmetic Operations / F32 OPs", "per_kernel", lambda k: (k["flops"] or {}).get("fp32")),
    ("1100 Arithmetic Operations / F64 OPs", "per_kernel", lambda k: (k["flops"] or {}).get("fp64")),
    ("1100 Arithmetic Operations / INT8 OPs", "per_kernel", lambda k: (k["tensor_ops_by_dtype"] or {}).get("i8")),
    ("1700 L2 - Fabric Transactions / Read BW", "per_kernel", lambda k: k["rocprof"]["hbm_read_bytes"]),
    ("1700 L2 - Fabric Transactions / Write and Atomic BW", "per_kernel", lambda k: k["rocprof"]["hbm_write_bytes"]),
    ("1600 L1D Cache Accesses / Cache BW", "per_kernel", lambda k: k["l1_bytes"]),
    ("1600 L1D Cache Accesses / L1-L2 BW", "per_kernel", lambda k: k["l2_bytes"]),
    ("1200 LDS Stats / Theoretical Bandwidth", "per_kernel", lambda k: k["lds_bytes"]),
]
SOL = [  # 0200 Speed-of-Light: (metric, column, our value)
    ("L2 Cache Hit Rate", "value", lambda k: k["l2_hit_rate_pct"]),
    ("vL1D Cache Hit Rate", "value", lambda k: k["l1_hit_rate_pct"]),
    ("L2-Fabric Read BW", "peak", lambda k: k["ncu_peaks"]["dram_tbps"] * 1000),
    ("VALU FLOPs", "peak", lambda k: k["ncu_peaks"]["compute_tflops"] * 1000),
]


@pytest.mark.parametrize("gpu", sorted(WORKLOADS))
def test_numbers_equal_rocprof_computes_own(tmp_path: Path, gpu: str) -> None:
    arch = WORKLOADS[gpu][0]
    k = imported(tmp_path, gpu)
    sysinfo, kernels = oracle.read_workload(DATA / gpu)
    rows = next(iter(kernels.values()))
    m = oracle.metrics(arch)
    for name, unit, ours in ORACLE:
        same(ours(k), oracle.evaluate(m[name]["avg"], rows, sysinfo, unit))
    for name, column, ours in SOL:
        same(ours(k), oracle.evaluate(m[f"0200 Speed-of-Light / {name}"][column], rows, sysinfo))
    fabric = [m[f"1700 L2 - Fabric Transactions / {n}"]["avg"] for n in ("Read BW", "Write and Atomic BW")]
    same(k["dram_bytes"], sum(oracle.evaluate(e, rows, sysinfo) for e in fabric))
    same(None if k["achieved_dram_tbps"] is None else k["achieved_dram_tbps"] * 1e12,
         sum(oracle.evaluate(e, rows, sysinfo, "per_second") for e in fabric))
    pops = [m[f"0200 Speed-of-Light / L2-Fabric {n} BW"]["pop"] for n in ("Read", "Write")]
    same(k["dram_pct_of_peak"], sum(oracle.evaluate(e, rows, sysinfo) for e in pops))


def test_mi300_hbm_read_is_the_tcc_bubble_form(tmp_path: Path) -> None:
    k = imported(tmp_path, "MI300X_A1")
    sysinfo, kernels = oracle.read_workload(DATA / "MI300X_A1")
    rows = next(iter(kernels.values()))
    read = oracle.metrics("gfx942")["1700 L2 - Fabric Transactions / Read BW"]["avg"]
    assert "TCC_BUBBLE_sum" in read
    other = oracle.metrics("gfx940")["1700 L2 - Fabric Transactions / Read BW"]["avg"]  # no TCC_BUBBLE before gfx942
    assert "TCC_BUBBLE" not in other
    assert k["rocprof"]["hbm_read_bytes"] == pytest.approx(oracle.evaluate(read, rows, sysinfo))
    assert k["rocprof"]["hbm_read_bytes"] != pytest.approx(oracle.evaluate(other, rows, sysinfo))


def test_kernel_row_shape_and_cell_file(tmp_path: Path) -> None:
    result = import_rocprof(campaign(tmp_path), "vcopy", DATA / "MI200")
    k = result.kernels[0]
    assert (k["name"], k["function"], k["launches"], k["launch_ids"]) == (
        "vecCopy(double*, double*, double*, int, int)", "vecCopy", 3, [0, 1, 2])
    assert (k["grid_size"], k["block_size"], k["family"], k["chip"]) == ("(4096,)", "(256,)", "copy", "gfx90a")
    assert k["duration_ns"] == pytest.approx((20480 + 16320 + 15520) / 3)  # End - Start of pmc_perf.csv's rows
    assert k["stats"]["duration_ns"]["n"] == 3 and len(k["per_launch"]) == 3
    assert k["vendor"] == "amd" and "vendor" not in k["rocprof"]
    cell = json.loads(result.path.read_text())
    assert cell["hardware"] == "mi210_gfx90a" and cell["kernels"][0]["id"] == "k000"
    source = cell["sources"][0]
    assert (source["format"], source["id"], source["gpu"]) == ("rocprof-compute", "MI200", "MI200 (gfx90a)")
    assert {p["file"] for p in source["parts"]} >= {"MI200/pmc_perf.csv", "MI200/sysinfo.csv", "MI200/roofline.csv"}
    again = import_rocprof(tmp_path / "campaign", "vcopy", DATA / "MI200")  # the same source replaces itself
    assert len(json.loads(again.path.read_text())["kernels"]) == 1


@pytest.mark.parametrize("gpu", sorted(WORKLOADS))
def test_recognized_chip(gpu: str) -> None:
    assert amd.recognize(read_workload(DATA / gpu)) == (WORKLOADS[gpu][1], None)


def test_missing_counters_are_null_not_zero(tmp_path: Path) -> None:
    k = imported(tmp_path, "MI100")  # gfx908: rocprof-compute collects no FLOP counter ("None # No perf counter")
    assert k["flops"] is None and k["arithmetic_intensity"] is None and k["ai_measured"] is False
    assert k["achieved_tflops"] is None and k["compute_pct_of_peak"] is None and k["bound"] == "unknown"
    assert k["dram_bytes"] is not None and k["sol_ceiling_key"] == "mi100_gfx908.hbm_tbps"
    v = imported(tmp_path / "b", "MI200")  # counters collected and counting no FLOP (a copy): 0, not null
    assert v["flops"]["total"] == 0.0 and v["arithmetic_intensity"] == 0.0 and v["ai_measured"] is True


def test_rounded_timestamps_leave_durations_null(tmp_path: Path) -> None:
    result = import_rocprof(campaign(tmp_path), "vcopy", DATA / "MI300X_A1")
    k = result.kernels[0]
    assert (DATA / "MI300X_A1" / "pmc_perf.csv").read_text().count("8.1097E+14") == 6  # as shipped by AMD
    assert k["duration_ns"] is None and k["achieved_dram_tbps"] is None and k["sol_pct"] is None
    assert k["dram_bytes"] == pytest.approx(k["rocprof"]["hbm_read_bytes"] + k["rocprof"]["hbm_write_bytes"])
    assert k["bound"] == "unknown" and "timestamps" in k["bound_reason"]
    assert any("six significant digits" in w for w in result.warnings)


def test_measured_roofs_with_their_confidence_interval(tmp_path: Path) -> None:
    w = read_workload(DATA / "MI200")
    assert "hbmBwHigh" in w.roofline_columns and "MFMAFI8OpsLow" in w.roofline_columns  # the old spelling
    roofs = amd.measured(w, "mi210_gfx90a")
    hbm, i8 = roofs["roofline_hbm_tbps"], roofs["roofline_mfma_i8_tops"]
    row = w.roofline[0] if w.roofline else {}
    assert (hbm.value, hbm.low, hbm.high) == pytest.approx(
        tuple(float(row[c]) / 1000 for c in ("HBMBw", "HBMBwLow", "hbmBwHigh")))
    assert i8.low == pytest.approx(float(row["MFMAFI8OpsLow"]) / 1000)
    k = imported(tmp_path, "MI200")
    assert k["achievable_key"] == "mi210_gfx90a.empirical.roofline_hbm_tbps"
    assert k["pct_of_achievable"] == pytest.approx(100 * k["achieved_dram_tbps"] / hbm.value, rel=1e-3)
    low, high = k["pct_of_achievable_ci"]
    assert low < k["pct_of_achievable"] < high
    assert k["sol_pct"] == pytest.approx(100 * k["achieved_dram_tbps"] / 1.6384, rel=1e-9)
    assert k["bound"] == "memory" and "ridge" in k["bound_reason"]


def test_new_roofline_spelling_reads_the_same(tmp_path: Path) -> None:
    folder = tmp_path / "MI200"
    shutil.copytree(DATA / "MI200", folder)
    text = (folder / "roofline.csv").read_text()
    (folder / "roofline.csv").write_text(text.replace("hbmBwHigh", "HBMBwHigh").replace("MFMAFI8OpsLow",
                                                                                          "MFMAI8OpsLow"))
    old = amd.measured(read_workload(DATA / "MI200"), "mi210_gfx90a")
    new = amd.measured(read_workload(folder), "mi210_gfx90a")
    assert {k: (r.value, r.low, r.high) for k, r in new.items()} == \
        {k: (r.value, r.low, r.high) for k, r in old.items()}


def _pass(gpu: str, counter: str) -> int:
    for f in sorted((DATA / gpu / "perfmon").glob("pmc_perf_*.txt")):
        if counter in f.read_text().split():
            return int(f.stem.rsplit("_", 1)[1])
    raise AssertionError(counter)


@pytest.mark.parametrize("gpu", sorted(WORKLOADS))
def test_counters_of_two_passes_in_one_difference_are_flagged(tmp_path: Path, gpu: str) -> None:
    k = imported(tmp_path, gpu)
    lds = sorted({_pass(gpu, "SQ_LDS_IDX_ACTIVE"), _pass(gpu, "SQ_LDS_BANK_CONFLICT")})
    assert len(lds) == 2 and k["pass_mixed"]["lds_bytes"] == lds
    assert "hbm_read_bytes" not in k["pass_mixed"]  # its counters share one pass by design


def test_hardware_mismatch_refused_or_nulled(tmp_path: Path) -> None:
    root = campaign(tmp_path, "h200_sm90")
    with pytest.raises(InputError, match=r"profiled on MI200 \(mi210_gfx90a\), not on the campaign's hardware "
                                         r"h200_sm90.*--hardware-mismatch warn"):
        import_rocprof(root, "vcopy", DATA / "MI200")
    k = import_rocprof(root, "vcopy", DATA / "MI200", hardware_mismatch="warn").kernels[0]
    assert k["sol_pct"] is None and k["pct_of_achievable"] is None and k["dram_bytes"] is not None


def test_datasheet_tokens_cite_sources() -> None:
    for token in ("mi100_gfx908", "mi210_gfx90a", "mi250x_gfx90a", "mi300a_gfx942", "mi300x_gfx942",
                  "mi325x_gfx942"):
        sheet = amd.datasheet(token)
        assert sheet["hbm_tbps"].kind == "memory" and all("https://www.amd.com/" in r.source for r in sheet.values())
    assert amd.datasheet("mi250x_gfx90a")["hbm_tbps"].value == pytest.approx(3.2768 / 2)  # one GCD


def _error(folder: Path, tmp_path: Path) -> str:
    with pytest.raises(InputError) as info:
        import_rocprof(campaign(tmp_path), "vcopy", folder)
    message = info.value.message
    assert "\n" not in message
    assert not (tmp_path / "campaign" / "cells" / "vcopy" / FILE_NAME).exists()
    return message


@pytest.mark.parametrize("name", ["pmc_perf.csv", "sysinfo.csv"])
def test_partial_folder(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "MI200"
    shutil.copytree(DATA / "MI200", folder)
    (folder / name).unlink()
    message = _error(folder, tmp_path)
    assert f"no {name}" in message and "sysinfo.csv and pmc_perf.csv" in message and "roofline.csv" in message


def test_truncated_csv(tmp_path: Path) -> None:
    folder = tmp_path / "MI300A_A1"
    shutil.copytree(DATA / "MI300A_A1", folder)
    text = (folder / "pmc_perf.csv").read_text()
    (folder / "pmc_perf.csv").write_text(text[: len(text) * 2 // 3])  # a copy cut off mid-row
    message = _error(folder, tmp_path)
    assert "pmc_perf.csv' line 2: 1090 fields" in message and "the header has 2110" in message
    assert "truncated" in message


def test_header_only_and_foreign_csv(tmp_path: Path) -> None:
    folder = tmp_path / "MI100"
    shutil.copytree(DATA / "MI100", folder)
    (folder / "pmc_perf.csv").write_text((DATA / "MI100" / "pmc_perf.csv").read_text().splitlines()[0] + "\n")
    assert "a header but no row" in _error(folder, tmp_path / "a")
    (folder / "pmc_perf.csv").write_text("a,b\n1,2\n")
    assert "no column Dispatch_ID, Kernel_Name" in _error(folder, tmp_path / "b")


def test_unknown_arch_and_not_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "MI100"
    shutil.copytree(DATA / "MI100", folder)
    text = (folder / "sysinfo.csv").read_text()
    (folder / "sysinfo.csv").write_text(text.replace(",gfx908,", ",gfx1100,"))
    assert "gpu_arch 'gfx1100' has no formulas; expected one of gfx908, gfx90a" in _error(folder, tmp_path / "a")
    assert "no such folder" in _error(tmp_path / "nowhere", tmp_path / "b")
