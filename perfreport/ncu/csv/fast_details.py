"""Fast path for a clean details page (``--page details``, long): the byte scan splits it, numpy groups its rows.

The page is mapped and scanned (scan.scan_fields) as two halves on two cores; the scan proves the bytes have
the form ncu writes (every field quoted, one record per line, ASCII, no CR or NUL) and, on the way, finds every
field: in that form its fields are csv.reader's. The columns derivation needs are gathered from those positions
as Arrow strings (`_Page`), never as 200,000 Python tuples: launches, sections and labels are numbered per
distinct string, a label is mapped to its metric once per (section, label, CC), and only the values of the rows
derivation reads are gathered and converted. A launch whose rows are all plain numbers in known units, each
metric once, gets its dicts filled in bulk; any other launch (text, missing or damaged values, unknown units, a
metric given twice) goes row by row through `_Reader.value`, in file order, so warnings, merges and errors are
the strict reader's. Returns None where the strict reader must decide.

The scan splits the page itself: it is faster than DuckDB's ``read_csv`` at the same split (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perfreport.errors import InputError
from perfreport.ncu.catalog.dimensions import unit_problem
from perfreport.ncu.catalog.sets import display_name, infer_section_set
from perfreport.ncu.csv.common import LONG_COLUMNS, RULE_COLUMNS, CsvTable, _parse_line
from perfreport.ncu.csv.convert import convert, scale
from perfreport.ncu.csv.details import _Reader, metric_key
from perfreport.ncu.csv.scan import Fields, scan_fields
from perfreport.ncu.model import Capture, KernelLaunch, Rule

_PLAIN, _SKIP, _SLOW = 0, 1, 2  # a value: converted in bulk; no value (the row is ignored); `_Reader.value` decides
_Launches = list[tuple[KernelLaunch, dict[str, float]]]


@dataclass
class _Rows:
    """Per data row: its launch, section, label and unit as codes into the distinct strings, in file order."""

    launch: np.ndarray
    section: np.ndarray
    sections: list[str]
    label: np.ndarray
    labels: list[str]  # stripped, as the strict reader keys them
    unit: np.ndarray
    units: list[str]  # stripped
    values: pa.Array


def read_details(path: Path, fh: BinaryIO, first: bytes, table: CsvTable, only: frozenset[str]) -> Capture | None:
    """Read a clean details page whose header line `first` was read from `fh`; None when not provably clean.

    `table` carries the header and its column roles; its digest and row lines are filled here. The file is
    mapped, not copied, and only until the columns are gathered; the launch lines are read with pread.
    """
    header = table.header
    col = {name: i for i, name in enumerate(header)}
    wanted = {c: col[c] for c in ("ID", *LONG_COLUMNS, *RULE_COLUMNS) if c in col}
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            gathered = _gather(path, fh.fileno(), header, wanted, pool)
            if gathered is None:
                return None
            counts, newlines, columns, is_rule = gathered
            digest = pool.submit(_sha256, fh.fileno(), os.fstat(fh.fileno()).st_size)  # beside the conversion
            table.row_lines = list(range(2, len(counts) + 1))
            capture = _capture(table, columns, is_rule, fh.fileno(), newlines, only)
            table.sha256 = capture.sha256 = digest.result()
            return capture
    except (OSError, ValueError, pa.ArrowException):
        return None  # empty, unreadable or not mappable: the strict reader reports or reads it
    except (InputError, ArithmeticError):
        return None  # a damaged cell or id: the strict reader reports it (or fails on it) its own way


_Gathered = tuple[np.ndarray, np.ndarray, dict[str, pa.Array], np.ndarray]


def _gather(path: Path, fd: int, header: list[str], wanted: dict[str, int], pool: ThreadPoolExecutor
            ) -> _Gathered | None:
    """Map and scan the page, gather the wanted columns, unmap: (field counts, newlines, columns, rule rows).

    The columns are every data row's ID, section, label, unit and value, and the rule columns of the rule rows
    (`is_rule`), half of them gathered on the pool's thread. None when the page is not provably clean.
    """
    with pa.memory_map(str(path), "r") as source:
        if source.size() != os.fstat(fd).st_size:
            return None  # not the file `fd` has open (replaced meanwhile)
        page = _scan_halves(source.read_buffer(), pool, wanted)
        _trim_heap()
        if page is None:
            return None  # CRLF, NUL, non-ASCII, or not in ncu's quoted form: the strict reader decides
        counts, rows = page.counts, page.counts[1:]
        if counts[0] != len(header) or not len(rows):
            return None
        if rows.min() <= wanted["Metric Value"] or rows.max() > len(header):
            return None  # a row cut before its value, or a row wider than the header
        is_rule = page.nonempty("Rule Name") if "Rule Name" in wanted else np.zeros(rows.size, dtype=bool)
        rule_rows = np.flatnonzero(is_rule)
        later = {c: pool.submit(page.column, c) for c in ("Section Name", "Metric Unit")}
        later.update({c: pool.submit(page.column, c, rule_rows) for c in RULE_COLUMNS if c in wanted})
        columns = {c: page.column(c) for c in ("ID", "Metric Name", "Metric Value")}
        columns.update({c: f.result() for c, f in later.items()})
        newlines = page.newlines
        del page  # the quote positions and the mapped file go here: the conversion holds only the columns
    return counts, newlines, columns, is_rule


SPLIT_MIN = 4 << 20  # a page this size or larger is scanned as two halves, one per core
# Arrow's default pool (mimalloc) commits ~33 MB at its first allocation; the few MB of columns here use malloc.
ARROW_POOL = pa.system_memory_pool()


def _trim_heap() -> None:
    """Give the scan's freed temporaries back to the OS (glibc keeps ~30 MB of them otherwise); elsewhere a no-op.

    The scan frees a 1 MB comparison array and its quote positions per chunk; glibc's adaptive mmap threshold
    serves those from the heap after the first, and interleaved with the kept positions they stay resident.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _indices(values: np.ndarray) -> pa.Array:
    """An Arrow index array over the integer array `values`, without a copy."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size, [None, pa.py_buffer(values)])


def _scan_halves(data: pa.Buffer, pool: ThreadPoolExecutor, wanted: dict[str, int]) -> _Page | None:
    """`scan_fields` of the whole page, run as two halves split after a newline (numpy releases the GIL).

    In ncu's form a newline always ends a record, so each half is a run of whole records and scans alone; a
    newline inside a quoted field leaves a quote unpaired in the first half, which then does not scan (None),
    as the whole file would not. Every chunk is also checked for bytes the strict reader must judge.
    """
    view = memoryview(data)  # pa.Buffer has the buffer protocol
    size = len(view)
    if size >= 1 << 31:
        return None  # quote positions are int32 (scan_fields)
    cut = _newline_after(view, size // 2) if size >= SPLIT_MIN else 0
    if cut <= 0 or cut >= size:
        whole = scan_fields(view, _ascii_only)
        return None if whole is None else _Page(data, whole[0], whole[1], [(whole[2], 0)], wanted)
    upper = pool.submit(scan_fields, view[cut:], _ascii_only)
    lower = scan_fields(view[:cut], _ascii_only)
    high = upper.result()
    if lower is None or high is None:
        return None
    (c0, n0, f0), (c1, n1, f1) = lower, high
    return _Page(data, np.concatenate((c0, c1)), np.concatenate((n0, n1 + cut)), [(f0, 0), (f1, cut)], wanted)


def _newline_after(view: memoryview, at: int) -> int:
    """Index just past the first newline at or after `at` (0 when there is none)."""
    tail = np.frombuffer(view, dtype=np.uint8, offset=at)
    hits = np.flatnonzero(tail[: 1 << 20] == 10)
    return at + int(hits[0]) + 1 if hits.size else 0


def _ascii_only(chunk: np.ndarray) -> bool:
    """A chunk the fast path may read: no CR, no NUL, nothing above 127 (else the strict reader judges it)."""
    return not (chunk.max(initial=0) > 127 or (chunk == 13).any() or (chunk == 0).any())


def _sha256(fd: int, size: int) -> str:
    """SHA-256 of the first `size` bytes of `fd` (the open file's length), read with pread in 1 MiB pieces.

    Runs on the pool's thread while this one converts the rows (hashlib and pread release the GIL).
    """
    hasher, chunk = hashlib.sha256(), 1 << 20
    for start in range(0, size, chunk):
        hasher.update(os.pread(fd, min(chunk, size - start), start))
    return hasher.hexdigest()


@dataclass
class _Page:
    """A scanned page: gathers the fields of a column as Arrow strings without a Python string per cell.

    A binary array over the mapped file whose values alternate between the field and the bytes up to the next
    row's field (its offsets rise through the file), then a take of every other value, copies only the fields.
    The page is ASCII (checked by the scan), so each field is valid UTF-8. The scan's quote positions stay in
    its parts (one per scanned half, with the half's first byte), never joined into one copy.
    """

    data: pa.Buffer
    counts: np.ndarray  # per record (the header first): its fields
    newlines: np.ndarray  # per record: where its newline is
    parts: list[tuple[Fields, int]]
    columns: dict[str, int]  # the wanted columns by name

    def spans(self, name: str, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of field `name` in every data row, or in `rows` (data-row indexes, rising), as int32."""
        column = self.columns[name]
        starts, ends, base = [], [], 0  # base: the records before this part
        for f, offset in self.parts:
            m = f.first.size
            if rows is None:  # data row r is record r + 1: this part's data rows, skipping the header record
                skip = 1 if base == 0 else 0
                local: slice | np.ndarray = slice(skip, m)
                records: slice | np.ndarray = slice(base + skip, base + m)
            else:
                records = rows[(rows + 1 >= base) & (rows + 1 < base + m)] + 1
                local = records - base
            start, end, missing = f.spans(column, local)
            start += offset
            end += offset
            line_end = self.newlines[records]  # a missing field: empty, at its row's newline
            np.copyto(start, line_end, casting="unsafe", where=missing)
            np.copyto(end, line_end, casting="unsafe", where=missing)
            starts.append(start)
            ends.append(end)
            base += m
        return np.concatenate(starts), np.concatenate(ends)

    def column(self, name: str, rows: np.ndarray | None = None) -> pa.Array:
        """Field `name` of every data row (or of `rows`) as a string array; missing or empty as ''."""
        start, end = self.spans(name, rows)
        n = start.size
        if not n:
            return pa.array([], type=pa.string())
        offsets = np.empty(2 * n + 1, dtype=np.int32)  # the page is under 2 GiB (_scan_halves)
        offsets[0:-1:2], offsets[1:-1:2], offsets[-1] = start, end, end[-1]
        del start, end
        spans = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(offsets), self.data])
        every_other = _indices(np.arange(0, 2 * n, 2, dtype=np.int32))
        return pc.take(spans, every_other, memory_pool=ARROW_POOL).view(pa.string())

    def nonempty(self, name: str) -> np.ndarray:
        """Per data row: whether field `name` holds any text."""
        start, end = self.spans(name)
        return end > start


