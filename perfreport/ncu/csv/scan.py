"""The byte scan that proves a CSV export has the form ncu writes, and, in that form, tokenizes it.

Fast parsers are lenient where the strict reader is not: pandas pads a short row with empty fields, appends text
after a closing quote to the field (``"1"x`` -> ``1x``) and splits lines at a bare ``\\r``; DuckDB trims blanks
around quotes and skips blank lines; the strict reader also skips lines that do not start with a quote (log
output). So `scan_records` proves, in one vectorized pass over the quote positions, that the file has the form
ncu writes: every field double-quoted with no quote or newline inside, fields separated by ``,``, records by
``\\n`` (a details row may end in one unquoted empty field, ``"3.20",``). In that form one record is one line,
any parser splits it into csv.reader's fields, and the quote positions found on the way are the fields
themselves: `scan_fields` keeps them, so a reader needs no second parse.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Buffer = bytes | mmap.mmap | memoryview  # the file as bytes, or (part of) a mapped file (fast_details)
Check = Callable[[np.ndarray], bool]
_QUOTE, _COMMA, _NL = 34, 44, 10
_CHUNK = 1 << 20  # bytes scanned at a time: small chunks keep the temporary arrays near 10 MB


@dataclass
class Fields:
    """Where every field of a scanned file is: field j of record r is quote pair ``first[r] + j``."""

    first: np.ndarray  # per record: index of its first quote pair
    quoted: np.ndarray  # per record: quoted fields (the count without a trailing unquoted empty field)
    opening: np.ndarray  # per quote pair: position of its opening quote (int32 while the file is < 2 GiB)
    closing: np.ndarray  # per quote pair: position of its closing quote

    def spans(self, column: int, records: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, missing) of field `column` in `records`: int32 byte positions, (0, 0) where it is missing.

        A slice of records reads the arrays without copying them (fast_details gathers 200,000 rows a column).
        """
        quoted, first = self.quoted[records], self.first[records]
        missing = quoted <= column
        pair = first + column
        pair[missing] = 0
        start, end = self.opening[pair], self.closing[pair]
        start += 1
        start[missing] = end[missing] = 0
        return start, end, missing


def scan_records(data: Buffer) -> tuple[np.ndarray, np.ndarray] | None:
    """Return (field count, position of the ending newline) of every line if `data` is in ncu's quoted CSV form.

    None when it is not (see the module doc).
    """
    scanned = _scan(data, keep=False)
    return None if scanned is None else scanned[:2]


def scan_fields(data: Buffer, check: Check | None = None) -> tuple[np.ndarray, np.ndarray, Fields] | None:
    """As `scan_records`, plus where each field is; None when `data` is not in ncu's form (or 2 GiB or more).

    `check(chunk)` sees every scanned chunk's bytes (a uint8 array); the scan gives None when it says False.
    """
    if len(data) >= 1 << 31:
        return None
    scanned = _scan(data, keep=True, check=check)
    if scanned is None:
        return None
    counts, newlines, fields = scanned
    assert fields is not None
    return counts, newlines, fields


def _scan(data: Buffer, keep: bool, check: Check | None = None
          ) -> tuple[np.ndarray, np.ndarray, Fields | None] | None:
    """Quotes pair up in order (opening, closing); the bytes between a closing quote and the next opening one must
    be ``,`` (next field), ``\\n`` (next record) or ``,\\n`` (an unquoted empty last field, then the next record)."""
    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    if n < 3 or a[0] != _QUOTE or a[-1] != _NL:
        return None
    ends: list[np.ndarray] = []  # per chunk: index of the last field (quote pair) of each record
    trails: list[np.ndarray] = []  # per chunk: whether that record ends with an unquoted empty field
    newlines: list[np.ndarray] = []  # per chunk: where each record's newline is
    openings: list[np.ndarray] = []  # per chunk, with `keep`: its opening quotes, then its closing ones
    closings: list[np.ndarray] = []
    pending: int | None = None  # an opening quote whose closing quote lies in a later chunk
    prev_close, pairs, lines = -1, 0, 0
    for start in range(0, n, _CHUNK):
        chunk = a[start:start + _CHUNK]
        if check is not None and not check(chunk):
            return None
        lines += int(np.count_nonzero(chunk == _NL))
        q = np.flatnonzero(chunk == _QUOTE) + start
        if pending is not None:
            q = np.concatenate(([pending], q))
        pending = None
        if q.size % 2:
            pending, q = int(q[-1]), q[:-1]
        if not q.size:
            continue
        opening, closing = q[0::2], q[1::2]
        if keep:
            openings.append(opening.astype(np.int32))
            closings.append(closing.astype(np.int32))
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
    if lines != end.size:
        return None  # a newline inside a quoted field: one record would span lines
    trail = np.concatenate(trails)
    counts = np.diff(end, prepend=-1) + trail
    if not keep:
        return counts, np.concatenate(newlines), None
    first = np.concatenate(([0], end[:-1] + 1))
    opening = np.concatenate(openings)  # one list at a time: its chunks and one joined array, never two of each
    del openings
    closing = np.concatenate(closings)
    del closings
    return counts, np.concatenate(newlines), Fields(first, counts - trail, opening, closing)
