"""Compare one kernel metric across cells whose descriptors match but for one varied field.

Cells that differ in any other descriptor field are never compared: they are listed as not comparable,
with the fields that differ from their nearest cell named. Kernels of the compared cells are paired by the kernel
contract's identity (kernel_identity.simplify of the name, then the launch configuration: pair_kernels), never by
their place in a cell's list nor by the section set that captured them: a kernel captured with --set full in one cell
and --set basic in another is one row. A kernel only some cells ran is `added` or `removed`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from perfreport.config.context import CONTEXT_FIELDS
from perfreport.errors import PerfReportError
from perfreport.kernels.identity import simplify
from perfreport.kernels.labels import kernel_labels
from perfreport.lake.history import tables_as_of
from perfreport.lake.iceberg import open_lake
from perfreport.lake.rows import DESCRIPTOR, KERNEL_MEASURES
from perfreport.ncu.catalog.sets import section_table
from perfreport.warehouse.gather import compare_samples

KEY_COLUMNS = ("kernel", "set", "change")  # then one column per compared cell
METRICS = tuple(n for n, t in KERNEL_MEASURES if pa.types.is_integer(t) or pa.types.is_floating(t))
FIELDS = tuple(n for n, _ in DESCRIPTOR)
TRIAL_COLUMNS = ("metric", "before", "after", "n_before", "n_after", "ratio", "ci_low", "ci_high", "p_value",
                 "verdict")


@dataclass
class Group:
    """Cells equal in every descriptor field but the varied one: one row per kernel (KEY_COLUMNS: label, the section
    set of each cell's row (set_column), paired/added/removed), then one column per cell (None where it did not run
    it)."""

    cells: list[tuple[str, str, Any]]  # (campaign, cell_id, varied value), sorted by value
    columns: list[str]
    rows: list[tuple[Any, ...]]
    trials: list[tuple[Any, ...]] = field(default_factory=list)  # TRIAL_COLUMNS: each cell's trials vs the first's


@dataclass
class CompareResult:
    """Comparable groups and the cells that could not be compared (with the mismatching fields)."""

    metric: str
    vary: str
    groups: list[Group] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # which section set's rows a cell captured in several gave


# --vary's one spelling: section.field, as config.yaml's context and the site's comparison pages write a field.
SPELLINGS = tuple(f"{section}.{name}" for section, names in CONTEXT_FIELDS.items() for name in names)


def _field(vary: str) -> str:
    """The lake column that --vary (section.field) names; a bare field name is refused with its one spelling."""
    if vary in SPELLINGS:
        return vary.rpartition(".")[2]
    spelled = [s for s in SPELLINGS if s.rpartition(".")[2] == vary]
    if spelled:
        raise PerfReportError(f"lake compare --vary {vary!r}: expected section.field (the one spelling, as in "
                              f"config.yaml's context and the site), got the bare field name. Use --vary {spelled[0]}")
    raise PerfReportError(f"lake compare --vary {vary!r}: not a descriptor field; expected section.field, one of "
                          f"{', '.join(SPELLINGS)}. Example: --vary workload.concurrency")


def _label(value: Any) -> str:
    return "null" if value is None else str(value)


Row = dict[str, Any]


def identity(k: Row) -> str:
    """A kernel row's identity, as the kernel contract keys it: its instantiation (kernel_identity.simplify of the
    name, the function where there is no name). The section set that captured it is no part of it."""
    return simplify(k["name"]) if k.get("name") else str(k.get("function") or "?")


def _set_rank(section_set: str | None) -> tuple[int, str]:
    """Largest set first (most sections in metrics.yaml's section_sets: full, detailed, roofline, basic), then by
    name; a set that table does not know, last."""
    sections = section_table().sets.get(section_set or "")
    return (-len(sections) if sections is not None else 1, section_set or "")


def one_set_each(rows: list[Row]) -> tuple[list[Row], list[tuple[str, list[str]]]]:
    """Keep, of a kernel one cell captured in several section sets, only the rows of its largest set (the one that
    measured the most); return the rows kept and, per kernel narrowed so, (the set kept, the sets left out)."""
    sets: dict[str, set[str | None]] = defaultdict(set)
    for k in rows:
        sets[identity(k)].add(k.get("section_set"))
    keep = {ident: min(found, key=_set_rank) for ident, found in sets.items()}
    kept = [k for k in rows if k.get("section_set") == keep[identity(k)]]
    narrowed = [(keep[i] or "?", sorted((s or "?" for s in found - {keep[i]}), key=_set_rank))
                for i, found in sets.items() if len(found) > 1]
    return kept, narrowed


def pair_kernels(cells: list[list[Row]]) -> list[list[Row | None]]:
    """Pair the kernel rows of several cells: one list per kernel, one slot per cell (None: the cell did not run it).

    Rows pair by identity at the same launch configuration (grid, block, work instance), wherever they sit in their
    cell's list and whichever section set captured them (a cell that captured a kernel in several gives its largest
    set's rows: one_set_each). Rows of an identity at a configuration only one cell has (the grid grew with the
    varied field) pair with the other cells' such rows of that identity in kernel_id order (source, first launch).
    """
    slots: dict[tuple[str, tuple[Any, ...], int], list[Row | None]] = {}
    for c, rows in enumerate(cells):
        seen: dict[tuple[str, tuple[Any, ...]], int] = defaultdict(int)
        for k in sorted(one_set_each(rows)[0], key=lambda k: k["kernel_id"]):
            key = (identity(k), (k.get("grid_size"), k.get("block_size"), k.get("instance")))
            seen[key] += 1
            slots.setdefault((*key, seen[key]), [None] * len(cells))[c] = k
    paired: list[list[Row | None]] = []
    alone: dict[str, list[list[Row]]] = {}
    for (ident, _, _), row in slots.items():
        present = [(c, k) for c, k in enumerate(row) if k is not None]
        if len(present) > 1:
            paired.append(row)
        else:
            alone.setdefault(ident, [[] for _ in cells])[present[0][0]].append(present[0][1])
    for per_cell in alone.values():
        for j in range(max(map(len, per_cell))):
            paired.append([ks[j] if j < len(ks) else None for ks in per_cell])
    return paired


def set_column(row: list[Row | None]) -> str:
    """The `set` of a paired kernel: the section set of its rows where the cells agree, else each cell's in column
    order (`full/basic`, `-` for a cell without the kernel)."""
    present = {k.get("section_set") or "?" for k in row if k is not None}
    if len(present) == 1:
        return present.pop()
    return "/".join("-" if k is None else (k.get("section_set") or "?") for k in row)


def _labels(paired: list[list[Row | None]]) -> list[str]:
    """Each paired kernel's label over the compared cells (kernels/labels.py, the comparison standing for one
    source): a cell's own where the cells ran the same instantiations, told apart across them where they did not."""
    reps = [(next(i for i, k in enumerate(row) if k is not None), next(k for k in row if k is not None))
            for row in paired]
    order = sorted(range(len(reps)), key=lambda i: (reps[i][0], reps[i][1]["kernel_id"]))
    first = {i: n for n, i in enumerate(order)}
    return kernel_labels([{"name": k.get("name") or k.get("function") or "?",
                           "function": k.get("function") or k.get("name") or "?",
                           "source": "compare", "launch_ids": [first[i]]}
                          for i, (_, k) in enumerate(reps)])