def _capture(table: CsvTable, columns: dict[str, pa.Array], is_rule: np.ndarray, fd: int, newlines: np.ndarray,
             only: frozenset[str]) -> Capture:
    """The Capture of a gathered page: `columns` hold every row's fields, the rule columns the `is_rule` rows'."""
    reader = _Reader(table, only)
    launch_codes, _ = _encode(columns["ID"])
    launches = _launches(reader, fd, newlines, launch_codes)
    section, sections = _encode(columns["Section Name"])
    label, labels = _encode(columns["Metric Name"], strip=True)
    unit, units = _encode(columns["Metric Unit"], strip=True)
    rows = _Rows(launch_codes, section, sections, label, labels, unit, units, columns["Metric Value"])
    labeled = ~is_rule & np.array([bool(s) for s in labels], dtype=bool)[label]
    reader.sections = _sections(section, sections, is_rule, labeled)
    _rules(launches, columns, rows, np.flatnonzero(is_rule))
    kept, key_index, keys = _wanted_rows(rows, [la.cc for la, _ in launches], labeled, only)
    _values(reader, launches, rows, kept, key_index, keys)
    return Capture(
        source_path=str(table.path), source_format="csv-details", sha256=table.sha256, ncu_version=None,
        gpu=None, section_set=infer_section_set(displayed=reader.sections), sections=reader.sections,
        launches=[la for la, _ in launches], warnings=reader.warnings,
    )


