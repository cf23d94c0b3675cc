"""Dispatches of a rocprof-compute workload -> per-dispatch values -> one kernel row per kernel (the cell contract).

Honesty rules (docs/rocprof.md): a field whose counters the workload lacks is None, never 0; AI is None unless both
FLOP and HBM-byte counters were collected; a duration that cannot be measured (timestamps rounded to six digits) is
None, and every rate with it. AMD values the kernel row has a field for (lds_bytes, ai_lds, pass_mixed,
pct_of_achievable_ci) are set there; the other AMD-named values sit in each row's ROCPROF_KEY dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from perfreport.config.ceilings import Ceilings, classify_family, load_ceilings
from perfreport.errors import InputError
from perfreport.kernels.aggregate import combine, launch_stats, mean, mean_dicts, mean_lists
from perfreport.kernels.identity import without_code_object_suffix
from perfreport.kernels.names import function_name
from perfreport.kernels.row import KERNEL_ROW, LAUNCH_ID
from perfreport.rocprof import ceilings as amd
from perfreport.rocprof.expr import Formula, Lookup, compile_formula
from perfreport.rocprof.read import Workload, to_number

FORMULAS_PATH = Path(__file__).with_name("formulas.yaml")
ROCPROF_KEY = "rocprof"  # the per-row dict of AMD values the kernel row has no field for (docs/rocprof.md)
VENDOR = "amd"
BOUND_HIGH_PCT, LATENCY_LOW_PCT = 60.0, 40.0  # the ncu verdict's thresholds, so both vendors' verdicts read alike
MIN_DURATION_NS = 100.0  # a shorter dispatch is a unit slip or a broken timestamp (metrics.yaml implausible)
FLOP_PARTS = {"fp16": ("valu_f16_flops",), "fp32": ("valu_f32_flops",), "fp64": ("valu_f64_flops",),
              "tensor": ("mfma_f16_flops", "mfma_bf16_flops", "mfma_f32_flops", "mfma_f64_flops")}
# busiest-path candidates: (path, formula field, peak field)
PATHS = (("valu_f16", "valu_f16_flops", "valu_gflops"), ("valu_f32", "valu_f32_flops", "valu_gflops"),
         ("valu_f64", "valu_f64_flops", "valu_gflops"), ("mfma_f16", "mfma_f16_flops", "mfma_f16_gflops"),
         ("mfma_bf16", "mfma_bf16_flops", "mfma_bf16_gflops"), ("mfma_f32", "mfma_f32_flops", "mfma_f32_gflops"),
         ("mfma_f64", "mfma_f64_flops", "mfma_f64_gflops"), ("mfma_i8", "mfma_i8_ops", "mfma_i8_gops"))


@lru_cache(maxsize=1)
def formulas_doc() -> dict[str, Any]:
    """formulas.yaml, parsed once (do not mutate)."""
    doc: dict[str, Any] = yaml.safe_load(FORMULAS_PATH.read_text(encoding="utf-8"))
    return doc


@dataclass
class Context:
    """What derivation needs besides a dispatch: the workload, its arch's formulas and peaks, the roofs."""

    workload: Workload
    arch: str
    formulas: dict[str, Formula]
    peaks: dict[str, float | None]
    token: str | None
    datasheet: dict[str, amd.Roof]
    measured: dict[str, amd.Roof]
    ceilings: Ceilings  # the packaged sol-ceilings.yaml: kernel families and their default ceiling names
    sysnum: dict[str, float | None] = field(default_factory=dict)  # sysinfo.csv as numbers, read once per workload
    summed: set[str] = field(default_factory=set)  # X_sum counters read as the sum of X[i] columns
    rounded_timestamps: bool = False


def sys_numbers(w: Workload) -> dict[str, float | None]:
    """sysinfo.csv as numbers (None where not numeric)."""
    return {k: to_number(v) for k, v in w.sysinfo.items()}


