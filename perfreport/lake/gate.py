"""Full-context gate: every descriptor field and every published %SoL must be filled before a clean publish.

A problem is a string that starts with its path (``cells[<id>].context.<section>.<field>: missing``) so one
error can list them all at once. Context problems make a cell's rows ``context_complete = false``; kernel
problems (a null %SoL, a %SoL without its ceiling, an AMD row whose source lacks its measurement context:
rocprof/context.py) are recorded on that kernel's row only. Campaign problems
(the krhpa block, ``krhpa.candidate.H: ...``) are recorded on every published cell row and listed once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign, Cell, load_campaign
from perfreport.config.context import CONTEXT_FIELDS, context_value_problem, missing_context_fields
from perfreport.errors import ConfigError, PerfReportError
from perfreport.frontier.krhpa import krhpa_problems
from perfreport.kernels.cells import FILE_NAME, read_cell
from perfreport.kernels.identity import simplify
from perfreport.rocprof.context import FORMAT as ROCPROF_FORMAT
from perfreport.rocprof.context import source_context_problems
from perfreport.warehouse.gather import trial_count

FULL_SETS = frozenset({"full", "roofline", "detailed"})


class GateError(ConfigError):
    """publish --strict found problems: every one is kept (`problems`), the message lists one line per kind."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(dict.fromkeys(problems))  # a campaign problem is carried by every cell: list it once
        kinds = grouped(self.problems)
        lines = "\n".join(f"  - {p}" for p in kinds)
        PerfReportError.__init__(self, (
            f"{source}: {len(self.problems)} problem(s) of {len(kinds)} kind(s):\n{lines}\nNothing was written. "
            f"Fill these fields in config.yaml (`n/a: why` where a field does not apply; re-capture with --set full "
            f"for a null %SoL; docs/frontier.md for krhpa), or publish without --strict to record them on the rows."))


_WHERE = re.compile(r"^cells\[(?P<cell>[^\]]+)\](?:\.kernels\[(?P<kernel>[^\]]+)\])?(?P<rest>.*)$")


def grouped(problems: list[str]) -> list[str]:
    """One line per kind of problem (its path without the cell and kernel ids, and its reason), with the cells and
    kernels that have it, in first-seen order: 2 cells x 9 kernels missing the same thing are one line."""
    kinds: dict[str, dict[str, list[str]]] = {}
    for p in problems:
        m = _WHERE.match(p)
        if m is None:
            kinds.setdefault(p, {})
            continue
        kind = ("kernels[...]" if m["kernel"] else "") + m["rest"]
        kinds.setdefault(kind.lstrip("."), {}).setdefault(m["cell"], []).append(m["kernel"] or "")
    out = []
    for kind, cells in kinds.items():
        if not cells:
            out.append(kind)
        elif any(k for ks in cells.values() for k in ks):
            out.append(f"{kind} (" + "; ".join(f"cell {cell}: {len(ks)} kernel(s) {_ids(ks)}"
                                                for cell, ks in cells.items()) + ")")
        else:
            out.append(f"{kind} (cell(s) {', '.join(cells)})")
    return out


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if len(ids) <= 4 else f"{ids[0]}, {ids[1]}, ... {ids[-1]}"


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
    if kernel.get("duration_ns") is None:
        return "not measured (no kernel duration in the capture, so no rate to set against a roof; the import's " \
               "warnings say why)"
    return None


def _instantiation(k: dict[str, Any]) -> str:
    return simplify(str(k.get("name") or k.get("function")))


def _fuller_rows(ncu: dict[str, Any], sets: dict[Any, Any]) -> dict[str, str]:
    """Kernel instantiation -> the id of a row of it from a full-set source that carries a %SoL: a --set basic row of
    the same kernel beside it is the cheaper capture of the same work, not a gap (the warehouse joins the full one)."""
    out: dict[str, str] = {}
    for k in ncu.get("kernels", []):
        if sets.get(k.get("source")) in FULL_SETS and k.get("sol_pct") is not None:
            out.setdefault(_instantiation(k), str(k.get("id")))
    return out


