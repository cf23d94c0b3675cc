"""value_view: the campaign's grind frontier and its next lever.

The next lever is the first kernel of the one ranking (candidates.rank_kernels: measured time saved against the
achievable roof or launch floor), the same on page 1, page 7 and in the import summary; levers.yaml's open lever
for that kernel, if any, is named beside it as the estimate it is, with its gate. The output always ends with three
lines: `next lever: ...`, `expected unlock: ...`, `gate: ...`. "exhausted" is printed only when no kernel saves
anything AND levers.yaml documents a speed-of-light wall (`sol_wall:`), so the search is never declared over by
omission. `--handoff` rewrites only the `## Frontier` section of a HANDOFF.md, atomically.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign, load_campaign
from perfreport.errors import InputError
from perfreport.files import write_text_atomic
from perfreport.frontier.candidates import KernelLever, next_lever, rank_campaign
from perfreport.frontier.levers import LEVERS_NAME, LeversFile, ValuedLever, load_levers, rank_frontier
from perfreport.kernels.identity import name_matches
from perfreport.warehouse.gather import CampaignData, gather

SCHEMA_VERSION = 1
HEADING = "## Frontier"
_HEADING_RE = re.compile(r"^##[ \t]+frontier[ \t]*$", re.IGNORECASE)
_SECTION_END_RE = re.compile(r"^#{1,2}[ \t]")  # the next heading of level 1 or 2 ends the section
_FENCE_RE = re.compile(r"^(```|~~~)")


@dataclass
class ValueView:
    """The ranked frontier of one campaign and the three closing lines."""

    campaign: str
    levers_path: Path
    levers: list[ValuedLever]  # open first by score, then won, banked, refuted
    sol_wall: dict[str, Any] | None
    kernels: list[KernelLever]  # the one ranking: measured time saved, largest first
    next_lever: str
    expected_unlock: str
    gate: str
    exhausted: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def open(self) -> list[ValuedLever]:
        """The frontier: levers still open, ranked."""
        return [v for v in self.levers if v.spec.status == "open"]

    @property
    def closed(self) -> list[ValuedLever]:
        """Levers the gate settled (won, banked, refuted)."""
        return [v for v in self.levers if v.spec.status != "open"]

    def final_lines(self) -> list[str]:
        """The three lines every output ends with."""
        return [f"next lever: {self.next_lever}", f"expected unlock: {self.expected_unlock}", f"gate: {self.gate}"]


def pct_text(v: float | None) -> str:
    """A percentage for the table and the hand-off, or 'unknown'."""
    return "unknown" if v is None else f"{v:.1f}%"


def _lever_for(top: KernelLever, levers: Sequence[ValuedLever]) -> ValuedLever | None:
    """levers.yaml's first open lever that works on the top kernel in its cell."""
    return next((v for v in levers if v.spec.status == "open"
                 and (v.spec.cells is None or top.cell_id in v.spec.cells)
                 and name_matches(v.spec.kernel, top.function)), None)


def _closing(levers: Sequence[ValuedLever], wall: Mapping[str, Any] | None,
             kernels: Sequence[KernelLever]) -> tuple[str, str, str, bool]:
    """(next lever, expected unlock, gate, exhausted)."""
    top = next_lever(kernels)
    if top is not None:
        lever = _lever_for(top, levers)
        proposed = (f"; {LEVERS_NAME} proposes {lever.spec.id}: {lever.spec.lever} (an estimate: "
                    f"~{lever.spec.fraction:.0%} of the matched kernels' time, cost {lever.spec.cost})"
                    if lever else "")
        ms = "" if top.saved_ms is None else f" ({top.saved_ms:.3f} ms)"
        unlock = (f"up to {top.saved_pct:.1f}% of {top.cell_id}'s timeline{ms}, {top.rests_on}: {top.basis}" +
                  (f"; {top.host_note}" if top.host_note else ""))
        gate = (lever.spec.gate if lever else
                f"{top.action}; write it into {LEVERS_NAME} with the measurement that proves or refutes it")
        return top.headline() + proposed, unlock, gate, False
    if wall:
        evidence = ", ".join(wall["evidence"])
        return (f"none: the frontier is exhausted at the documented speed-of-light wall: {wall['statement']}",
                f"none beyond the speed-of-light wall (evidence: {evidence})",
                f"re-open a lever in {LEVERS_NAME} when new evidence moves the wall ({evidence})", True)
    not_over = "no speed-of-light wall is documented (sol_wall:), so the search is not over"
    if kernels:
        return (f"none measured: every timed kernel is at its floor or has no roof; {not_over}",
                "unknown until a kernel below its roof is captured with --set full and timed",
                f"capture the workload with --set full, then write {LEVERS_NAME} with the measurement that proves "
                f"each lever", False)
    return (f"none known: {not_over}; nothing is captured and timed yet",
            "unknown until a kernel is captured (import_ncu) and timed (import_torch_trace or import_nsys)",
            f"capture the workload, then write {LEVERS_NAME} with the measurement that proves each lever", False)


