"""Blackwell exports, SYNTHETIC: made here from the real H200 raw-page export of the oracle kernels
(tests/data/h200_oracle/oracle_full-raw.csv) by setting the device to a B200 (CC 10.0) and moving the tensor columns
to the GB100 path names ncu's GB100 catalog lists (perfreport/ncu/catalog/chips/), with known ops per path. No
Blackwell GPU was profiled: the counts, durations and bytes are the H200's, the per-cycle peaks are made up in
B200 proportions (FP4 2x FP8 2x BF16). What this holds is the arithmetic on Blackwell counter names: tensor FLOPs
exact, dtype and ceiling right, AI and bound right; and an export from a chip with no verified map gets null tensor
FLOPs and a warning, never a sum over another chip's names."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from perfreport.config.ceilings import load_ceilings
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.catalog import chips
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.derive import DeriveContext

H200_RAW = Path(__file__).parent / "data" / "h200_oracle" / "oracle_full-raw.csv"
NVFP4 = "bmm_E2m1E2m1E2m1_Fp32_t128x256x256u2_s3_et128x128_m256x256x64_cga2x1x1_16dp256b_TN_transOut_schedS_bN_sm100f"
FP8 = "nvjet_sm100_qqtst_256x256_128x6_2x1_2cta_h_bz_Avec32UE8M0_Bvec32UE8M0_NNT"
# PyTorch's symmetric-memory all-reduce (torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu)
ALLREDUCE = "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 8>(T1 *, unsigned long, " \
            "unsigned long, unsigned int **, unsigned long, unsigned long)"
# made-up dense per-cycle peaks of a 148-SM B200 (ops/cycle, whole GPU), in the datasheet's ratios
PEAKS = {"bf16": 1_146_880, "fp16": 1_146_880, "fp16_dst_fp16": 1_146_880, "tf32": 573_440, "fp4_fp6_fp8": 2_293_760,
         "fp4_fp6_fp8_dst_fp16": 2_293_760, "fp4": 4_587_520, "int8": 2_293_760, "fp64": 37_888}


def _rows() -> tuple[list[str], list[str], list[list[str]]]:
    rows = list(csv.reader(H200_RAW.open(newline="")))
    return rows[0], rows[1], rows[2:]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def synthetic_b200(path: Path) -> dict[str, float]:
    """Write the B200 export; return the ops put on each moved kernel's path (by new kernel name)."""
    head, units, rows = _rows()
    keep = [i for i, h in enumerate(head) if not h.startswith(chips.TENSOR_PREFIX)]
    paths = chips.tensor_paths("gb100")
    bf16, fp8 = head.index("sm__ops_path_tensor_src_bf16_dst_fp32.sum"), \
        head.index("sm__ops_path_tensor_src_fp8_sparsity_off.sum")
    name, cc, gpu = head.index("Kernel Name"), head.index("CC"), head.index("device__attribute_display_name")
    new_head = [head[i] for i in keep] + [p.flops for p in paths.values()] + [p.peak for p in paths.values()]
    new_units = [units[i] for i in keep] + [""] * (2 * len(paths))
    ops: dict[str, float] = {}
    out = []
    for r in rows:
        counts = dict.fromkeys(paths, "0")
        if _number(r[bf16]) > 0 and "decode" not in r[name] and "64x16" not in r[name] and "nvjet" in r[name]:
            r = [*r]
            r[name], counts["fp4"] = NVFP4, r[bf16]  # the bf16 GEMM's ops as an NVFP4 GEMM's (UTCOMMA)
            ops[NVFP4] = _number(r[bf16])
        elif _number(r[fp8]) > 0:
            r = [*r]
            r[name], counts["fp4_fp6_fp8"] = FP8, r[fp8]  # FP8 with FP32 accumulation runs on UTCQMMA
            ops[FP8] = _number(r[fp8])
        elif "elementwise" in r[name]:
            r = [*r]
            r[name] = ALLREDUCE  # a streaming kernel's counters under a collective's name
        r[cc], r[gpu] = "10.0", "NVIDIA B200"
        out.append([r[i] for i in keep] + list(counts.values()) + [f"{PEAKS[k]:,}" for k in paths])
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([new_head, new_units, *out])
    return ops


