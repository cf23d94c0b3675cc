"""The capture's own GPU is the ground truth (issue 28.1): a capture from another GPU than the campaign's `hardware`
is refused with one line naming both, or (--hardware-mismatch warn) imported with its roofs left null."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli, write_config

DATA = Path(__file__).parent / "data"
H100 = DATA / "h100_oracle" / "oracle_full.ncu-rep.gz"  # NVIDIA H100 80GB HBM3, CC 9.0
GTX = DATA / "wild" / "mojo-1660ti" / "josiahls_profile.ncu-rep"  # NVIDIA GeForce GTX 1660 Ti, CC 7.5
NERSC = DATA / "wild" / "leleucas-a100-csv" / "leleucas_bert_flashattn_nsight.csv"  # no GPU-name column


def _import(campaign: Path, path: Path, *extra: str, ok: bool) -> str:
    return run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(path), *extra,
                   ok=ok).output


def _kernels(campaign: Path) -> list[dict]:
    return json.loads((campaign / "cells" / "c1" / "ncu_kernels.json").read_text())["kernels"]


def test_a_capture_from_another_gpu_is_refused_naming_both(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp")  # hardware h200_sm90
    out = _import(camp, H100, ok=False)
    (line,) = [x for x in out.splitlines() if x.startswith("Error:")]
    assert "captured on 'NVIDIA H100 80GB HBM3' (CC 9.0, hardware h100_sm90)" in line
    assert "not on the campaign's hardware h200_sm90 (NVIDIA H200" in line
    assert "`hardware: h100_sm90`" in line and "--hardware-mismatch warn" in line
    assert "Traceback" not in out and not (camp / "cells" / "c1" / "ncu_kernels.json").exists()
    out = _import(camp, GTX, ok=False)
    assert "'NVIDIA GeForce GTX 1660 Ti' (CC 7.5, hardware gtx1660ti_sm75)" in out


def test_warn_imports_it_with_the_roofs_null_and_says_so(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp")
    out = _import(camp, H100, "--hardware-mismatch", "warn", ok=True)
    assert "not on the campaign's hardware h200_sm90: imported with %SoL" in out
    kernels = _kernels(camp)
    assert kernels and all(k["sol_pct"] is None and k["sol_ceiling_key"] is None and k["pct_of_achievable"] is None
                           for k in kernels)
    # what the counters measure does not depend on the roof: the GEMM keeps its FLOPs, AI and ncu's own peaks
    gemm = max(kernels, key=lambda k: k["flops"]["total"] or 0)
    assert gemm["arithmetic_intensity"] > 100 and gemm["compute_pct_of_peak"] > 50


def test_the_captures_own_hardware_imports_without_a_word(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp", hardware="h100_sm90")
    out = _import(camp, H100, ok=True)
    assert "hardware" not in out.lower() or "not on the campaign's hardware" not in out
    assert any(k["sol_ceiling_key"] and k["sol_ceiling_key"].startswith("h100_sm90.") for k in _kernels(camp))


def test_an_export_without_a_gpu_name_is_scored_as_given_and_said(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp", hardware="a100_sm80")
    out = _import(camp, NERSC, ok=True)
    assert "records no GPU name" in out and "a100_sm80 as given" in out


def test_campaign_init_and_validate_refuse_an_unknown_token(tmp_path: Path) -> None:
    out = run_cli("campaign", "init", str(tmp_path / "a"), "--hardware", "h300_sm95", ok=False).output
    assert "h300_sm95" in out and "h200_sm90" in out and "a40_sm86" in out and "Traceback" not in out
    assert not (tmp_path / "a" / "config.yaml").exists()
    camp = write_config(tmp_path / "b", hardware="h300_sm95")
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert "hardware" in out and "h300_sm95" in out and "h100_sm90" in out
