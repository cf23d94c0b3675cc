"""Kernel labels: the one display name of a kernel row, on every page, table and view, in the import table and the lake.

A label is the kernel's function (`splitKreduce_kernel`) where the cell ran that function as one instantiation. Where
it ran several (the SiLU, mul and add `vectorized_elementwise_kernel`; CUTLASS's `Kernel<Gemm<...>>` and
`Kernel<B2bGemm<...>>`, thousands of characters each), the label is the function with the template arguments that
tell the instantiations apart and `…` for the rest: `Kernel<Gemm<…>>`, `vectorized_elementwise_kernel<…,
CUDAFunctor_add<BFloat16>,…>`. Rows of one source that still share a label (one instantiation at two launch
configurations, or launches that did different work, `instance`) get ` #1`, ` #2` by first launch. The instantiation
is kernel_identity.simplify's, so an instantiation has the same label in every source of its cell.

cells.merge_sources stores each row's `label` in ncu_kernels.json; everything that names a kernel reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from perfreport.kernels.identity import normalize, simplify

SHORT = 32  # a template argument this short is shown whole (`GemmShape<128,96,64>`, `CUDAFunctor_add<BFloat16>`)
LONGEST = 160  # a label that would be longer falls back to the function and ` #n`
ELIDED = "…"
_ROOT = re.compile(r"^(.*) \[([A-Za-z_]\w*)\]$")  # simplify's ` [cutlass]`: the kernel's outermost namespace
_OPEN, _CLOSE = "<({[", ">)}]"


@dataclass(frozen=True)
class _Node:
    """One (template) name: `head<args>tail`; args None when it has no template argument list."""

    text: str
    head: str
    args: tuple[_Node, ...] | None
    tail: str


def _parse(text: str) -> _Node:
    """Split a simplified name at its first top-level template argument list (nested ones recursively)."""
    start = _first_angle(text)
    if start < 0:
        return _Node(text, text, None, "")
    parts, end = _split_args(text, start + 1)
    if end < 0:  # unbalanced: keep it whole
        return _Node(text, text, None, "")
    return _Node(text, text[:start], tuple(_parse(p) for p in parts), text[end + 1:])


def _first_angle(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<" and depth == 0:
            return i
        if ch in "({[":
            depth += 1
        elif ch in ")}]" and depth:
            depth -= 1
    return -1


def _split_args(text: str, i: int) -> tuple[list[str], int]:
    """The comma-separated arguments from text[i] to the `>` that closes them, and that `>`'s index (-1: none)."""
    parts, depth, begin = [], 0, i
    for j in range(i, len(text)):
        ch = text[j]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                if ch != ">":
                    return [], -1
                parts.append(text[begin:j])
                return ([] if parts == [""] else parts), j
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:j])
            begin = j + 1
    return [], -1


def _tell_apart(nodes: Sequence[_Node]) -> list[str]:
    """Render each node so that different nodes read differently and equal ones alike, as briefly as that allows."""
    distinct = list(dict.fromkeys(nodes))
    heads = list(dict.fromkeys(n.head for n in distinct))
    shown: dict[_Node, str] = {}
    for head in heads:
        same = [n for n in distinct if n.head == head]
        deeper = _structural(same) if len(same) > 1 else {}
        for n in same:
            if len(n.text) <= SHORT:
                shown[n] = n.text
            else:
                shown[n] = deeper.get(n) or _short_head(head, [h for h in heads if h != head]) + _elided_rest(n)
    return [shown[n] for n in nodes]


def _elided_rest(n: _Node) -> str:
    args = "" if n.args is None else f"<{ELIDED}>" if n.args else "<>"
    return args + _elided_tail(n.tail)


def _elided_tail(tail: str) -> str:
    return "" if not tail else f"::{ELIDED}" if tail.startswith("::") else ELIDED


