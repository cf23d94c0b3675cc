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
from perfreport.ncu.catalog.metrics import Catalog, FlopTerm, load_catalog
from perfreport.ncu.model import KernelLaunch

# Verdict thresholds (% of the per-kernel peak ncu reports for the unit).
BOUND_HIGH_PCT = 60.0
LATENCY_LOW_PCT = 40.0
CACHE_BOUND_PCT = 80.0  # memory throughput at which a kernel with DRAM under BOUND_HIGH_PCT is cache-bound
TENSOR_FAMILIES = {"gemm", "moe_gemm", "attention"}
MEMORY_FAMILY = "copy"  # its category_ceiling_map entry is the DRAM roof (hbm_tbps)
COMM_FAMILY = "communication"  # collectives: judged against the interconnect (nvlink_tbps), verdict "comm"
Paths = Mapping[str, TensorPath]  # one chip's tensor paths by key (chips.yaml)


@dataclass(frozen=True)
class DeriveContext:
    """What derivation needs besides the counters: the ceilings file and the hardware token."""

    ceilings: Ceilings
    hardware: str | None  # None: no roof to score against (a capture from another GPU, --hardware-mismatch warn)


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


def _plain_count(get: Getter, term: FlopTerm, cycles: float | None) -> float | None:
    """Instruction count from a `.sum.per_cycle_elapsed` rate (or its weighted derived__ twin / weight) x elapsed
    cycles, or a captured plain `.sum`."""
    rate = get(term.metric)
    if rate is None and term.derived is not None and (weighted := get(term.derived)) is not None:
        rate = weighted / term.weight
    if rate is not None and cycles is not None:
        return rate * cycles
    for name in term.counts:
        if (count := get(name)) is not None:
            return count
    return None


SMSP_PER_SM = 4  # every chip since Volta has four SM sub-partitions per SM
FLOP_PARTS = ("tensor", "fp64", "fp32", "fp16")  # flops.total sums these


def elapsed_cycles(get: Getter, cat: Catalog, seconds: float | None) -> float | None:
    """smsp__cycles_elapsed.avg, the multiplier of every per-cycle rate; ncu <= 2023.3 does not store it, so it is
    recovered as its per-second rate x duration, or as the sum over SMSPs / (4 x SMs) (the two agree)."""
    s = cat.scalars
    if (cycles := get(s["smsp_cycles_elapsed"])) is not None:
        return cycles
    rate = get(s["smsp_cycles_elapsed_per_second"])
    if rate is not None and seconds is not None:
        return rate * seconds
    total, sms = get(s["smsp_cycles_elapsed_sum"]), get(s["sm_count"])
    return total / (SMSP_PER_SM * sms) if total is not None and sms else None


def duration_ns(get: Getter, cat: Catalog) -> float | None:
    """gpu__time_duration.sum, or (the NERSC recipe, which captures no duration) SM cycles / SM clock."""
    s = cat.scalars
    if (dur := get(s["duration_ns"])) is not None:
        return dur
    cycles, hz = get(s["sm_cycles_elapsed"]), get(s["sm_hz"])
    return cycles / hz * 1e9 if cycles is not None and hz else None


def device_name(launch: KernelLaunch) -> str | None:
    """The display name of the GPU a launch ran on (`NVIDIA H200`), when the export holds it."""
    return launch.text.get(load_catalog().text["gpu"])


def launch_chip(launch: KernelLaunch) -> str | None:
    """The chips.yaml map of the GPU a launch ran on, from its display name and compute capability; None when no
    verified map fits (its tensor FLOPs are then null, never summed over another chip's counters)."""
    return chip_for(device_name(launch), launch.cc or None)


