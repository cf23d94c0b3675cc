"""`hardware: from-capture` (issue 28.1): a campaign's ceilings are ncu's own device peaks of its captures, recorded
with their source in capture-ceilings.json, at a rigor below datasheet and measured ceilings; one GPU per campaign."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_config
from test_wild_roofline import MISTIC, REPORTS, SGLANG, ncu_launches

DATA = Path(__file__).parent / "data"
KINDS = DATA / "h100_kinds" / "kinds_full-raw.csv"  # NVIDIA H100 80GB HBM3, ncu 2025.3.1 --set full
NERSC = DATA / "wild" / "leleucas-a100-csv" / "leleucas_bert_flashattn_nsight.csv"  # no GPU-name column
H100_TOKEN = "capture_nvidia_h100_80gb_hbm3_sm90"


def _campaign(tmp_path: Path, name: str = "camp") -> Path:
    return write_config(tmp_path / name, hardware="from-capture")


def _import(campaign: Path, path: Path, *, ok: bool, cell: str = "c1") -> str:
    return run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", cell, "--bundle", str(path), ok=ok).output


def _ceilings(campaign: Path) -> dict:
    return json.loads((campaign / "capture-ceilings.json").read_text())


def _kernels(campaign: Path, cell: str = "c1") -> list[dict]:
    return json.loads((campaign / "cells" / cell / "ncu_kernels.json").read_text())["kernels"]


def test_the_ceilings_are_ncus_own_peaks_of_the_report(tmp_path: Path) -> None:
    """On the H800 report: FP32, FP64 and DRAM ceilings equal the highest per-launch peak ncu_report's roofline
    section computes (H800's cut FP64 included), each with the counters it came from."""
    camp = _campaign(tmp_path)
    _import(camp, SGLANG, ok=True)
    doc = _ceilings(camp)
    assert (doc["gpu"], doc["cc"], doc["token"], doc["rigor"]) == ("NVIDIA H800", "9.0", "capture_nvidia_h800_sm90",
                                                                    "ncu device peak")
    launches = [k for k in ncu_launches(SGLANG) if k.peaks["fp32"] is not None]
    for name, key in (("fp32_tflops", "fp32"), ("fp64_tflops", "fp64"), ("hbm_tbps", "dram")):
        want = max(k.peaks[key] for k in launches) / 1e12  # type: ignore[type-var]
        assert doc["ceilings"][name]["value"] == pytest.approx(want, rel=1e-6), name
        assert doc["ceilings"][name]["source"].startswith("ncu device peak (hardware: from-capture): ")
    assert doc["ceilings"]["fp64_tflops"]["value"] < 1.0  # H800: FP64 cut to ~1/64 of FP32, as ncu's peak says
    assert "dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second" in \
        doc["ceilings"]["hbm_tbps"]["source"]
    assert "'sglang_profile.ncu-rep.gz'" in doc["ceilings"]["hbm_tbps"]["source"]
    header = json.loads((camp / "cells" / "c1" / "ncu_kernels.json").read_text())
    assert header["hardware"] == "capture_nvidia_h800_sm90" and "capture-ceilings.json" in header["ceilings_sources"]


def test_every_roof_of_an_h100_full_capture_and_the_kernels_against_them(tmp_path: Path) -> None:
    """A full-set H100 export gives a ceiling per tensor path and CUDA-core precision; each kernel is scored against
    its own precision's, never above 100% (the highest clock's peak), and %SoL equals ncu's own %-of-peak where the
    kernel ran at that clock."""
    camp = _campaign(tmp_path)
    _import(camp, KINDS, ok=True)
    ceilings = _ceilings(camp)["ceilings"]
    assert set(ceilings) == {"bf16_dense_tflops", "fp16_dense_tflops", "fp16_tflops", "fp32_tflops",
                             "fp64_tensor_tflops", "fp64_tflops", "fp8_dense_tflops", "hbm_tbps", "int8_dense_tops",
                             "tf32_dense_tflops"}
    assert ceilings["fp8_dense_tflops"]["value"] == pytest.approx(2 * ceilings["bf16_dense_tflops"]["value"])
    assert ceilings["fp32_tflops"]["value"] == pytest.approx(2 * ceilings["fp64_tflops"]["value"])
    assert 3.0 < ceilings["hbm_tbps"]["value"] < 3.5  # HBM3 at ncu's measured DRAM clock (datasheet 3.35)
    kernels = _kernels(camp)
    simt = next(k for k in kernels if "simt_sgemm" in k["name"])
    assert simt["sol_ceiling_key"] == f"{H100_TOKEN}.fp32_tflops"  # the SIMT fp32 GEMM: its own roof, not HBM
    assert 60 < simt["sol_pct"] <= 100
    assert simt["sol_pct"] == pytest.approx(simt["achieved_tflops"] / ceilings["fp32_tflops"]["value"] * 100)
    scored = [k for k in kernels if k["sol_pct"] is not None]
    assert len(scored) >= 10 and all(0 <= k["sol_pct"] <= 100 for k in scored)
    assert all(k["sol_pct"] <= k["compute_pct_of_peak"] + 1e-9 for k in scored
               if k["sol_ceiling_key"].endswith("tflops") and k["compute_pct_of_peak"] is not None)
    assert {k["sol_ceiling_key"].split(".")[1] for k in scored} >= {
        "bf16_dense_tflops", "fp8_dense_tflops", "fp32_tflops", "fp64_tflops", "fp64_tensor_tflops",
        "int8_dense_tops", "hbm_tbps"}


def test_a_later_import_keeps_the_values_and_adds_what_was_missing(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    _import(camp, SGLANG, ok=True)
    first = (camp / "capture-ceilings.json").read_bytes()
    _import(camp, SGLANG, ok=True, cell="c1")
    assert (camp / "capture-ceilings.json").read_bytes() == first  # re-import: unchanged, byte for byte


def test_a_capture_from_another_gpu_is_refused_naming_both(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    _import(camp, SGLANG, ok=True)
    before = (camp / "cells" / "c1" / "ncu_kernels.json").read_bytes()
    out = _import(camp, MISTIC, ok=False)
    (line,) = [x for x in out.splitlines() if x.startswith("Error:")]
    assert "captured on 'NVIDIA A100-PCIE-40GB' (CC 8.0), not on 'NVIDIA H800' (CC 9.0)" in line
    assert "capture-ceilings.json" in line and "a campaign of its own" in line and "Traceback" not in out
    assert (camp / "cells" / "c1" / "ncu_kernels.json").read_bytes() == before


def test_two_gpus_in_one_first_import_are_refused(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(SGLANG), "--bundle",
                  str(MISTIC), ok=False).output
    assert "captures from 2 GPUs: 'NVIDIA A100-PCIE-40GB' (CC 8.0)" in out and "'NVIDIA H800' (CC 9.0)" in out
    assert not (camp / "capture-ceilings.json").exists() and not (camp / "cells" / "c1").exists()


def test_an_export_without_a_gpu_name_or_peaks_is_refused(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    out = _import(camp, NERSC, ok=False)
    assert "hardware: from-capture takes the GPU and its peaks from the captures" in out
    assert "record(s) no GPU name" in out and "name the GPU's token in `hardware:`" in out
    assert not (camp / "capture-ceilings.json").exists()


def test_from_capture_stands_at_rigor_l1_or_l2_and_init_offers_it(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "a", hardware="from-capture", sol_rigor="L3")
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert "sol_rigor: L3 with hardware: from-capture; expected L1 or L2" in out
    out = run_cli("campaign", "init", str(tmp_path / "b"), "--hardware", "from-capture", ok=True).output
    assert "hardware: from-capture" in (tmp_path / "b" / "config.yaml").read_text()
    out = run_cli("campaign", "validate", str(tmp_path / "b"), ok=True).output
    assert "hardware from-capture" in out  # nothing imported yet
    out = run_cli("campaign", "init", str(tmp_path / "c"), "--hardware", "h300_sm95", ok=False).output
    assert "`from-capture` (ncu's own device peaks of the captures)" in out


def test_render_before_any_import_says_what_to_do(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    out = run_cli("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site"), ok=False).output
    assert "no capture is imported yet" in out and "import_ncu" in out and "Traceback" not in out


def test_a_damaged_ceilings_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    _import(camp, SGLANG, ok=True)
    doc = _ceilings(camp)
    doc["ceilings"]["hbm_tbps"]["value"] = 0
    (camp / "capture-ceilings.json").write_text(json.dumps(doc))
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert "capture-ceilings.json" in out and "ceilings.hbm_tbps: expected {value: a positive number" in out
    assert "re-import" in out and "Traceback" not in out


def test_the_site_draws_the_capture_roofs_with_their_source(tmp_path: Path) -> None:
    camp = _campaign(tmp_path)
    _import(camp, SGLANG, ok=True)
    run_cli("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site"), ok=True)
    page = (tmp_path / "site" / "t-campaign" / "05-roofline.html").read_text()
    assert "capture_nvidia_h800_sm90.hbm_tbps" in page and "ncu device peak (hardware: from-capture)" in page
    summary = (tmp_path / "site" / "t-campaign" / "01-summary.html").read_text()
    assert "ncu&#39;s own device peaks of the captures" in summary or "ncu's own device peaks" in summary


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_every_wild_report_is_scored_against_its_own_gpu(path: Path, tmp_path: Path) -> None:
    """Each shared public report in a from-capture campaign: its GPU's peaks as ncu_report reads them become the
    ceilings and its kernels' %SoL is against them; a report that holds no peak at all is refused saying so."""
    launches = ncu_launches(path)
    peaks = {key: [v for k in launches if (v := k.peaks[key])] for key in ("fp32", "fp64", "dram")}
    camp = _campaign(tmp_path)
    out = _import(camp, path, ok=any(peaks.values()))
    if not any(peaks.values()):
        assert "hold none of ncu's device peaks" in out and not (camp / "capture-ceilings.json").exists()
        return
    doc = _ceilings(camp)
    assert doc["gpu"] == launches[0].gpu and doc["cc"] == launches[0].cc
    for key, name in (("fp32", "fp32_tflops"), ("fp64", "fp64_tflops"), ("dram", "hbm_tbps")):
        if peaks[key]:
            assert doc["ceilings"][name]["value"] == pytest.approx(max(peaks[key]) / 1e12, rel=1e-6), name
    kernels = _kernels(camp)
    scored = [k for k in kernels if k["sol_pct"] is not None]
    # unscored only where no roof can be told: AI unmeasured, a lower bound left of the ridge, or cache-bound
    assert all(k["arithmetic_intensity"] is None or k["flops_uncounted"] or k["bound"] == "cache"
               or k["ceiling_exceeded"] for k in kernels if k["sol_pct"] is None), path.name
    for k in scored:
        ceiling = doc["ceilings"][k["sol_ceiling_key"].split(".", 1)[1]]["value"]
        achieved = k["achieved_dram_tbps"] if k["sol_ceiling_key"].endswith("_tbps") else None
        if achieved is not None:
            assert k["sol_pct"] == pytest.approx(100 * achieved / ceiling, rel=1e-9), k["name"][:60]
        assert 0 <= k["sol_pct"] <= 100
