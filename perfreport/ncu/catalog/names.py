"""Kernel names: reduce a demangled signature to its function name."""

from __future__ import annotations

import re

_ANONYMOUS = re.compile(r"\(anonymous namespace\)|<unnamed>|(?<![\w<])unnamed>")


def function_name(demangled: str) -> str:
    """`void at::native::foo<4, X<int>>(int, T)` -> `foo`; plain names pass through unchanged."""
    # the anonymous namespace has three spellings: `(anonymous namespace)`, `<unnamed>` (ncu_report) and
    # `unnamed>` (ncu's CSV pages drop the scope before it, `at::native::<`): its '>' would close a template
    s = _ANONYMOUS.sub("{anonymous}", demangled.strip())
    depth = 0
    cut = len(s)
    # drop the parameter list: the last top-level '(' (template args may contain parentheses)
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut]
    # drop template arguments
    out, depth = [], 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.split(" ")[-1] if " " in s else s  # return type
    name = s.split("::")[-1]
    return name if name and name != "{anonymous}" else demangled
