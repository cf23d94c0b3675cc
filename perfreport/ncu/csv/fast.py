"""Fast path for clean ncu CSV exports: a C parser splits the file, the strict readers' code converts it.

Used only when the importer passes `only` (the metrics derivation reads). `read_clean` returns None for anything
it does not prove clean, and the caller then runs the strict reader, so every error message and warning about a
damaged file stays the strict reader's. A converted file gives the Capture the strict reader gives.

Which parser, by measurement (docs/benchmarks.md): the wide raw page (2,240 columns) is split by pandas' C
parser, reading only the fixed and the needed metric columns, and used only after `scan_records` (scan)
proves the bytes have the form ncu writes, in which one record is one line and every parser splits a line into
csv.reader's fields (the scan and the SHA-256 run on a second core while pandas splits). The long details page
is split by that scan itself (fast_details), whose field positions give Arrow columns directly.
"""

from __future__ import annotations

import hashlib
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from perfreport.errors import InputError
from perfreport.ncu.catalog.sets import infer_section_set
from perfreport.ncu.csv.common import (
    LONG_COLUMNS,
    CsvTable,
    _check_duplicates,
    _fixed_block,
    _parse_line,
)
from perfreport.ncu.csv.fast_details import read_details
from perfreport.ncu.csv.raw import _GPU, read_wide
from perfreport.ncu.csv.scan import scan_records
from perfreport.ncu.model import Capture

__all__ = ["read_clean", "scan_records"]


def read_clean(path: Path, only: frozenset[str]) -> Capture | None:
    """Read a clean ncu CSV export fast; None when the file is not provably clean (the strict reader decides)."""
    try:
        with path.open("rb") as fh:
            first = fh.readline()
            table = _header_table(path, first)
            if table is None:
                return None
            if "Metric Name" in table.header:
                if any(c not in table.header for c in LONG_COLUMNS):
                    return None
                return read_details(path, fh, first, table, only)
            fh.seek(0)
            data = fh.read()  # one buffer (`first + fh.read()` would copy the whole file once more)
    except OSError:
        return None
    return _read_raw(table, data, only)


def _header_table(path: Path, first: bytes) -> CsvTable | None:
    """The table of a file whose first line is an ncu header (rows not read yet); None for anything else."""
    if not first.startswith(b'"ID",') or not first.endswith(b"\n") or b"\r" in first or b"\x00" in first:
        return None  # gzip, ncu log framing, BOM, CRLF, binary: the strict reader handles (or rejects) these
    try:
        header = _parse_line(path, 1, first[:-1].decode("utf-8", errors="replace"))
        _check_duplicates(path, 1, header)
        fixed, nvtx, first_metric = _fixed_block(path, 1, header)
    except InputError:
        return None
    return CsvTable(path, "", header, 1, [], [], fixed, nvtx, first_metric)


def _read_raw(table: CsvTable, data: bytes, only: frozenset[str]) -> Capture | None:
    """Raw page: pandas splits the fixed and the needed metric columns; read_wide converts them."""
    if b"\r" in data or b"\x00" in data:
        return None
    header, start = table.header, table.first_metric
    usecols = list(range(start)) + [j for j in range(start, len(header)) if header[j] in only or header[j] == _GPU]
    # Hash and scan on a second core while pandas splits (both release the GIL); the scan decides if `df` is used.
    with ThreadPoolExecutor(max_workers=1) as pool:
        checked = pool.submit(lambda: (hashlib.sha256(data).hexdigest(), scan_records(data)))
        df = _parse(data, len(header), usecols)
        digest, scanned = checked.result()
    if df is None or scanned is None:
        return None
    counts, _ = scanned
    if counts[0] != len(header) or len(df) != len(counts) - 1 or not len(df) or (counts != len(header)).any():
        return None  # a ragged or truncated row: the strict reader names it
    table.sha256, table.row_lines = digest, list(range(2, len(counts) + 1))
    table.header = [header[j] for j in usecols]
    table.rows = df.to_numpy().tolist()
    try:
        capture = read_wide(table, only)
    except (InputError, ArithmeticError):
        return None  # a damaged cell or id: the strict reader reports it (or fails on it) its own way
    capture.section_set = infer_section_set(metrics=header[start:])  # every column, as the strict reader
    return capture


def _parse(data: bytes, width: int, usecols: list[int] | None) -> pd.DataFrame | None:
    """Split the records after the header with pandas (strings as printed, nothing read as NaN)."""
    try:
        return pd.read_csv(io.BytesIO(data), header=None, skiprows=1, names=list(range(width)), usecols=usecols,
                           dtype=object, keep_default_na=False, na_filter=False, encoding="utf-8",
                           engine="c")
    except (ValueError, pd.errors.ParserError):  # includes UnicodeDecodeError: the strict reader replaces
        return None

