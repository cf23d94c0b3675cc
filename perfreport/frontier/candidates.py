"""The frontier: which kernel to work on next, and how sure we are: one ranking (rank_kernels), one answer.

A kernel's value is the time reaching its floor would save (kernel_lever): its time share x the distance to its
roof, the measured (achievable) roof where one is measured (a kernel at it saves nothing), the datasheet roof
otherwise, and for a launch-bound kernel the distance to the measured launch floor. Without an imported time
share, the ncu duration share stands in, labelled as a proxy (ncu serializes kernels). The campaign's own levers
(levers.yaml: hand-written estimates, with gates and status) are valued in perfreport/frontier/levers.py; the
K/R/H/P/A rubric lives in perfreport/frontier/krhpa.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfreport.timeshare.step_budget import host_share_pct
from perfreport.warehouse.gather import CampaignData

HOST_BOUND_PCT = 50.0
AT_ROOF_PCT = 95.0  # % of the achievable roof from which only less work or a cheaper dtype moves a kernel
EASE = {"low": 1.0, "medium": 0.5, "high": 0.25}
TENSOR_FAMILIES = {"gemm", "moe_gemm", "attention"}
PROFILERS = {"nvidia": "ncu", "amd": "rocprof-compute"}  # kernel_join vendor -> the profiler behind its duration


@dataclass(frozen=True)
class KernelLever:
    """One kernel of a cell and the time reaching its floor would save: the one ranking of "what next".

    saved_pct: % of the cell's timeline (time share x the distance to the kernel's floor); saved_ms over the timeline
    and saved_us_per_step where the cell's step budget counts its steps. basis says which floor and why.
    roof: which roof pct_of_roof is against ("measured": the achievable ceiling measured on this GPU, "datasheet").
    saving: "measured" (an imported timeline's time share), "estimate" (no time share for it: the ncu duration share,
    an upper bound) or "unknown". cell_weight: the cell's share of the campaign base (config `weight:`, normalised;
    equal without one); campaign_saved_pct = cell_weight x saved_pct, what cells are ranked together by.
    """

    cell_id: str
    label: str
    kernel_id: str | None
    function: str
    family: str | None
    bound: str | None
    time_share_pct: float | None
    pct_of_roof: float | None
    ceiling_key: str | None
    saved_pct: float | None
    saved_ms: float | None
    saved_us_per_step: float | None
    basis: str
    action: str
    cost: str
    host_note: str | None
    roof: str | None = None
    saving: str = "unknown"
    cell_weight: float | None = None
    campaign_saved_pct: float | None = None

    @property
    def rests_on(self) -> str:
        """What the saving rests on, as every page and verb words it: `measured` or `an estimate, not measured`."""
        return "measured" if self.saving == "measured" else "an estimate, not measured"

    @property
    def against(self) -> str | None:
        """The roof pct_of_roof is against, in words: `measured roof <key>` or `datasheet roof <key>`."""
        return None if self.roof is None else f"{self.roof} roof {self.ceiling_key}"

    def as_row(self) -> dict[str, Any]:
        """Return the lever as a table row (with `against`, the roof of its %, in words)."""
        weight = None if self.cell_weight is None else 100.0 * self.cell_weight
        return {**self.__dict__, "against": self.against, "rests_on": self.rests_on, "cell_weight_pct": weight}

    def headline(self) -> str:
        """One line: where, how much, against what (the same words on every page and in the CLI)."""
        if self.saved_pct is None:
            return f"{self.label} in {self.cell_id}: time saved unknown ({self.basis})"
        step = f", {self.saved_us_per_step:.1f} µs per step" if self.saved_us_per_step is not None else ""
        host = f"; {self.host_note}" if self.host_note else ""
        ms = "" if self.saved_ms is None else f" ({self.saved_ms:.3f} ms{step})"
        return f"{self.label} in {self.cell_id}: saves up to {self.saved_pct:.1f}% of the cell's timeline{ms}; " \
               f"{self.rests_on}: {self.basis}{host}"


def action_for(row: Mapping[str, Any]) -> tuple[str, str]:
    """Return (what to try, cost low/medium/high) from a kernel's bound verdict, family and % of its roof."""
    bound, family = row.get("bound"), row.get("family")
    pct, _, _ = _roof(row)
    if family == "communication":
        return "overlap the collective with compute, or change the parallelism", "high"
    if bound in (None, "unknown"):
        return "re-capture with --set full (FLOP + DRAM counters) to get a bound verdict", "low"
    if bound == "latency":
        return "launch/latency-bound: CUDA graphs, fuse with neighbours, more work per launch", "low"
    if row.get("above_achievable"):
        return (f"at (above) its achievable roof: re-measure {row.get('achievable_key')} with perftunereport "
                f"ceilings measure; only less work, fewer bytes or a cheaper dtype moves it"), "high"
    if pct is not None and pct >= AT_ROOF_PCT:
        return "at its achievable roof: only less work, fewer bytes or a cheaper dtype moves it", "high"
    if bound == "cache":
        return ("cache-bound (L1/L2): more reuse per byte fetched (tiling, shared memory, fusing passes over the "
                "same data)"), "medium"
    if bound == "memory" and family in TENSOR_FAMILIES:
        return "streams weights/KV: raise arithmetic intensity (larger batch, fp8 weights or KV)", "medium"
    if bound == "memory":
        return "bandwidth-bound: fuse into neighbouring kernels or move fewer bytes", "medium"
    if bound == "compute":
        return "compute-bound below its roof: tile/kernel choice (autotune, persistent, split-K)", "medium"
    return "compute and DRAM both busy: an algorithmic change (less work or fewer bytes)", "high"


