"""Which ncu section set a capture used: from its command line, else from the sections it holds."""

from __future__ import annotations

import re

# ncu 2025.3.1 section sets (from the Sets{} blocks of its .section files).
SETS: dict[str, frozenset[str]] = {
    "basic": frozenset({"LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution"}),
    "detailed": frozenset({"LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution",
                           "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart",
                           "SourceCounters", "SpeedOfLight_RooflineChart"}),
    "roofline": frozenset({"SpeedOfLight", "SpeedOfLight_RooflineChart", "WorkloadDistribution",
                           "SpeedOfLight_HierarchicalSingleRooflineChart",
                           "SpeedOfLight_HierarchicalDoubleRooflineChart",
                           "SpeedOfLight_HierarchicalHalfRooflineChart",
                           "SpeedOfLight_HierarchicalTensorRooflineChart"}),
}
_FULL_EXTRA = frozenset({"WarpStateStats", "InstructionStats", "SchedulerStats"})
_SET_ARG = re.compile(r"--set[ =](\S+)")


def infer_section_set(sections: list[str], command_line: str | None = None) -> str | None:
    """Return 'full'/'detailed'/'roofline'/'basic' or 'custom'; None when nothing is known."""
    if command_line:
        m = _SET_ARG.search(command_line)
        if m:
            return m.group(1)
    have = set(sections)
    if not have:
        return None
    if have >= _FULL_EXTRA and SETS["detailed"] <= have and SETS["roofline"] <= have:
        return "full"
    for name in ("detailed", "roofline", "basic"):
        if have == set(SETS[name]):
            return name
    return "custom"