def _kernel_problems(check: CellCheck, prefix: str, ncu: dict[str, Any], not_measured: str | None = None) -> None:
    grounding = check.context.get("grounding") or {}
    # an ncu section set decides which rows measure a %SoL; a rocprof-compute source's `section_set` lists the
    # hardware blocks it profiled (ip_blocks), which is no such set
    sets = {s.get("id"): None if s.get("format") == ROCPROF_FORMAT else s.get("section_set")
            for s in ncu.get("sources", [])}
    unframed = {s.get("id"): gaps for s in ncu.get("sources", []) if (gaps := source_context_problems(s))}
    # a workload of another GPU than the cell's (import_rocprof --hardware-mismatch warn) has no roof of its own here
    foreign = {s.get("id"): chip for s in ncu.get("sources", []) if s.get("format") == ROCPROF_FORMAT
               and (chip := (s.get("rocprof") or {}).get("chip")) and chip != ncu.get("hardware")}
    fuller = _fuller_rows(ncu, sets)
    for k in ncu.get("kernels", []):
        kid = str(k.get("id"))
        kpath = f"{prefix}.kernels[{kid}]"
        problems: list[str] = [f"{kpath}: implausible value: {p} (a unit slip or a corrupt export; fix the "
                               f"export and re-import)" for p in k.get("implausible") or []]
        problems += [f"{kpath}.measurement_context: source {k.get('source')} does not record {gap}; its "
                     f"sysinfo.csv lacks it: re-profile with rocprof-compute (which writes it) and re-import"
                     for gap in unframed.get(k.get("source"), [])]
        section_set = sets.get(k.get("source"))
        twin = fuller.get(_instantiation(k)) if k.get("sol_pct") is None and section_set not in FULL_SETS else None
        if twin is not None:
            check.kernel_notes[kid] = f"not measured ({section_set} set): the full-set row {twin} of the same " \
                                      f"kernel carries its %SoL"
        elif k.get("sol_pct") is None:
            chip = foreign.get(k.get("source"))
            reason = (f"not scored: the workload ran on {chip}, the cell's hardware is {ncu.get('hardware')} (imported "
                      f"with --hardware-mismatch warn); import it into a campaign of {chip} (hardware: from-capture)"
                      if chip else _null_sol_reason(k, section_set))
            if not_measured and section_set is not None and section_set not in FULL_SETS:
                # the cell says why its cheap rows carry no %SoL: an honest null, noted with that why
                check.kernel_notes[kid] = f"{reason}: {not_measured}"
            elif reason:
                check.kernel_notes[kid] = reason
                problems.append(f"{kpath}.sol_pct: {reason}")
            else:
                problems.append(f"{kpath}.sol_pct: null and the row does not say why; re-import the capture")
        else:
            if not k.get("sol_ceiling_key"):
                problems.append(f"{kpath}.sol_ceiling_key: missing; a %SoL needs the ceiling it divides by")
            # grounding.sol_rigor is the top-level sol_rigor, always set (campaign._one_sol_rigor)
            if context_value_problem("trials", grounding.get("trials")):
                problems.append(f"{kpath}.trials: missing; a published %SoL needs context.grounding.trials")
        if problems:
            check.kernel_problems[kid] = problems


def check_cell(campaign: Campaign, cell: Cell) -> CellCheck:
    """Check one cell's effective context and its imported kernels."""
    prefix = f"cells[{cell.id}]"
    ctx = cell.effective_context(campaign)
    check = CellCheck(cell.id, ctx, _context_problems(prefix, ctx))
    counted, typed = trial_count(campaign, cell), (ctx.get("grounding") or {}).get("trials")
    if counted is not None and typed != counted:  # grounding.trials is a number the data holds, not a claim
        check.context_problems.append(
            f"{prefix}.context.grounding.trials: {typed!r} typed, but the cell holds {counted} trial(s) (distinct "
            f"`trial` numbers of its bundle results and of its timelines imported with --trial or trials:); write "
            f"{counted}")
    check.ncu = read_cell(cell.cell_dir(campaign) / FILE_NAME)
    if check.ncu is None:
        check.context_problems.append(
            f"{prefix}: no {FILE_NAME} (nothing imported); run `perftunereport import_ncu --campaign "
            f"{campaign.dir} --cell-id {cell.id} --bundle ...` first")
    else:
        _kernel_problems(check, prefix, check.ncu, cell.not_measured)
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