def _roof(row: Mapping[str, Any]) -> tuple[float | None, str | None, str | None]:
    """(% of the roof, its key, which roof): the measured (achievable) roof where measured, else the datasheet's; a
    kernel that ran above its measured roof has no % of it (the ceiling is to be re-measured)."""
    if row.get("above_achievable"):
        return None, row.get("achievable_key"), "measured"
    if row.get("pct_of_achievable") is not None:
        return float(row["pct_of_achievable"]), row.get("achievable_key"), "measured"
    if row.get("sol_pct") is not None:
        return float(row["sol_pct"]), row.get("sol_ceiling_key"), "datasheet"
    return None, None, None


def _host_note(steps: Sequence[Mapping[str, Any]]) -> str | None:
    """What a host-bound cell (step budget) says of every GPU saving in it; None for a GPU-bound or unknown one."""
    host = host_share_pct(steps)
    if host is None or host <= HOST_BOUND_PCT:
        return None
    return (f"capped: the cell is host-bound ({host:.0f}% of its steps' time is host gap), so GPU savings shorten "
            f"the step only once the host gap shrinks")


def kernel_lever(row: Mapping[str, Any], host_note: str | None = None, steps: int = 0, timed: bool = False,
                 weight: float | None = None) -> KernelLever:
    """Value one kernel_join row: the time reaching its floor would save, with the assumption stated.

    The rule lives in the warehouse (kernel_join's amdahl_bound_pct / amdahl_basis: achievable roof, datasheet
    roof or launch floor); a kernel without an imported time share gets the same distance to its roof applied to its
    ncu duration share, an estimate (ncu serializes kernels). `host_note`: its cell's (_host_note); `steps`: its
    cell's step count; `timed`: whether its cell has a timeline (a kernel missing from one is said to be missing
    from it); `weight`: its cell's normalised weight on the campaign base.
    """
    action, cost = action_for(row)
    pct, key, roof = _roof(row)
    saved: float | None = None
    saved_ms: float | None = None
    saving = "unknown"
    proxy = ("not in the cell's imported timeline (no timeline kernel matched its name)" if timed
             else "no timeline imported for this cell")
    profiler = PROFILERS.get(str(row.get("vendor")), "ncu")  # who measured the duration share it stands in with
    if row.get("amdahl_bound_pct") is not None:
        saved, saved_ms, saving = float(row["amdahl_bound_pct"]), row.get("amdahl_bound_ms"), "measured"
        what = str(row.get("amdahl_basis"))
        basis = f"time share x the distance to its {_roof_words(what)}"
        if what == "above the achievable roof":
            sol = row.get("sol_pct")
            basis = (f"nothing: it ran above its measured roof {key}, a ceiling to re-measure" +
                     (f"; at {sol:.0f}% of the datasheet roof {row.get('sol_ceiling_key')}" if sol is not None else ""))
        elif what.endswith("roof") and pct is not None:
            basis += f" {key} (at {pct:.0f}% of it)" + ("; no measured roof on this hardware"
                                                         if what == "datasheet roof" else "")
    elif row.get("ncu_share_pct") is not None and row.get("bound") == "latency":
        saved, saving = float(row["ncu_share_pct"]), "estimate"
        saved_ms = None if row.get("ncu_ms") is None else float(row["ncu_ms"])
        basis = (f"launch-bound, {proxy}: its launch floor cannot be placed, so its whole {profiler} duration share, "
                 f"an upper bound")
    elif row.get("ncu_share_pct") is not None and pct is not None:
        fraction = 1.0 - min(max(pct, 0.0), 100.0) / 100.0
        saved, saving = float(row["ncu_share_pct"]) * fraction, "estimate"
        saved_ms = None if row.get("ncu_ms") is None else float(row["ncu_ms"]) * fraction
        basis = (f"{profiler} duration share x the distance to its {roof} roof {key} (at {pct:.0f}% of it); {proxy}, "
                 f"so an upper bound ({profiler} serializes kernels)")
    else:
        basis = "unknown: no time share and no % of a roof"
    per_step = float(saved_ms) * 1e3 / steps if saved_ms is not None and steps else None
    return KernelLever(
        cell_id=str(row["cell_id"]), label=str(row.get("label") or row["function"]), kernel_id=row.get("kernel_id"),
        function=str(row["function"]), family=row.get("family"), bound=row.get("bound"),
        time_share_pct=row.get("time_share_pct"), pct_of_roof=pct, ceiling_key=key, saved_pct=saved,
        saved_ms=None if saved_ms is None else float(saved_ms), saved_us_per_step=per_step, basis=basis,
        action=action, cost=cost, host_note=host_note, roof=roof, saving=saving, cell_weight=weight,
        campaign_saved_pct=None if saved is None or weight is None else saved * weight)