def _import(path: Path, hardware: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    capture = read_csv_export(path, frozenset(load_catalog().needed()))
    entries = summarize_capture(capture, DeriveContext(load_ceilings(), hardware), path.name)
    return {e["name"]: e for e in entries}, capture.warnings


def test_b200_fp8_and_nvfp4_gemms_count_their_tensor_flops_exactly(tmp_path: Path) -> None:
    path = tmp_path / "b200_oracle-raw.csv"
    ops = synthetic_b200(path)
    rows, warnings = _import(path, "b200_sm100")
    assert warnings == []
    nvfp4, fp8 = rows[NVFP4], rows[FP8]
    for k in (nvfp4, fp8):
        assert k["chip"] == "gb100"
        assert k["flops"]["tensor"] == ops[k["name"]]  # exact: one path, nothing added twice
        parts = k["flops"]["tensor"] + k["flops"]["fp32"] + k["flops"]["fp16"] + k["flops"]["fp64"]
        assert k["flops"]["total"] == pytest.approx(parts) and k["ai_measured"] is True
        assert k["arithmetic_intensity"] == pytest.approx(k["flops"]["total"] / k["dram_bytes"])
        assert k["family"] == "gemm"
        # the verdict is the roofline's side at ncu's own peaks: AI against the ridge of the path's compute peak
        side = "compute" if k["arithmetic_intensity"] >= k["ridge_ai"] else "memory"
        assert k["bound"] == side, k["bound_reason"]
    # FP8 at AI ~1,600 is right of its ridge (~710): compute-bound, held to the FP8 roof
    assert fp8["bound"] == "compute" and fp8["arithmetic_intensity"] > 1500
    # the bf16 GEMM's bytes with FP4's 2x-FP8 peak: AI ~808 is left of FP4's ridge (~1,520 at ncu's peaks, 1,125 on
    # the datasheet's 9,000 TFLOP/s over 8 TB/s): memory-bound, and its %SoL is against HBM, not the FP4 roof
    assert nvfp4["tensor_dtype"] == "fp4" and nvfp4["bound"] == "memory" and 700 < nvfp4["arithmetic_intensity"] < 900
    assert nvfp4["family_ceiling_key"] == "b200_sm100.fp4_dense_tflops"
    assert nvfp4["sol_ceiling_key"] == "b200_sm100.hbm_tbps"
    assert {d: v for d, v in nvfp4["tensor_ops_by_dtype"].items() if v} == {"fp4": ops[NVFP4]}
    assert fp8["tensor_dtype"] == "fp4_fp6_fp8" and fp8["sol_ceiling_key"] == "b200_sm100.fp8_dense_tflops"
    # ncu's own peak for the kernel: the path's dense per-cycle peak x the SM clock of the launch
    assert fp8["ncu_peaks"]["compute_path"] == chips.tensor_paths("gb100")["fp4_fp6_fp8"].peak
    assert fp8["ncu_peaks"]["compute_tflops"] == pytest.approx(PEAKS["fp4_fp6_fp8"] * fp8["sm_hz"] / 1e12)
    peak = load_ceilings().value("b200_sm100.fp4_dense_tflops")
    assert nvfp4["family_sol_pct"] == pytest.approx(100 * nvfp4["achieved_tflops"] / peak)


def test_the_same_export_read_with_hopper_names_would_have_counted_nothing(tmp_path: Path) -> None:
    """What the issue saw: summing Hopper's path names over a B200 export gives 0 tensor FLOPs and a 'memory'
    verdict for a 1.1 TFLOP GEMM. The B200 map reads the Blackwell names instead."""
    path = tmp_path / "b200_oracle-raw.csv"
    synthetic_b200(path)
    head = next(csv.reader(path.open(newline="")))
    gb100 = {p.flops for p in chips.tensor_paths("gb100").values()}
    hopper = {p.flops for p in chips.tensor_paths("gh100").values()} - gb100
    assert not hopper & set(head)  # no Hopper-only path in a B200 export
    rows, _ = _import(path, "b200_sm100")
    assert rows[FP8]["flops"]["tensor"] > 1e12


def test_an_unmapped_chip_gets_null_tensor_flops_and_a_warning(tmp_path: Path) -> None:
    head, units, rows = _rows()
    cc, gpu = head.index("CC"), head.index("device__attribute_display_name")
    for r in rows:
        r[cc], r[gpu] = "7.0", "Tesla V100-SXM2-32GB"  # Volta: older than Turing, no chips.yaml map
    path = tmp_path / "v100-raw.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([head, units, *rows])
    entries, warnings = _import(path, "h200_sm90")
    for k in entries.values():
        idle = k["tensor_pipe_active_pct"] == 0  # the tensor pipe measurably idle: no tensor work, whatever the map
        assert k["chip"] is None and k["flops"]["tensor"] == (0.0 if idle else None)
        if not idle:
            assert k["flops"]["total"] is None and k["arithmetic_intensity"] is None and k["ai_measured"] is False
        assert k["tensor_ops_by_dtype"] is None
        assert k["flops"]["fp32"] is not None  # CUDA-core instruction counts do not depend on the chip's map
    (warning,) = [w for w in warnings if "tensor-path map" in w]
    assert "GPU 'Tesla V100-SXM2-32GB', CC 7.0" in warning and "tensor FLOPs left null" in warning
    assert "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in warning


def test_a_collective_is_comm_bound_against_the_nvlink_key(tmp_path: Path) -> None:
    path = tmp_path / "b200_oracle-raw.csv"
    synthetic_b200(path)
    rows, _ = _import(path, "b200_sm100")
    k = rows[ALLREDUCE]
    assert k["family"] == "communication" and k["bound"] == "comm"
    assert k["sol_ceiling_key"] == "b200_sm100.nvlink_tbps" and k["sol_pct"] is None  # no NVLink byte counter read
    assert k["bound_reason"].startswith("communication kernel: bound by the interconnect (b200_sm100.nvlink_tbps)")
    assert "DRAM" in k["bound_reason"]  # the local side stays visible: this one streamed at ~90% of DRAM peak


def test_the_roofline_draws_a_roof_per_dtype_the_b200_kernels_use(tmp_path: Path) -> None:
    from conftest import write_config

    from perfreport.ncu.importer import import_ncu
    from perfreport.warehouse.gather import gather

    path = tmp_path / "b200_oracle-raw.csv"
    synthetic_b200(path)
    camp = write_config(tmp_path / "camp", hardware="b200_sm100")
    import_ncu(camp, "c1", path)
    model = gather(camp).roofline
    roofs = {r.key for r in model.roofs if not r.is_memory and r.measured_for is None}
    assert {"b200_sm100.fp4_dense_tflops", "b200_sm100.fp8_dense_tflops"} <= roofs
    by_kernel = {p.label: p.ceiling_key for p in model.points}
    assert by_kernel[NVFP4.split("(")[0]] == "b200_sm100.fp4_dense_tflops"
    assert by_kernel[FP8] == "b200_sm100.fp8_dense_tflops"
