"""Protocol-buffer wire primitives for reading .ncu-rep bytes (wire, rules, bulk, walk): the file
magic, the field numbers of NVIDIA's `.proto` files this reader uses, varints, fields, skipping a field by its wire
type, a MetricValue; and the two ways a read stops (UnknownLayout, Truncated)."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from struct import unpack_from
from typing import Any

ReportBytes = bytes | mmap.mmap  # a report read into memory, or mapped

MAGIC = b"NVR\x00"  # the first 4 bytes of every .ncu-rep

# protobuf wire types
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def key(field: int, wire: int) -> int:
    """The key (tag) that precedes a field's value on the wire: its number and its wire type."""
    return field << 3 | wire


# Field numbers of Nsight Compute's extras/FileFormat/*.proto (ncu 2025.3.1): docs/ncu_rep.md lists each one with
# its message and field name, and a test holds the two equal. Only the fields the readers use are named.
FILE_VERSION = 1  # FileHeader.Version
BLOCK_NUM_SOURCES = 1  # BlockHeader.NumSources
BLOCK_NUM_RESULTS = 2  # BlockHeader.NumResults
BLOCK_SESSION_DETAILS = 3  # BlockHeader.SessionDetails
BLOCK_STRING_TABLE = 4  # BlockHeader.StringTable
BLOCK_PAYLOAD_SIZE = 5  # BlockHeader.PayloadSize
STRING_TABLE_STRINGS = 1  # ProfilerStringTable.Strings (repeated; a NameId is an index into them)
RESULT_MANGLED_NAME = 5  # ProfileResult.KernelMangledName
RESULT_FUNCTION_NAME = 6  # ProfileResult.KernelFunctionName
RESULT_DEMANGLED_NAME = 7  # ProfileResult.KernelDemangledName
RESULT_METRICS = 13  # ProfileResult.MetricResults (repeated ProfileMetricResult)
RESULT_SECTIONS = 17  # ProfileResult.Sections (repeated ProfilerSection)
RESULT_RULES = 19  # ProfileResult.RuleResults (repeated RuleResult)
METRIC_NAME_ID = 1  # ProfileMetricResult.NameId
METRIC_VALUE = 2  # ProfileMetricResult.MetricValue
VALUE_STRING = 1  # ProfileMetricValue.StringValue
VALUE_FLOAT = 2  # ProfileMetricValue.FloatValue
VALUE_DOUBLE = 3  # ProfileMetricValue.DoubleValue
VALUE_UINT32 = 4  # ProfileMetricValue.Uint32Value
VALUE_UINT64 = 5  # ProfileMetricValue.Uint64Value
SECTION_IDENTIFIER = 1  # ProfilerSection.Identifier
RULE_IDENTIFIER = 1  # RuleResult.Identifier
RULE_BODY = 3  # RuleResult.Body
RULE_SECTION_IDENTIFIER = 4  # RuleResult.SectionIdentifier
RULE_BODY_ITEMS = 1  # RuleResultBody.Items
RULE_ITEM_MESSAGE = 1  # RuleResultBodyItem.Message
RULE_MESSAGE_TEXT = 1  # RuleResultMessage.Message
RULE_MESSAGE_TYPE = 2  # RuleResultMessage.Type
RULE_ITEM_SPEEDUP = 10  # RuleResultBodyItem.Speedup
RULE_SPEEDUP_TYPE = 1  # RuleResultSpeedup.Type
RULE_SPEEDUP_VALUE = 2  # RuleResultSpeedup.Value (a double)

# the keys the hot loops compare a byte with: a metric entry of a ProfileResult, its NameId (written first) and value
METRIC_TAG = key(RESULT_METRICS, LEN)
ID_TAG = key(METRIC_NAME_ID, VARINT)
VALUE_TAG = key(METRIC_VALUE, LEN)
_SECTION_ID_TAG = key(SECTION_IDENTIFIER, LEN)


class UnknownLayout(Exception):
    """The bytes are not the layout this reader knows; read the report with ncu_report."""


class Damaged(UnknownLayout):
    """The framing's sizes do not add up (a block header or payload does not end where its size says): the file is
    damaged. Refused with where, never handed to ncu_report, whose protobuf code aborts the process on such files."""


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
        if wire == VARINT:
            value, p = read_varint(b, p)
        elif wire == LEN:
            n, p = read_varint(b, p)
            value = (p, p + n)
            p += n
        elif wire == I64:
            value = (p, p + 8)
            p += 8
        elif wire == I32:
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
    """Where a section's identifier (field 1 of the ProfilerSection b[p:end]) lies when it is written first;
    None when it is not."""
    if p < end and b[p] == _SECTION_ID_TAG:
        n, q = read_varint(b, p + 1)
        if q + n <= end:
            return q, q + n
    return None


def metric_value(b: ReportBytes, p: int, end: int) -> float | int | str | None:
    """Decode one MetricValue message b[p:end] (None: it holds no value)."""
    for number, wire, v in iter_fields(b, p, end):
        if number == VALUE_DOUBLE and wire == I64:
            return float(unpack_from("<d", b, v[0])[0])
        if number in (VALUE_UINT32, VALUE_UINT64) and wire == VARINT:
            return int(v)
        if number == VALUE_FLOAT and wire == I32:
            return float(unpack_from("<f", b, v[0])[0])
        if number == VALUE_STRING and wire == LEN:
            return field_text(b, v)
        raise UnknownLayout(f"metric value field {number} (wire type {wire}) at byte {p}")
    return None


def skip_field(b: ReportBytes, p: int, key: int) -> int:
    """Skip the value of a field whose key was just read (p: right after the key)."""
    wire = key & 7
    if wire == VARINT:
        while b[p] >= 0x80:
            p += 1
        return p + 1
    if wire == LEN:
        n, p = read_varint(b, p)
        return p + n
    if wire in (I64, I32):
        return p + (8 if wire == I64 else 4)
    raise UnknownLayout(f"wire type {wire} (field {key >> 3}) at byte {p}")