def _encode(column: pa.Array, strip: bool = False) -> tuple[np.ndarray, list[str]]:
    """Number a column's distinct strings in order of first appearance; with `strip`, stripped strings."""
    encoded = pc.dictionary_encode(column, memory_pool=ARROW_POOL)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    names: list[str] = encoded.dictionary.to_pylist()
    if not strip:
        return codes, names
    index: dict[str, int] = {}
    renumber = np.array([index.setdefault(s.strip(), len(index)) for s in names] or [0], dtype=np.int64)
    return renumber[codes], list(index)


def _launches(reader: _Reader, fd: int, newlines: np.ndarray, codes: np.ndarray) -> _Launches:
    """Create the launches from their IDs' first rows, in order, as the strict reader does.

    The lines are read with pread, not through the mapping: a page fault there maps the pages around it too
    (fault-around), and one first line per launch across the file would map the whole file back in.
    """
    if not codes.size:
        return []
    seen = np.maximum.accumulate(codes)  # codes number the IDs in order of first appearance
    first = np.flatnonzero(np.concatenate(([True], seen[1:] > seen[:-1])))
    for k in first.tolist():  # data row k is the file line after newline k
        start, end = int(newlines[k]) + 1, int(newlines[k + 1])
        text = os.pread(fd, end - start, start).decode("utf-8", errors="replace")
        reader.launch_for(k, _parse_line(reader.table.path, k + 2, text))
    return list(reader.launches.values())


