"""Roofline model: which roofs to draw (by key path) and where each kernel sits, from ncu rows and ceilings.

Pure (no I/O). One point per kernel row the warehouse chose for its cell (kernel_ncu: the richest capture of each
kernel, so a `--set full` row hides the `--set basic` row of the same kernel). A kernel with measured arithmetic
intensity is a point (AI, achieved TFLOP/s). A kernel without it (only a `--set basic` capture) has no roofline
position: it is drawn hollow in a separate "AI unmeasured" strip by its SM busy %, never on the achieved-TFLOP/s
axis: SM busy is the busiest SM sub-unit, not a FLOP rate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfreport.config.ceilings import CeilingRef, Ceilings
from perfreport.errors import PerfReportError

FAR_BELOW_PCT = 10.0  # a measured kernel under this % of the roof at its AI is annotated
# A kernel that executes this many times the FLOPs its op needs (ncu's counted FLOPs over the useful FLOPs of its
# traced shapes) is flagged on the roofline: its lever is the padded work (e.g. decode attention's tile over 1 query).
PADDING_FLAG = 2.0
NEAR_ROOF_PCT = 80.0
_LEVEL_RE = {"l2": re.compile(r"(^|_)l2(_|$)"), "l1": re.compile(r"(^|_)l1(tex)?(_|$)")}


@dataclass(frozen=True)
class Roof:
    """One drawn roof: its key path, peak value (TFLOP/s or TB/s) and level (compute, dram, l2, l1)."""

    key: str
    value: float
    level: str  # "compute" | "dram" | "l2" | "l1"
    measured_for: str | None = None  # an achievable (measured) roof: the datasheet roof key it stands beside

    @property
    def is_memory(self) -> bool:
        """Return True for a bandwidth roof (a diagonal on the log-log plot)."""
        return self.level != "compute"


@dataclass(frozen=True)
class RoofPoint:
    """One kernel row placed on the roofline."""

    cell_id: str
    kernel_id: str
    label: str  # the kernel row's label (kernels/labels.py)
    family: str
    source: str  # section set of the capture ("full", "basic", ...) or the file id
    measured: bool  # True: x = measured AI; False: hollow marker in the "AI unmeasured" band
    ai: float | None
    achieved_tflops: float | None  # measured only; a hollow marker stands at its SM busy % (sm_pct), not at a TFLOP/s
    ceiling_key: str  # the compute ceiling the kernel is judged against (hollow: the one y is scaled by)
    ceiling_value: float
    pct_of_roof: float | None  # measured only: achieved / min(ceiling, AI x HBM roof)
    sm_pct: float | None
    sol_pct: float | None
    sol_key: str | None
    bound: str | None
    duration_ns: float | None
    launches: int
    ai_l2: float | None = None  # hierarchical points (L2, L1 bytes): drawn only where measured, beside their roofs
    ai_l1: float | None = None
    time_share_pct: float | None = None
    flops: float | None = None  # per launch: the inputs of AI = flops / dram_bytes and TFLOP/s = flops / duration
    dram_bytes: float | None = None
    executed_per_useful: float | None = None  # ncu FLOPs over the op's useful FLOPs (trace with shapes); None: unknown

    @property
    def padded(self) -> bool:
        """Measured and executing at least PADDING_FLAG x its useful FLOPs: drawn with its useful point."""
        return self.measured and (self.executed_per_useful or 0.0) >= PADDING_FLAG

    @property
    def useful(self) -> tuple[float, float] | None:
        """A padded kernel's useful point: AI and TFLOP/s of its op's FLOPs over the same bytes and time (both divided
        by executed / useful); None when it is not padded."""
        if not self.padded or not self.ai or not self.achieved_tflops or not self.executed_per_useful:
            return None
        return self.ai / self.executed_per_useful, self.achieved_tflops / self.executed_per_useful

    @property
    def time_ns(self) -> float:
        """ncu time of the row (launches x duration): the order of "biggest kernels" without a time share."""
        return (self.duration_ns or 0.0) * self.launches


@dataclass
class RooflineModel:
    """Roofs, points and notes (kernels left off and why) for one hardware token."""

    hardware: str
    roofs: list[Roof]
    points: list[RoofPoint]
    notes: list[str] = field(default_factory=list)

    @property
    def memory_roof(self) -> Roof | None:
        """Return the DRAM (datasheet) roof, if the hardware has one."""
        return next((r for r in self.roofs if r.level == "dram" and r.measured_for is None), None)


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _compute_ref(ceilings: Ceilings, hw: str, family: str, dtype: str | None, notes: list[str]) -> CeilingRef | None:
    """The family's compute ceiling (tensor dtype when measured); CUDA-core fp32 for memory families."""
    try:
        ref = ceilings.ceiling_for(hw, family, dtype)
    except PerfReportError as exc:
        notes.append(str(exc.message))
        ref = None
    if ref is not None and ref.kind == "compute":
        return ref
    return _fp32(ceilings, hw)


