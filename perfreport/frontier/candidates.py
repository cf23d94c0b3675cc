"""The frontier: which kernel to work on next, and how sure we are.

A lever's value is its Amdahl bound (the end-to-end time saved if the kernel reached its roof: time share x
distance to the roof, from the warehouse's kernel_join). Without an imported time share, the proxy is the
kernel's share of ncu-measured duration x (1 - %SoL), labelled as a proxy: ncu serializes kernels, so that
share is not a share of wall time. Cost is a coarse rubric per bound verdict; score = value x ease.
These are the warehouse's kernel candidates; the campaign's own levers (levers.yaml, with gates and status) are
valued in perfreport/frontier/levers.py, and the K/R/H/P/A rubric lives in perfreport/krhpa.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfreport.timeshare.step_budget import host_share_pct

FAR_FROM_ROOF_PCT = 50.0
HOST_BOUND_PCT = 50.0
EASE = {"low": 1.0, "medium": 0.5, "high": 0.25}
TENSOR_FAMILIES = {"gemm", "moe_gemm", "attention"}


@dataclass(frozen=True)
class Lever:
    """One ranked lever: a kernel function of a cell, what to try, its value, cost and score."""

    cell_id: str
    function: str
    family: str | None
    bound: str | None
    sol_pct: float | None
    sol_ceiling_key: str | None
    value_pct: float | None
    value_basis: str
    action: str
    cost: str
    score: float | None

    def as_row(self) -> dict[str, Any]:
        """Return the lever as a table row."""
        return dict(self.__dict__)


def action_for(row: Mapping[str, Any]) -> tuple[str, str]:
    """Return (what to try, cost low/medium/high) from a kernel's bound verdict, family and %SoL."""
    bound, family, sol = row.get("bound"), row.get("family"), row.get("sol_pct")
    if family == "communication":
        return "overlap the collective with compute, or change the parallelism", "high"
    if bound in (None, "unknown"):
        return "re-capture with --set full (FLOP + DRAM counters) to get a bound verdict", "low"
    if bound == "latency":
        return "launch/latency-bound: CUDA graphs, fuse with neighbours, more work per launch", "low"
    if bound == "memory" and family in TENSOR_FAMILIES:
        return "streams weights/KV: raise arithmetic intensity (larger batch, fp8 weights or KV)", "medium"
    if bound == "memory":
        return "bandwidth-bound: fuse into neighbouring kernels or move fewer bytes", "medium"
    if bound == "compute" and (sol is None or sol < 60.0):
        return "compute-bound below its roof: tile/kernel choice (autotune, persistent, split-K)", "medium"
    if bound == "compute":
        return "near its dtype roof: only lower precision or less work moves it", "high"
    return "compute and DRAM both busy: an algorithmic change (less work or fewer bytes)", "high"


def lever_value(row: Mapping[str, Any]) -> tuple[float | None, str]:
    """Return (value in % of the cell's time, basis): the Amdahl bound, else the labelled ncu-share proxy."""
    if row.get("amdahl_bound_pct") is not None:
        return float(row["amdahl_bound_pct"]), "Amdahl bound (time share x distance to roof)"
    share, sol = row.get("ncu_share_pct"), row.get("sol_pct")
    if share is not None and sol is not None:
        return share * (1.0 - min(float(sol), 100.0) / 100.0), "proxy: ncu duration share x (1 - %SoL)"
    return None, "unknown: no time share and no %SoL"


def rank_levers(join: Iterable[Mapping[str, Any]]) -> list[Lever]:
    """Rank every (cell, kernel function) by value x ease, unknown values last."""
    levers = []
    for row in join:
        action, cost = action_for(row)
        value, basis = lever_value(row)
        levers.append(Lever(
            cell_id=row["cell_id"], function=row["function"], family=row.get("family"), bound=row.get("bound"),
            sol_pct=row.get("sol_pct"), sol_ceiling_key=row.get("sol_ceiling_key"), value_pct=value,
            value_basis=basis, action=action, cost=cost, score=None if value is None else value * EASE[cost],
        ))
    levers.sort(key=lambda lv: (lv.score is None, -(lv.score or 0.0), lv.cell_id, lv.function))
    return levers


def next_lever(join: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """The kernel with the largest Amdahl bound; without time shares, the longest kernel far from its roof."""
    rows = list(join)
    amdahl = [r for r in rows if r.get("amdahl_bound_pct") is not None]
    if amdahl:
        best = max(amdahl, key=lambda r: (r["amdahl_bound_pct"], r["cell_id"], r["function"]))
        return dict(best), "largest Amdahl bound (time share x distance to its roof)"
    far = [r for r in rows if r.get("sol_pct") is not None and r["sol_pct"] < FAR_FROM_ROOF_PCT and r.get("ncu_ms")]
    if far:
        best = max(far, key=lambda r: (r["ncu_ms"], r["cell_id"], r["function"]))
        return dict(best), (f"no time shares imported: the longest ncu-measured kernel under {FAR_FROM_ROOF_PCT:.0f}% "
                            f"of its roof")
    return None


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