_ROOF_WORDS = {"achievable roof": "measured roof", "datasheet roof": "datasheet roof", "launch floor": "launch floor"}


def _roof_words(basis: str) -> str:
    """The warehouse's amdahl_basis in the words every page uses (the achievable roof is the measured one)."""
    return _ROOF_WORDS.get(basis, basis)


SAVING_ORDER = {"measured": 0, "estimate": 1, "unknown": 2}  # measured savings first, then estimates, then unknown


def cell_weights(weights: Mapping[str, float | None]) -> dict[str, float]:
    """Each cell's share of the campaign base: its `weight:` over the sum of the cells' (equal weights where no
    cell gives one; a cell without one beside cells with one weighs their mean)."""
    given = [w for w in weights.values() if w is not None]
    fill = sum(given) / len(given) if given else 1.0
    full = {c: (fill if w is None else float(w)) for c, w in weights.items()}
    total = sum(full.values())
    return {c: w / total for c, w in full.items()} if total else {}


def rank_kernels(join: Iterable[Mapping[str, Any]], steps_by_cell: Mapping[str, Sequence[Mapping[str, Any]]] | None
                 = None, timed: Iterable[str] = (), weights: Mapping[str, float] | None = None) -> list[KernelLever]:
    """Every (cell, kernel) by the time reaching its floor would save: measured savings first, then estimates (no
    time share: an upper bound), then unknown; within each, by the saving on the campaign base (cell weight x
    saved %; one cell's own % where no weights are given).

    The one ranking: page 1, page 7, value_view and the import summary all take next_lever of it.
    """
    steps_by_cell = steps_by_cell or {}
    timed_cells = set(timed)
    notes = {cell: _host_note(steps) for cell, steps in steps_by_cell.items()}  # once per cell, not per kernel
    levers = [kernel_lever(r, notes.get(str(r["cell_id"])), len(steps_by_cell.get(str(r["cell_id"]), ())),
                           str(r["cell_id"]) in timed_cells, (weights or {}).get(str(r["cell_id"])))
              for r in join]

    def on_base(lv: KernelLever) -> float:
        return lv.campaign_saved_pct if lv.campaign_saved_pct is not None else lv.saved_pct or 0.0

    levers.sort(key=lambda lv: (SAVING_ORDER[lv.saving], -on_base(lv), lv.cell_id, lv.label))
    return levers


