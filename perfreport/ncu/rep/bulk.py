"""Read the metric runs of a report's kernels in bulk: a kernel launched again writes the same metric list.

Every result (profiled launch) holds its metrics as one contiguous run of entries (tag, length, NameId, value,
instance values). The first launch of each kernel (and a kernel launched once) is walked by a loop that steps by
entry lengths only; its NameIds are decoded at once (_walk). Launches of the same kernel in one report write the
same metrics in the same order with the same entry lengths (ncu 2025.3.1; values change, sizes do not: the
many-launch H200 reports in tests/data hold to it, docs/ncu_rep.md). So the first launch becomes a template: where
each entry's header bytes lie and what they are, and the same for the fields after the run up to the first rule result
(_tail: keys and lengths whole, varints by their high bits, section identifiers whole). Every later launch of that
kernel is checked against it with numpy: all those bytes equal. That proves the entries and fields lie where the
template says (each header fixes where the next starts), so the wanted values are decoded at those places, for
all launches of the kernel together (_values), and the launch's walk resumes at its first rule result. A launch
that differs anywhere is walked entry by entry instead (wire). The result is exactly the walk's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfreport.ncu.rep.proto import (
    I64,
    ID_TAG,
    LEN,
    METRIC_TAG,
    RESULT_DEMANGLED_NAME,
    RESULT_FUNCTION_NAME,
    RESULT_MANGLED_NAME,
    RESULT_METRICS,
    RESULT_RULES,
    RESULT_SECTIONS,
    VALUE_DOUBLE,
    VALUE_STRING,
    VALUE_TAG,
    VALUE_UINT32,
    VALUE_UINT64,
    VARINT,
    ReportBytes,
    UnknownLayout,
    field_text,
    first_string,
    key,
    metric_value,
    read_varint,
    skip_field,
)

_NAME_TAGS = {key(RESULT_MANGLED_NAME, LEN): 0, key(RESULT_FUNCTION_NAME, LEN): 1, key(RESULT_DEMANGLED_NAME, LEN): 2}
# fields the per-launch walk reads itself, so the tail compared in bulk stops at them
_OWN_FIELDS = (RESULT_MANGLED_NAME, RESULT_FUNCTION_NAME, RESULT_DEMANGLED_NAME, RESULT_METRICS, RESULT_RULES)


def prefix(b: ReportBytes, p: int, end: int) -> tuple[int | None, tuple[bytes, bytes, bytes]]:
    """Where the result b[p:end]'s first metric entry starts (None: it has none), and the bytes of its names
    before that (as launched, function, demangled)."""
    names = [b"", b"", b""]
    while p < end:
        tag = b[p]
        if tag == METRIC_TAG:
            break
        if tag >= 0x80 or tag & 7 != LEN:  # fields 1-11 come first: one-byte keys
            tag, p = read_varint(b, p)
            p = skip_field(b, p, tag)
            continue
        n, p = read_varint(b, p + 1)
        at = _NAME_TAGS.get(tag)
        if at is not None:
            names[at] = b[p : p + n]
        p += n
    return (p if p < end else None), (names[0], names[1], names[2])


@dataclass(slots=True)
class Run:
    """A result's contiguous metric entries b[start:stop] and the wanted values among them."""

    start: int
    stop: int
    values: dict[str, float | int | str]
    names: tuple[bytes, bytes, bytes]  # the result's fields 5, 6, 7 (prefix): read before the run
    resume: int  # where the walk of the result's other fields goes on (`stop`, or past the fields checked)
    sections: tuple[str, ...] = ()  # the section identifiers of the fields between `stop` and `resume`
    shape: Shape | None = None  # shared by the runs whose values hold the same names, in order, of the same types


class Shape:
    """What the values of some runs share: the same names in the same order, each of the same type (compared by
    identity: rep._launch works out once per Shape which values are numbers or text)."""


@dataclass
class _Template:
    """The first launch of a kernel: its run's header bytes and where its wanted entries lie (run-relative)."""

    head_at: np.ndarray  # offsets of every entry's header bytes
    head: np.ndarray  # those bytes
    length: int  # the run's length
    value_at: np.ndarray  # offset of each wanted entry's value field (its tag)
    stop: np.ndarray  # offset of each wanted entry's end
    nid: np.ndarray  # its NameId
    resume: int  # where the walk goes on: the run's end, or past the tail's fields compared (the bytes to hold)
    mask: np.ndarray | None = None  # per byte of `head`: 0xFF compared whole, 0x80 only whether a varint goes on
    sections: tuple[str, ...] = ()  # the identifiers of the sections before `resume`


