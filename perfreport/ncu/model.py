"""The tidy model every reader produces: one KernelLaunch per profiled action, metrics in base units.

Metric keys are raw ncu metric names (``gpu__time_duration.sum``). Readers of the details page map
(section, label) rows onto those names through ``details_labels.yaml`` so derivation sees one vocabulary.
Base units: time in ns, data in byte, rates per second, frequency in hz (cycle/s), percentages in %.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple


class Rule(NamedTuple):
    """One ncu rule result (guided analysis) as exported; a tuple, as 20,000 of them are built per large import."""

    section: str  # section identifier (SpeedOfLight)
    rule: str  # rule identifier (SOLBottleneck)
    type: str  # INF, OPT, WRN, ERR
    description: str
    speedup_type: str = ""  # "global" / "local"; "" when the rule estimates none
    speedup: str = ""  # estimated speedup in %, as printed (details page) or speedup_text of the stored double


# ncu's link markup in rule messages (`@section:WarpStateStats:Warp State Statistics@`) -> its text, as the
# details page prints it.
RULE_LINK = re.compile(r"@[a-z]+:[^:@\s]*:([^@]*)@")
# A rule message's type: ncu_report's MsgType number (the .ncu-rep readers) -> the details page's name.
RULE_TYPE_NAMES = {"0": "", "1": "INF", "2": "OPT", "3": "WRN", "4": "ERR"}


def rule_row(rule: Rule, launch_id: int) -> dict[str, object]:
    """One rule result as the kernel row's `rules` holds it: type by name, speedup a number (null when none)."""
    try:
        speedup: float | None = float(rule.speedup.replace(",", "")) if rule.speedup else None
    except ValueError:
        speedup = None
    return {"launch_id": launch_id, "section": rule.section, "rule": rule.rule,
            "type": RULE_TYPE_NAMES.get(rule.type, rule.type), "message": RULE_LINK.sub(r"\1", rule.description),
            "speedup_type": rule.speedup_type or None, "speedup_pct": speedup}


def speedup_text(value: float) -> str:
    """A report's stored speedup estimate (a double, in %) as text: 4 significant digits, as ncu prints ~5.573."""
    return f"{value:.4g}"


@dataclass(slots=True)
class KernelLaunch:
    """One profiled kernel launch (an ncu action)."""

    launch_id: int
    name: str  # demangled (as exported by ncu)
    function: str  # function base name (no template args / parameters)
    mangled: str | None = None
    process_id: str = ""
    process_name: str = ""
    host: str = ""
    context: str = ""
    stream: str = ""
    device: str = ""
    cc: str = ""
    block_size: str = ""
    grid_size: str = ""
    nvtx: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)  # base unit per metric key ("" unitless)
    text: dict[str, str] = field(default_factory=dict)  # string-valued metrics
    rules: list[Rule] = field(default_factory=list)
    # metric key -> absolute tolerance in base units implied by the printed digits (absent: full precision)
    precision: dict[str, float] = field(default_factory=dict)


@dataclass
class Capture:
    """Everything one export holds, with provenance."""

    source_path: str
    source_format: str  # "ncu-rep" | "csv-raw" | "csv-details"
    sha256: str
    ncu_version: str | None
    gpu: str | None
    section_set: str | None
    sections: list[str]
    launches: list[KernelLaunch]
    command_line: str | None = None
    warnings: list[str] = field(default_factory=list)