def next_lever(ranked: Iterable[KernelLever]) -> KernelLever | None:
    """The next lever: the first kernel of a ranking that saves anything (a measured saving before any estimate);
    None when nothing is measured or every kernel is at its floor."""
    return next((lv for lv in ranked if lv.saved_pct), None)


def campaign_weights(data: CampaignData) -> dict[str, float]:
    """Each cell's normalised weight on the campaign base (cell_weights of the config's `weight:`)."""
    return cell_weights({cd.id: cd.cell.weight for cd in data.cells})


def weights_note(weights: Mapping[str, float], given: bool) -> str:
    """The sentence that states the campaign base next to a ranking across cells."""
    each = ", ".join(f"{c} {w:.0%}" for c, w in weights.items())
    how = "from each cell's `weight:` in config.yaml" if given else "equal: no cell gives a `weight:` in config.yaml"
    return (f"Cells are put on one base before they are ranked together: each cell's saving x its weight ({each}; "
            f"{how}). Measured savings (an imported timeline's time share) rank before estimates (no time share: "
            f"the ncu duration share, an upper bound).")


def rank_campaign(data: CampaignData) -> list[KernelLever]:
    """rank_kernels over a gathered campaign: its join, each cell's step budget, timeline and weight."""
    return rank_kernels(data.join, {cd.id: cd.steps for cd in data.cells},
                        [cd.id for cd in data.cells if data.timed(cd.id)], campaign_weights(data))


def campaign_next_lever(campaign_dir: Path) -> str:
    """The campaign's next lever in words (next_lever of rank_campaign), for a CLI that has just written a cell; a
    campaign the warehouse cannot load yet says why instead (the cell is written either way)."""
    from perfreport.errors import PerfReportError
    from perfreport.warehouse.gather import gather

    try:
        lever = next_lever(rank_campaign(gather(campaign_dir)))
    except PerfReportError as exc:
        return f"unknown: the campaign's warehouse cannot be built yet ({exc.message.splitlines()[0]})"
    return "none measured yet (no kernel below its roof with a time share)" if lever is None else lever.headline()


def bound_mix(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Share (%) of ncu-measured time per bound verdict."""
    totals: dict[str, float] = {}
    for r in rows:
        if r.get("ncu_ms"):
            totals[r.get("bound") or "unknown"] = totals.get(r.get("bound") or "unknown", 0.0) + r["ncu_ms"]
    whole = sum(totals.values())
    return {k: 100.0 * v / whole for k, v in sorted(totals.items())} if whole else {}


def host_verdict(steps: Sequence[Mapping[str, Any]]) -> str | None:
    """'host-bound' when the host gap is over half the steps' time, 'GPU-bound' otherwise; None without steps.

    The share is time-weighted (step_budget.host_share_pct: what import_step_budget prints), never a mean of
    per-step shares, which would let a short idle step weigh as much as a long busy one.
    """
    share = host_share_pct(steps)
    if share is None:
        return None
    if share > HOST_BOUND_PCT:
        return f"host-bound: the host gap is {share:.1f}% of the steps' time; kernel work is moot until it shrinks"
    return f"GPU-bound: the host gap is {share:.1f}% of the steps' time; kernel work pays"


def verdict_criteria(has_shares_per_cell: list[bool], join: Sequence[Mapping[str, Any]], sol_rigor: str,
                     trials: Any) -> list[tuple[str, bool]]:
    """What a VERDICT (vs a DRAFT) needs, each with whether this campaign meets it."""
    return [
        ("time shares imported for every cell (import_nsys, import_torch_trace or import_samples)",
         bool(has_shares_per_cell) and all(has_shares_per_cell)),
        ("every ranked kernel has measured arithmetic intensity (--set full or roofline)",
         bool(join) and all(r.get("ai_measured") for r in join)),
        (f"sol_rigor L3 or L4 (config: {sol_rigor})", sol_rigor in ("L3", "L4")),
        (f"at least 3 trials (context.grounding.trials: {trials})", isinstance(trials, int) and trials >= 3),
    ]
