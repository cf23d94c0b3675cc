"""What `capture run` produced on the H200 (tests/data/h200_capture/run1, ncu 2025.3.1), replayed on the CPU.

capture_device.sh ran `perftunereport capture run --mode launch-and-attach` on the oracle kernels: the bf16 GEMM
(basic, then full), cuDNN causal SDPA and the Triton RMSNorm (full), and a pattern that matches nothing. Here:
the receipts validate and point at the files by digest, and the bundles import with the physics we expect.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfreport.bundle.receipt import load_receipt
from perfreport.files import sha256_file
from perfreport.ncu.importer import import_ncu

RUN = Path(__file__).resolve().parents[1] / "tests" / "data" / "h200_capture" / "run1" / "bundle" / "ncu-profiles"
GOOD = {"gemm_bf16_basic": ("basic", "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"),
        "gemm_bf16_full": ("full", "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"),
        "sdpa_full": ("full", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_"
                              "cga1x1x1_kernel0_0"),
        "triton_rmsnorm_full": ("full", "rmsnorm_kernel")}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_each_h200_receipt_names_gpu_ncu_set_and_the_digest_of_its_csv(name: str) -> None:
    r = load_receipt(RUN / f"{name}.receipt.json")
    section_set, kernel = GOOD[name]
    assert (r["gpu_name"], r["ncu_version"], r["driver_version"]) == ("NVIDIA H200", "2025.3.1.0", "580.159.04")
    assert r["section_set"] == section_set and r["kernel_names"] == [kernel] and r["exit_status"] == 0
    assert r["mode"] == "launch-and-attach" and r["argv"][0] == "/usr/local/cuda/bin/ncu"
    assert r["argv"][1:3] == ["--clock-control", "none"] and r["cleanup_done"] is True
    raw = next(o for o in r["outputs"] if o["path"].endswith("-raw.csv"))
    assert raw["sha256"] == sha256_file(RUN / f"{name}-raw.csv")  # the receipt names the very file we hold


def test_the_empty_capture_receipt_carries_its_diagnosis() -> None:
    r = load_receipt(RUN / "empty_pattern.receipt.json")
    assert r["kernels_profiled"] == 0 and r["exit_status"] == 0
    assert [d["code"] for d in r["diagnosis"]] == ["no-kernels-profiled"]
    assert "vectorized_elementwise_kernel" in r["diagnosis"][0]["message"]


def _import(campaign: Path, file: str) -> dict:  # type: ignore[type-arg]
    res = import_ncu(campaign, "c1", RUN / file)
    (kernel,) = res.kernels
    return kernel


def test_gemm_full_capture_imports_with_2mnk_tensor_flops(campaign: Path) -> None:
    k = _import(campaign, "gemm_bf16_full-raw.csv")
    ratio = k["flops"]["tensor"] / (2 * 8192**3)
    assert 1.0 <= ratio <= 1.02  # 320-wide tiles pad N: 8320/8192 would be 1.0156
    assert k["flops"]["fp32"] == pytest.approx(0, abs=1e9) and k["ai_measured"] is True
    assert k["sol_ceiling_key"].startswith("h200_sm90.")


def test_basic_set_capture_leaves_ai_null(campaign: Path) -> None:
    k = _import(campaign, "gemm_bf16_basic.ncu-rep.gz")
    assert k["arithmetic_intensity"] is None and k["ai_measured"] is False and k["flops"] is None


def test_causal_sdpa_counts_the_diagonal_tiles(campaign: Path) -> None:
    k = _import(campaign, "sdpa_full-raw.csv")
    b, h, s, d = 8, 32, 1024, 128
    ratio = k["flops"]["tensor"] / (2 * 2 * b * h * s * s * d // 2)
    assert 1.0 < ratio < 1.2  # 128-wide causal tiles: 36 of 64 tiles computed instead of 32 -> 1.125
    assert k["family"] == "attention"


def test_triton_rmsnorm_streams_its_bytes(campaign: Path) -> None:
    """Reads come from DRAM in full (ncu flushes caches per pass); part of the 64 MiB output is still dirty in the
    H200's L2 when the kernel ends, so DRAM writes show 42.5 MB of it (raw CSV: dram__bytes_write.sum)."""
    k = _import(campaign, "triton_rmsnorm_full-raw.csv")
    reads = 8192 * 4096 * 2 + 4096 * 2  # x and w (bf16)
    must_move = reads + 8192 * 4096 * 2  # + y
    assert reads < k["dram_bytes"] <= must_move * 1.01
    assert k["dram_bytes"] == pytest.approx(67.129088e6 + 42.496768e6, rel=1e-6)
    assert k["flops"]["tensor"] == 0 and k["ai_measured"] is True and k["family"] == "norm"


def test_a_capture_run_bundle_imports_one_source_per_capture_with_captured_at(campaign: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from perfreport.bundle.layout import bundle_init

    bundle = bundle_init(tmp_path, "h200-capture-run")
    shutil.copytree(RUN, bundle / "ncu-profiles", dirs_exist_ok=True)
    res = import_ncu(campaign, "c1", bundle)
    # not also the CSVs; a bundle outside the campaign names its captures after itself
    assert sorted(s["file"] for s in res.sources) == sorted(f"h200-capture-run/{n}.ncu-rep.gz" for n in GOOD)
    assert sorted(k["function"] for k in res.kernels) == sorted(
        [GOOD[n][1] for n in GOOD if n != "sdpa_full"] + ["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_"
                                                          "f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"])
    starts = [load_receipt(RUN / f"{n}.receipt.json")["started_at"] for n in GOOD]
    internals = json.loads((bundle / "inference_perfbench_v1.json").read_text())["kernel_internals"]
    first = load_receipt(RUN / "gemm_bf16_basic.receipt.json")["started_at"]  # the first capture of the run
    assert internals["captured_at"] == min(starts) == first == "2026-12-03T11:15:08.086Z"
    assert len(internals["per_kernel"]) == 4
