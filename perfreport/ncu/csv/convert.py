"""The one cell converter of the CSV readers: text as ncu prints it -> (value in base units, tolerance).

The readers only tokenize (csv module, pandas, the byte scan); every number, unit and missing-value rule lives
here, so the fast and the strict readers give equal Captures. A value's tolerance is half a unit in the last
printed place, in base units. `Column` converts one raw-page column; `convert_row` is the raw page's hot loop
(a plain decimal is read by `float` before the general parser, and remembered per column: values repeat).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from perfreport.ncu.catalog.units import (
    MISSING_TOKENS,
    decimals,
    half_ulp,
    parse_number,
    power_of_ten,
    rescale,
    unit_scale,
)

_MAX_PLACES = 64
_MEMO_MAX = 64  # plain numbers remembered per column (bounded: 2,240 columns without `only`)
_HALF = [half_ulp(d) for d in range(_MAX_PLACES)]
_PLAIN_CHARS = "0123456789.-"
_GROUPED = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", re.ASCII).fullmatch  # "1,116,691,496,960"

Converted = tuple[float, float]  # (value in base units, absolute tolerance)


def scale(unit: str) -> tuple[float, str, bool]:
    """Return (factor, base unit, known) for a printed unit; an unknown unit converts as printed (factor 1)."""
    scaled = unit_scale(unit)
    if scaled is None:
        return 1.0, unit, False
    return scaled[0], scaled[1], True


def convert(text: str, factor: float = 1.0) -> Converted | None:
    """Convert one printed value scaled by `factor`; None when ncu printed no value (empty, n/a, nan, '-').

    Raises ValueError when the text is not a number (a name, a per-instance list, garbage).
    """
    number = parse_number(text)
    if number is None:
        return None
    places = decimals(text)
    return rescale(number, factor, places), half_ulp(places, factor)


class Column:
    """How to convert one raw-page column: its unit factor and the plain values already converted."""

    __slots__ = ("name", "index", "factor", "exp", "base", "unit", "required", "memo")

    def __init__(self, name: str, index: int, unit: str | None) -> None:
        self.name = name
        self.index = index
        self.unit = unit  # as the units row prints it (msecond): what a message about a cell names
        if unit is None:
            self.factor, self.base = 1.0, None
        else:
            self.factor, self.base, _ = scale(unit)
        self.exp = power_of_ten(self.factor)  # None: a binary prefix, whose product needs no rounding
        # A column with a unit holds numbers; a unitless one may hold text (device name, policy).
        self.required = bool(unit)
        self.memo: dict[str, Converted] = {}  # cell text -> converted plain number


def convert_row(columns: list[Column], cells: list[str], metrics: dict[str, float], precision: dict[str, float],
                other: Callable[[Column, str], bool]) -> list[str]:
    """Convert one row's cells into `metrics`/`precision`; return the names with no value.

    A cell that is neither a plain decimal nor missing goes to `other(column, text)`, which returns False when it
    holds no value. This is the raw page's hot loop (~4.5 M cells for 2,000 kernels): keep per-cell work minimal.
    """
    absent: list[str] = []
    half = _HALF
    plain = _PLAIN_CHARS
    grouped = _GROUPED
    missing = MISSING_TOKENS
    for col, s in zip(columns, cells, strict=True):
        hit = col.memo.get(s)
        if hit is not None:
            metrics[col.name], precision[col.name] = hit
            continue
        if s and (not s.strip(plain) or grouped(s)):
            try:
                v = float(s.replace(",", "")) if "," in s else float(s)
            except ValueError:  # "-", ".", "1.2.3": the general parser decides
                pass
            else:
                dot = s.find(".")
                d = len(s) - dot - 1 if dot >= 0 else 0
                if d < _MAX_PLACES:
                    if col.factor == 1.0:
                        hit = v, half[d]
                    elif col.exp is None:
                        hit = v * col.factor, half[d] * col.factor
                    else:
                        hit = round(v * col.factor, d - col.exp), half[d] * col.factor
                    metrics[col.name], precision[col.name] = hit
                    if len(col.memo) < _MEMO_MAX:
                        col.memo[s] = hit
                    continue
        if s.strip().lower() in missing or not other(col, s):
            absent.append(col.name)
    return absent
