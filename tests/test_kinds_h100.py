"""Verdicts and FLOPs on kernel kinds beyond tensor GEMMs, from a real H100 capture (tests/data/h100_kinds).

The capture holds one launch of each kind in kinds_manifest.json order: bf16 / fp8 / fp32-SIMT SwiGLU GEMMs, fp64
DMMA and int8 IMMA GEMMs, CUDA-core FMA loops in fp32 / fp64 / fp16, an L1-bound and an L2-bound kernel, a tiny add.
Expected numbers are computed here from the CSV with the csv module (ncu's own formulas: its roofline chart sections'
expressions, ncu_reference.md 2.1) or from the manifest (the ops' algorithmic FLOPs), never from perfreport.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_config

from perfreport.config.ceilings import load_ceilings
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.derive import DeriveContext, derive_launch
from perfreport.ncu.read import read_export

DATA = Path(__file__).resolve().parent / "data" / "h100_kinds"
RAW = DATA / "kinds_full-raw.csv"
BASE = DATA / "kinds_full-raw-base.csv"  # the same export in base units (ns, hz, byte): plain floats to check with
MANIFEST = json.loads((DATA / "kinds_manifest.json").read_text(encoding="utf-8"))
CTX = DeriveContext(ceilings=load_ceilings(), hardware="h100_sm90")


def _base_rows() -> list[dict[str, float | str]]:
    with BASE.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[2:]

    def value(text: str) -> float | str:
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return text

    return [dict(zip(header, (value(v) for v in r), strict=True)) for r in body]


BASE_ROWS = _base_rows()
OPS = [m["op"] for m in MANIFEST]


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    capture = read_export(RAW)
    assert len(capture.launches) == len(MANIFEST) == 20
    return {op: derive_launch(launch, CTX) for op, launch in zip(OPS, capture.launches, strict=True)}


def _ncu_fp(row: dict[str, float | str], p: str) -> float:
    """ncu's achieved FLOP/s of precision prefix p (f, d, h) as its roofline charts compute it."""
    rate = f"smsp__sass_thread_inst_executed_op_{p}{{}}_pred_on.sum.per_cycle_elapsed"
    add, mul, fma = (float(row[rate.format(o)]) for o in ("add", "mul", "fma"))
    w = 2 if p == "h" else 1  # the half chart: hadd x2, hmul x2, hfma x4
    return (w * add + w * mul + 2 * w * fma) * float(row["smsp__cycles_elapsed.avg.per_second"])


def test_cuda_core_flops_equal_the_manifest_and_ncus_roofline(rows: dict[str, dict[str, Any]]) -> None:
    for op, prec, p in (("triton_fma_fp32", "fp32", "f"), ("triton_fma_fp64", "fp64", "d"),
                        ("triton_fma_fp16", "fp16", "h"), ("mlp_fp32_gate", "fp32", "f"),
                        ("mlp_fp32_down", "fp32", "f")):
        r, base = rows[op], BASE_ROWS[OPS.index(op)]
        expected = MANIFEST[OPS.index(op)]["flops"]
        assert r["flops"][prec] == pytest.approx(expected, rel=2e-3), op  # executed = algorithmic, to 0.2%
        seconds = float(base["gpu__time_duration.sum"]) * 1e-9
        assert r["flops"][prec] == pytest.approx(_ncu_fp(base, p) * seconds, rel=1e-3), op
        assert r["flops"]["tensor"] == 0.0 and r["tensor_dtype"] is None


def test_tensor_flops_cover_the_algorithmic_count(rows: dict[str, dict[str, Any]]) -> None:
    """Tensor-path ops count the padded tiles: at least the algorithmic 2MNK, at most 5% over for these shapes."""
    for op, dtype in (("mlp_bf16_gate", "bf16"), ("mlp_bf16_down", "bf16"), ("mlp_fp8_gate", "fp8"),
                      ("gemm_fp64_2048", "fp64"), ("gemm_int8_4096", "int8")):
        r, expected = rows[op], MANIFEST[OPS.index(op)]["flops"]
        assert r["tensor_dtype"] == dtype, op
        assert expected <= r["tensor_ops_by_dtype"][dtype] <= 1.05 * expected, op


def test_compute_pct_of_peak_is_ncus_for_cuda_core_kernels(rows: dict[str, dict[str, Any]]) -> None:
    """% of ncu's own peak of the kernel's precision: FFMA x 2, DFMA x 2, HFMA2 x 4 per cycle x SM clock."""
    for op, p, weight in (("triton_fma_fp32", "f", 2), ("triton_fma_fp64", "d", 2), ("triton_fma_fp16", "h", 4),
                          ("mlp_fp32_gate", "f", 2)):
        base = BASE_ROWS[OPS.index(op)]
        peak = weight * float(base[f"sm__sass_thread_inst_executed_op_{p}fma_pred_on.sum.peak_sustained"]) * float(
            base["sm__cycles_elapsed.avg.per_second"])
        assert rows[op]["compute_pct_of_peak"] == pytest.approx(100 * _ncu_fp(base, p) / peak, rel=1e-3), op