def _fp32(ceilings: Ceilings, hw: str) -> CeilingRef | None:
    key = f"{hw}.fp32_tflops"
    if key not in ceilings.key_paths(hw):
        return None
    return CeilingRef(key=key, value=ceilings.value(key), kind="compute", unit="tflops")


def _level_roofs(ceilings: Ceilings, hw: str, kernels: list[Mapping[str, Any]], notes: list[str]) -> list[Roof]:
    """L2 / L1 bandwidth roofs when kernels carry hierarchical traffic and the ceilings have such a key."""
    roofs: list[Roof] = []
    for level, field_name in (("l2", "ai_l2"), ("l1", "ai_l1")):
        if not any(_positive(k.get(field_name)) for k in kernels):
            continue
        keys = [p for p in ceilings.key_paths(hw)
                if p.endswith("_tbps") and _LEVEL_RE[level].search(p.rsplit(".", 1)[1])]
        usable = []
        for key in keys:
            entry = ceilings.entry(key)
            if entry.get("value") is not None:
                usable.append(Roof(key, float(entry["value"]), level))
        if usable:  # a measured copy bandwidth stands beside the level's peak, as a measured roof does
            peak = next((r.key for r in usable if not r.key.endswith("_copy_tbps")), None)
            roofs.extend(Roof(r.key, r.value, r.level, measured_for=peak) if r.key.endswith("_copy_tbps") and peak
                         else r for r in usable)
        else:
            notes.append(f"kernels carry {level.upper()} traffic ({field_name}) but the ceilings have no "
                         f"{level}_*_tbps key for {hw}: add a measured one under {hw}.empirical in a ceilings "
                         f"override to draw the {level.upper()} roof.")
    return roofs