@dataclass
class _Tail:
    """The fields right after a kernel's first run, up to its first rule result: the bytes that fix where each
    field lies and the section identifiers (varint values only by whether they go on), run-stop-relative."""

    at: list[int]
    mask: list[int]
    resume: int
    sections: tuple[str, ...]


def _tail(b: ReportBytes, stop: int, end: int) -> _Tail | None:
    """The fields of the result b[.., end) from its run's end `stop`, up to the first rule result (field 19) or
    anything the per-launch walk must read itself (names, a metric entry, an unknown wire type). Their values
    change from launch to launch (a varint's bytes, a message's content) but not where they lie: the keys and
    lengths are compared whole, a varint's bytes only by their high bit, a section's identifier whole."""
    at: list[int] = []
    mask: list[int] = []
    sections: list[str] = []

    def keep(lo: int, hi: int, m: int) -> None:
        at.extend(range(lo - stop, hi - stop))
        mask.extend([m] * (hi - lo))

    p = stop
    while p < end:
        tag, q = read_varint(b, p)
        field, wire = tag >> 3, tag & 7
        if field in _OWN_FIELDS or (wire != VARINT and wire != LEN):
            break
        keep(p, q, 0xFF)
        if wire == VARINT:
            r = q
            while b[r] >= 0x80:
                r += 1
            keep(q, r + 1, 0x80)
            p = r + 1
            continue
        n, r = read_varint(b, q)
        keep(q, r, 0xFF)
        if field == RESULT_SECTIONS:  # a section: its identifier (field 1, first), compared whole
            ident = first_string(b, r, r + n)
            if ident is None:
                return None  # the walk says what is wrong
            keep(r, ident[1], 0xFF)
            sections.append(field_text(b, ident))
        p = r + n
    if p > end:
        return None
    return _Tail(at, mask, p - stop, tuple(sections))


@dataclass
class _Walk:
    """A result's metric run found in bulk: every entry's header, and the wanted entries (absolute offsets)."""

    stop: int  # where the run ends
    at: np.ndarray  # each entry's start
    size: np.ndarray  # its header length (tag, length varint, NameId tag and varint)
    value_at: np.ndarray  # each wanted entry's value field (its tag: right after the header)
    end: np.ndarray  # its end
    nid: np.ndarray  # its NameId