def test_verdicts_use_the_roof_of_the_kernels_own_precision_and_pipe(rows: dict[str, dict[str, Any]]) -> None:
    fp32 = rows["mlp_fp32_gate"]  # CUTLASS SIMT fp32 GEMM, AI ~180: on the FP32 roof, not HBM's
    assert fp32["bound"] == "compute" and fp32["sol_ceiling_key"] == "h100_sm90.fp32_tflops"
    assert fp32["sol_pct"] == pytest.approx(100 * fp32["achieved_tflops"] / 67, rel=1e-9)
    assert 70 < fp32["sol_pct"] < 80
    assert fp32["pct_of_achievable"] is None and fp32["achievable_key"] is None  # fp32 peak never measured here
    assert rows["gemm_fp64_2048"]["sol_ceiling_key"] == "h100_sm90.fp64_tensor_tflops"
    assert rows["triton_fma_fp64"]["sol_ceiling_key"] == "h100_sm90.fp64_tflops"
    assert rows["triton_fma_fp64"]["bound"] == "compute"
    half = rows["triton_fma_fp16"]  # CUDA-core fp16: no datasheet row on H100, never placed on the HBM roof
    assert half["bound"] == "compute" and half["sol_pct"] is None and half["sol_ceiling_key"] is None
    assert half["ncu_peaks"]["compute_path"] == "4 * sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained"
    int8 = rows["gemm_int8_4096"]  # integer ops place it: FLOPs 0 would read AI 0, "memory-bound"
    assert int8["arithmetic_intensity"] == 0.0
    assert int8["ops_intensity"] == pytest.approx(int8["tensor_ops_by_dtype"]["int8"] / int8["dram_bytes"])
    assert int8["ops_intensity"] > int8["ridge_ai"]
    assert int8["bound"] == "compute" and int8["sol_ceiling_key"] == "h100_sm90.int8_dense_tops"
    assert int8["bound_reason"].startswith(f"AI {int8['ops_intensity']:.3g} >= ridge")
    assert "int ops/B" in int8["bound_reason"]
    for op in ("mlp_bf16_silu_mul", "mlp_fp32_silu_mul"):
        assert rows[op]["bound"] == "memory" and rows[op]["sol_ceiling_key"] == "h100_sm90.hbm_tbps"
    assert rows["tiny_add_1"]["bound"] == "latency"


def test_cache_bound_kernels_are_cache_not_latency_or_compute(rows: dict[str, dict[str, Any]]) -> None:
    l1, l2 = rows["triton_l1_reuse"], rows["triton_l2_sweep"]
    base_l1, base_l2 = BASE_ROWS[OPS.index("triton_l1_reuse")], BASE_ROWS[OPS.index("triton_l2_sweep")]
    assert l1["bound"] == "cache" and l1["bound_reason"].startswith("cache-bound (L1/TEX): memory throughput 93%")
    assert l2["bound"] == "cache" and l2["bound_reason"].startswith("cache-bound (L2): memory throughput 87%")
    l1_pct = float(base_l1["l1tex__throughput.avg.pct_of_peak_sustained_active"])
    l2_pct = float(base_l2["lts__throughput.avg.pct_of_peak_sustained_elapsed"])
    assert l1["l1tex_throughput_pct"] == pytest.approx(l1_pct, abs=0.01)
    assert l2["l2_throughput_pct"] == pytest.approx(l2_pct, abs=0.01)
    for r in (l1, l2):
        assert r["dram_throughput_pct"] < 5
        assert r["sol_pct"] is None and r["sol_ceiling_key"] is None and r["pct_of_achievable"] is None


