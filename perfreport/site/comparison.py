"""Which cells may be compared: those sharing every context descriptor field but the one being varied.

Cells are never compared silently across other differences: a cell in no comparable group is listed with its
nearest neighbour and every field where the two differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfreport.config.context import CONTEXT_FIELDS


@dataclass(frozen=True)
class Comparison:
    """Cells equal on every context field but `field`, which takes more than one value among them."""

    field: str
    cell_ids: tuple[str, ...]
    values: tuple[Any, ...]  # the varied field's value per cell, in cell_ids order
    slug: str  # page file stem, e.g. compare-workload.concurrency-1


@dataclass(frozen=True)
class Mismatch:
    """A cell in no comparable group (a), its nearest cell (b), and every field where they differ: (field, a, b)."""

    a: str
    b: str
    fields: tuple[tuple[str, Any, Any], ...]


def flatten(context: Mapping[str, Any]) -> dict[str, Any]:
    """Return every context descriptor field as `section.name` -> value (None when not filled), schema order."""
    out: dict[str, Any] = {}
    for section, fields in CONTEXT_FIELDS.items():
        values = context.get(section) or {}
        for name in fields:
            out[f"{section}.{name}"] = values.get(name)
    return out


def varying_fields(contexts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Context fields (flattened, schema order) whose value differs between the given effective contexts."""
    flats = [flatten(c) for c in contexts]
    if not flats:
        return []
    return [f for f in flats[0] if len({repr(fl[f]) for fl in flats}) > 1]


def context_line(context: Mapping[str, Any], fields: Sequence[str]) -> str:
    """A short `field=value, ...` line of the given fields of one effective context."""
    flat = flatten(context)
    return ", ".join(f"{f.split('.', 1)[1]}={flat[f]}" for f in fields)


def _key(v: Any) -> str:
    return repr(v)


def comparisons(contexts: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[list[Comparison], list[Mismatch]]:
    """Group cells (id, effective context) that differ in exactly one field; list the others' mismatches."""
    flat = {cid: flatten(ctx) for cid, ctx in sorted(contexts, key=lambda c: c[0])}
    ids = list(flat)
    fields = list(next(iter(flat.values()))) if flat else []
    groups: list[Comparison] = []
    grouped: set[str] = set()
    for f in fields:
        buckets: dict[tuple[str, ...], list[str]] = {}
        for cid in ids:
            rest = tuple(_key(v) for g, v in flat[cid].items() if g != f)
            buckets.setdefault(rest, []).append(cid)
        members = sorted((m for m in buckets.values() if len({_key(flat[c][f]) for c in m}) > 1),
                         key=lambda m: m[0])
        for n, m in enumerate(members, start=1):
            m.sort(key=lambda c: (_key(flat[c][f]), c))
            groups.append(Comparison(f, tuple(m), tuple(flat[c][f] for c in m), f"compare-{f}-{n}"))
            grouped.update(m)
    return groups, _mismatches(flat, [c for c in ids if c not in grouped])


def _mismatches(flat: Mapping[str, dict[str, Any]], loners: list[str]) -> list[Mismatch]:
    """Each cell in no group, with its nearest cell (fewest differing fields, then id) and those fields."""
    keys = {cid: [_key(v) for v in values.values()] for cid, values in flat.items()}
    names = {cid: list(values) for cid, values in flat.items()}
    seen: set[frozenset[str]] = set()
    out = []
    for a in loners:
        best: tuple[int, str] | None = None
        for b in flat:
            if b != a:
                n = sum(x != y for x, y in zip(keys[a], keys[b], strict=True))
                best = (n, b) if best is None or (n, b) < best else best
        if best is None or frozenset((a, best[1])) in seen:
            continue
        b = best[1]
        seen.add(frozenset((a, b)))
        diff = tuple((f, flat[a][f], flat[b][f]) for i, f in enumerate(names[a]) if keys[a][i] != keys[b][i])
        out.append(Mismatch(a, b, diff))
    return out
