"""CSV exports written through ncu_report (capture run's fallback when `ncu --import` cannot run) import to the same
numbers as ncu's own exports of the same H200 report (tests/data/h200_capture/run1, ncu 2025.3.1)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from perfreport.capture.export import export_report
from perfreport.errors import InputError
from perfreport.ncu.importer import import_ncu

RUN = Path(__file__).resolve().parents[1] / "tests" / "data" / "h200_capture" / "run1" / "bundle" / "ncu-profiles"
FIELDS = ("duration_ns", "dram_bytes", "arithmetic_intensity", "achieved_tflops", "sm_throughput_pct",
          "dram_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct", "regs_per_thread",
          "smem_per_block_bytes", "branch_divergence_pct")


@pytest.mark.parametrize("name", ["gemm_bf16_full", "sdpa_full", "triton_rmsnorm_full"])
def test_exports_through_ncu_report_import_like_ncus_own(name: str, tmp_path: Path, campaign: Path) -> None:
    report = tmp_path / f"{name}.ncu-rep"
    report.write_bytes(gzip.decompress((RUN / f"{name}.ncu-rep.gz").read_bytes()))
    raw, sol = export_report(report, tmp_path / f"{name}-raw.csv", tmp_path / f"{name}-sol.csv")
    ours = import_ncu(campaign, "c1", raw).kernels[0]
    # the same file name, other bytes, from outside the campaign: --replace says it stands for the same source
    theirs = import_ncu(campaign, "c1", RUN / f"{name}-raw.csv", replace=True).kernels[0]
    assert ours["function"] == theirs["function"] and ours["family"] == theirs["family"]
    for f in FIELDS:  # ncu's raw page prints ~6 significant digits; ours keeps every digit
        assert ours[f] == pytest.approx(theirs[f], rel=2e-3, abs=1e-6), f
    assert ours["flops"]["tensor"] == pytest.approx(theirs["flops"]["tensor"], rel=1e-5)
    ours_sol = import_ncu(campaign, "c1", sol).kernels[0]
    theirs_sol = import_ncu(campaign, "c1", RUN / f"{name}-sol.csv", replace=True).kernels[0]
    for f in ("duration_ns", "sm_throughput_pct", "dram_throughput_pct"):
        assert ours_sol[f] == pytest.approx(theirs_sol[f], rel=1e-2), f
    assert ours_sol["arithmetic_intensity"] is None  # a SpeedOfLight page has no FLOP counters


def test_export_of_a_damaged_report_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"not a report")
    with pytest.raises(InputError, match="cannot load it|holds no kernel"):
        export_report(bad, tmp_path / "r.csv", tmp_path / "s.csv")
    assert not (tmp_path / "r.csv").exists()