def make_context(w: Workload, token: str | None, use_roofs: bool, device: int = 0) -> Context:
    """The derivation context; `use_roofs` False scores against no ceiling (%SoL null)."""
    arch = w.sysinfo.get("gpu_arch", "").strip()
    archs = formulas_doc()["archs"]
    if arch not in archs:
        raise InputError(f"'{w.path / 'sysinfo.csv'}': gpu_arch {arch or '(blank)'!r} has no formulas; expected one "
                         f"of {', '.join(sorted(archs))} (perfreport/rocprof/formulas.yaml). Add its formulas from "
                         f"rocprof-compute's analysis_configs/{arch or '<gfx>'}/ to formulas.yaml.")
    block = archs[arch]
    where = f"formulas.yaml archs.{arch}"
    formulas = {name: compile_formula(text, where) for name, text in block["formulas"].items()}
    sysnum = sys_numbers(w)
    peaks = {name: compile_formula(text, where).evaluate(lambda _: None, sysnum)
             for name, text in block["peaks"].items()}
    sheet = amd.datasheet(token) if token and use_roofs else {}
    measured = amd.measured(w, token, device) if token and use_roofs else {}
    return Context(w, arch, formulas, peaks, token, sheet, measured, load_ceilings(), sysnum)


def _lookup(ctx: Context, row: dict[str, str]) -> Lookup:
    def get(name: str) -> float | None:
        if name in row:
            return to_number(row[name])
        base = name[:-4] if name.endswith("_sum") else None
        if base and base in ctx.workload.instances:  # no X_sum column: the X[i] columns summed, all or nothing
            parts = [to_number(row[c]) for c in ctx.workload.instances[base]]
            ctx.summed.add(name)
            return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
        return None
    return get


def _duration(ctx: Context, row: dict[str, str]) -> float | None:
    start, end = row.get("Start_Timestamp", ""), row.get("End_Timestamp", "")
    if any(c in t for t in (start, end) for c in "eE"):  # 1.62068E+14: six digits of a 15-digit ns clock
        ctx.rounded_timestamps = True
        return None
    a, b = to_number(start), to_number(end)
    return b - a if a is not None and b is not None and b > a else None


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _div(a: float | None, b: float | None, scale: float = 1.0) -> float | None:
    return None if a is None or not b else scale * a / b


def _flops(v: dict[str, float | None]) -> tuple[dict[str, float | None] | None, list[str] | None]:
    if not any(f in v for parts in FLOP_PARTS.values() for f in parts):
        return None, None  # the arch collects no FLOP counter (gfx908)
    out = {part: _sum([v.get(f) for f in fields]) for part, fields in FLOP_PARTS.items()}
    missing = [p for p in ("tensor", "fp64", "fp32", "fp16") if out[p] is None]
    if len(missing) == 4:
        return None, None
    out["total"] = None if missing else float(sum(out[p] or 0.0 for p in FLOP_PARTS))
    return out, missing or None


def _busiest(v: dict[str, float | None]) -> str | None:
    done = {p: x for p, f, _ in PATHS if (x := v.get(f))}
    return max(sorted(done), key=lambda p: done[p]) if done else None


def _roofs(ctx: Context, family: str, path: str | None, ai: float | None, ridge: float | None
           ) -> tuple[amd.Roof | None, amd.Roof | None, amd.Roof | None]:
    """(binding datasheet roof, the family's roof, the measured roof that binds) at the kernel's AI."""
    sheet = ctx.datasheet
    mem = sheet.get(amd.chips()["memory_ceiling"])
    family_name = ctx.ceilings.family_ceiling(family)
    family_roof = sheet.get(family_name) if family_name else None
    compute = sheet.get(amd.chips()["path_ceiling_map"].get(path or "", ""))
    if ai is None:
        binding = compute or family_roof
    elif compute is None:
        binding = None if ridge and ai >= ridge else mem
    else:
        binding = compute if mem is None or ai * mem.value >= compute.value else mem
    m_mem = amd.achievable_for(amd.chips()["memory_ceiling"], ctx.measured)
    m_comp = amd.achievable_for(amd.chips()["path_ceiling_map"].get(path or "", ""), ctx.measured)
    achievable: amd.Roof | None
    if ai is not None and m_mem is not None and m_comp is not None:
        achievable = m_comp if ai * m_mem.value >= m_comp.value else m_mem
    elif binding is not None:
        achievable = amd.achievable_for(binding.key.rsplit(".", 1)[1], ctx.measured)
    else:
        achievable = None
    return binding, family_roof, achievable


