"""Fast path for clean ncu CSV exports: pandas' C parser splits the file, the strict readers' code converts it.

Used only when the importer passes `only` (the metrics derivation reads). `read_clean` returns None for anything
it does not prove clean, and the caller then runs the strict reader, so every error message and warning about a
damaged file stays the strict reader's. A converted file gives the Capture the strict reader gives.

Why the bytes are checked before pandas' result is used: pandas is lenient where the strict reader is not. It pads
a short row with empty fields, appends text after a closing quote to the field (``"1"x`` -> ``1x``), and splits
lines at a bare ``\\r``; the strict reader also skips lines that do not start with a quote (log output). So
`scan_records` proves, in one vectorized pass over the quote positions, that the file has the form ncu writes:
every field double-quoted with no quote or newline inside, fields separated by ``,``, records by ``\\n`` (a
details row may end in one unquoted empty field, ``"3.20",``). In that form one record is one line, pandas and
csv.reader split it into the same fields, and the pass yields every record's field count, which is checked as the
strict reader checks it. The scan and the SHA-256 (~70 ms for 40 MB together) run on a second thread while
pandas parses.
"""

from __future__ import annotations

import hashlib
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from perfreport.errors import InputError
from perfreport.ncu.csv_common import (
    LONG_COLUMNS,
    RULE_COLUMNS,
    CsvTable,
    _check_duplicates,
    _fixed_block,
    _parse_line,
)
from perfreport.ncu.csv_details import SECTION_DISPLAY_NAMES, _Reader, infer_details_set, metric_key
from perfreport.ncu.csv_raw import _GPU, infer_raw_set, read_wide
from perfreport.ncu.model import Capture, KernelLaunch
from perfreport.ncu.units import decimals, half_ulp, parse_number, rescale, unit_scale

_QUOTE, _COMMA, _NL = 34, 44, 10
_CHUNK = 1 << 20  # bytes scanned at a time: keeps the scan's temporary arrays near 10 MB