def _sections(sec_codes: np.ndarray, sec_names: list[str], is_rule: np.ndarray, labeled: np.ndarray) -> list[str]:
    """Sections in order of first mention: a rule row's section id by display name, a labeled row's as printed."""
    names = list(dict.fromkeys(sec_names + [display_name(s) for s in sec_names]))
    index = {name: i for i, name in enumerate(names)}
    as_printed = np.array([index[s] for s in sec_names], dtype=np.int64)
    displayed = np.array([index[display_name(s)] for s in sec_names], dtype=np.int64)
    seen = np.where(is_rule, displayed[sec_codes], np.where(labeled, as_printed[sec_codes], -1))
    seen = seen[seen >= 0]
    unique, first = np.unique(seen, return_index=True)
    return [names[i] for i in unique[np.argsort(first)].tolist() if names[i]]


def _rules(launches: _Launches, gathered: dict[str, pa.Array], rows: _Rows, where: np.ndarray) -> None:
    """Append the rule rows to their launches in file order, built as `_Reader.row` builds them.

    Rules repeat across launches (same section, rule and text): one immutable Rule per distinct row, shared.
    """
    if not where.size:
        return
    section = rows.section[where]
    # the row's codes in all six columns as one number, renumbered 0..n-1 after each column
    combined = np.unique(section, return_inverse=True)[1].ravel()
    columns: list[tuple[np.ndarray, list[str]]] = [(section, rows.sections)]
    for c in RULE_COLUMNS:
        if c in gathered:  # gathered for the rule rows only
            codes, names = _encode(gathered[c])
        else:
            codes, names = np.zeros(where.size, dtype=np.int64), [""]
        columns.append((codes, names))
        combined = np.unique(combined * len(names) + codes, return_inverse=True)[1].ravel()  # renumbered 0..n-1
    first = np.unique(combined, return_index=True)[1]  # the first row of each distinct rule, in code order
    shared = [Rule(*(names[codes[i]] for codes, names in columns)) for i in first.tolist()]
    built = [shared[i] for i in combined.tolist()]
    owner = rows.launch[where]
    starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))  # runs of one launch's rules
    for code, s, e in zip(owner[starts].tolist(), starts.tolist(), [*starts[1:].tolist(), where.size], strict=True):
        launches[code][0].rules.extend(built[s:e])