def flops(get: Getter, cat: Catalog, paths: Paths | None, seconds: float | None = None
          ) -> tuple[dict[str, float | None] | None, dict[str, float], list[str]]:
    """Return ({tensor, fp64, fp32, fp16, total} or None, tensor ops by path, tensor counters missing), the tensor
    part from the chip's disjoint paths (`paths`; None: the chip has no map and its tensor FLOPs are unknown). Integer
    paths (int8) are kept by path but are not FLOPs. A chip's path counter absent while others of it are captured
    makes the tensor total unknown (None), never a sum that silently lacks it."""
    by_dtype = {} if paths is None else {k: v for k, p in paths.items() if (v := get(p.flops)) is not None}
    missing = [p.flops for k, p in (paths or {}).items() if k not in by_dtype] if by_dtype else []
    tensor = None
    if by_dtype and not missing:
        tensor = sum(v for k, v in by_dtype.items() if paths and not paths[k].integer)
    elif paths is not None and not paths:
        tensor = 0.0  # a chip without tensor cores (TU116, TU117): its tensor FLOPs are 0 by construction
    elif not missing and 0.0 in (get(cat.scalars["tensor_inst_executed"]), get(cat.scalars["tensor_pipe_active_pct"])):
        tensor = 0.0  # no path counter kept, but the tensor pipe measurably idle: no tensor work
    cycles = elapsed_cycles(get, cat, seconds)
    core: dict[str, float | None] = {}
    for kind, terms in cat.cuda_core_flops.items():
        counts = [_plain_count(get, t, cycles) for t in terms]
        core[kind] = None if any(c is None for c in counts) else sum(
            t.weight * c for t, c in zip(terms, counts, strict=True) if c is not None
        )
    if tensor is None and all(v is None for v in core.values()):
        return None, by_dtype, missing
    parts = [tensor, core["fp64"], core["fp32"], core["fp16"]]
    total = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    return {"tensor": tensor, "fp64": core["fp64"], "fp32": core["fp32"], "fp16": core["fp16"],
            "total": total}, by_dtype, missing


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


def _ncu_peaks(get: Getter, cat: Catalog, dtype: str | None, paths: Paths | None,
               core: str | None = None) -> dict[str, Any]:
    """Per-kernel peaks as ncu computes them: per-cycle peak x the clock measured during this kernel; CUDA-core work
    against its own precision's FMA peak (DFMA x 2, HFMA2 x 4 as ncu's half-precision chart; else FFMA x 2)."""
    sm_hz = get(cat.scalars["sm_hz"])
    out: dict[str, Any] = {"compute_path": None, "compute_tflops": None, "dram_tbps": None}
    if dtype is not None and paths is not None and dtype in paths:
        per_cycle = get(paths[dtype].peak)
        out["compute_path"] = paths[dtype].peak
    else:
        precision = core if core in cat.cuda_core_peak_per_cycle else "fp32"
        fma, weight = cat.cuda_core_peak_per_cycle[precision], cat.cuda_core_peak_flops_per_inst[precision]
        per_cycle = None if (v := get(fma)) is None else weight * v
        out["compute_path"] = f"{weight:g} * {fma}"
    if per_cycle is not None and sm_hz is not None:
        out["compute_tflops"] = per_cycle * sm_hz / 1e12
    bpc = get(cat.scalars["dram_bytes_peak_per_cycle"])
    dram_hz = get(cat.scalars["dram_hz"])
    if bpc is not None and dram_hz is not None:
        out["dram_tbps"] = bpc * dram_hz / 1e12
    return out


