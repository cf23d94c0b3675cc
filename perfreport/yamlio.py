"""The YAML loader for files we parse on every import: PyYAML's safe loader, on libyaml when PyYAML has it.

`CSafeLoader` is the same safe constructor and resolver with libyaml's C scanner and parser: the same documents,
types and error classes, an order of magnitude faster on the files every import reads (docs/benchmarks.md).
"""

from __future__ import annotations

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def error_place(exc: yaml.YAMLError) -> str | None:
    """'line L, column C' of a YAML error (1-based), or None when PyYAML gives no mark."""
    mark = getattr(exc, "problem_mark", None)
    return None if mark is None else f"line {mark.line + 1}, column {mark.column + 1}"
