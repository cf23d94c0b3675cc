"""Fast path for a clean details page (``--page details``, long): DuckDB splits it, numpy groups its rows.

DuckDB's ``read_csv`` (all columns VARCHAR, ``strict_mode``) splits the file on its threads while this thread
reads, hashes and scans the same bytes (csv_scan); the DuckDB result is used only when the scan proves the file
clean, so the split is csv.reader's. The rows come back as Arrow columns, never as 200,000 Python tuples:
launches, sections and labels are numbered per distinct string, a label is mapped to its metric once per
(section, label, CC), and only the rows whose metric derivation reads are converted. A launch whose rows are
all plain numbers in known units, each metric once, gets its dicts filled in bulk; any other launch (text,
missing or damaged values, unknown units, a metric given twice) goes row by row through `_Reader.value`, in file
order, so warnings, merges and errors are the strict reader's. Returns None where the strict reader must decide.
"""

from __future__ import annotations

import hashlib
import io
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perfreport.errors import InputError
from perfreport.ncu.csv_common import LONG_COLUMNS, RULE_COLUMNS, CsvTable, _parse_line
from perfreport.ncu.csv_details import SECTION_DISPLAY_NAMES, _Reader, infer_details_set, metric_key
from perfreport.ncu.csv_scan import scan_records
from perfreport.ncu.model import Capture, KernelLaunch, Rule
from perfreport.ncu.units import decimals, half_ulp, parse_number, rescale, unit_scale

