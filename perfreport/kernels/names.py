"""Kernel names: reduce a demangled signature to its function name."""

from __future__ import annotations

ANONYMOUS = "{anonymous}"


def anonymous_spelled_once(demangled: str) -> str:
    """The anonymous namespace spelled `{anonymous}` whatever tool wrote the name.

    It has three spellings: `(anonymous namespace)` (c++filt, nsys, kineto), `<unnamed>` (ncu_report) and `unnamed>`
    (ncu's CSV pages, which drop its '<': `void unnamed>::CatArrayBatchedCopy<unnamed>::OpaqueType<4>, ...>` is
    `void <unnamed>::CatArrayBatchedCopy<<unnamed>::OpaqueType<4>, ...>`). A name holds the CSV spelling when each
    `unnamed>` is one '>' too many; then a '<' before it is a template's own.
    """
    s = demangled.replace("(anonymous namespace)", ANONYMOUS)
    n = s.count("unnamed>")
    if n and s.count(">") - s.count("<") == n:
        return s.replace("unnamed>", ANONYMOUS)
    return s.replace("<unnamed>", ANONYMOUS)


def function_name(demangled: str) -> str:
    """`void at::native::foo<4, X<int>>(int, T)` -> `foo`; plain names pass through unchanged."""
    s = anonymous_spelled_once(demangled.strip())
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
    return name if name and name != ANONYMOUS else demangled