def device_peaks(launches: list[KernelLaunch], ceilings: Ceilings, where: str) -> dict[str, tuple[float, str]]:
    """ncu's own peaks of the GPU the launches ran on, per ceiling name (hardware: from-capture): each tensor path
    of the chip map (its dtype's ceiling, dtype_ceiling_map), each CUDA-core precision (fp32_tflops, ...) and DRAM
    (the memory roof's name), as per-cycle peak_sustained x the clock ncu measured; the highest over the launches
    (a kernel at a lower clock then stays under 100%). A peak the export lacks, or 0, is left out, never a 0 roof.
    Values are (value, source), the source naming the counters, `where` and the launches it is the highest of."""
    cat = load_catalog()
    s = cat.scalars
    best: dict[str, tuple[float, str, float]] = {}
    seen: dict[str, int] = {}
    mem_name = ceilings.family_ceiling(MEMORY_FAMILY)
    for launch in launches:
        get = getter(launch)
        sm_hz = get(s["sm_hz"])
        chip = launch_chip(launch)
        found: list[tuple[str, float, str, float]] = []
        if sm_hz:
            for key, path in sorted((tensor_paths(chip) if chip else {}).items()):
                name = ceilings.dtype_ceiling(key)
                if name is not None and (per_cycle := get(path.peak)):
                    found.append((name, per_cycle * sm_hz / 1e12, f"{path.peak} x {s['sm_hz']}", sm_hz))
            for precision, fma in sorted(cat.cuda_core_peak_per_cycle.items()):
                weight = cat.cuda_core_peak_flops_per_inst[precision]
                if per_cycle := get(fma):
                    found.append((f"{precision}_tflops", weight * per_cycle * sm_hz / 1e12,
                                  f"{weight:g} x {fma} x {s['sm_hz']}", sm_hz))
        bpc, dram_hz = get(s["dram_bytes_peak_per_cycle"]), get(s["dram_hz"])
        if mem_name and bpc and dram_hz:
            found.append((mem_name, bpc * dram_hz / 1e12, f"{s['dram_bytes_peak_per_cycle']} x {s['dram_hz']}",
                          dram_hz))
        for name, value, formula, clock in found:
            seen[name] = seen.get(name, 0) + 1
            if name not in best or value > best[name][0]:
                best[name] = (value, formula, clock)
    return {name: (value, f"ncu device peak (hardware: from-capture): {formula}, the highest of {seen[name]} "
                          f"launch(es) in {where} (clock {clock / 1e6:,.0f} MHz)")
            for name, (value, formula, clock) in sorted(best.items())}


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
    cache = _cache_bound(row, comp, mem)
    if cache is not None:
        return "cache", cache
    if comp is None:
        if mem is not None and mem >= BOUND_HIGH_PCT:
            return "memory", f"DRAM at {mem:.0f}% of peak; FLOP counters not captured"
        if mem is not None and sm is not None and max(mem, sm) < LATENCY_LOW_PCT:
            return "latency", f"DRAM {mem:.0f}% and SM throughput {sm:.0f}% both under {LATENCY_LOW_PCT:.0f}%"
        return "unknown", "no FLOP counters captured: compute utilization cannot be measured"
    mem_v = mem if mem is not None else 0.0
    if comp >= BOUND_HIGH_PCT and mem_v >= BOUND_HIGH_PCT:
        return "mixed", f"compute {comp:.0f}% and DRAM {mem_v:.0f}% of peak"
    if max(comp, mem_v, sm or 0.0) < LATENCY_LOW_PCT:
        return "latency", f"compute {comp:.0f}%, DRAM {mem_v:.0f}%, SM {sm or 0:.0f}% all under " \
                          f"{LATENCY_LOW_PCT:.0f}%"
    ai, ridge = row.get("arithmetic_intensity"), row.get("ridge_ai")
    unit = "FLOP/B"
    if row.get("ops_intensity") is not None:  # an integer tensor kernel: ops, not FLOPs, place it
        ai, unit = row["ops_intensity"], "int ops/B"
    lower = row.get("flops_uncounted")
    if ai is not None and ridge and not (lower and ai < ridge):  # a lower bound left of the ridge tells no side
        side = "memory" if ai < ridge else "compute"
        return side, f"AI {ai:.3g} {'<' if ai < ridge else '>='} ridge {ridge:.3g} {unit}; " \
                     f"compute {comp:.0f}%, DRAM {mem_v:.0f}% of peak"
    if mem is None:
        return "unknown", "no DRAM byte counters"
    note = f"; AI {ai:.3g} is a lower bound ({', '.join(lower)} not counted)" if lower and ai is not None else ""
    return ("compute" if comp >= mem_v else "memory"), f"compute {comp:.0f}%, DRAM {mem_v:.0f}% of peak{note}"