def _set_notes(who: str, rows: list[Row]) -> list[str]:
    """Say which section set's rows stand for the kernels a cell captured in several sets."""
    counts: dict[tuple[str, tuple[str, ...]], int] = defaultdict(int)
    for kept, left in one_set_each(rows)[1]:
        counts[(kept, tuple(left))] += 1
    return [f"{who}: {n} kernel(s) captured in both {kept} and {', '.join(left)}; compared from the {kept} rows "
            f"(the largest section set)" for (kept, left), n in sorted(counts.items())]


def _change(values: list[bool]) -> str:
    """paired: in every cell; added: not in the first (lowest value) cell; removed: in it, missing from a later one."""
    return "paired" if all(values) else "removed" if values[0] else "added"


def lake_compare(lake: str | Path | None, metric: str, campaign: str | None = None,
                 vary: str = "workload.concurrency") -> CompareResult:
    """Pair cells differing only in vary and tabulate metric per kernel (paired by identity), one column per value."""
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
    trials: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(dict)
    for t in arrow["trials"].to_pylist() if "trials" in arrow else []:
        trials[(t["campaign"], t["cell_id"])][t["metric"]] = t["values"]
    kernels: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for k in arrow["kernels"].to_pylist():
        kernels[(k["campaign"], k["cell_id"])].append(k)
    result = CompareResult(metric, vary)
    for members in sorted(buckets.values(), key=lambda m: min((c["campaign"], c["cell_id"]) for c in m)):
        if len({_label(c[name]) for c in members}) < 2:
            for c in members:
                result.not_comparable.append(_why_not(c, cells, others, name))
            continue
        members.sort(key=lambda c: (c[name] is None, _label(c[name]) if not isinstance(c[name], int | float)
                                    else f"{c[name]:020.6f}", c["campaign"], c["cell_id"]))
        labels = [_label(c[name]) for c in members]
        columns = [*KEY_COLUMNS] + [
            f"{name}={lab}" + (f" ({c['cell_id']})" if labels.count(lab) > 1 else "")
            for lab, c in zip(labels, members, strict=True)]
        cell_rows = [kernels[(c["campaign"], c["cell_id"])] for c in members]
        for c, rows_of in zip(members, cell_rows, strict=True):
            result.notes += _set_notes(f"{c['campaign']}/{c['cell_id']}", rows_of)
        paired = pair_kernels(cell_rows)
        rows = [(label, set_column(row), _change([k is not None for k in row]),
                 *(None if k is None else k[metric] for k in row))
                for label, row in zip(_labels(paired), paired, strict=True)]
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        result.groups.append(Group([(c["campaign"], c["cell_id"], c[name]) for c in members], columns, rows,
                                   _trial_rows(members, trials)))
    return result


def _trial_rows(members: list[dict[str, Any]], trials: dict[tuple[str, str], dict[str, list[float]]]
                ) -> list[tuple[Any, ...]]:
    """Each later cell's repeated numbers against the first cell's (gather.compare_samples: ratio of medians, its
    bootstrap CI, Mann-Whitney U p, faster / slower / no significant change / insufficient trials)."""
    first = members[0]
    base = trials.get((first["campaign"], first["cell_id"]), {})
    out = []
    for c in members[1:]:
        for metric, r in compare_samples(base, trials.get((c["campaign"], c["cell_id"]), {})):
            out.append((metric, f"{first['campaign']}/{first['cell_id']}", f"{c['campaign']}/{c['cell_id']}",
                        r.n_before, r.n_after, r.ratio, r.ci_low, r.ci_high, r.p_value, r.verdict))
    return out


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

