"""Protocol-buffer wire primitives for reading .ncu-rep bytes (rep_wire, rep_rules, rep_bulk): varints, fields,
skipping a field by its wire type, a MetricValue; and the two ways a read stops (UnknownLayout, Truncated)."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from struct import unpack_from
from typing import Any

ReportBytes = bytes | mmap.mmap  # a report read into memory, or mapped

# a metric entry of a ProfileResult (field 13), its NameId (field 1, first) and its value (field 2): the keys the
# entry-by-entry walk (rep_wire) and the bulk read (rep_bulk) step by
METRIC_TAG = 13 << 3 | 2
ID_TAG = 1 << 3 | 0
VALUE_TAG = 2 << 3 | 2


class UnknownLayout(Exception):
    """The bytes are not the layout this reader knows; read the report with ncu_report."""


class Truncated(Exception):
    """The file ends inside a block or entry: `results` whole kernels came before the cut."""

    def __init__(self, offset: int, needed: int, results: int) -> None:
        super().__init__(f"at byte {offset} an entry needs {needed} bytes")
        self.offset, self.needed, self.results = offset, needed, results


def read_varint(b: ReportBytes, p: int) -> tuple[int, int]:
    """(value, position after it) of the varint at p; one byte (the common case) first."""
    c = b[p]
    if c < 0x80:
        return c, p + 1
    value = shift = 0
    while True:
        c = b[p]
        p += 1
        value |= (c & 0x7F) << shift
        if c < 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise UnknownLayout(f"varint longer than 10 bytes at {p}")


def iter_fields(b: ReportBytes, p: int, end: int) -> Iterator[tuple[int, int, Any]]:
    """Yield (field, wire type, value) of the message b[p:end]; length-delimited values as (start, stop)."""
    while p < end:
        key, p = read_varint(b, p)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, p = read_varint(b, p)
        elif wire == 2:
            n, p = read_varint(b, p)
            value = (p, p + n)
            p += n
        elif wire == 1:
            value = (p, p + 8)
            p += 8
        elif wire == 5:
            value = (p, p + 4)
            p += 4
        else:
            raise UnknownLayout(f"wire type {wire} (field {number}) at byte {p}")
        if p > end:
            raise UnknownLayout(f"field {number} runs past its message at byte {p}")
        yield number, wire, value


def field_text(b: ReportBytes, span: tuple[int, int]) -> str:
    """The string field b[span] (ncu writes UTF-8; a bad byte becomes U+FFFD rather than an error)."""
    return b[span[0] : span[1]].decode("utf-8", "replace")


def first_string(b: ReportBytes, p: int, end: int) -> tuple[int, int] | None:
    """Where field 1 of the message b[p:end] lies when it is a string written first (a section's identifier);
    None when it is not."""
    if p < end and b[p] == 1 << 3 | 2:
        n, q = read_varint(b, p + 1)
        if q + n <= end:
            return q, q + n
    return None


def metric_value(b: ReportBytes, p: int, end: int) -> float | int | str | None:
    """Decode one MetricValue message b[p:end] (None: it holds no value)."""
    for number, wire, v in iter_fields(b, p, end):
        if number == 3 and wire == 1:
            return float(unpack_from("<d", b, v[0])[0])
        if number in (4, 5) and wire == 0:
            return int(v)
        if number == 2 and wire == 5:
            return float(unpack_from("<f", b, v[0])[0])
        if number == 1 and wire == 2:
            return field_text(b, v)
        raise UnknownLayout(f"metric value field {number} (wire type {wire}) at byte {p}")
    return None


def skip_field(b: ReportBytes, p: int, key: int) -> int:
    """Skip the value of a field whose key was just read (p: right after the key)."""
    wire = key & 7
    if wire == 0:
        while b[p] >= 0x80:
            p += 1
        return p + 1
    if wire == 2:
        n, p = read_varint(b, p)
        return p + n
    if wire == 1 or wire == 5:
        return p + (8 if wire == 1 else 4)
    raise UnknownLayout(f"wire type {wire} (field {key >> 3}) at byte {p}")