def _cache_bound(row: dict[str, Any], comp: float | None, mem: float | None) -> str | None:
    """The reason a kernel is cache-bound, or None: memory throughput (ncu's busiest memory unit) at or above
    CACHE_BOUND_PCT while DRAM, compute and SM throughput stay under BOUND_HIGH_PCT, so the busy unit is L1/TEX or
    L2, not DRAM or the SM.
    Such a kernel is neither latency-bound (a unit is saturated) nor DRAM-bound (bytes stay on chip)."""
    busy = row.get("memory_throughput_pct")
    if busy is None or busy < CACHE_BOUND_PCT or mem is None or mem >= BOUND_HIGH_PCT:
        return None
    sm = row.get("sm_throughput_pct")
    if (comp is not None and comp >= BOUND_HIGH_PCT) or (sm is not None and sm >= BOUND_HIGH_PCT):
        return None  # a busy SM (a tensor GEMM streams its tiles through L1/shared memory) is not held by a cache
    levels = {name: v for name, key in (("L1/TEX", "l1tex_throughput_pct"), ("L2", "l2_throughput_pct"))
              if (v := row.get(key)) is not None}
    where = max(sorted(levels), key=lambda k: levels[k]) if levels else "L1/TEX or L2"
    units = ", ".join(f"{k} {v:.0f}%" for k, v in sorted(levels.items()))
    return (f"cache-bound ({where}): memory throughput {busy:.0f}% of peak with DRAM at {mem:.0f}%"
            + (f"; {units}" if units else "") + (f"; compute {comp:.0f}%" if comp is not None else ""))


def derive_launch(launch: KernelLaunch, ctx: DeriveContext, family: str | None = None,
                  problems: list[str] | None = None) -> dict[str, Any]:
    """All derived fields of one launch (None where the counters were not captured).

    `family`: the kernel family of launch.name when the caller already knows it (one classification per kernel,
    not per launch: the family rules are regular expressions). `problems`: where to say what the export lacks.
    """
    cat = load_catalog()
    s = cat.scalars
    get = getter(launch)
    dur = duration_ns(get, cat)
    sec = None if dur is None else dur * 1e-9
    chip = launch_chip(launch)
    paths = None if chip is None else tensor_paths(chip)
    fl, by_dtype, missing = flops(get, cat, paths, sec)
    stall_cycles = _stall_cycles(get, cat)
    dram, dram_method = dram_bytes(get, cat, sec)
    # a part the export keeps no counter for (old sets: no tensor path, no op_h*): the counted parts' sum is a
    # lower bound, flagged; a path counter dropped from a set that keeps the others, or one kept but not mapped
    # for this chip, leaves the total unknown (those FLOPs exist)
    uncounted = [] if fl is None or missing or (fl["tensor"] is None and any(
        m.startswith("sm__ops_path_tensor_") for m in launch.metrics)) else [p for p in FLOP_PARTS if fl[p] is None]
    total = None if fl is None else fl["total"]
    if uncounted and fl is not None:
        total = sum(v for p in FLOP_PARTS if (v := fl[p]) is not None)
    ai = total / dram if total is not None and dram else None
    l2 = _rate_bytes(get, s["l2_bytes_per_second"], sec)
    l1 = _rate_bytes(get, s["l1_bytes_per_second"], sec)
    tflops = total / sec / 1e12 if total is not None and sec else None
    tbps = dram / sec / 1e12 if dram is not None and sec else None
    if family is None:
        family = classify_family(launch.name, ctx.ceilings)
    dtype = _tensor_dtype(by_dtype)
    core = _core_precision(fl)
    ref = None if ctx.hardware is None else ctx.ceilings.ceiling_for(
        ctx.hardware, family, dtype if family in TENSOR_FAMILIES else None)
    peaks = _ncu_peaks(get, cat, dtype, paths, core)
    limits, limiter = _block_limit(get, cat)
    smem_parts = [get(s["smem_static_per_block_bytes"]), get(s["smem_dynamic_per_block_bytes"])]
    comp_achieved = (by_dtype.get(dtype, 0.0) / sec / 1e12) if dtype and sec else tflops
    # an integer tensor path (int8 IMMA) does ops, not FLOPs: its roof (TOPS) is placed by ops per DRAM byte
    integer = dtype is not None and paths is not None and dtype in paths and paths[dtype].integer
    ops_ai = by_dtype[dtype] / dram if integer and dtype and dram else None
    work_ai, work_rate = (ops_ai, comp_achieved) if integer else (ai, tflops)
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
        "ops_intensity": ops_ai,
        "ai_l2": total / l2 if total is not None and l2 else None,
        "ai_l1": total / l1 if total is not None and l1 else None,
        "ai_measured": ai is not None,
        "flops_uncounted": (uncounted or None) if total is not None else None,
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
        "l1tex_throughput_pct": get(s["l1tex_throughput_pct"]),
        "l2_throughput_pct": get(s["l2_throughput_pct"]),
        "branch_efficiency_pct": get(s["branch_efficiency_pct"]),
        "branch_divergence_pct": _divergence(get, cat),
    }
    family_sol = _sol(ref, work_rate, tbps)
    row["family_sol_pct"], row["family_ceiling_key"] = family_sol["sol_pct"], family_sol["sol_ceiling_key"]
    compute = _compute_roof(ctx, ref, core, dtype)
    binding = _binding_roof(ctx, ref, compute, work_ai, ridge=row["ridge_ai"])
    if uncounted and work_ai is not None and row["ridge_ai"] and work_ai < row["ridge_ai"] and \
            binding is not None and binding.kind in ("compute", "memory"):
        binding = None  # a lower-bound AI left of the ridge: uncounted work may put it right of it; no roof known
    row.update(_sol(binding, work_rate, tbps))
    achievable = _sol(_achievable_roof(ctx, compute, binding, work_ai), work_rate, tbps)
    row["pct_of_achievable"], row["achievable_key"] = achievable["sol_pct"], achievable["sol_ceiling_key"]
    settle(row)
    if problems is not None:
        problems += [f"tensor-path counter {m} is not in the export (others of {chip} are): tensor FLOPs, AI and "
                     f"%SoL left null; re-export with every sm__ops_path_tensor_* column" for m in missing]
    return row