def _wanted_rows(rows: _Rows, launch_cc: list[str], labeled: np.ndarray, only: frozenset[str]
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Return the labeled rows whose metric key is in `only`, each one's index into the keys, and the keys.

    One metric_key call per distinct (section, label, launch CC).
    """
    cc_index: dict[str, int] = {}
    cc_of_launch = np.array([cc_index.setdefault(cc, len(cc_index)) for cc in launch_cc] or [0], dtype=np.int64)
    ccs = list(cc_index)
    n_label, n_cc = max(len(rows.labels), 1), max(len(ccs), 1)
    triple = (rows.section * n_label + rows.label) * n_cc + cc_of_launch[rows.launch]
    where = np.flatnonzero(labeled)
    unique, inverse = np.unique(triple[where], return_inverse=True)
    keys = [metric_key(rows.sections[t // (n_label * n_cc)], rows.labels[t // n_cc % n_label], ccs[t % n_cc])
            for t in unique.tolist()]
    hit = np.array([key in only for key in keys], dtype=bool)[inverse]
    return where[hit], inverse[hit], keys


def _values(reader: _Reader, launches: _Launches, rows: _Rows, kept: np.ndarray, key_index: np.ndarray,
            keys: list[str]) -> None:
    """Convert the kept rows: per distinct (unit, text) once; launches with only plain numbers in bulk."""
    _check_units(rows, kept, key_index, keys)
    text_codes, texts = _encode(pc.take(rows.values, _indices(kept), memory_pool=ARROW_POOL))
    n_text = max(len(texts), 1)
    pair = rows.unit[kept] * n_text + text_codes
    distinct, pair_of = np.unique(pair, return_inverse=True)
    numbers = [_number(rows.units[p // n_text], texts[p % n_text]) for p in distinct.tolist()]
    kind = np.array([n if isinstance(n, int) else _PLAIN for n in numbers] or [_PLAIN], dtype=np.int8)[pair_of]
    launch = rows.launch[kept]
    plain = kind == _PLAIN
    row_by_row = np.zeros(max(len(launches), 1), dtype=bool)
    row_by_row[launch[kind == _SLOW]] = True
    twice = np.sort(launch[plain] * max(len(keys), 1) + key_index[plain])
    row_by_row[twice[1:][twice[1:] == twice[:-1]] // max(len(keys), 1)] = True  # a metric given twice: merged
    slow = row_by_row[launch]
    for i in np.flatnonzero(slow).tolist():
        k = int(kept[i])
        la, precision = launches[launch[i]]
        number, key = numbers[pair_of[i]], keys[key_index[i]]
        if not isinstance(number, int) and key not in la.metrics:
            la.metrics[key], la.units[key], precision[key] = number
        else:  # text, no value, unknown unit, garbage, or a second row for the key: the strict code path
            where = (rows.sections[rows.section[k]], rows.labels[rows.label[k]])
            reader.value(k, la, precision, where, rows.units[rows.unit[k]], texts[text_codes[i]])
    _bulk(launches, launch, key_index, keys, numbers, pair_of, plain & ~slow)


def _check_units(rows: _Rows, kept: np.ndarray, key_index: np.ndarray, keys: list[str]) -> None:
    """Raise when a kept row's unit does not fit its metric's dimension (the strict reader then names the row)."""
    n_units = max(len(rows.units), 1)
    for pair in np.unique(key_index * n_units + rows.unit[kept]).tolist():
        unit = rows.units[pair % n_units]
        _, base, known = scale(unit)
        problem = unit_problem(keys[pair // n_units], unit, base if known else None)
        if problem:
            raise InputError(problem)


def _bulk(launches: _Launches, launch: np.ndarray, key_index: np.ndarray, keys: list[str],
          numbers: list[tuple[float, str, float] | int], pair_of: np.ndarray, use: np.ndarray) -> None:
    """Fill the dicts of launches whose rows are all plain and distinct: one update per dict, file order kept."""
    order = np.argsort(launch[use], kind="stable")
    by_launch, key_of, number_of = launch[use][order], key_index[use][order], pair_of[use][order]
    if not by_launch.size:
        return
    plain = [n if not isinstance(n, int) else (0.0, "", 0.0) for n in numbers]
    names = np.array(keys, dtype=object)[key_of].tolist()
    value = np.array([n[0] for n in plain], dtype=np.float64)[number_of].tolist()
    base = np.array([n[1] for n in plain], dtype=object)[number_of].tolist()
    tolerance = np.array([n[2] for n in plain], dtype=np.float64)[number_of].tolist()
    starts = np.flatnonzero(np.concatenate(([True], by_launch[1:] != by_launch[:-1])))
    ends = np.append(starts[1:], by_launch.size)
    for code, s, e in zip(by_launch[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        la, precision = launches[code]
        la.metrics.update(zip(names[s:e], value[s:e], strict=True))
        la.units.update(zip(names[s:e], base[s:e], strict=True))
        precision.update(zip(names[s:e], tolerance[s:e], strict=True))


def _number(unit: str, text: str) -> tuple[float, str, float] | int:
    """(value, base unit, tolerance) as `_Reader.value` computes them, else _SKIP (it ignores the row) or _SLOW."""
    factor, base, known = scale(unit)
    if not known:
        return _SLOW  # an unknown unit: `_Reader.value` warns
    try:
        converted = convert(text, factor)
    except ValueError:
        return _SLOW  # text, or garbage
    if converted is None:
        return _SKIP
    if not 0.0 <= converted[0] < math.inf:
        return _SLOW  # not finite, or negative: `_Reader.value` refuses it for a metric derivation reads
    return converted[0], base, converted[1]
