"""Derived per-kernel metrics: FLOPs, bytes, arithmetic intensity, %SoL, occupancy limiter, stalls, verdict.

Honesty rules (docs/metrics.md): a quantity whose counters were not captured is None, never 0 and never
estimated; AI is None with ai_measured False unless both FLOP and DRAM-byte counters were captured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfreport.config.ceilings import CeilingRef, Ceilings, classify_family
from perfreport.errors import InputError
from perfreport.ncu.catalog.chips import TensorPath, chip_for, tensor_paths
from perfreport.ncu.catalog.dimensions import metric_dimensions, unit_problem, value_problem
from perfreport.ncu.catalog.metrics import Catalog, load_catalog
from perfreport.ncu.model import KernelLaunch

# Verdict thresholds (% of the per-kernel peak ncu reports for the unit).
BOUND_HIGH_PCT = 60.0
LATENCY_LOW_PCT = 40.0
TENSOR_FAMILIES = {"gemm", "moe_gemm", "attention"}
MEMORY_FAMILY = "copy"  # its category_ceiling_map entry is the DRAM roof (hbm_tbps)
COMM_FAMILY = "communication"  # collectives: judged against the interconnect (nvlink_tbps), verdict "comm"
Paths = Mapping[str, TensorPath]  # one chip's tensor paths by key (chips.yaml)


@dataclass(frozen=True)
class DeriveContext:
    """What derivation needs besides the counters: the ceilings file and the hardware token."""

    ceilings: Ceilings
    hardware: str


Getter = Callable[[str], "float | None"]  # a launch's captured value of a raw metric, None when not captured


def getter(launch: KernelLaunch) -> Getter:
    """The launch's metric lookup, NaN (ncu_report's value for an unavailable counter) read as not captured.

    One dict of the captured values per launch and its bound `get`: derivation reads ~75 metrics per launch.
    """
    values = {k: v for k, v in launch.metrics.items() if v == v}  # v != v: NaN
    _check_dimensions(launch, values)
    return values.get


def _check_dimensions(launch: KernelLaunch, values: dict[str, float]) -> None:
    """Refuse a value no derived number may use: a unit outside its metric's dimension, not finite, or negative.

    The readers refuse these with the file and line; this holds every reader (a report's units, a Capture built
    elsewhere) to the same rule, so no derived number is silently wrong.
    """
    for metric, dim in metric_dimensions().items():
        v = values.get(metric)
        if v is None:
            continue
        unit = launch.units.get(metric)
        problem = (unit_problem(metric, unit, unit) if unit is not None and unit not in dim.base
                   else value_problem(metric, v))
        if problem:
            raise InputError(f"kernel {launch.name[:80]!r} (launch {launch.launch_id}): {problem}.")


def _plain_count(get: Getter, rate_metric: str, cycles: float | None) -> float | None:
    """Instruction count from a `.sum.per_cycle_elapsed` rate x elapsed cycles, or a captured plain `.sum`."""
    rate = get(rate_metric)
    if rate is not None and cycles is not None:
        return rate * cycles
    if rate_metric.endswith(".per_cycle_elapsed"):
        return get(rate_metric[: -len(".per_cycle_elapsed")])
    return None


def device_name(launch: KernelLaunch) -> str | None:
    """The display name of the GPU a launch ran on (`NVIDIA H200`), when the export holds it."""
    return launch.text.get(load_catalog().text["gpu"])


def launch_chip(launch: KernelLaunch) -> str | None:
    """The chips.yaml map of the GPU a launch ran on, from its display name and compute capability; None when no
    verified map fits (its tensor FLOPs are then null, never summed over another chip's counters)."""
    return chip_for(device_name(launch), launch.cc or None)


def flops(get: Getter, cat: Catalog, paths: Paths | None) -> tuple[dict[str, float | None] | None, dict[str, float]]:
    """Return ({tensor, fp64, fp32, fp16, total} or None, tensor ops by path), the tensor part from the chip's
    disjoint paths (`paths`; None: the chip has no map and its tensor FLOPs are unknown). Integer paths (int8) are
    kept by path but are not FLOPs."""
    by_dtype = {} if paths is None else {k: v for k, p in paths.items() if (v := get(p.flops)) is not None}
    tensor = sum(v for k, v in by_dtype.items() if paths and not paths[k].integer) if by_dtype else None
    cycles = get(cat.scalars["smsp_cycles_elapsed"])
    core: dict[str, float | None] = {}
    for kind, terms in cat.cuda_core_flops.items():
        counts = [_plain_count(get, t.metric, cycles) for t in terms]
        core[kind] = None if any(c is None for c in counts) else sum(
            t.weight * c for t, c in zip(terms, counts, strict=True) if c is not None
        )
    if tensor is None and all(v is None for v in core.values()):
        return None, by_dtype
    parts = [tensor, core["fp64"], core["fp32"], core["fp16"]]
    total = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    return {"tensor": tensor, "fp64": core["fp64"], "fp32": core["fp32"], "fp16": core["fp16"],
            "total": total}, by_dtype


def dram_bytes(get: Getter, cat: Catalog, seconds: float | None) -> tuple[float | None, str | None]:
    """DRAM bytes: a captured count, read+write (full set), or rate x duration (roofline set); else None."""
    total = get(cat.scalars["dram_bytes_sum"])
    if total is not None:
        return total, "dram__bytes.sum"
    rd = get(cat.scalars["dram_bytes_read"])
    wr = get(cat.scalars["dram_bytes_write"])
    if rd is not None and wr is not None:
        return rd + wr, "dram__bytes_read.sum + dram__bytes_write.sum"
    rate = get(cat.scalars["dram_bytes_per_second"])
    if rate is not None and seconds is not None:
        return rate * seconds, "dram__bytes.sum.per_second * gpu__time_duration.sum"
    return None, None


def _rate_bytes(get: Getter, metric: str, seconds: float | None) -> float | None:
    rate = get(metric)
    return None if rate is None or seconds is None else rate * seconds


def _block_limit(get: Getter, cat: Catalog) -> tuple[dict[str, float], str | None]:
    limits = {k: v for k, m in cat.block_limits.items() if (v := get(m)) is not None}
    if not limits:
        return limits, None
    low = min(limits.values())
    return limits, "+".join(sorted(k for k, v in limits.items() if v == low))


def _stall_cycles(get: Getter, cat: Catalog) -> dict[str, float] | None:
    """Cycles per issued instruction a warp spends stalled, per reason, as captured (None when none is)."""
    cycles = {r: v for r, m in sorted(cat.warp_stalls.items()) if (v := get(m)) is not None}
    return cycles or None


def _stall_shares(cycles: dict[str, float] | None) -> dict[str, float] | None:
    """Each reason's share of the stall cycles, in %."""
    total = sum(cycles.values()) if cycles else 0.0
    if not cycles or total <= 0:
        return None
    return {r: 100.0 * v / total for r, v in cycles.items()}


def _divergence(get: Getter, cat: Catalog) -> float | None:
    eff = get(cat.scalars["branch_efficiency_pct"])
    divergent = get(cat.scalars["divergent_branches_avg"])
    if divergent == 0.0:
        return 0.0  # ncu prints 0% efficiency for kernels with no divergent branch targets at all
    return None if eff is None else 100.0 - eff


def _tensor_dtype(by_dtype: dict[str, float]) -> str | None:
    busy = {d: v for d, v in by_dtype.items() if v > 0}
    if not busy:
        return None
    d = max(sorted(busy), key=lambda k: busy[k])
    return "fp8" if d == "fp8_sparse" else d


def _ncu_peaks(get: Getter, cat: Catalog, dtype: str | None, paths: Paths | None) -> dict[str, Any]:
    """Per-kernel peaks as ncu computes them: per-cycle peak x the clock measured during this kernel."""
    sm_hz = get(cat.scalars["sm_hz"])
    out: dict[str, Any] = {"compute_path": None, "compute_tflops": None, "dram_tbps": None}
    if dtype is not None and paths is not None and dtype in paths:
        per_cycle = get(paths[dtype].peak)
        out["compute_path"] = paths[dtype].peak
    else:
        ffma = get(cat.cuda_core_peak_per_cycle["fp32"])
        per_cycle = None if ffma is None else 2 * ffma
        out["compute_path"] = "2 * " + cat.cuda_core_peak_per_cycle["fp32"]
    if per_cycle is not None and sm_hz is not None:
        out["compute_tflops"] = per_cycle * sm_hz / 1e12
    bpc = get(cat.scalars["dram_bytes_peak_per_cycle"])
    dram_hz = get(cat.scalars["dram_hz"])
    if bpc is not None and dram_hz is not None:
        out["dram_tbps"] = bpc * dram_hz / 1e12
    return out


def _pct(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else 100.0 * a / b


def verdict(row: dict[str, Any]) -> tuple[str, str]:
    """Bound verdict from % of peak compute / memory and the roofline ridge; never from SM-busy % alone.

    A collective (all-reduce, all-gather, NCCL) is "comm": its time is set by the interconnect and the peers, which
    this GPU's compute and DRAM counters do not see; their percentages are kept in the reason."""
    comp = row.get("compute_pct_of_peak")
    mem = row.get("dram_pct_of_peak")
    if mem is None:
        mem = row.get("dram_throughput_pct")
    sm = row.get("sm_throughput_pct")
    if row.get("family") == COMM_FAMILY:
        local = ", ".join(f"{n} {v:.0f}%" for n, v in (("SM", sm), ("DRAM", mem)) if v is not None) or "not captured"
        return "comm", (f"communication kernel: bound by the interconnect ({row.get('sol_ceiling_key') or 'nvlink'}) "
                        f"and its peers, not by this GPU's roofs (local: {local} of peak)")
    if comp is None:
        if mem is not None and mem >= BOUND_HIGH_PCT:
            return "memory", f"DRAM at {mem:.0f}% of peak; FLOP counters not captured"
        if mem is not None and sm is not None and max(mem, sm) < LATENCY_LOW_PCT:
            return "latency", f"DRAM {mem:.0f}% and SM throughput {sm:.0f}% both under {LATENCY_LOW_PCT:.0f}%"
        return "unknown", "no FLOP counters (basic set): compute utilization cannot be measured"
    mem_v = mem if mem is not None else 0.0
    if comp >= BOUND_HIGH_PCT and mem_v >= BOUND_HIGH_PCT:
        return "mixed", f"compute {comp:.0f}% and DRAM {mem_v:.0f}% of peak"
    if max(comp, mem_v, sm or 0.0) < LATENCY_LOW_PCT:
        return "latency", f"compute {comp:.0f}%, DRAM {mem_v:.0f}%, SM {sm or 0:.0f}% all under " \
                          f"{LATENCY_LOW_PCT:.0f}%"
    ai, ridge = row.get("arithmetic_intensity"), row.get("ridge_ai")
    if ai is not None and ridge:
        side = "memory" if ai < ridge else "compute"
        return side, f"AI {ai:.3g} {'<' if ai < ridge else '>='} ridge {ridge:.3g} FLOP/B; " \
                     f"compute {comp:.0f}%, DRAM {mem_v:.0f}% of peak"
    if mem is None:
        return "unknown", "no DRAM byte counters"
    return ("compute" if comp >= mem_v else "memory"), f"compute {comp:.0f}%, DRAM {mem_v:.0f}% of peak"


def derive_launch(launch: KernelLaunch, ctx: DeriveContext, family: str | None = None) -> dict[str, Any]:
    """All derived fields of one launch (None where the counters were not captured).

    `family`: the kernel family of launch.name when the caller already knows it (one classification per kernel,
    not per launch: the family rules are regular expressions).
    """
    cat = load_catalog()
    s = cat.scalars
    get = getter(launch)
    dur = get(s["duration_ns"])
    sec = None if dur is None else dur * 1e-9
    chip = launch_chip(launch)
    paths = None if chip is None else tensor_paths(chip)
    fl, by_dtype = flops(get, cat, paths)
    stall_cycles = _stall_cycles(get, cat)
    dram, dram_method = dram_bytes(get, cat, sec)
    total = None if fl is None else fl["total"]
    ai = total / dram if total is not None and dram else None
    l2 = _rate_bytes(get, s["l2_bytes_per_second"], sec)
    l1 = _rate_bytes(get, s["l1_bytes_per_second"], sec)
    tflops = total / sec / 1e12 if total is not None and sec else None
    tbps = dram / sec / 1e12 if dram is not None and sec else None
    if family is None:
        family = classify_family(launch.name, ctx.ceilings)
    dtype = _tensor_dtype(by_dtype)
    ref = ctx.ceilings.ceiling_for(ctx.hardware, family, dtype if family in TENSOR_FAMILIES else None)
    peaks = _ncu_peaks(get, cat, dtype, paths)
    limits, limiter = _block_limit(get, cat)
    smem_parts = [get(s["smem_static_per_block_bytes"]), get(s["smem_dynamic_per_block_bytes"])]
    comp_achieved = (by_dtype.get(dtype, 0.0) / sec / 1e12) if dtype and sec else tflops
    row: dict[str, Any] = {
        "launch_id": launch.launch_id,
        "chip": chip,
        "duration_ns": dur,
        "flops": fl,
        "tensor_ops_by_dtype": by_dtype or None,
        "tensor_dtype": dtype,
        "dram_bytes": dram,
        "dram_bytes_method": dram_method,
        "l2_bytes": l2,
        "l1_bytes": l1,
        "arithmetic_intensity": ai,
        "ai_l2": total / l2 if total is not None and l2 else None,
        "ai_l1": total / l1 if total is not None and l1 else None,
        "ai_measured": ai is not None,
        "achieved_tflops": tflops,
        "achieved_dram_tbps": tbps,
        "family": family,
        "sm_hz": get(s["sm_hz"]),
        "ncu_peaks": peaks,
        "compute_pct_of_peak": _pct(comp_achieved, peaks["compute_tflops"]),
        "dram_pct_of_peak": _pct(tbps, peaks["dram_tbps"]),
        "ridge_ai": (peaks["compute_tflops"] / peaks["dram_tbps"])
        if peaks["compute_tflops"] and peaks["dram_tbps"] else None,
        "sm_throughput_pct": get(s["sm_throughput_pct"]),
        "memory_throughput_pct": get(s["memory_throughput_pct"]),
        "dram_throughput_pct": get(s["dram_throughput_pct"]),
        "achieved_occupancy_pct": get(s["achieved_occupancy_pct"]),
        "theoretical_occupancy_pct": get(s["theoretical_occupancy_pct"]),
        "achieved_active_warps_per_sm": get(s["achieved_active_warps_per_sm"]),
        "regs_per_thread": get(s["regs_per_thread"]),
        "smem_per_block_bytes": None if any(p is None for p in smem_parts) else sum(
            p for p in smem_parts if p is not None),
        "block_limits": limits or None,
        "block_limit_factor": limiter,
        "warp_stalls_pct": _stall_shares(stall_cycles),
        "warp_stall_cycles": stall_cycles,
        "warp_cycles_per_issued_inst": get(s["warp_cycles_per_issued_inst"]),
        "waves_per_sm": get(s["waves_per_sm"]),
        "l1_hit_rate_pct": get(s["l1_hit_rate_pct"]),
        "l2_hit_rate_pct": get(s["l2_hit_rate_pct"]),
        "tensor_pipe_active_pct": get(s["tensor_pipe_active_pct"]),
        "branch_efficiency_pct": get(s["branch_efficiency_pct"]),
        "branch_divergence_pct": _divergence(get, cat),
    }
    family_sol = _sol(ref, tflops, tbps)
    row["family_sol_pct"], row["family_ceiling_key"] = family_sol["sol_pct"], family_sol["sol_ceiling_key"]
    row.update(_sol(_binding_roof(ctx, ref, ai), tflops, tbps))
    achievable = _sol(_binding_roof(ctx, ref, ai, achievable=True), tflops, tbps)
    row["pct_of_achievable"], row["achievable_key"] = achievable["sol_pct"], achievable["sol_ceiling_key"]
    row["bound"], row["bound_reason"] = verdict(row)
    return row


def _binding_roof(ctx: DeriveContext, ref: CeilingRef | None, ai: float | None,
                  achievable: bool = False) -> CeilingRef | None:
    """The roof that binds at this kernel's measured AI: the memory roof left of the ridge, else the family's.

    A decode GEMM at 16 FLOP/B cannot reach the bf16 tensor peak; its speed of light is HBM bandwidth. Without
    measured AI the family ceiling stands (and its %SoL is null where FLOPs or bytes are missing).
    `achievable`: the same choice between the measured roofs (achievable_ceiling_map; their ridge lies elsewhere);
    None where the binding roof has no measured counterpart on this hardware.
    """
    mem = ctx.ceilings.ceiling_for(ctx.hardware, MEMORY_FAMILY, None)
    if achievable:
        ref, mem = ctx.ceilings.achievable_for(ref), ctx.ceilings.achievable_for(mem)
    if ref is None or ref.kind != "compute" or ai is None:
        return ref
    if mem is None or mem.kind != "memory":
        return None if achievable else ref  # no measured memory roof: which one binds is unknown
    if ai * mem.value >= ref.value:
        return ref
    return mem


def _sol(ref: CeilingRef | None, tflops: float | None, tbps: float | None) -> dict[str, Any]:
    """%SoL against one ceiling from sol-ceilings.yaml, with its key path."""
    if ref is None:
        return {"sol_pct": None, "sol_ceiling_key": None}
    if ref.kind == "compute":
        return {"sol_pct": _pct(tflops, ref.value), "sol_ceiling_key": ref.key}
    if ref.kind == "memory":
        return {"sol_pct": _pct(tbps, ref.value), "sol_ceiling_key": ref.key}
    return {"sol_pct": None, "sol_ceiling_key": ref.key}  # interconnect bytes are not ncu counters here
