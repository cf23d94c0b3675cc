"""What every time-share reader returns, and what an import reports back."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.config.validate import cut
from perfreport.errors import InputError
from perfreport.files import check_regular

QUOTED_CHARS = 40  # a bad value is quoted this long at most in a message (a 5,000-digit number is not echoed)
# The largest count or duration (ns) a row may hold: DuckDB's BIGINT and the lake's int64 (292 years in ns).
INT64_LIMIT = 2**63
_BARE = r"(?:^|[:\[,])\s*"  # where a JSON value starts (a best-effort locator for the error message)
_CONSTANT = re.compile(_BARE + r"(-?Infinity|NaN)\b")
_LONG_INT = re.compile(_BARE + r"-?\d{4301}")
_FLOAT = re.compile(_BARE + r"(-?\d+(?:\.\d+)?[eE][+-]?\d+)")


@dataclass
class Parsed:
    """One input file read into per-kernel rows (one row per distinct kernel name, or per kernel name, launching op
    and shapes for a torch trace recorded with shapes).

    Time rows: name, instances, total_ns, min_ns, max_ns (ints; min/max None when the input lacks them); a torch
    trace adds op, shapes (None when unknown) and useful_flops (distinct FLOPs per launch, sorted; None when unknown).
    Sample rows: name, samples, share_pct (None when the input gives no share).
    """

    format: str
    rows: list[dict[str, Any]]
    report: str | None = None
    tool_version: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class TimeshareResult:
    """What one import wrote, for the CLI summary."""

    path: Path
    campaign: str
    cell_id: str
    kind: str  # "kernel_times" | "kernel_samples"
    sources: list[dict[str, Any]]  # the source(s) imported now
    kernels: list[dict[str, Any]]  # the rows imported now
    warnings: list[str] = field(default_factory=list)


def read_input(path: Path, expected: str) -> bytes:
    """Return the file's bytes, or raise naming what was expected when it is missing, a folder or empty."""
    if path.is_dir():
        raise InputError(f"'{path}': a folder; expected one file: {expected}.")
    check_regular(path, expected)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"'{path}': no such file; expected {expected}. Check the path.") from None
    except OSError as exc:
        raise InputError(f"'{path}': cannot be read ({exc.strerror}); expected {expected}.") from None
    if not data.strip():
        raise InputError(f"'{path}': the file is empty ({len(data)} bytes); expected {expected}.")
    return data


def sha256(data: bytes) -> str:
    """Hex SHA-256 of the input bytes, recorded so a re-import of a changed file is visible."""
    return hashlib.sha256(data).hexdigest()


def decode_text(path: Path, data: bytes, expected: str) -> str:
    """UTF-8 text (a BOM is dropped); binary input is refused with what was expected.

    A NUL anywhere is refused, not only in the head: one past it would enter a kernel name.
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data[:nul].count(b"\n") + 1
        raise InputError(f"'{path}':{line}: binary data (a NUL byte at offset {nul}); expected {expected}. The file "
                         f"was damaged (a disk or copy error) or is not an export.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"'{path}':{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); expected {expected}. "
            f"Re-export the file as UTF-8."
        ) from None


class _Refused(ValueError):
    """A JSON number that parses but is no value a row may hold (NaN, Infinity, 1e400)."""


def _constant(name: str) -> Any:
    raise _Refused(f"the constant {name} (JSON has no NaN or Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} (beyond a 64-bit float)")
    return value


def _line_of(text: str, pattern: re.Pattern[str]) -> str:
    """':LINE' of the first match of `pattern` (a refused value's place), '' when it cannot be told."""
    for m in pattern.finditer(text):
        if pattern is not _FLOAT or not math.isfinite(float(m.group(1))):
            return f":{text.count(chr(10), 0, m.end()) + 1}"
    return ""


def load_json(path: Path, text: str, expected: str, hint: str = "") -> Any:
    """Parse JSON strictly: NaN/Infinity, numbers beyond a float or 4,300 digits, and nesting too deep for the
    parser are one InputError each (Python's json accepts the first two and raises others untyped)."""
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"'{path}':{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); expected "
                         f"{expected}.{hint}") from None
    except _Refused as exc:
        where = _line_of(text, _FLOAT if "number" in str(exc) else _CONSTANT)
        raise InputError(f"'{path}'{where}: {exc} where a number is expected; expected {expected}. The export "
                         f"was damaged or written by a tool that breaks JSON; export it again.") from None
    except RecursionError:
        raise InputError(f"'{path}': JSON nested too deep to read (thousands of levels); expected {expected}. "
                         f"The file is damaged or not an export.") from None
    except ValueError:  # int() refuses more than 4,300 digits
        raise InputError(f"'{path}'{_line_of(text, _LONG_INT)}: a number with more than 4,300 digits; expected "
                         f"{expected}, whose counts and times fit 64 bits.") from None


def json_value(value: Any) -> str:
    """A JSON value as a message names it, its type first: the string "30" is not the number 30."""
    if isinstance(value, str):
        return f"the string {json.dumps(cut(value, QUOTED_CHARS), ensure_ascii=False)} (write numbers unquoted)"
    if value is None or isinstance(value, bool):
        return f"{json.dumps(value)}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return f"{'an object' if isinstance(value, dict) else 'a list' if isinstance(value, list) else 'a value'} " \
           f"{quoted(value)}"


def quoted(value: Any) -> str:
    """A value as a message quotes it: at most QUOTED_CHARS characters, nesting cut short (reprlib)."""
    return cut(value if isinstance(value, str) else reprlib.repr(value), QUOTED_CHARS)


def csv_row(where: str, line: str, expected: str) -> list[str]:
    """One CSV line's fields; a malformed one (a field over csv's size limit, a stray carriage return) is an
    InputError naming `where` and what was `expected`."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as exc:
        raise InputError(f"{where}: malformed CSV row ({exc}); expected {expected}.") from None