def _pct_of(roof: amd.Roof | None, tflops: float | None, tbps: float | None) -> tuple[float | None, list[float] | None]:
    """% of a roof and its 95% CI [low, high] (a measured roof's High gives the low %)."""
    if roof is None:
        return None, None
    rate = tflops if roof.kind == "compute" else tbps
    pct = _div(rate, roof.value, 100.0)
    if pct is None or roof.low is None or roof.high is None:
        return pct, None
    return pct, [100.0 * rate / roof.high, 100.0 * rate / roof.low] if rate is not None and roof.low else None


def derive_dispatch(ctx: Context, row: dict[str, str], family: str) -> dict[str, Any]:
    """Every derived field of one dispatch (None where its counters are missing)."""
    get = _lookup(ctx, row)
    sysnum = ctx.sysnum
    v = {name: f.evaluate(get, sysnum) for name, f in ctx.formulas.items()}
    dur = _duration(ctx, row)
    flops, uncounted = _flops(v)
    work = None if flops is None else (flops["total"] if flops["total"] is not None else
                                       float(sum(x for p, x in flops.items() if p != "total" and x is not None)))
    dram = _sum([v.get("hbm_read_bytes"), v.get("hbm_write_bytes")]) if "hbm_read_bytes" in v else None
    path = _busiest(v)
    peak_name = next((pk for p, _, pk in PATHS if p == path), "valu_gflops")
    compute_peak, hbm_peak = ctx.peaks.get(peak_name), ctx.peaks.get("hbm_gbps")
    ai = _div(work, dram) if dram is not None and work is not None else None
    ridge = _div(compute_peak, hbm_peak)
    tflops, tbps = _div(work, dur, 1e-3), _div(dram, dur, 1e-3)
    path_rate = _div(v.get(next((f for p, f, _ in PATHS if p == path), "")), dur)  # GFLOP/s
    by_dtype = {d: v.get(f"mfma_{d}_{'ops' if d == 'i8' else 'flops'}") for d in ("f16", "bf16", "f32", "f64", "i8")}
    binding, family_roof, achievable = _roofs(ctx, family, path, ai, ridge)
    sol, sol_ci = _pct_of(binding, tflops, tbps)
    reach, reach_ci = _pct_of(achievable, tflops, tbps)
    fam, _ = _pct_of(family_roof, tflops, tbps)
    vgpr = _sum([to_number(row.get("Arch_VGPR")), to_number(row.get("Accum_VGPR"))])
    out: dict[str, Any] = {f.name: None for f in KERNEL_ROW if f.level == "launch"}
    out.update({
        LAUNCH_ID: int(to_number(row["Dispatch_ID"]) or 0), "family": family, "chip": ctx.arch,
        "duration_ns": dur, "flops": flops, "flops_uncounted": uncounted, "dram_bytes": dram,
        "dram_bytes_method": f"rocprof-compute L2-Fabric read + write bytes ({ctx.arch}, formulas.yaml)"
        if dram is not None else None,
        "arithmetic_intensity": ai, "ai_measured": ai is not None and not uncounted, "ridge_ai": ridge,
        "achieved_tflops": tflops, "achieved_dram_tbps": tbps,
        "ops_intensity": _div(by_dtype["i8"], dram) if path == "mfma_i8" else None,
        "tensor_ops_by_dtype": by_dtype if any(x is not None for x in by_dtype.values()) else None,
        "tensor_dtype": path[5:] if path and path.startswith("mfma_") else None,
        "compute_pct_of_peak": (0.0 if work == 0 and dur else _div(path_rate, compute_peak, 100.0)),
        "dram_pct_of_peak": _div(_div(dram, dur), hbm_peak, 100.0),
        "ncu_peaks": {"compute_tflops": _div(compute_peak, 1000.0), "dram_tbps": _div(hbm_peak, 1000.0)},
        "sol_pct": sol, "sol_ceiling_key": binding.key if binding else None,
        "pct_of_achievable": reach, "achievable_key": achievable.key if achievable else None,
        "family_sol_pct": fam, "family_ceiling_key": family_roof.key if family_roof else None,
        "l2_bytes": v.get("l2_bytes"), "l1_bytes": v.get("l1_bytes"),
        "ai_l2": _div(work, v.get("l2_bytes")), "ai_l1": _div(work, v.get("l1_bytes")),
        "l1_hit_rate_pct": v.get("l1_hit_rate_pct"), "l2_hit_rate_pct": v.get("l2_hit_rate_pct"),
        "regs_per_thread": vgpr, "smem_per_block_bytes": to_number(row.get("LDS_Per_Workgroup")),
        "sm_hz": _div(sysnum.get("cur_sclk"), 1e-6),
    })
    out[ROCPROF_KEY] = {
        "gfx_arch": ctx.arch, "busiest_path": path,
        "hbm_read_bytes": v.get("hbm_read_bytes"), "hbm_write_bytes": v.get("hbm_write_bytes"),
        "flops_by_path": {p: v.get(f) for p, f, _ in PATHS if f in v} or None,
        "arch_vgpr": to_number(row.get("Arch_VGPR")), "accum_vgpr": to_number(row.get("Accum_VGPR")),
        "sgpr": to_number(row.get("SGPR")), "scratch_per_workitem": to_number(row.get("Scratch_Per_Workitem")),
        "sol_pct_ci": sol_ci,
    }
    out.update({"lds_bytes": v.get("lds_bytes"), "ai_lds": _div(work, v.get("lds_bytes")),
                "pct_of_achievable_ci": reach_ci})  # this dispatch's: the kernel row holds their mean
    settle(out)
    return out