# The roofs a kernel is scored against: (percent field, its ceiling key field)
ROOF_FIELDS = (("sol_pct", "sol_ceiling_key"), ("pct_of_achievable", "achievable_key"),
               ("family_sol_pct", "family_ceiling_key"))


def implausible(row: dict[str, Any]) -> list[str]:
    """Values no GPU can produce (metrics.yaml `implausible`): a unit slip or a corrupt export, never a measurement.
    --strict refuses a row with one; otherwise it is imported with a warning."""
    lim = load_catalog().implausible
    out = []
    if (dur := row.get("duration_ns")) is not None and dur < lim["min_duration_ns"]:
        out.append(f"duration {dur:.3g} ns is under {lim['min_duration_ns']:g} ns")
    if (tf := row.get("achieved_tflops")) is not None and tf > lim["max_tflops"]:
        out.append(f"{tf:.3g} TFLOP/s is over {lim['max_tflops']:g} TFLOP/s")
    for pct, key in ROOF_FIELDS:
        if (v := row.get(pct)) is not None and v > lim["max_pct_of_ceiling"]:
            out.append(f"{pct} {v:.3g}% of {row.get(key)} is over {lim['max_pct_of_ceiling']:g}%")
    return out


def settle(row: dict[str, Any], parts: list[dict[str, Any]] | None = None) -> None:
    """The verdict and the judgement of the roofs, on a launch's row or (with `parts`, its launches' settled rows)
    a kernel's: implausible values listed; a percentage above 100 of a ceiling never stands as a value: it moves to
    `ceiling_exceeded` {key: pct} (that ceiling is to be re-measured) and the field is null; a cache-bound kernel's
    roof is its cache level's bandwidth, which sol-ceilings.yaml does not hold, so its %SoL is null, not a % of a
    compute or DRAM roof it is not bound by."""
    row["implausible"] = sorted({p for r in parts for p in r.get("implausible") or []}) if parts else \
        implausible(row)
    exceeded: dict[str, list[float]] = {}
    for r in parts or []:
        for key, v in (r.get("ceiling_exceeded") or {}).items():
            exceeded.setdefault(key, []).append(v)
    for pct, key in ROOF_FIELDS:
        if (v := row.get(pct)) is not None and v > 100.0:
            exceeded.setdefault(row[key], []).append(v)
            row[pct] = None
    row["ceiling_exceeded"] = {k: sum(v) / len(v) for k, v in sorted(exceeded.items())} or None
    row["implausible"] = row["implausible"] or None
    row["bound"], row["bound_reason"] = verdict(row)
    if row["bound"] == "cache":
        for pct, key in ROOF_FIELDS[:2]:
            row[pct] = row[key] = None


def _core_precision(fl: dict[str, float | None] | None) -> str | None:
    """The CUDA-core precision (fp64, fp32, fp16) that did a kernel's floating-point work, when the tensor pipe did
    none: its roof is that precision's, not a tensor one (a SIMT fp32 GEMM runs at the FP32 peak)."""
    if not fl or fl["tensor"] not in (0, None):
        return None
    core = {p: v for p in ("fp64", "fp32", "fp16") if (v := fl[p])}
    return max(sorted(core), key=lambda p: core[p]) if core else None