def _short_head(head: str, others: list[str]) -> str:
    """A long head cut to the scopes that tell it from the other heads (`silu_kernel::{lambda()#1}::...` ->
    `silu_kernel::…`)."""
    if len(head) <= SHORT or "::" not in head:
        return head
    scopes = head.split("::")
    for n in range(1, len(scopes)):
        prefix = scopes[:n]
        if all(o.split("::")[:n] != prefix for o in others):
            return "::".join(prefix) + f"::{ELIDED}"
    return head


_EMPTY = _Node("", "", None, "")


def _structural(group: Sequence[_Node]) -> dict[_Node, str]:
    """Distinct nodes of one head: the template arguments (leftmost first) and tail that tell them apart, shown;
    the others elided."""
    width = max(len(n.args or ()) for n in group)
    columns = [[(n.args or ())[p] if p < len(n.args or ()) else _EMPTY for n in group] for p in range(width)]
    classes = [list(range(len(group)))]  # nodes not told apart yet (partition refinement, linear per column)
    chosen: list[int] = []
    for p, column in enumerate(columns):
        finer: list[list[int]] = []
        for members in classes:
            by_value: dict[_Node, list[int]] = {}
            for i in members:
                by_value.setdefault(column[i], []).append(i)
            finer += by_value.values()
        if len(finer) > len(classes):
            chosen.append(p)
            classes = finer
    with_tail = any(len({group[i].tail for i in members}) > 1 for members in classes)
    shown = {p: _tell_apart(columns[p]) for p in chosen}
    out = {}
    for i, n in enumerate(group):
        parts: list[str] = []
        for p in range(len(n.args or ())):
            part = shown[p][i] if p in shown else ELIDED
            if not (part == ELIDED and parts and parts[-1] == ELIDED):
                parts.append(part)
        args = "" if n.args is None else "<" + ",".join(parts) + ">"
        out[n] = n.head + args + (n.tail if with_tail else _elided_tail(n.tail))
    return out


def _instantiation_bases(function: str, instantiations: list[str]) -> dict[str, str]:
    """Per instantiation of one function: the label part that tells it from the others (the function when none
    does within LONGEST characters)."""
    split = [_ROOT.match(i) for i in instantiations]
    bare = [m.group(1) if m else i for m, i in zip(split, instantiations, strict=True)]
    shown = _tell_apart([_parse(b) for b in bare])
    if len(set(shown)) < len(shown):  # alike but for the library (`flash::k<T>` and `flash2::k<T>`)
        shown = [s + (f" [{m.group(2)}]" if m else "") for s, m in zip(shown, split, strict=True)]
    if len(set(shown)) < len(shown) or max(map(len, shown)) > LONGEST:
        return dict.fromkeys(instantiations, function)  # mangled or unreadable names: ` #n` tells them apart
    return dict(zip(instantiations, shown, strict=True))


