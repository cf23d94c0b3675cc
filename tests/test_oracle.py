"""Known-shape oracle kernels captured on the H200 and the H100 (tests/data/{h200,h100}_oracle, the same ops by
device/h200_oracle/oracle.py): on both chips the counters must match physics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfreport.config.ceilings import load_ceilings
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.derive import DeriveContext
from perfreport.ncu.rep.reader import read_rep

TESTS = Path(__file__).parent
# gpu -> (captures, hardware key, the GPU name ncu records)
GPUS = {"h200": (TESTS / "data" / "h200_oracle", "h200_sm90", "NVIDIA H200"),
        "h100": (TESTS / "data" / "h100_oracle", "h100_sm90", "NVIDIA H100 80GB HBM3")}


def _manifest(data: Path) -> list[dict[str, Any]]:
    ops = json.loads((data / "oracle_manifest.json").read_text())
    # dst.copy_(src) of equal dtypes is a cudaMemcpyAsync, not a kernel: ncu profiles nothing for it.
    return [op for op in ops if op["op"] != "copy_fp32_256M"]


def _kernels(gpu: str, name: str) -> dict[str, dict[str, Any]]:
    data, hw, _ = GPUS[gpu]
    ctx = DeriveContext(load_ceilings(), hw)
    capture = read_rep(data / name)
    entries = summarize_capture(capture, ctx, name)
    ops = _manifest(data)
    assert len(entries) == len(ops)
    return {op["op"]: {**k, "expected": op, "hw": hw} for op, k in zip(ops, entries, strict=True)}


@pytest.fixture(scope="module", params=sorted(GPUS))
def gpu(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def full(gpu: str) -> dict[str, dict[str, Any]]:
    return _kernels(gpu, "oracle_full.ncu-rep.gz")


@pytest.fixture(scope="module")
def basic(gpu: str) -> dict[str, dict[str, Any]]:
    return _kernels(gpu, "oracle_basic.ncu-rep.gz")


def test_oracle_report_names_its_ncu_gpu_set_and_six_kernels(gpu: str) -> None:
    data, _, name = GPUS[gpu]
    cap = read_rep(data / "oracle_full.ncu-rep.gz")
    assert cap.ncu_version == "2025.3.1.0"
    assert cap.gpu == name
    assert cap.section_set == "full"
    assert cap.command_line is not None and "--set full" in cap.command_line
    assert len(cap.sha256) == 64
    assert [k.function for k in cap.launches] == [
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT",
        "nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN",
        "nvjet_sm90_tst_64x16_64x16_2x1_v_bz_NNT",
        "vectorized_elementwise_kernel",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
        "rmsnorm_kernel",
    ]


@pytest.mark.parametrize(("op", "tile_padding"), [
    ("gemm_bf16_8192", 26 * 320 / 8192),  # 320-wide tiles pad N=8192 to 8320
    ("gemm_fp8_8192", 57 * 144 / 8192),  # 144-wide tiles pad to 8208
    ("gemm_bf16_decode_m16", 1.0),
])
def test_tensor_flops_equal_2mnk_within_tile_padding(full: dict[str, Any], op: str, tile_padding: float) -> None:
    k = full[op]
    ratio = k["flops"]["tensor"] / k["expected"]["flops"]
    assert ratio == pytest.approx(tile_padding, rel=1e-3)
    assert 1.0 <= ratio <= 1.02


def test_hopper_gemms_run_no_cuda_core_fp_and_ai_is_not_zero(full: dict[str, Any]) -> None:
    for op in ("gemm_bf16_8192", "gemm_bf16_decode_m16"):
        k = full[op]
        assert k["flops"]["fp32"] == 0.0 and k["flops"]["fp16"] == 0.0 and k["flops"]["fp64"] == 0.0
        assert k["flops"]["total"] == k["flops"]["tensor"] > 0
        assert k["arithmetic_intensity"] > 1.0 and k["ai_measured"] is True


def test_causal_attention_flops_count_full_diagonal_tiles(full: dict[str, Any]) -> None:
    # S=1024 in 128-row tiles: 8*9/2 = 36 of 64 tiles computed vs the 32 the causal mask needs.
    k = full["sdpa_causal_bf16"]
    assert k["flops"]["tensor"] / k["expected"]["flops"] == pytest.approx(36 / 32, rel=1e-3)
    assert k["family"] == "attention" and k["tensor_dtype"] == "bf16"


def test_streaming_kernel_dram_bytes_match_bytes_it_must_move(full: dict[str, Any]) -> None:
    k = full["add_fp32_256M"]  # reads 2 x 1 GiB, writes 1 GiB
    assert k["dram_bytes"] / k["expected"]["min_bytes"] == pytest.approx(1.0, abs=0.02)
    # PyTorch's add is one FFMA (a + alpha*b) per element: executed-instruction FLOPs are 2x algorithmic
    assert k["flops"]["fp32"] == pytest.approx(2 * k["expected"]["flops"], rel=1e-3)
    assert k["flops"]["tensor"] == 0.0
    assert k["bound"] == "memory"


def test_decode_gemm_streams_its_weights(full: dict[str, Any]) -> None:
    k = full["gemm_bf16_decode_m16"]
    assert k["dram_bytes"] / k["expected"]["min_bytes"] == pytest.approx(1.0, abs=0.03)
    assert k["bound"] == "memory"
    # left of the ridge the binding roof is DRAM: %SoL is against hbm_tbps; the family's tensor ceiling is kept
    hw = k["hw"]
    assert k["sol_ceiling_key"] == f"{hw}.hbm_tbps"
    assert k["sol_pct"] == pytest.approx(100 * k["achieved_dram_tbps"] / load_ceilings().value(f"{hw}.hbm_tbps"))
    assert k["sol_pct"] > 70
    assert k["family_ceiling_key"] == f"{hw}.bf16_dense_tflops" and k["family_sol_pct"] < 10


def test_fp8_gemm_is_judged_against_the_fp8_ceiling(full: dict[str, Any]) -> None:
    k = full["gemm_fp8_8192"]
    assert k["tensor_dtype"] == "fp8"
    assert k["sol_ceiling_key"] == f"{k['hw']}.fp8_dense_tflops"
    peak = load_ceilings().value(f"{k['hw']}.fp8_dense_tflops")
    assert k["sol_pct"] == pytest.approx(100 * k["achieved_tflops"] / peak)
    assert k["bound"] == "compute"


def test_bf16_gemm_matches_ncu_own_percent_of_peak(full: dict[str, Any]) -> None:
    # ncu's sm__throughput for this kernel equals the hgmma bf16 dense path utilization
    k = full["gemm_bf16_8192"]
    assert k["compute_pct_of_peak"] == pytest.approx(k["sm_throughput_pct"], abs=0.5)
    assert k["bound"] == "compute"
    assert k["block_limit_factor"] == "registers+shared_mem"
    assert k["theoretical_occupancy_pct"] == 18.75
    assert k["regs_per_thread"] == 168
    assert k["smem_per_block_bytes"] == 188636
    assert k["warp_stalls_pct"]["gmma"] > 20  # Hopper's wgmma wait dominates a tensor-bound GEMM
    assert sum(k["warp_stalls_pct"].values()) == pytest.approx(100.0)


def test_triton_kernel_is_a_memory_bound_norm(full: dict[str, Any]) -> None:
    k = full["triton_rmsnorm_8192x4096"]
    assert k["family"] == "norm"
    assert k["flops"]["tensor"] == 0.0 and k["flops"]["fp32"] > 0
    assert k["sol_ceiling_key"] == f"{k['hw']}.hbm_tbps"
    assert k["bound"] == "memory"
    # ncu reports 0% branch efficiency with 0 divergent branches: that is no divergence, not full divergence
    assert k["branch_efficiency_pct"] == 0.0 and k["branch_divergence_pct"] == 0.0


def test_basic_set_leaves_ai_null_and_never_claims_compute_bound(basic: dict[str, Any]) -> None:
    for op, k in basic.items():
        assert k["flops"] is None, op
        assert k["arithmetic_intensity"] is None and k["ai_measured"] is False
        assert k["dram_bytes"] is None and k["achieved_tflops"] is None and k["sol_pct"] is None
        assert k["bound"] != "compute"
        assert k["achieved_occupancy_pct"] is not None and k["sm_throughput_pct"] is not None
    assert basic["gemm_bf16_8192"]["bound"] == "unknown"
    assert basic["add_fp32_256M"]["bound"] == "memory"


def test_basic_and_full_agree_on_what_both_capture(full: dict[str, Any], basic: dict[str, Any]) -> None:
    for op in full:
        f, b = full[op], basic[op]
        assert f["regs_per_thread"] == b["regs_per_thread"]
        assert f["theoretical_occupancy_pct"] == b["theoretical_occupancy_pct"]
        assert f["block_limit_factor"] == b["block_limit_factor"]
        # separate runs: durations agree to within run-to-run noise
        assert b["duration_ns"] == pytest.approx(f["duration_ns"], rel=0.15)


def test_the_two_hopper_boards_count_the_same_work() -> None:
    """Same ops, same kernels, same SM count: tensor FLOPs equal exactly and streamed bytes within 3%; only the
    time (and so the rates) differs with the memory (H200 4.8 vs H100 3.35 TB/s datasheet)."""
    h200, h100 = _kernels("h200", "oracle_full.ncu-rep.gz"), _kernels("h100", "oracle_full.ncu-rep.gz")
    for op in h200:
        a, b = h200[op], h100[op]
        assert a["function"] == b["function"], op
        assert a["flops"]["tensor"] == b["flops"]["tensor"], op
        if op in ("add_fp32_256M", "gemm_bf16_decode_m16"):
            assert b["dram_bytes"] == pytest.approx(a["dram_bytes"], rel=0.03), op
            assert b["duration_ns"] > 1.2 * a["duration_ns"], op  # streaming: the H100's HBM is slower