DUCKDB_BUFFER = 4 << 20  # DuckDB's CSV buffer (default 32 MB): the same speed here, peak 116 -> 90 MB on 50 MB
_GLOB = frozenset("*?[]{}")  # DuckDB expands these in a path: such a file is handed over as bytes
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
    mapped, not copied: the hash, the scan and the launch lines read the page cache directly.
    """
    header = table.header
    col = {name: i for i, name in enumerate(header)}
    wanted = [c for c in ("ID", *LONG_COLUMNS, *RULE_COLUMNS) if c in col]
    source = str(path.absolute())
    with ThreadPoolExecutor(max_workers=1) as pool:
        split = None if _GLOB & set(source) else pool.submit(_split, source, len(header), col, wanted)
        try:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if split is None:
                    split = pool.submit(_split, io.BytesIO(data), len(header), col, wanted)
                try:
                    scanned = scan_records(data, _check_and_release(data))
                except _NotClean:
                    return None  # CRLF or binary: the strict reader handles (or rejects) it
                if scanned is None:
                    return None
                counts, newlines = scanned
                rows = counts[1:]
                if counts[0] != len(header) or not len(rows):
                    return None
                if rows.min() <= col["Metric Value"] or rows.max() > len(header):
                    return None  # a row cut before its value, or a row wider than the header
                tab = split.result()
                if tab.num_rows != len(rows):
                    return None
                digest = pool.submit(_sha256, fh.fileno(), len(data))  # on the idle core, beside the conversion
                table.row_lines = list(range(2, len(counts) + 1))
                capture = _capture(table, tab, fh.fileno(), newlines, only)
                table.sha256 = capture.sha256 = digest.result()
                return capture
        except (duckdb.Error, OSError, ValueError):
            return None  # ragged, not UTF-8, unreadable or not mappable: the strict reader reports or reads it
        except (InputError, ArithmeticError):
            return None  # a damaged cell or id: the strict reader reports it (or fails on it) its own way


class _NotClean(Exception):
    """A byte the strict reader must judge (``\\r``, NUL) was found in a chunk."""


def _check_and_release(data: mmap.mmap) -> Any:
    """Per scanned chunk: refuse CR and NUL bytes, and drop the mapped pages two chunks behind the scan.

    Read-only file pages come back from the page cache when touched again (the launches' first lines are), so
    only the resident set shrinks: the whole mapped file no longer counts in the import's peak (VmHWM).
    """
    page, released = mmap.PAGESIZE, 0

    def on_chunk(start: int, end: int) -> None:
        nonlocal released
        if data.find(b"\r", start, end) >= 0 or data.find(b"\x00", start, end) >= 0:
            raise _NotClean
        behind = (start - 2 * (end - start)) // page * page
        if behind > released:
            data.madvise(mmap.MADV_DONTNEED, released, behind - released)
            released = behind

    return on_chunk


def _sha256(fd: int, size: int) -> str:
    """SHA-256 of the first `size` bytes of `fd` (the mapped length), read with pread in 1 MiB pieces.

    Runs on the pool's thread while this one converts the rows (hashlib and pread release the GIL), and reads
    through the page cache, not the mapping, so the file's pages never count in the import's resident set.
    """
    hasher, chunk = hashlib.sha256(), 1 << 20
    for start in range(0, size, chunk):
        hasher.update(os.pread(fd, min(chunk, size - start), start))
    return hasher.hexdigest()


def _split(source: str | BinaryIO, width: int, col: dict[str, int], wanted: list[str]) -> pa.Table:
    """The wanted columns of every data row as Arrow strings, a missing or unquoted empty field as ''."""
    with duckdb.connect() as con:
        rel = con.read_csv(source, header=True, sep=",", quotechar='"', escapechar='"', auto_detect=False,
                           columns={f"c{i}": "VARCHAR" for i in range(width)}, strict_mode=True,
                           null_padding=True, allow_quoted_nulls=False, compression="none",
                           buffer_size=DUCKDB_BUFFER, max_line_size=DUCKDB_BUFFER)
        return rel.select(", ".join(f"coalesce(c{col[c]}, '') AS \"{c}\"" for c in wanted)).to_arrow_table()


def _capture(table: CsvTable, tab: pa.Table, fd: int, newlines: np.ndarray, only: frozenset[str]) -> Capture:
    reader = _Reader(table, only)
    launch_codes, _ = _encode(tab["ID"])
    launches = _launches(reader, fd, newlines, launch_codes)
    section, sections = _encode(tab["Section Name"])
    label, labels = _encode(tab["Metric Name"], strip=True)
    unit, units = _encode(tab["Metric Unit"], strip=True)
    rows = _Rows(launch_codes, section, sections, label, labels, unit, units, tab["Metric Value"].combine_chunks())
    if "Rule Name" in tab.column_names:
        is_rule = pc.not_equal(tab["Rule Name"], "").to_numpy()
    else:
        is_rule = np.zeros(tab.num_rows, dtype=bool)
    labeled = ~is_rule & np.array([bool(s) for s in labels], dtype=bool)[label]
    reader.sections = _sections(section, sections, is_rule, labeled)
    _rules(launches, tab, rows, np.flatnonzero(is_rule))
    kept, key_index, keys = _wanted_rows(rows, [la.cc for la, _ in launches], labeled, only)
    _values(reader, launches, rows, kept, key_index, keys)
    return Capture(
        source_path=str(table.path), source_format="csv-details", sha256=table.sha256, ncu_version=None,
        gpu=None, section_set=infer_details_set(set(reader.sections)), sections=reader.sections,
        launches=[la for la, _ in launches], warnings=reader.warnings,
    )


def _encode(column: pa.ChunkedArray, strip: bool = False) -> tuple[np.ndarray, list[str]]:
    """Number a column's distinct strings in order of first appearance; with `strip`, stripped strings."""
    encoded = pc.dictionary_encode(column.combine_chunks())
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
    (fault-around), and one first line per launch across the file mapped the whole file back in (+48 MB).
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
    names = list(dict.fromkeys(sec_names + [SECTION_DISPLAY_NAMES.get(s, s) for s in sec_names]))
    index = {name: i for i, name in enumerate(names)}
    as_printed = np.array([index[s] for s in sec_names], dtype=np.int64)
    displayed = np.array([index[SECTION_DISPLAY_NAMES.get(s, s)] for s in sec_names], dtype=np.int64)
    seen = np.where(is_rule, displayed[sec_codes], np.where(labeled, as_printed[sec_codes], -1))
    seen = seen[seen >= 0]
    unique, first = np.unique(seen, return_index=True)
    return [names[i] for i in unique[np.argsort(first)].tolist() if names[i]]


def _rules(launches: _Launches, tab: pa.Table, rows: _Rows, where: np.ndarray) -> None:
    """Append the rule rows to their launches in file order, built as `_Reader.row` builds them.

    Rules repeat across launches (same section, rule and text): one immutable Rule per distinct row, shared.
    """
    if not where.size:
        return
    combined = np.zeros(where.size, dtype=np.int64)  # the row's codes in all six columns, as one number
    columns: list[tuple[np.ndarray, list[str]]] = []
    for c in ("Section Name", *RULE_COLUMNS):
        if c in tab.column_names:  # encoding the whole column, then indexing, peaks lower than take()/filter()
            codes, names = _encode(tab[c])  # of the rule rows first (+45 / +21 MB on a 50 MB page)
            codes = codes[where]
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
    text_codes, texts = _encode(pa.chunked_array([rows.values.take(pa.array(kept, type=pa.int64()))]))
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
    scaled = unit_scale(unit)
    if scaled is None:
        return _SLOW  # an unknown unit: `_Reader.value` warns
    try:
        number = parse_number(text)
    except ValueError:
        return _SLOW  # text, or garbage
    if number is None:
        return _SKIP
    factor, base = scaled
    places = decimals(text)
    return rescale(number, factor, places), base, half_ulp(places, factor)
