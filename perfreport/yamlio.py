"""The YAML loader for files we parse on every import: PyYAML's safe loader, on libyaml when PyYAML has it.

`CSafeLoader` is the same safe constructor and resolver with libyaml's C scanner and parser: the same documents,
types and error classes, an order of magnitude faster on the files every import reads (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def error_place(exc: yaml.YAMLError) -> str | None:
    """'line L, column C' of a YAML error (1-based), or None when PyYAML gives no mark."""
    mark = getattr(exc, "problem_mark", None)
    return None if mark is None else f"line {mark.line + 1}, column {mark.column + 1}"


class UniqueKeyLoader(SAFE_LOADER):
    """SAFE_LOADER refusing a key given twice in one mapping (`hardware:` twice: PyYAML keeps the last, silently);
    keys merged in with `<<` may repeat, as YAML allows."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given at line {first}); each key once: keep one",
                    key_node.start_mark)
        return super().construct_mapping(node, deep=deep)
