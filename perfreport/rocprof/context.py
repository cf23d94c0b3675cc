"""The measurement context an AMD number needs to be published: which tool, which ROCm, which GPU, at which clocks.

An ncu report names its ncu version and GPU; a rocprof-compute workload says the same things in sysinfo.csv. The
importer keeps them in the source record (`sources[].rocprof.sysinfo`), warns where sysinfo.csv lacks one, and the
lake's strict gate refuses the rows of a source without them: a %SoL whose clock or tool version is unknown cannot
be compared with another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfreport.rocprof.read import to_number

FORMAT = "rocprof-compute"  # sources[].format of a workload folder
# sysinfo.csv key -> what it records; clocks (MHz) must be numbers > 0: the peaks are computed from max_sclk
MEASUREMENT_CONTEXT = {
    "version": "the rocprof-compute version that profiled it",
    "rocm_version": "the ROCm version it ran under",
    "gpu_model": "the GPU model",
    "gpu_arch": "the gfx architecture",
    "max_sclk": "the peak engine clock in MHz (the peaks are computed from it)",
    "cur_sclk": "the engine clock in MHz during the profile",
    "max_mclk": "the peak memory clock in MHz",
    "cur_mclk": "the memory clock in MHz during the profile",
}
CLOCKS = frozenset({"max_sclk", "cur_sclk", "max_mclk", "cur_mclk"})


def missing_context(sysinfo: Mapping[str, Any]) -> list[str]:
    """Each measurement-context key sysinfo lacks (blank, NA, or a clock that is no number > 0), as `key (what)`."""
    out = []
    for key, what in MEASUREMENT_CONTEXT.items():
        value = sysinfo.get(key)
        text = "" if value is None else str(value).strip()
        if key in CLOCKS:
            number = to_number(text)
            bad = number is None or number <= 0
        else:
            bad = text.upper() in ("", "NA", "N/A", "NAN", "NONE")
        if bad:
            out.append(f"{key} ({what})")
    return out


def source_context_problems(source: Mapping[str, Any]) -> list[str]:
    """The measurement-context gaps of one cell-file source: [] for an ncu source or a complete rocprof one."""
    if source.get("format") != FORMAT:
        return []
    record = source.get("rocprof")
    sysinfo = record.get("sysinfo") if isinstance(record, Mapping) else None
    return missing_context(sysinfo if isinstance(sysinfo, Mapping) else {})