def name_bases(kernels: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Per (function, name) of one cell's kernels: its label without ` #n` (the function, or its instantiation's
    distinguishing part where the cell ran the function as several instantiations)."""
    pairs = set(kernels)
    instantiation = {name: simplify(name) for name in {n for _, n in pairs}}
    by_function: dict[str, set[str]] = {}
    for function, name in pairs:
        by_function.setdefault(function, set()).add(instantiation[name])
    bases = {f: _instantiation_bases(f, sorted(insts)) for f, insts in by_function.items() if len(insts) > 1}
    return {(f, n): bases[f][instantiation[n]] if f in bases else f for f, n in pairs}


def kernel_labels(kernels: Sequence[Mapping[str, Any]]) -> list[str]:
    """The label of every kernel row of one cell (all its sources), in row order.

    Rows need `name`, `function`, `source` and `launch_ids` (ncu_kernels.json's kernels[] entries): the base of
    name_bases, then ` #1`, ` #2` by first launch among the rows of one source that share it.
    """
    bases = name_bases((str(k["function"]), str(k["name"])) for k in kernels)
    labels = [bases[(str(k["function"]), str(k["name"]))] for k in kernels]
    shared: dict[tuple[str, str], list[int]] = {}
    for i, (k, base) in enumerate(zip(kernels, labels, strict=True)):
        shared.setdefault((str(k["source"]), base), []).append(i)
    for rows in shared.values():
        if len(rows) > 1:
            rows.sort(key=lambda i: (min(kernels[i]["launch_ids"]), i))
            for n, i in enumerate(rows, start=1):
                labels[i] = f"{labels[i]} #{n}"
    return labels


def shortened(label: str, width: int) -> str:
    """A label cut to width characters with `…`, its ` #n` kept (it is what tells two rows of one name apart)."""
    if len(label) <= width:
        return label
    base, sep, n = label.rpartition(" #")
    tail = sep + n if sep and n.isdigit() else ""
    base = base if tail else label
    return base[: max(width - len(tail) - 1, 1)] + ELIDED + tail


# A table cell shows at most this many characters of a kernel name (two lines of site.css's name column); the whole
# name stays in the cell's hover text and the downloads.
SHOWN = 80
# Template arguments that are TensorIterator plumbing (operand pointers, offset calculators, load/store casts): they
# never say which op an ATen kernel computes, so a shortened name drops them.
PLUMBING = frozenset({"array", "TrivialOffsetCalculator", "OffsetCalculator", "LoadWithCast", "StoreWithCast",
                      "LoadWithoutCast", "StoreWithoutCast"})


@lru_cache(maxsize=4096)  # a label is shown on several pages of a render
def short_name(name: str, width: int = SHOWN) -> str:
    """A kernel name or label as a table cell shows it: whole when it fits `width`; else the function and the
    leftmost template arguments that fit (namespaces, return type, parameters and plumbing dropped), ` #n` kept.

    `void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,
    std::array<char*, 3>>(int, ...)` -> `vectorized_elementwise_kernel<4,CUDAFunctor_add<BFloat16>,…>`.
    """
    if len(name) <= width:
        return name
    base, sep, n = name.rpartition(" #")
    tail = sep + n if sep and n.isdigit() else ""
    base = base if tail else name
    budget = max(width - len(tail), 8)
    if base.lstrip().startswith("_Z"):  # mangled: the function identifier is all a reader can use
        return shortened(normalize(base) + ELIDED, budget) + tail
    simple = simplify(base)
    if (root := _ROOT.match(simple)) is not None:  # the library suffix only ever tells two labels apart
        simple = root.group(1)
    return _fit(_parse(simple), budget) + tail


def _fit(node: _Node, budget: int, top: bool = True) -> str:
    """The node within budget characters: its head (scopes past the first elided), then its arguments left to right
    while they fit (a type repeating the one before elided), `…` for the rest. A flat name too long is cut in the
    middle (its end is often the tile shape); an argument with no room for its head is `…`."""
    head, tail = _short_head(node.head, []), _elided_tail(node.tail)
    if len(head) + (0 if node.args is None else 2 + len(tail)) > budget:
        return _middle_cut(head, budget) if top else ELIDED
    if node.args is None:
        return head
    parts: list[str] = []
    room = budget - len(head) - 2 - len(tail) - 2  # 2 kept for a `,…` that ends the list
    for i, arg in enumerate(node.args):
        comma = 1 if parts else 0
        skip = arg.head in PLUMBING or (i and arg == node.args[i - 1] and not arg.text.isdigit())  # a type again
        part = ELIDED if skip else arg.text if len(arg.text) <= SHORT else _fit(arg, room - comma, top=False)
        if part != ELIDED and comma + len(part) <= room:
            parts.append(part)
            room -= comma + len(part)
        elif parts and parts[-1] == ELIDED:
            if not skip:
                break
        else:
            parts.append(ELIDED)
            if not skip or comma + 1 > room:  # it did not fit (nor will those after it): the kept 2 pay for `…`
                break
            room -= comma + 1
    return head + "<" + ",".join(parts) + ">" + tail


def _middle_cut(text: str, width: int) -> str:
    keep = max(width - 1, 2)
    front = (keep + 1) // 2 + keep // 6
    return text[:front] + ELIDED + text[len(text) - (keep - front):]