def _varints(u: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints at byte offsets `at` read as 1 to 3 bytes: (values, lengths); length 4: a longer one."""
    b0, b1, b2 = (u[at + k].astype(np.int64) for k in range(3))
    two, three, more = b0 >= 0x80, (b0 >= 0x80) & (b1 >= 0x80), (b0 >= 0x80) & (b1 >= 0x80) & (b2 >= 0x80)
    value = np.where(two, (b0 & 0x7F) | ((b1 & 0x7F) << 7), b0) | np.where(three, (b2 & 0x7F) << 14, 0)
    return value, 1 + two + three + more


def _walk(b: ReportBytes, u: np.ndarray, start: int, end: int, wanted: np.ndarray) -> _Walk | None:
    """The metric run starting at `start` (a metric entry) of the result ending at `end`; `wanted`: which NameIds
    are wanted (wanted_table). None: a NameId longer than 3 bytes, or the layout breaks; the entry-by-entry walk
    (wire._metrics) reads the run then, or says what is wrong.

    The loop only steps from entry to entry by their lengths (a full-set kernel: ~2,250 entries in 1.6 MB);
    every entry's NameId is then decoded at once, and the wanted ones picked out.
    """
    at: list[int] = []
    keep_at = at.append
    p = start
    while p < end and b[p] == METRIC_TAG:
        keep_at(p)
        n = b[p + 1]
        if n < 0x80:
            p += 2 + n
        else:
            c = b[p + 2]
            if c < 0x80:
                p += 3 + ((n & 0x7F) | c << 7)
            else:
                n, q = read_varint(b, p + 1)
                p = q + n
    if p > end:
        return None
    first = np.array(at, dtype=np.int64)
    _, ll = _varints(u, first + 1)
    idp = first + 1 + ll
    ident, nl = _varints(u, idp + 1)
    if (nl > 3).any() or (u[idp] != ID_TAG).any():
        return None
    keep = wanted[np.minimum(ident, wanted.size - 1)] & (ident < wanted.size)
    ends = np.append(first[1:], p)
    value_at = idp + 1 + nl
    return _Walk(p, first, value_at - first, value_at[keep], ends[keep], ident[keep])


def wanted_table(wanted: dict[int, str]) -> np.ndarray:
    """NameId -> whether it is wanted, as a boolean table (NameIds past its end are not)."""
    table = np.zeros(max(wanted, default=0) + 1, dtype=bool)
    table[list(wanted)] = True
    return table


def _template(u: np.ndarray, w: _Walk, tail: _Tail | None = None) -> _Template:
    """A kernel's first launch, walked (`w`), as the template its later launches are checked against; `tail`: the
    fields after its run, compared too (then a launch that matches resumes its walk after them)."""
    start = int(w.at[0])
    first, sizes = w.at - start, w.size
    inside = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    head_at = np.repeat(first, sizes) + inside
    length = w.stop - start
    if tail is None:
        return _Template(head_at, u[start + head_at], length, w.value_at - start, w.end - start, w.nid, length)
    head_at = np.concatenate([head_at, length + np.array(tail.at, dtype=np.int64)])
    mask = np.concatenate([np.full(head_at.size - len(tail.mask), 0xFF, dtype=np.uint8),
                           np.array(tail.mask, dtype=np.uint8)])
    return _Template(head_at, u[start + head_at] & mask, length, w.value_at - start, w.end - start, w.nid,
                     length + tail.resume, mask, tail.sections)


def _matches(u: np.ndarray, t: _Template, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which of the runs starting at `starts` (results ending at `ends`) are laid out exactly as `t`."""
    stop = starts + t.length
    ok = stop <= ends
    ok[ok] = (stop[ok] == ends[ok]) | (u[np.minimum(stop[ok], u.size - 1)] != METRIC_TAG)
    ok &= starts + t.resume <= ends
    at, head, span, mask = t.head_at, t.head.tobytes(), t.resume, t.mask
    got = np.empty(at.size, dtype=np.uint8)
    for i in np.flatnonzero(ok).tolist():  # one gather per launch from a view of its run: no index array to build
        s = int(starts[i])
        u[s : s + span].take(at, out=got, mode="clip")  # every offset < span, and the view is span long
        if mask is not None:
            np.bitwise_and(got, mask, out=got)
        ok[i] = got.tobytes() == head
    return ok


def read_runs(b: ReportBytes, results: list[tuple[int, int]], wanted: dict[int, str]) -> list[Run | None]:
    """The metric run of every result, found in bulk (None: walk it yourself, entry by entry).

    A kernel's first launch is walked in bulk (_walk); its later launches are checked against it (_template).
    """
    u = np.frombuffer(b, dtype=np.uint8)
    starts = np.zeros(len(results), dtype=np.int64)
    launches: dict[bytes, list[int]] = {}
    names: list[tuple[bytes, bytes, bytes]] = []
    for i, (s, e) in enumerate(results):
        start, result_names = prefix(b, s, e)
        names.append(result_names)
        if start is not None:
            starts[i] = start
            launches.setdefault(result_names[0], []).append(i)  # by the name as launched
    runs: list[Run | None] = [None] * len(results)
    ends = np.array([e for _, e in results], dtype=np.int64)
    ids = wanted_table(wanted)
    try:
        for rows in launches.values():
            first = rows[0]
            w = _walk(b, u, int(starts[first]), results[first][1], ids)
            if w is None:
                continue  # the entry-by-entry walk reads this kernel's launches (or says what is wrong)
            if len(rows) == 1:
                runs[first] = Run(int(starts[first]), w.stop, {}, names[first], w.stop)
                _values(b, u, [first], np.zeros(1, dtype=np.int64), w.value_at, w.end, w.nid, wanted, runs)
                continue
            t = _template(u, w, _tail(b, w.stop, results[first][1]))
            idx = np.array(rows, dtype=np.int64)
            ok = idx[_matches(u, t, starts[idx], ends[idx])]  # the first launch matches itself
            for i in ok.tolist():
                s = int(starts[i])
                runs[i] = Run(s, s + t.length, {}, names[i], s + t.resume, t.sections)
            if ok.size:
                _values(b, u, ok.tolist(), starts[ok], t.value_at, t.stop, t.nid, wanted, runs)
    except IndexError as exc:
        raise UnknownLayout(f"a metric value points past the file ({exc})") from exc
    return runs


_DOUBLE_TAG, _STRING_TAG = key(VALUE_DOUBLE, I64), key(VALUE_STRING, LEN)  # a MetricValue's first key
_UINT32_TAG, _UINT64_TAG = key(VALUE_UINT32, VARINT), key(VALUE_UINT64, VARINT)
_DOUBLE, _VARINT, _TEXT, _OTHER = range(4)  # how a value is stored: its MetricValue is exactly one double, one
# varint (uint32/uint64) of at most 127 bytes, one string of at most 127 bytes; or anything else


def _values(b: ReportBytes, u: np.ndarray, rows: list[int], base: np.ndarray, value_at: np.ndarray,
            stop: np.ndarray, nid: np.ndarray, wanted: dict[int, str], runs: list[Run | None]) -> None:
    """Decode the wanted values of the launches `rows`, laid out alike: each launch's wanted entries have their
    value field at `base` plus `value_at` (when the entry holds one), end at `base` plus `stop`, and hold the
    NameIds `nid`. As wire decodes.

    Each kind of value (_DOUBLE, ...) is decoded in one gather for all launches; where every launch stores an
    entry the same way (the rule: they repeat their kernel's layout), the names are listed once and each launch
    gets its values by one dict update per kind, else entry by entry.
    """
    if not nid.size:
        return
    q = base[:, None] + value_at  # (launches, entries): the value field's tag, when the entry has one
    has = q < base[:, None] + stop
    has[has] = u[q[has]] == VALUE_TAG
    vlen, tag, third = u[q + 1], u[q + 2], u[q + 3]
    kind = np.full(q.shape, _OTHER, dtype=np.int8)
    kind[(vlen == 9) & (tag == _DOUBLE_TAG)] = _DOUBLE
    kind[(vlen >= 2) & (vlen < 0x80) & ((tag == _UINT32_TAG) | (tag == _UINT64_TAG))] = _VARINT
    kind[(vlen >= 2) & (vlen < 0x80) & (tag == _STRING_TAG) & (third == vlen - 2)] = _TEXT
    kind[~has] = -1  # no value: nothing stored
    varint = kind == _VARINT
    ints = np.zeros(q.shape, dtype=np.uint64)
    ints[varint], size = _uvarints(u, q[varint] + 3)
    # a varint that does not end inside its value message: the plain decoder (which says what is wrong)
    kind[varint] = np.where(size <= vlen[varint] - 1, _VARINT, _OTHER)
    if not (kind == kind[0]).all():
        for r, row in enumerate(rows):
            _each(b, runs[row], q[r, kind[r] >= 0], nid[kind[r] >= 0], wanted)
        return
    first = kind[0]
    cols_d, cols_v = np.flatnonzero(first == _DOUBLE), np.flatnonzero(first == _VARINT)
    cols_t, cols_x = np.flatnonzero(first == _TEXT), np.flatnonzero(first == _OTHER)
    names_dv = [wanted[i] for i in nid[np.concatenate([cols_d, cols_v])].tolist()]  # the doubles, then the varints
    names_t = [wanted[i] for i in nid[cols_t].tolist()]
    doubles = (u[(q[:, cols_d] + 3)[..., None] + np.arange(8)].copy().view("<f8")
               .reshape(len(rows), cols_d.size).tolist())
    varints = ints[:, cols_v].tolist()
    texts = (q[:, cols_t] + 4).tolist()  # where each string's bytes start; its length is the byte before
    shape = Shape() if not cols_x.size else None  # a value decoded by itself may be of any type
    for r, row in enumerate(rows):
        run = runs[row]
        assert run is not None
        run.shape = shape
        run.values.update(zip(names_dv, doubles[r] + varints[r], strict=True))
        for name, at in zip(names_t, texts[r], strict=True):
            run.values[name] = b[at : at + b[at - 1]].decode("utf-8", "replace")  # as field_text decodes
        if cols_x.size:
            _each(b, run, q[r, cols_x], nid[cols_x], wanted)


def _each(b: ReportBytes, run: Run | None, q: np.ndarray, nid: np.ndarray, wanted: dict[int, str]) -> None:
    """Values of one launch decoded one by one, by the plain decoder (value field tags at `q`)."""
    assert run is not None
    for at, ident in zip(q.tolist(), nid.tolist(), strict=True):
        vn, vp = read_varint(b, at + 1)
        value = metric_value(b, vp, vp + vn)
        if value is not None:
            run.values[wanted[ident]] = value


def _uvarints(u: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode unsigned varints at byte offsets `at`, exactly: (values as uint64, lengths; 11: longer than 10)."""
    value = np.zeros(at.size, dtype=np.uint64)
    size = np.full(at.size, 11, dtype=np.int64)
    going = np.ones(at.size, dtype=bool)
    for i in range(10):
        c = u[at + i].astype(np.uint64)
        value |= np.where(going, (c & np.uint64(0x7F)) << np.uint64(7 * i), np.uint64(0))
        size[going & (c < 0x80)] = i + 1
        going &= c >= 0x80
        if not going.any():
            break
    return value, size
