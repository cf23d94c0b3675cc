"""The kernel names of an empty capture: those ncu listed under `Available Kernels:`, and the few of them closest to
the --kernel-name that matched nothing (difflib on the pattern's literal core). Standard library only: this runs on
the GPU machine.
"""

from __future__ import annotations

import difflib
import itertools
import re
import shlex
from typing import Any

MAX_LISTED = 10  # names shown when the pattern used is unknown
MAX_SUGGESTED = 3  # close names offered for a --kernel-name that matched nothing
CLOSE_CUTOFF = 0.7  # difflib ratio from which a name counts as close to the pattern's literal core
_AVAILABLE = re.compile(r"^\s*\d+\.\s+(?P<name>\S.*?)\s*$")


def available_names(lines: list[str], start: int) -> list[str]:
    """The numbered names under `Available Kernels:` after the no-kernels warning at line `start` (ncu 2025.3.1 may
    print its child-process warning in between: tests/data/h200_capture/graph_server_probe/release_node.txt)."""
    rest = list(itertools.dropwhile(lambda x: x.startswith("==WARNING=="), lines[start + 1:]))
    if not rest or rest[0].strip() != "Available Kernels:":
        return []
    return [m.group("name") for m in itertools.takewhile(bool, map(_AVAILABLE.match, rest[1:])) if m]


def listed_message(line: str, names: list[str], pattern: str | None) -> tuple[str, dict[str, Any]]:
    """The no-kernels-profiled message and details when ncu listed names: those closest to the pattern, or none."""
    checks = "also check --launch-skip / --launch-count, and --kernel-name-base (these are ncu's function names)."
    if pattern is None:
        more = f", ... (+{len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
        return (f"ncu finished without profiling a kernel: `{line}`. The process launched {len(names)} kernel "
                f"name(s): {', '.join(names[:MAX_LISTED])}{more}. This log does not say which --kernel-name the "
                f"capture used: pass it (`capture diagnose LOG --kernel-name PATTERN`) for the names closest to it; "
                f"{checks}"), {"available_kernels": names, "suggested_pattern": None, "suggested_patterns": [],
                               "pattern_used": None}
    core, close = close_names(pattern, names)
    suggested = [f"regex:{re.escape(n)}" for n in close]
    if close:
        # the suggestions are pasted into a shell: quoted, as a regex holds `|`, `\` and `$`
        offered = " or ".join(f"`--kernel-name {shlex.quote(p)}`" for p in suggested)
        said = (f"Of the {len(names)} kernel name(s) the process launched, the closest to {core or pattern!r}: "
                f"{', '.join(close)}. Capture again with {offered}")
    else:
        said = (f"None of the {len(names)} kernel name(s) the process launched (ncu lists them under `Available "
                f"Kernels:`) is close to {core or pattern!r}: the kernel did not run in this workload, or runs under "
                f"another name (libraries pick GEMM and attention kernels by shape and GPU). Pick a name from that "
                f"list for --kernel-name")
    return (f"ncu finished without profiling a kernel with --kernel-name {pattern}: `{line}`. {said}; {checks}",
            {"available_kernels": names, "suggested_pattern": suggested[0] if suggested else None,
             "suggested_patterns": suggested, "pattern_used": pattern})


def close_names(pattern: str, names: list[str]) -> tuple[str, list[str]]:
    """The pattern's literal core and at most MAX_SUGGESTED names close to it: names holding the core first, then
    difflib's closest at CLOSE_CUTOFF or above."""
    core = _literal_core(pattern)
    if not core:
        return core, []
    low = core.lower()
    holding = [n for n in names if len(low) >= 3 and low in n.lower()]
    lowered = {n.lower(): n for n in names}
    similar = [lowered[m] for m in difflib.get_close_matches(low, list(lowered), n=MAX_SUGGESTED, cutoff=CLOSE_CUTOFF)]
    return core, list(dict.fromkeys(holding + similar))[:MAX_SUGGESTED]


def _literal_core(pattern: str) -> str:
    """The longest literal run of a --kernel-name value: `regex:^.*flash_fwd.*$` -> flash_fwd; a plain name as is."""
    body = re.sub(r"^(?:regex|demangled|mangled):", "", pattern)
    if not pattern.startswith("regex:"):
        return body
    body = re.sub(r"\[[^\]]*\]|\{[^}]*\}|\\[A-Za-z]", " ", body)  # classes, counts, escapes such as \d
    pieces = re.split(r"(?<!\\)[.*+?^$()|\s]+", body)
    return max((re.sub(r"\\(.)", r"\1", p) for p in pieces), key=len)  # an escaped mark is itself