def test_a_gemm_above_its_measured_ceiling_flags_the_ceiling(rows: dict[str, dict[str, Any]]) -> None:
    """The bf16 GEMMs run above the measured bf16 GEMM ceiling: the % is not shown, the ceiling is flagged."""
    down = rows["mlp_bf16_down"]
    assert down["pct_of_achievable"] is None and down["achievable_key"] == "h100_sm90.empirical.bf16_gemm_burst_tflops"
    measured = CTX.ceilings.value("h100_sm90.empirical.bf16_gemm_burst_tflops")
    pct = 100 * down["achieved_tflops"] / measured
    assert pct > 100
    assert down["ceiling_exceeded"] == {"h100_sm90.empirical.bf16_gemm_burst_tflops": pytest.approx(pct)}
    assert down["sol_pct"] == pytest.approx(100 * down["achieved_tflops"] / 989.5) and down["sol_pct"] < 100
    capture = read_export(RAW)
    summarize_capture(capture, CTX, RAW.name)
    said = [w for w in capture.warnings if "ran above 100% of ceiling h100_sm90.empirical.bf16_gemm_burst_tflops" in w]
    assert len(said) == 1 and "re-measure it (`perftunereport ceilings measure`)" in said[0]


def _without(columns: set[str], tmp_path: Path) -> Path:
    """A copy of the raw export without the given columns (what a user's trimmed export looks like)."""
    with RAW.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, name in enumerate(rows[0]) if name not in columns]
    assert len(keep) == len(rows[0]) - len(columns)
    out = tmp_path / "trimmed-raw.csv"
    with out.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([[r[i] for i in keep] for r in rows])
    return out


def test_a_missing_tensor_path_column_never_counts_as_zero(tmp_path: Path) -> None:
    path = _without({"sm__ops_path_tensor_src_fp8_sparsity_off.sum"}, tmp_path)
    capture = read_export(path)
    entries = summarize_capture(capture, CTX, path.name)
    fp8 = [e for e in entries if e["launch_ids"][0] == OPS.index("mlp_fp8_gate")][0]
    assert fp8["flops"]["tensor"] is None and fp8["flops"]["total"] is None
    assert fp8["arithmetic_intensity"] is None and fp8["ai_measured"] is False and fp8["bound"] != "memory"
    named = [w for w in capture.warnings if "sm__ops_path_tensor_src_fp8_sparsity_off.sum is not in the export" in w]
    assert named and "tensor FLOPs, AI and %SoL left null" in named[0]
    bf16 = [e for e in entries if e["launch_ids"][0] == OPS.index("mlp_bf16_gate")][0]
    assert bf16["flops"]["tensor"] is None  # every path is needed for a total, whichever dtype ran


def test_fp16_from_the_derived_x2_x4_metrics_when_the_rates_are_absent(tmp_path: Path,
                                                                       rows: dict[str, dict[str, Any]]) -> None:
    rates = {f"smsp__sass_thread_inst_executed_op_h{o}_pred_on.sum.per_cycle_elapsed" for o in ("add", "mul", "fma")}
    capture = read_export(_without(rates, tmp_path))
    half = derive_launch(capture.launches[OPS.index("triton_fma_fp16")], CTX)
    assert half["flops"]["fp16"] == pytest.approx(rows["triton_fma_fp16"]["flops"]["fp16"], rel=1e-9)
    assert half["flops"]["fp16"] == pytest.approx(MANIFEST[OPS.index("triton_fma_fp16")]["flops"], rel=2e-3)


def test_implausible_values_are_listed_and_warned(tmp_path: Path) -> None:
    """A duration exported as 1 ps (a unit slip) makes every rate impossible: listed, warned, not silently kept."""
    with RAW.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index("gpu__time_duration.sum")
    assert rows[1][col] == "ms"
    rows[2 + OPS.index("tiny_add_1")][col] = "0.000000001"  # 1 ps
    path = tmp_path / "slip-raw.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    capture = read_export(path)
    entries = summarize_capture(capture, CTX, path.name)
    tiny = [e for e in entries if e["launch_ids"][0] == OPS.index("tiny_add_1")][0]
    assert tiny["implausible"] and tiny["implausible"][0] == "duration 0.001 ns is under 100 ns"
    said = [w for w in capture.warnings if "duration 0.001 ns is under 100 ns" in w]
    assert len(said) == 1 and "--strict refuses it" in said[0] and "launch 19" in said[0]
    others = [e for e in entries if e["launch_ids"][0] != OPS.index("tiny_add_1")]
    assert all(e["implausible"] is None for e in others)
    # import_ncu --strict refuses it, naming the value; nothing is written
    camp = write_config(tmp_path / "camp", hardware="h100_sm90")
    out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(path), "--strict",
                  ok=False).output
    assert "--strict: import refused" in out and "duration 0.001 ns is under 100 ns" in out
    assert not (camp / "cells" / "c1" / "ncu_kernels.json").exists()


def test_the_fixture_is_what_its_readme_says() -> None:
    assert [m["kind"] for m in MANIFEST].count("fp32_simt") == 3
    assert not [m for m in MANIFEST if m.get("error")]
    assert "2025.3.1.0" in (DATA / "versions.txt").read_text(encoding="utf-8")
