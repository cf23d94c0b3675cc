"""The tidy model every reader produces: one KernelLaunch per profiled action, metrics in base units.

Metric keys are raw ncu metric names (``gpu__time_duration.sum``). Readers of the details page map
(section, label) rows onto those names through ``details_labels.yaml`` so derivation sees one vocabulary.
Base units: time in ns, data in byte, rates per second, frequency in hz (cycle/s), percentages in %.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Rule(NamedTuple):
    """One ncu rule result (guided analysis) as exported; a tuple, as 20,000 of them are built per large import."""

    section: str  # section identifier (SpeedOfLight)
    rule: str  # rule identifier (SOLBottleneck)
    type: str  # INF, OPT, WRN, ERR
    description: str
    speedup_type: str = ""  # "global" / "local" (details page only)
    speedup: str = ""  # estimated speedup in %, as printed


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
