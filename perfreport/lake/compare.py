"""Compare one kernel metric across cells whose descriptors match but for one varied field.

Cells that differ in any other descriptor field are never compared: they are listed as not comparable,
with the fields that differ from their nearest cell named.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from perfreport.config.context import CONTEXT_FIELDS
from perfreport.errors import PerfReportError
from perfreport.lake.history import tables_as_of
from perfreport.lake.iceberg import open_lake
from perfreport.lake.rows import DESCRIPTOR, KERNEL_MEASURES

METRICS = tuple(n for n, t in KERNEL_MEASURES if pa.types.is_integer(t) or pa.types.is_floating(t))
FIELDS = tuple(n for n, _ in DESCRIPTOR)


@dataclass
class Group:
    """Cells equal in every descriptor field but the varied one: one column per cell, one row per kernel."""

    cells: list[tuple[str, str, Any]]  # (campaign, cell_id, varied value), sorted by value
    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass
class CompareResult:
    """Comparable groups and the cells that could not be compared (with the mismatching fields)."""

    metric: str
    vary: str
    groups: list[Group] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)


def _field(vary: str) -> str:
    section, _, name = vary.rpartition(".")
    if name in FIELDS and (not section or name in CONTEXT_FIELDS.get(section, {})):
        return name
    raise PerfReportError(f"lake compare --vary {vary!r}: not a descriptor field; expected one of "
                          f"{', '.join(FIELDS)} (optionally with its section). Example: --vary workload.concurrency")


def _label(value: Any) -> str:
    return "null" if value is None else str(value)


def _kernel_rows(kernels: list[dict[str, Any]], metric: str) -> dict[tuple[str, str, int], Any]:
    """Key each kernel by (function, section_set, n-th occurrence in kernel_id order)."""
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out = {}
    for k in sorted(kernels, key=lambda k: k["kernel_id"]):
        base = (k["function"] or k["name"] or "?", k["section_set"] or "?")
        seen[base] += 1
        out[(*base, seen[base])] = k[metric]
    return out


def lake_compare(lake: str | Path | None, metric: str, campaign: str | None = None,
                 vary: str = "concurrency") -> CompareResult:
    """Pair cells differing only in vary and tabulate metric per kernel function, one column per value."""
    if metric not in METRICS:
        raise PerfReportError(f"lake compare --metric {metric!r}: unknown metric; expected one of "
                              f"{', '.join(METRICS)}. Example: --metric sol_pct")
    name = _field(vary)
    where, catalog = open_lake(lake)
    arrow = tables_as_of(catalog, where, None)
    cells = [c for c in (arrow["cells"].to_pylist() if "cells" in arrow else [])
             if campaign is None or c["campaign"] == campaign]
    if not cells:
        raise PerfReportError(f"lake {str(where)!r}: no cells" + (f" of campaign {campaign!r}" if campaign else "")
                              + "; publish with `perftunereport publish_to_lake` or fix --campaign.")
    others = [f for f in FIELDS if f != name]
    buckets: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        buckets[tuple(c[f] for f in others)].append(c)
    kernels: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for k in arrow["kernels"].to_pylist():
        kernels[(k["campaign"], k["cell_id"])].append(k)
    result = CompareResult(metric, name)
    for members in sorted(buckets.values(), key=lambda m: min((c["campaign"], c["cell_id"]) for c in m)):
        if len({_label(c[name]) for c in members}) < 2:
            for c in members:
                result.not_comparable.append(_why_not(c, cells, others, name))
            continue
        members.sort(key=lambda c: (c[name] is None, _label(c[name]) if not isinstance(c[name], int | float)
                                    else f"{c[name]:020.6f}", c["campaign"], c["cell_id"]))
        labels = [_label(c[name]) for c in members]
        columns = ["function", "set", "n"] + [
            f"{name}={lab}" + (f" ({c['cell_id']})" if labels.count(lab) > 1 else "")
            for lab, c in zip(labels, members, strict=True)]
        per_cell = [_kernel_rows(kernels[(c["campaign"], c["cell_id"])], metric) for c in members]
        keys = sorted({k for p in per_cell for k in p})
        rows = [(*key, *(p.get(key) for p in per_cell)) for key in keys]
        result.groups.append(Group([(c["campaign"], c["cell_id"], c[name]) for c in members], columns, rows))
    return result


def _why_not(cell: dict[str, Any], cells: list[dict[str, Any]], others: list[str], name: str) -> str:
    """Name the fields (besides the varied one) in which cell differs from its nearest other cell."""
    who = f"{cell['campaign']}/{cell['cell_id']}"
    rest = [c for c in cells if c is not cell]
    if not rest:
        return f"{who}: the only cell; nothing to compare with"
    nearest = min(rest, key=lambda c: (sum(c[f] != cell[f] for f in others), c["campaign"], c["cell_id"]))
    diff = [f"{f} ({_label(cell[f])} vs {_label(nearest[f])})" for f in others if cell[f] != nearest[f]]
    if not diff:
        return f"{who}: same {name} ({_label(cell[name])}) as {nearest['campaign']}/{nearest['cell_id']}"
    return f"{who}: differs from {nearest['campaign']}/{nearest['cell_id']} in {', '.join(diff)}"