def build_roofline(
    kernels: Iterable[Mapping[str, Any]],
    ceilings: Ceilings,
    hardware: str,
    time_shares: Mapping[tuple[str, str], float] | None = None,
    keep: set[tuple[str, str]] | None = None,
    executed_per_useful: Mapping[tuple[str, str], float] | None = None,
) -> RooflineModel:
    """Place kernel rows (each with cell_id and source_set) on the roofline of `hardware`.

    time_shares maps (cell_id, kernel id) to a time share in % (marker size); missing means unknown. keep: the
    (cell_id, kernel id) rows to draw (the warehouse's chosen rows); None draws every row. executed_per_useful:
    (cell_id, kernel id) -> ncu FLOPs over useful FLOPs (the join's executed_per_useful), where a trace had shapes.
    """
    everything = sorted(kernels, key=lambda k: (k["cell_id"], k["id"]))
    rows = [k for k in everything if keep is None or (k["cell_id"], k["id"]) in keep]
    notes: list[str] = []
    if len(rows) < len(everything):
        notes.append(f"{len(everything) - len(rows)} kernel row(s) of a poorer capture (e.g. --set basic beside "
                     f"--set full of the same kernel) not drawn: one point per kernel per cell.")
    shares = time_shares or {}
    refs: dict[str, Roof] = {}
    hbm_key = f"{hardware}.hbm_tbps"
    hbm = ceilings.value(hbm_key) if hbm_key in ceilings.key_paths(hardware) else None
    if hbm is not None:
        refs[hbm_key] = Roof(hbm_key, hbm, "dram")
    fp32 = _fp32(ceilings, hardware)
    if fp32 is not None:
        refs[fp32.key] = Roof(fp32.key, fp32.value, "compute")
    points = []
    for k in rows:
        measured = bool(k.get("ai_measured")) and _positive(k.get("arithmetic_intensity"))
        dtype = k.get("tensor_dtype") if measured else None
        ref = _compute_ref(ceilings, hardware, k["family"], dtype, notes)
        name = str(k.get("label") or k["function"])
        label = f"{k['cell_id']} / {k['id']} {name}"
        if ref is None:
            notes.append(f"{label}: no compute ceiling for {hardware}; not drawn.")
            continue
        ai: float | None
        y: float | None
        if measured:
            if not _positive(k.get("achieved_tflops")):
                notes.append(f"{label}: measured AI but 0 TFLOP/s; a log axis cannot show it.")
                continue
            ai, y = float(k["arithmetic_intensity"]), float(k["achieved_tflops"])
            if k.get("flops_uncounted"):  # the counted parts only: the kernel sits at or above and right of it
                notes.append(f"{label}: AI {ai:.3g} and {y:.3g} TFLOP/s are lower bounds "
                             f"({', '.join(k['flops_uncounted'])} not counted by this export); drawn at them.")
            attainable = min(ref.value, ai * hbm) if hbm is not None else ref.value
            binding = hbm_key if hbm is not None and ai * hbm < ref.value else ref.key
            # the kernel's own %SoL where it is against this same roof: one number per kernel and roof everywhere
            pct_of_roof: float | None = (float(k["sol_pct"]) if k.get("sol_pct") is not None
                                         and k.get("sol_ceiling_key") == binding else 100.0 * y / attainable)
        else:
            if k.get("ai_measured"):
                notes.append(f"{label}: AI measured as 0 (no floating-point work); shown in the unmeasured band.")
            if not _positive(k.get("sm_throughput_pct")):
                notes.append(f"{label}: neither AI nor SM throughput captured; not drawn.")
                continue
            ai, y, pct_of_roof = None, None, None
        refs.setdefault(ref.key, Roof(ref.key, ref.value, "compute"))
        points.append(RoofPoint(
            cell_id=k["cell_id"], kernel_id=k["id"], label=name, family=k["family"],
            source=str(k.get("source_set") or k.get("source") or ""), measured=measured, ai=ai, achieved_tflops=y,
            ceiling_key=ref.key, ceiling_value=ref.value, pct_of_roof=pct_of_roof,
            sm_pct=k.get("sm_throughput_pct"), sol_pct=k.get("sol_pct"), sol_key=k.get("sol_ceiling_key"),
            bound=k.get("bound"), duration_ns=k.get("duration_ns"), launches=int(k.get("launches") or 1),
            ai_l2=k.get("ai_l2") if measured and _positive(k.get("ai_l2")) else None,
            ai_l1=k.get("ai_l1") if measured and _positive(k.get("ai_l1")) else None,
            time_share_pct=shares.get((k["cell_id"], k["id"])),
            flops=k.get("flops_total", (k.get("flops") or {}).get("total")), dram_bytes=k.get("dram_bytes"),
            executed_per_useful=(executed_per_useful or {}).get((k["cell_id"], k["id"])),
        ))
        if (useful := points[-1].useful) is not None:
            notes.append(f"{label}: executes {points[-1].executed_per_useful:.1f}x the FLOPs its op needs (useful AI "
                         f"{useful[0]:.3g} FLOP/B, {useful[1]:.3g} useful TFLOP/s, drawn beside it): the padded work "
                         f"is its lever before any roof.")
    roofs = sorted(refs.values(), key=lambda r: (r.is_memory, -r.value, r.key))
    achievable: list[Roof] = []
    for roof in roofs:  # what the GPU really reaches on each roof, drawn beside it (achievable_ceiling_map)
        kind, unit = ("memory", "tbps") if roof.is_memory else ("compute", "tops" if roof.key.endswith("_tops")
                                                                  else "tflops")
        ach = ceilings.achievable_for(CeilingRef(roof.key, roof.value, kind, unit))  # type: ignore[arg-type]
        if ach is not None:
            achievable.append(Roof(ach.key, ach.value, roof.level, measured_for=roof.key))
    roofs += achievable
    roofs += _level_roofs(ceilings, hardware, [k for k in rows if k.get("ai_measured")], notes)
    return RooflineModel(hardware, roofs, points, sorted(set(notes)))