def _compute_roof(ctx: DeriveContext, ref: CeilingRef | None, core: str | None, dtype: str | None
                  ) -> CeilingRef | None:
    """The compute roof the kernel runs against: its tensor dtype's (the family ceiling), else, for CUDA-core work,
    that precision's datasheet peak (`fp32_tflops`, `fp64_tflops`, `fp16_tflops`); None where the board has none."""
    if ctx.hardware is None:
        return None
    if core is None or dtype is not None:
        return ref if ref is not None and ref.kind == "compute" else None
    key = f"{ctx.hardware}.{core}_tflops"
    if key not in ctx.ceilings.key_paths(ctx.hardware):
        return None
    return CeilingRef(key=key, value=ctx.ceilings.value(key), kind="compute", unit="tflops")


def _binding_roof(ctx: DeriveContext, ref: CeilingRef | None, compute: CeilingRef | None, ai: float | None,
                  ridge: float | None = None) -> CeilingRef | None:
    """The datasheet roof that binds at this kernel's measured AI: the memory roof left of the compute roof's ridge,
    else the compute roof of its own precision and pipe (`compute`, _compute_roof); `ref` is the family's roof.

    A decode GEMM at 16 FLOP/B cannot reach the bf16 tensor peak; its speed of light is HBM bandwidth. An fp32 SIMT
    GEMM at 100 FLOP/B is right of the FP32 ridge: its roof is the FP32 peak, not HBM. Without measured AI the
    kernel's compute roof, else the family's, stands (its %SoL is null where FLOPs or bytes are missing). With AI but
    no datasheet roof for the kernel's precision (CUDA-core fp16 on most boards, fp4 on Hopper), ncu's own ridge
    (`ridge`) tells the side: right of it there is no roof (None), never the memory roof of a compute-bound kernel.
    """
    if ctx.hardware is None:
        return None
    if ref is not None and ref.kind not in ("compute", "memory"):
        return ref  # a collective: the interconnect roof, whatever its AI
    if ai is None:
        return compute if compute is not None else ref
    mem = ctx.ceilings.ceiling_for(ctx.hardware, MEMORY_FAMILY, None)
    if compute is None:
        return None if ridge and ai >= ridge else mem
    if mem is None or mem.kind != "memory" or ai * mem.value >= compute.value:
        return compute
    return mem


def _achievable_roof(ctx: DeriveContext, compute: CeilingRef | None, binding: CeilingRef | None,
                     ai: float | None) -> CeilingRef | None:
    """The measured (achievable_ceiling_map) roof that binds: chosen between the measured compute and memory roofs
    at their own ridge where both are measured, else the measured counterpart of the binding datasheet roof; None
    where that roof has no measured counterpart on this hardware (an fp32 SIMT GEMM is never placed on the HBM
    copy roof because the fp32 peak was not measured)."""
    if ctx.hardware is None or binding is None:
        return None
    mem = ctx.ceilings.ceiling_for(ctx.hardware, MEMORY_FAMILY, None)
    measured_compute, measured_mem = ctx.ceilings.achievable_for(compute), ctx.ceilings.achievable_for(mem)
    if ai is not None and measured_compute is not None and measured_mem is not None:
        return measured_compute if ai * measured_mem.value >= measured_compute.value else measured_mem
    return ctx.ceilings.achievable_for(binding)


def _sol(ref: CeilingRef | None, tflops: float | None, tbps: float | None) -> dict[str, Any]:
    """%SoL against one ceiling from sol-ceilings.yaml, with its key path."""
    if ref is None:
        return {"sol_pct": None, "sol_ceiling_key": None}
    if ref.kind == "compute":
        return {"sol_pct": _pct(tflops, ref.value), "sol_ceiling_key": ref.key}
    if ref.kind == "memory":
        return {"sol_pct": _pct(tbps, ref.value), "sol_ceiling_key": ref.key}
    return {"sol_pct": None, "sol_ceiling_key": ref.key}  # interconnect bytes are not ncu counters here