def pass_mixing(ctx: Context) -> dict[str, list[int]] | None:
    """Fields whose formula subtracts or divides counters of different perfmon passes (or, for AI, whose FLOPs and
    bytes come from different passes): {field: passes}. Such a value mixes two replays of the kernel."""
    passes = dict(ctx.workload.pass_of)
    for base, cols in ctx.workload.instances.items():
        if f"{base}_sum" not in passes and cols and cols[0] in passes:
            passes[f"{base}_sum"] = passes[cols[0]]
    out = {name: p for name, f in ctx.formulas.items() if (p := f.mixed_passes(passes))}

    def used(fields: tuple[str, ...]) -> set[int]:
        return {passes[c] for name in fields if name in ctx.formulas for c in ctx.formulas[name].counters
                if c in passes}
    flop_passes = used(tuple(f for parts in FLOP_PARTS.values() for f in parts))
    for field_name, byte_fields in (("arithmetic_intensity", ("hbm_read_bytes", "hbm_write_bytes")),
                                    ("ai_l2", ("l2_bytes",)), ("ai_l1", ("l1_bytes",))):
        byte_passes = used(byte_fields)
        if flop_passes and byte_passes and flop_passes != byte_passes:
            out[field_name] = sorted(flop_passes | byte_passes)
    return out or None


def verdict(row: dict[str, Any]) -> tuple[str, str]:
    """Bound verdict from rocprof-compute's % of peak (compute, HBM) and the roofline ridge, with the binding roof."""
    comp, mem = row.get("compute_pct_of_peak"), row.get("dram_pct_of_peak")
    roof = f"; binding roof {row['sol_ceiling_key']}" if row.get("sol_ceiling_key") else ""
    if row.get("duration_ns") is None:
        return "unknown", "no duration (the dispatch timestamps cannot be subtracted): rates and % of peak unknown"
    if comp is None:
        if mem is not None and mem >= BOUND_HIGH_PCT:
            return "memory", f"HBM at {mem:.0f}% of peak; FLOP counters not collected{roof}"
        if mem is not None and mem < LATENCY_LOW_PCT:
            return "latency", f"HBM at {mem:.0f}% of peak, under {LATENCY_LOW_PCT:.0f}%; FLOPs not collected"
        return "unknown", f"no FLOP counters collected: compute utilization cannot be measured{roof}"
    mem_v = mem if mem is not None else 0.0
    if comp >= BOUND_HIGH_PCT and mem_v >= BOUND_HIGH_PCT:
        return "mixed", f"compute {comp:.0f}% and HBM {mem_v:.0f}% of peak{roof}"
    if max(comp, mem_v) < LATENCY_LOW_PCT:
        return "latency", f"compute {comp:.0f}% and HBM {mem_v:.0f}% of peak, both under {LATENCY_LOW_PCT:.0f}%"
    ai, ridge = row.get("arithmetic_intensity"), row.get("ridge_ai")
    if ai is not None and ridge and not row.get("flops_uncounted"):
        side = "memory" if ai < ridge else "compute"
        return side, (f"AI {ai:.3g} {'<' if ai < ridge else '>='} ridge {ridge:.3g} FLOP/B; compute {comp:.0f}%, "
                      f"HBM {mem_v:.0f}% of peak{roof}")
    return ("compute" if comp >= mem_v else "memory"), f"compute {comp:.0f}%, HBM {mem_v:.0f}% of peak{roof}"


