"""Read the metric values of a .ncu-rep straight from its bytes: the report's own protobuf layout, no decode.

A report (ncu 2025.3.1, file format version 7) is `NVR\\0`, a u32-sized file header, then blocks: a u32-sized
block header (1 NumSources, 2 NumResults, 3 session details, 4 string table, 5 PayloadSize; 7 and 9 count range
and graph results, which go to ncu_report) and a payload of
u32-sized entries, the sources first, then the results. A result (one profiled kernel) holds its names (5 name
as launched, 6 function, 7 demangled when it differs), its metrics (13, repeated: 1 NameId into the string table,
2 the value: 1 string, 2 float, 3 double, 4 uint32, 5 uint64), its sections (17: 1 identifier) and its rule
results (19, rules). The framing (file header, blocks, entries) is walked by walk; wire primitives and the
field numbers, those of NVIDIA's `extras/FileFormat/*.proto` shipped with Nsight Compute, are in proto.

ncu_report decodes every action in full (every metric's value and instance values, GIL held; docs/benchmarks.md
has its cost); this reader walks the metric list once, skips every metric it was not asked for without touching
its bytes, and stops there. Anything it does not recognise (another file format version, a value type it does
not know, a field where the layout says another) raises `UnknownLayout`, and the caller reads the report with
ncu_report instead: this reader is a shortcut, never a second opinion. Tests hold the two equal on every report
we have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from struct import error as struct_error

from perfreport.ncu.model import Rule
from perfreport.ncu.rep.bulk import Run, Shape, read_runs
from perfreport.ncu.rep.proto import (
    FILE_VERSION,
    I32,
    I64,
    ID_TAG,
    LEN,
    METRIC_TAG,
    RESULT_DEMANGLED_NAME,
    RESULT_FUNCTION_NAME,
    RESULT_MANGLED_NAME,
    RESULT_RULES,
    RESULT_SECTIONS,
    STRING_TABLE_STRINGS,
    VALUE_TAG,
    VARINT,
    Damaged,
    ReportBytes,
    Truncated,
    UnknownLayout,
    field_text,
    first_string,
    iter_fields,
    key,
    metric_value,
    read_varint,
    skip_field,
)
from perfreport.ncu.rep.rules import read_rules
from perfreport.ncu.rep.walk import blocks, entries, file_header

FILE_VERSIONS = frozenset({7})  # FileHeader.Version values this layout was read from (ncu 2025.3.1)
_SECTION_TAG = key(RESULT_SECTIONS, LEN)
_RULE_TAG = key(RESULT_RULES, LEN)
_NAME_TAG = key(RESULT_MANGLED_NAME, LEN)
_FUNCTION_TAG = key(RESULT_FUNCTION_NAME, LEN)
_DEMANGLED_TAG = key(RESULT_DEMANGLED_NAME, LEN)
_STRING_TAG = key(STRING_TABLE_STRINGS, LEN)


@dataclass(slots=True)
class Action:
    """What one profiled kernel holds, as ncu_report would return it."""

    name: str  # as launched (mangled when the compiler mangled it)
    function: str
    demangled: str
    values: dict[str, float | int | str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)  # ncu_report's unit per numeric value (filled by rep.py)
    rules: list[Rule] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    shape: Shape | None = field(default=None, compare=False)  # values laid out as other actions' (bulk)


def _metrics(b: ReportBytes, p: int, end: int, wanted: dict[int, str], out: dict[str, float | int | str]) -> int:
    """Walk the contiguous run of metric entries from p; decode the wanted ones; return where the run ends.

    The hot loop of the reader (a full-set kernel holds ~2,250 entries, we want ~90): one- and two-byte varints
    (entry lengths below 16 KB, NameIds below 16384) are decoded inline, longer ones by read_varint.
    """
    while p < end and b[p] == METRIC_TAG:
        n = b[p + 1]
        if n < 0x80:
            p += 2
        else:
            c = b[p + 2]
            if c < 0x80:
                n = (n & 0x7F) | c << 7
                p += 3
            else:
                n, p = read_varint(b, p + 1)
        if b[p] != ID_TAG:
            raise UnknownLayout(f"metric entry without its NameId first at byte {p}")
        nid = b[p + 1]
        if nid >= 0x80:
            c = b[p + 2]
            nid = (nid & 0x7F) | c << 7 if c < 0x80 else read_varint(b, p + 1)[0]
        name = wanted.get(nid)
        if name is not None:
            _, q = read_varint(b, p + 1)
            if q < p + n and b[q] == VALUE_TAG:
                vn, vp = read_varint(b, q + 1)
                value = metric_value(b, vp, vp + vn)
                if value is not None:
                    out[name] = value
        p += n
    if p > end:
        raise UnknownLayout(f"metric entry runs past its result at byte {end}")
    return p


def _result(b: ReportBytes, p: int, end: int, wanted: dict[int, str], walked: Run | None,
            rule_cache: dict[bytes, list[Rule]] | None, names: dict[tuple[bytes, bytes, bytes], tuple[str, ...]]
            ) -> Action:
    """One ProfileResult b[p:end]; `walked`: its metric run already read in bulk (bulk), skipped here.

    `names`: the names of walked results already decoded, by their bytes (the launches of a kernel repeat them).
    `rule_cache` None: the rule results are skipped by their lengths, not read. Rule results repeat across
    launches byte for byte (261 distinct of 1,050 in a 150-launch report): each is parsed once, by its bytes.
    """
    name = function = demangled = ""
    shape: Shape | None = None
    values: dict[str, float | int | str] = {}
    rules: list[Rule] = []
    sections: list[str] = []
    if walked is not None:  # the bulk read walked everything before the run (bulk.prefix) and the run itself
        decoded = names.get(walked.names)
        if decoded is None:
            decoded = names[walked.names] = tuple(x.decode("utf-8", "replace") for x in walked.names)
        name, function, demangled = decoded
        # the fields up to `resume` were checked against the kernel's first launch (bulk), or there are none
        values, p, shape, sections = walked.values, walked.resume, walked.shape, list(walked.sections)
    while p < end:
        tag = b[p]
        if tag == METRIC_TAG:  # (a second run: it adds values, so they no longer share the shape)
            p, shape = _metrics(b, p, end, wanted, values), None
            continue
        # keys of fields 1-15 are one byte, of 16-2047 two; they and the lengths are read inline, not by read_varint:
        # this loop walks every launch's rule results, where a call per field is a measurable cost (docs/benchmarks.md)
        if tag < 0x80:
            p += 1
        elif b[p + 1] < 0x80:
            tag = (tag & 0x7F) | b[p + 1] << 7
            p += 2
        else:
            tag, p = read_varint(b, p)
        wire = tag & 7
        if wire == LEN:
            n = b[p]
            if n < 0x80:
                p += 1
            elif b[p + 1] < 0x80:
                n = (n & 0x7F) | b[p + 1] << 7
                p += 2
            else:
                n, p = read_varint(b, p)
            start, p = p, p + n
            if tag == _RULE_TAG:
                if rule_cache is None:
                    continue
                raw = b[start:p]
                got = rule_cache.get(raw)
                if got is None:
                    got = rule_cache[raw] = []
                    read_rules(b, (start, p), got)
                rules.extend(got)
            elif tag == _SECTION_TAG:
                sections.append(_section_id(b, (start, p)))
            elif tag == _NAME_TAG:
                name = field_text(b, (start, p))
            elif tag == _FUNCTION_TAG:
                function = field_text(b, (start, p))
            elif tag == _DEMANGLED_TAG:
                demangled = field_text(b, (start, p))
        elif wire == VARINT:
            while b[p] >= 0x80:
                p += 1
            p += 1
        elif wire in (I64, I32):
            p += 8 if wire == I64 else 4
        else:
            raise UnknownLayout(f"wire type {wire} (result field {tag >> 3}) at byte {p}")
    if p != end:
        raise UnknownLayout(f"result ends at byte {p}, its size says {end}")
    return Action(name, function, demangled or name, values, {}, rules, sections, shape)


def _section_id(b: ReportBytes, span: tuple[int, int]) -> str:
    """A section's identifier: its field 1, written first (the rest is the section's layout, skipped)."""
    ident = first_string(b, *span)
    if ident is None:
        raise UnknownLayout(f"a section without its identifier first at byte {span[0]}")
    return field_text(b, ident)


@dataclass
class Report:
    """The kernels of a report and the bytes of its session records (ncu version, command line)."""

    actions: list[Action]
    sessions: list[bytes]


def read_report(b: ReportBytes, wanted_names: frozenset[str] | set[str], bulk: bool = True,
                rules: bool = True) -> Report:
    """Every profiled kernel of the report bytes `b`, in file order, with the values of `wanted_names`, and its
    rule results unless `rules` is False (each Action's rules then stay empty; the import writes none).

    `bulk` reads the metric runs of repeated kernels in bulk (bulk: checked against the first launch of
    the same kernel, byte for byte); without it every run is walked entry by entry. Both give the same Report.
    Raises Truncated when the file ends inside an entry, UnknownLayout for anything else it cannot read.
    """
    try:
        return _read_report(b, wanted_names, bulk, rules)
    except (IndexError, struct_error) as exc:  # a length or offset that points outside the file
        raise UnknownLayout(f"an entry points outside the file ({exc})") from exc


@dataclass
class Frame:
    """Where a report's results lie, the NameIds of the wanted metrics, and the session records' bytes."""

    results: list[tuple[int, int]]  # each ProfileResult's (start, end)
    wanted: dict[int, str]  # NameId -> metric name, for the wanted names the string tables hold
    sessions: list[bytes]


def _read_report(b: ReportBytes, wanted_names: frozenset[str] | set[str], bulk: bool, rules: bool) -> Report:
    f = frame(b, wanted_names)
    walked: list[Run | None] = [None] * len(f.results)
    if bulk and f.results:
        walked = read_runs(b, f.results, f.wanted)
    rule_cache: dict[bytes, list[Rule]] | None = {} if rules else None
    names: dict[tuple[bytes, bytes, bytes], tuple[str, ...]] = {}
    return Report([_result(b, s, e, f.wanted, w, rule_cache, names)
                   for (s, e), w in zip(f.results, walked, strict=True)], f.sessions)


def frame(b: ReportBytes, wanted_names: frozenset[str] | set[str]) -> Frame:
    """Walk the file header and every block (walk: its header, then its u32-sized entries), reading no result.

    Raises Truncated where the file ends inside the framing, Damaged where its sizes do not add up (in a file
    format version this reader knows: another version's framing is ncu_report's to read, UnknownLayout).
    """
    start, stop = file_header(b)
    if stop > len(b):
        raise Truncated(start, stop - start, 0)
    version = next((v for f, w, v in iter_fields(b, start, stop) if f == FILE_VERSION and w == VARINT), None)
    if version not in FILE_VERSIONS:
        raise UnknownLayout(f"file format version {version}, this reader knows {sorted(FILE_VERSIONS)}")
    try:
        return _frame(b, stop, wanted_names)
    except (IndexError, struct_error) as exc:  # a length in a string table that points outside the file
        raise Damaged(f"a string table points outside the file ({exc})") from exc


def _frame(b: ReportBytes, stop: int, wanted_names: frozenset[str] | set[str]) -> Frame:
    by_bytes = {name.encode(): name for name in wanted_names}
    n_strings = 0
    wanted: dict[int, str] = {}
    results: list[tuple[int, int]] = []
    sessions: list[bytes] = []
    for block in blocks(b, stop):
        if block.other is not None:  # range replay (7) or graph (9) results, which this reader does not decode
            raise UnknownLayout(f"block header field {block.other[0]} = {block.other[1]} (range or graph results, "
                                f"or another entry kind this reader does not decode)")
        for s, e in block.sessions:
            sessions.append(b[s:e])
        for table in block.string_tables:  # NameIds count on from the previous table's
            if table[0] != table[1]:
                n_strings = _strings(b, table, by_bytes, n_strings, wanted)
        spans = entries(b, block)
        results.extend(spans[block.sources :] if block.sources else spans)
    return Frame(results, wanted, sessions)


def _strings(b: ReportBytes, span: tuple[int, int], by_bytes: dict[bytes, str], n_strings: int,
             wanted: dict[int, str]) -> int:
    """Note the NameIds of the wanted names among the strings of the StringTable b[span] (the first is NameId
    `n_strings`); return the NameId after its last. Its keys and lengths are read inline (thousands of strings)."""
    r, stop = span
    while r < stop:
        k = b[r]
        if k != _STRING_TAG:
            k, r = read_varint(b, r)
            r = skip_field(b, r, k)
            continue
        m = b[r + 1]
        if m < 0x80:
            r += 2
        else:
            m, r = read_varint(b, r + 1)
        name = by_bytes.get(b[r : r + m])
        if name is not None:
            wanted[n_strings] = name
        n_strings += 1
        r += m
    if r != stop:
        raise Damaged(f"string table ends at byte {r}, its size says {stop}")
    return n_strings