def read_clean(path: Path, only: frozenset[str]) -> Capture | None:
    """Read a clean ncu CSV export fast; None when the file is not provably clean (the strict reader decides)."""
    try:
        with path.open("rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if not data.startswith(b'"ID",') or b"\n" not in data or b"\r" in data or b"\x00" in data:
        return None  # gzip, ncu log framing, BOM, CRLF, binary: the strict reader handles (or rejects) these
    header_text = data[: data.index(b"\n")].decode("utf-8", errors="replace")
    try:
        header = _parse_line(path, 1, header_text)
        _check_duplicates(path, 1, header)
        fixed, nvtx, first_metric = _fixed_block(path, 1, header)
    except InputError:
        return None
    col = {name: i for i, name in enumerate(header)}
    if "Metric Name" in col:
        if any(c not in col for c in LONG_COLUMNS):
            return None
        # kernel columns (long names) are read by csv from each launch's first row, not by pandas for every row
        usecols = sorted(col[c] for c in ("ID", *LONG_COLUMNS, *RULE_COLUMNS) if c in col)
    else:
        usecols = list(range(first_metric)) + [j for j in range(first_metric, len(header))
                                               if header[j] in only or header[j] == _GPU]
    # Hash and scan on a second core while pandas splits (both release the GIL); the scan decides if `df` is used.
    with ThreadPoolExecutor(max_workers=1) as pool:
        checked = pool.submit(lambda: (hashlib.sha256(data).hexdigest(), scan_records(data)))
        df = _parse(data, len(header), usecols)
        digest, scanned = checked.result()
    if df is None or scanned is None:
        return None
    counts, newlines = scanned
    if counts[0] != len(header) or len(df) != len(counts) - 1 or not len(df):
        return None
    table = CsvTable(path, digest, header, 1, [], list(range(2, len(counts) + 1)), fixed, nvtx, first_metric)
    try:
        if "Metric Name" in col:
            return _read_long(table, df, data, counts, newlines, only)
        return _read_wide(table, df, counts, usecols, only)
    except (InputError, ArithmeticError):
        return None  # a damaged cell or id: the strict reader reports it (or fails on it) its own way


def scan_records(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """Return (field count, position of the ending newline) of every line if `data` is in ncu's quoted CSV form.

    None when it is not (see the module doc). Quotes pair up in order (opening, closing); the bytes between a
    closing quote and the next opening one must be ``,`` (next field), ``\\n`` (next record) or ``,\\n`` (an
    unquoted empty last field, then the next record).
    """
    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    if n < 3 or a[0] != _QUOTE or a[-1] != _NL:
        return None
    ends: list[np.ndarray] = []  # per chunk: index of the last field (quote pair) of each record
    trails: list[np.ndarray] = []  # per chunk: whether that record ends with an unquoted empty field
    newlines: list[np.ndarray] = []  # per chunk: where each record's newline is
    pending: int | None = None  # an opening quote whose closing quote lies in a later chunk
    prev_close, pairs = -1, 0
    for start in range(0, n, _CHUNK):
        q = np.flatnonzero(a[start:start + _CHUNK] == _QUOTE) + start
        if pending is not None:
            q = np.concatenate(([pending], q))
        pending = None
        if q.size % 2:
            pending, q = int(q[-1]), q[:-1]
        if not q.size:
            continue
        opening, closing = q[0::2], q[1::2]
        if prev_close < 0:  # the file's first field (at byte 0: checked above)
            o, p, base = opening[1:], closing[:-1], 0
        else:
            o, p, base = opening, np.concatenate(([prev_close], closing[:-1])), pairs - 1
        gap, c1, c2 = o - p, a[p + 1], a[p + 2]  # p + 2 <= o: always inside the file
        two, three = gap == 2, gap == 3
        ok = (two & ((c1 == _COMMA) | (c1 == _NL))) | (three & (c1 == _COMMA) & (c2 == _NL))
        if not ok.all():
            return None
        line_end = (two & (c1 == _NL)) | three
        ends.append(np.flatnonzero(line_end) + base)
        trails.append(three[line_end])
        newlines.append(p[line_end] + 1 + three[line_end])
        pairs += closing.size
        prev_close = int(closing[-1])
    tail = n - 1 - prev_close  # bytes after the last closing quote
    if pending is not None or prev_close < 0 or not (tail == 1 or (tail == 2 and a[-2] == _COMMA)):
        return None
    ends.append(np.array([pairs - 1]))
    trails.append(np.array([tail == 2]))
    newlines.append(np.array([n - 1]))
    end = np.concatenate(ends)
    if data.count(b"\n") != end.size:
        return None  # a newline inside a quoted field: one record would span lines
    return np.diff(end, prepend=-1) + np.concatenate(trails), np.concatenate(newlines)


def _parse(data: bytes, width: int, usecols: list[int] | None) -> pd.DataFrame | None:
    """Split the records after the header with pandas (strings as printed, nothing read as NaN)."""
    try:
        return pd.read_csv(io.BytesIO(data), header=None, skiprows=1, names=list(range(width)), usecols=usecols,
                           dtype=object, keep_default_na=False, na_filter=False, encoding="utf-8",
                           engine="c")
    except (ValueError, pd.errors.ParserError):  # includes UnicodeDecodeError: the strict reader replaces
        return None


def _read_wide(table: CsvTable, df: pd.DataFrame, counts: np.ndarray, usecols: list[int], only: frozenset[str]
               ) -> Capture | None:
    """Raw page: run read_wide on the table narrowed to the fixed and the needed metric columns."""
    header, start = table.header, table.first_metric
    if (counts != len(header)).any():
        return None  # a ragged or truncated row: the strict reader names it
    table.header = [header[j] for j in usecols]
    table.rows = df.to_numpy().tolist()
    capture = read_wide(table, only)
    capture.section_set = infer_raw_set(set(header[start:]))  # from every column, as the strict reader does
    return capture


def _read_long(table: CsvTable, df: pd.DataFrame, data: bytes, counts: np.ndarray, newlines: np.ndarray,
               only: frozenset[str]) -> Capture | None:
    """Details page: map (section, label, CC) once per distinct triple, convert only rows whose key is in `only`."""
    header = table.header
    col = {name: i for i, name in enumerate(header)}
    rows = counts[1:]
    if rows.min() <= col["Metric Value"] or rows.max() > len(header):
        return None  # a row cut before its value, or a row wider than the header
    names = ["ID", *LONG_COLUMNS, *(c for c in RULE_COLUMNS if c in col)]
    cells = {c: df[col[c]] for c in names}
    reader = _Reader(table, only)
    codes = _launches(reader, data, newlines, cells["ID"])
    launches = list(reader.launches.values())
    sec_codes, sec_names = pd.factorize(cells["Section Name"], sort=False)
    raw_codes, raw_labels = pd.factorize(cells["Metric Name"], sort=False)
    label_of_raw, labels = pd.factorize(np.asarray([s.strip() for s in raw_labels], dtype=object), sort=False)
    label_codes = label_of_raw[raw_codes]
    is_rule = (cells["Rule Name"] != "").to_numpy() if "Rule Name" in cells else np.zeros(len(df), dtype=bool)
    labeled = ~is_rule & np.array([bool(s) for s in labels], dtype=bool)[label_codes]
    reader.sections = _sections(sec_codes, list(sec_names), is_rule, labeled)
    section = cells["Section Name"].tolist()
    _rules(launches, section, cells, codes, np.flatnonzero(is_rule))
    triple_names = (list(sec_names), list(labels), [la.cc for la, _ in launches])
    kept, keys = _wanted_rows(triple_names, (sec_codes, label_codes, codes), labeled, only)
    columns = (section, cells["Metric Unit"].tolist(), cells["Metric Value"].tolist())
    _values(reader, launches, columns, codes, kept, keys, [labels[c] for c in label_codes[kept].tolist()])
    return Capture(
        source_path=str(table.path), source_format="csv-details", sha256=table.sha256, ncu_version=None,
        gpu=None, section_set=infer_details_set(set(reader.sections)), sections=reader.sections,
        launches=[la for la, _ in launches], warnings=reader.warnings,
    )


def _launches(reader: _Reader, data: bytes, newlines: np.ndarray, ids: pd.Series) -> np.ndarray:
    """Create the launches from their IDs' first rows, in order, as the strict reader does; return row -> launch."""
    codes, _ = pd.factorize(ids, sort=False)  # numbers the IDs in order of first appearance
    _, first = np.unique(codes, return_index=True)
    for k in first.tolist():  # data row k is the file line after newline k
        text = data[newlines[k] + 1:newlines[k + 1]].decode("utf-8", errors="replace")
        reader.launch_for(k, _parse_line(reader.table.path, k + 2, text))
    return codes


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


def _rules(launches: list[tuple[KernelLaunch, dict[str, float]]], section: list[str], cells: dict[str, pd.Series],
           codes: np.ndarray, rows: np.ndarray) -> None:
    """Append the rule rows to their launches in file order, built as `_Reader.row` builds them."""
    empty = pd.Series([""] * len(section))
    rule, kind, text, speedup_type, speedup = (cells.get(c, empty).iloc[rows].tolist() for c in RULE_COLUMNS)
    for i, k in enumerate(rows.tolist()):
        launches[codes[k]][0].rules.append({
            "section": section[k], "rule": rule[i], "type": kind[i], "description": text[i],
            "speedup_type": speedup_type[i], "speedup": speedup[i],
        })


def _wanted_rows(names: tuple[list[str], list[str], list[str]], codes: tuple[np.ndarray, np.ndarray, np.ndarray],
                 labeled: np.ndarray, only: frozenset[str]) -> tuple[np.ndarray, list[str]]:
    """Return the labeled rows whose metric key is in `only` and their keys: one metric_key call per distinct triple.

    `names`: distinct sections, labels and launch CCs; `codes`: per row, its section, label and launch.
    """
    sections, labels, launch_cc = names
    sec_codes, label_codes, launch_codes = codes
    cc_of_launch, ccs = pd.factorize(np.asarray(launch_cc, dtype=object), sort=False)
    n_label, n_cc = max(len(labels), 1), max(len(ccs), 1)
    triple = (sec_codes.astype(np.int64) * n_label + label_codes) * n_cc + cc_of_launch[launch_codes]
    rows = np.flatnonzero(labeled)
    unique, inverse = np.unique(triple[rows], return_inverse=True)
    keys = [metric_key(sections[t // (n_label * n_cc)], labels[t // n_cc % n_label], ccs[t % n_cc])
            for t in unique.tolist()]
    wanted = np.array([key in only for key in keys], dtype=bool)
    hit = wanted[inverse]
    return rows[hit], [keys[i] for i in inverse[hit].tolist()]


def _values(reader: _Reader, launches: list[tuple[KernelLaunch, dict[str, float]]],
            columns: tuple[list[str], list[str], list[str]], codes: np.ndarray, kept: np.ndarray, keys: list[str],
            labels: list[str]) -> None:
    """Convert the kept rows in file order: a number in a known unit directly, anything else by `_Reader.value`."""
    section, unit_col, text_col = columns
    numbers: dict[tuple[str, str], tuple[float, str, float] | None] = {}
    for k, key, label in zip(kept.tolist(), keys, labels, strict=True):
        launch, precision = launches[codes[k]]
        unit, text = unit_col[k].strip(), text_col[k]
        pair = (unit, text)
        number = numbers[pair] if pair in numbers else numbers.setdefault(pair, _plain_number(unit, text))
        if number is not None and key not in launch.metrics:
            launch.metrics[key], launch.units[key], precision[key] = number
        else:  # text, no value, unknown unit, garbage, or a second row for the key: the strict code path
            reader.value(k, launch, precision, (section[k], label), unit, text)


def _plain_number(unit: str, text: str) -> tuple[float, str, float] | None:
    """(value, base unit, tolerance) as `_Reader.value` computes them; None when that needs the full path."""
    scaled = unit_scale(unit)
    if scaled is None:
        return None
    try:
        number = parse_number(text)
    except ValueError:
        return None
    if number is None:
        return None
    factor, base = scaled
    places = decimals(text)
    return rescale(number, factor, places), base, half_ulp(places, factor)