def settle(row: dict[str, Any]) -> None:
    """A percentage over 100 of a ceiling moves to ceiling_exceeded (the ceiling is to be re-measured); then the
    implausible values and the verdict."""
    exceeded = dict(row.get("ceiling_exceeded") or {})
    for pct, key in (("sol_pct", "sol_ceiling_key"), ("pct_of_achievable", "achievable_key"),
                     ("family_sol_pct", "family_ceiling_key")):
        if (v := row.get(pct)) is not None and v > 100.0:
            exceeded[row[key]] = v
            row[pct] = None
    row["ceiling_exceeded"] = dict(sorted(exceeded.items())) or None
    dur = row.get("duration_ns")
    row["implausible"] = [f"duration {dur:.3g} ns is under {MIN_DURATION_NS:g} ns"] \
        if dur is not None and dur < MIN_DURATION_NS else None
    row["bound"], row["bound_reason"] = verdict(row)


def summarize(ctx: Context, source_id: str) -> list[dict[str, Any]]:
    """One kernel row per (name, grid, workgroup), in first-dispatch order: means over its dispatches, with stats."""
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in sorted(ctx.workload.dispatches, key=lambda r: to_number(r["Dispatch_ID"]) or 0.0):
        key = (without_code_object_suffix(row["Kernel_Name"]), row["Grid_Size"], row["Workgroup_Size"])
        groups.setdefault(key, []).append(row)
    mixed = pass_mixing(ctx)
    entries = []
    for (name, grid, block), rows in groups.items():
        family = classify_family(name, ctx.ceilings)
        launches = [derive_dispatch(ctx, r, family) for r in rows]
        entries.append(_entry(name, grid, block, launches, source_id, mixed))
    return entries


def _dims(total: str, per: str | None = None) -> str:
    """rocprof records sizes flattened: work-items (grid) and work-items per workgroup; the grid is in workgroups."""
    t, p = to_number(total), to_number(per) if per is not None else 1.0
    return f"({int(t // p)},)" if t is not None and p else "(?,)"


def _entry(name: str, grid: str, block: str, launches: list[dict[str, Any]], source_id: str,
           mixed: dict[str, list[int]] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {f.name: None for f in KERNEL_ROW if f.level != "cell"}
    entry.update({"name": name, "function": function_name(name), "mangled": None, "source": source_id,
                  "grid_size": _dims(grid, block), "block_size": _dims(block), "launches": len(launches),
                  "launch_ids": [r[LAUNCH_ID] for r in launches], "instance": None, "rules": None})
    entry.update(combine(launches))
    entry["ai_measured"] = entry["arithmetic_intensity"] is not None and not entry["flops_uncounted"]
    entry["ceiling_exceeded"] = mean_dicts([r["ceiling_exceeded"] for r in launches]) if any(
        r["ceiling_exceeded"] for r in launches) else None
    entry[ROCPROF_KEY] = mean_dicts([r[ROCPROF_KEY] for r in launches]) or {}
    entry.update({"vendor": VENDOR, "pass_mixed": mixed, "lds_bytes": mean([r["lds_bytes"] for r in launches]),
                  "ai_lds": mean([r["ai_lds"] for r in launches]),
                  "pct_of_achievable_ci": mean_lists([r["pct_of_achievable_ci"] for r in launches])})
    settle(entry)
    if any(r["implausible"] for r in launches):
        entry["implausible"] = sorted({p for r in launches for p in r["implausible"] or []})
    entry["stats"] = launch_stats(launches)
    entry["per_launch"] = launches if len(launches) > 1 else []
    return entry