def build_view(campaign: Campaign, data: CampaignData, levers: LeversFile | None) -> ValueView:
    """Rank the levers and the kernels against the warehouse and pick the closing lines (pure)."""
    path = campaign.dir / LEVERS_NAME
    warnings = [] if levers is None else list(levers.warnings)
    if levers is None:
        warnings.append(f"{path}: not found; write it (docs/frontier.md) to track levers, their gates and status")
    ranked = rank_frontier(levers.levers if levers else [], data.join)
    kernels = rank_campaign(data)
    wall = levers.sol_wall if levers else None
    nxt, unlock, gate, exhausted = _closing(ranked, wall, kernels)
    return ValueView(campaign.id, path, ranked, wall, kernels, nxt, unlock, gate, exhausted, warnings)


def value_view(campaign_dir: Path, strict: bool = False) -> ValueView:
    """Load the campaign, its levers.yaml and the warehouse; return the ranked frontier."""
    campaign = load_campaign(Path(campaign_dir), strict=strict)
    levers = load_levers(campaign, strict=strict)
    return build_view(campaign, gather(campaign.dir), levers)


def view_json(view: ValueView) -> dict[str, Any]:
    """The view as a JSON document (perfreport/config/schemas/value_view.schema.json)."""
    return {
        "schema_version": SCHEMA_VERSION, "campaign": view.campaign, "levers_file": str(view.levers_path),
        "levers": [{"rank": i, **v.as_row()} for i, v in enumerate(view.levers, start=1)],
        "sol_wall": view.sol_wall, "exhausted": view.exhausted, "warnings": view.warnings,
        "next_lever": view.next_lever, "expected_unlock": view.expected_unlock, "gate": view.gate,
        "kernels": [_kernel_json(k) for k in view.kernels],
        "next_kernel": None if (top := next_lever(view.kernels)) is None else _kernel_json(top),
    }


def _kernel_json(k: KernelLever) -> dict[str, Any]:
    return {"cell_id": k.cell_id, "label": k.label, "kernel_id": k.kernel_id, "saved_pct": k.saved_pct,
            "saved_ms": k.saved_ms, "saved_us_per_step": k.saved_us_per_step, "pct_of_roof": k.pct_of_roof,
            "roof": k.roof, "ceiling_key": k.ceiling_key, "saving": k.saving, "cell_weight": k.cell_weight,
            "campaign_saved_pct": k.campaign_saved_pct, "basis": k.basis}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def frontier_markdown(view: ValueView) -> str:
    """The `## Frontier` section of a HANDOFF.md: the ranked table, settled levers, the three closing lines (a list,
    so markdown keeps them on separate lines)."""
    lines = [HEADING, "", f"Written by `perftunereport value_view --handoff` from `{LEVERS_NAME}` of campaign "
             f"`{view.campaign}`; edit {LEVERS_NAME}, not this section.", ""]
    if view.open:
        lines += ["| # | lever | kernel | cell | estimate (levers.yaml) | bound | cost | score | gate |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for i, v in enumerate(view.open, start=1):
            score = "unknown" if v.score is None else f"{v.score:.2f}"
            lines.append("| " + " | ".join(_cell(x) for x in (
                i, f"{v.spec.id}: {v.spec.lever}", f"`{v.spec.kernel}`", v.cell_id or "—", pct_text(v.value_pct),
                pct_text(v.bound_pct), v.spec.cost, score, v.spec.gate)) + " |")
        lines.append("")
    for v in view.closed:
        why = f": {v.spec.why_lost.rstrip('.')}" if v.spec.why_lost else ""
        lines.append(f"- {v.spec.id} ({v.spec.status}){why}; evidence: {', '.join(v.spec.evidence)}")
    if view.closed:
        lines.append("")
    return "\n".join(lines + [f"- {line}" for line in view.final_lines()]) + "\n"


def replace_section(text: str, section: str) -> str:
    """Replace the `## Frontier` section of markdown text with section (append it when absent).

    The section runs from its heading to the next level-1 or level-2 heading outside code fences; every byte
    before and after it is kept. The new section takes the file's line ending (CRLF when the file uses it).
    """
    newline = "\r\n" if "\r\n" in text else "\n"
    body = section.replace("\n", newline)
    lines = text.splitlines(keepends=True)
    start = end = None
    fenced = False
    for i, line in enumerate(lines):
        bare = line.rstrip("\r\n")
        if _FENCE_RE.match(bare):
            fenced = not fenced
        elif not fenced and start is None and _HEADING_RE.match(bare):
            start = i
        elif not fenced and start is not None and _SECTION_END_RE.match(bare):
            end = i
            break
    if start is None:
        if not text:
            return body
        ending = "" if text.endswith(("\n", "\r")) else newline
        blank = "" if text.endswith(newline + newline) else newline
        return text + ending + blank + body
    before, after = "".join(lines[:start]), "".join(lines[end:]) if end is not None else ""
    return before + body + (newline if after else "") + after


def update_handoff(path: Path, view: ValueView) -> Path:
    """Rewrite the `## Frontier` section of path (created when absent) atomically; keep the rest byte for byte."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--handoff {str(path)!r} is a folder; pass the HANDOFF.md file inside it.")
    try:
        text = path.read_bytes().decode("utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc}); expected a UTF-8 markdown file. Fix or move it, then "
                         f"run value_view --handoff again.") from exc
    write_text_atomic(path, replace_section(text, frontier_markdown(view)))
    return path
