"""Full-context gate: every descriptor field and every published %SoL must be filled before a clean publish.

A problem is a string that starts with its path (``cells[<id>].context.<section>.<field>: missing``) so one
error can list them all at once. Context problems make a cell's rows ``context_complete = false``; kernel
problems (a null %SoL, a %SoL without its ceiling) are recorded on that kernel's row only. Campaign problems
(the krhpa block, ``krhpa.candidate.H: ...``) are recorded on every published cell row and listed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign, Cell, load_campaign
from perfreport.config.context import CONTEXT_FIELDS, context_value_problem, missing_context_fields
from perfreport.errors import ConfigError, PerfReportError
from perfreport.frontier.krhpa import krhpa_problems
from perfreport.kernels.cells import FILE_NAME, read_cell

FULL_SETS = frozenset({"full", "roofline", "detailed"})


class GateError(ConfigError):
    """publish --strict found problems: every one is listed, nothing was written."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(dict.fromkeys(problems))  # a campaign problem is carried by every cell: list it once
        lines = "\n".join(f"  - {p}" for p in self.problems)
        PerfReportError.__init__(self, (
            f"{source}: {len(self.problems)} problem(s):\n{lines}\nNothing was written. Fill these fields in "
            f"config.yaml (re-capture with --set full for a null %SoL; docs/frontier.md for krhpa), or publish "
            f"without --strict to record them on the rows."))


@dataclass
class CellCheck:
    """The gate's verdict on one cell: context problems, and problems per kernel id."""

    cell_id: str
    context: dict[str, Any]
    context_problems: list[str] = field(default_factory=list)
    kernel_problems: dict[str, list[str]] = field(default_factory=dict)
    kernel_notes: dict[str, str] = field(default_factory=dict)  # kernel id -> why sol_pct is null
    ncu: dict[str, Any] | None = None  # the cell's ncu_kernels.json, None when not imported
    campaign_problems: list[str] = field(default_factory=list)  # krhpa: the same for every cell

    @property
    def context_complete(self) -> bool:
        """True when every descriptor field holds a real value."""
        return not self.context_problems

    def problems(self) -> list[str]:
        """Return every problem of this cell: context first, then kernels in id order, then the campaign's."""
        out = list(self.context_problems)
        for kid in sorted(self.kernel_problems):
            out += self.kernel_problems[kid]
        return out + self.campaign_problems


def _context_problems(prefix: str, ctx: dict[str, Any]) -> list[str]:
    missing = set(missing_context_fields(ctx))
    problems = []
    for section, fields in CONTEXT_FIELDS.items():
        values = ctx.get(section) or {}
        for name in fields:
            path = f"{section}.{name}"
            why = "missing" if path in missing else context_value_problem(name, values.get(name), section)
            if why:
                problems.append(f"{prefix}.context.{path}: {why}")
    return problems


def _null_sol_reason(kernel: dict[str, Any], section_set: str | None) -> str | None:
    if section_set is not None and section_set not in FULL_SETS:
        return f"not measured ({section_set} set)"
    if not kernel.get("ai_measured") and kernel.get("flops") is None:
        return "not measured (no FLOP counters in the capture)"
    key = kernel.get("sol_ceiling_key")
    over = (kernel.get("ceiling_exceeded") or {}).get(key) if key else None
    if over is not None:
        return f"above its ceiling ({over:.1f}% of {key}): the ceiling is to be re-measured"
    if kernel.get("bound") == "cache":
        return "cache-bound: its roof is its cache level's bandwidth, which the ceilings file does not hold"
    if not key and kernel.get("ai_measured"):
        return "no ceiling of its precision on this hardware (sol-ceilings.yaml)"
    return None


def _kernel_problems(check: CellCheck, prefix: str, ncu: dict[str, Any]) -> None:
    grounding = check.context.get("grounding") or {}
    sets = {s.get("id"): s.get("section_set") for s in ncu.get("sources", [])}
    for k in ncu.get("kernels", []):
        kid = str(k.get("id"))
        kpath = f"{prefix}.kernels[{kid}]"
        problems: list[str] = [f"{kpath}: implausible value: {p} (a unit slip or a corrupt export; fix the "
                               f"export and re-import)" for p in k.get("implausible") or []]
        if k.get("sol_pct") is None:
            reason = _null_sol_reason(k, sets.get(k.get("source")))
            if reason:
                check.kernel_notes[kid] = reason
                problems.append(f"{kpath}.sol_pct: {reason}")
            else:
                problems.append(f"{kpath}.sol_pct: null and the row does not say why; re-import the capture")
        else:
            if not k.get("sol_ceiling_key"):
                problems.append(f"{kpath}.sol_ceiling_key: missing; a %SoL needs the ceiling it divides by")
            for name in ("sol_rigor", "trials"):
                if context_value_problem(name, grounding.get(name)):
                    problems.append(f"{kpath}.{name}: missing; a published %SoL needs "
                                    f"context.grounding.{name}")
        if problems:
            check.kernel_problems[kid] = problems


def check_cell(campaign: Campaign, cell: Cell) -> CellCheck:
    """Check one cell's effective context and its imported kernels."""
    prefix = f"cells[{cell.id}]"
    ctx = cell.effective_context(campaign)
    check = CellCheck(cell.id, ctx, _context_problems(prefix, ctx))
    check.ncu = read_cell(cell.cell_dir(campaign) / FILE_NAME)
    if check.ncu is None:
        check.context_problems.append(
            f"{prefix}: no {FILE_NAME} (nothing imported); run `perftunereport import_ncu --campaign "
            f"{campaign.dir} --cell-id {cell.id} --bundle ...` first")
    else:
        _kernel_problems(check, prefix, check.ncu)
    return check


def check_campaign(campaign: Campaign, cell_ids: list[str] | None = None) -> list[CellCheck]:
    """Check the chosen cells (all by default) in config order; krhpa problems go on every cell."""
    cells = [campaign.cell(c) for c in cell_ids] if cell_ids else campaign.cells
    checks = [check_cell(campaign, cell) for cell in cells]
    campaign_problems = krhpa_problems(campaign)
    for check in checks:
        check.campaign_problems = list(campaign_problems)
    return checks


def context_problems(campaign: Campaign | Path) -> dict[str, list[str]]:
    """Return every problem per cell id (empty lists for clean cells), context and kernels alike."""
    if not isinstance(campaign, Campaign):
        campaign = load_campaign(Path(campaign))
    return {c.cell_id: c.problems() for c in check_campaign(campaign)}
