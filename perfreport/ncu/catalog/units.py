"""Numbers and units as ncu prints them, converted to the base units ``ncu_report`` returns.

ncu auto-scales CSV values (``ms``, ``Gbyte``, ``Tbyte/s``, ``Kbyte/block``, ``sector/ns``); the tidy model
holds base units (ns, byte, byte/s, hz, byte/block, sector/s) so every reader yields the same numbers.
Verified pairs (CSV unit -> ncu_report unit) on H200 / ncu 2025.3.1 exports: Gbyte->byte, Gbyte/s->byte/s,
Ghz->hz, Kbyte->byte, Kbyte/block->byte/block, Kbyte/cycle->byte/cycle, Mbyte->byte, Mbyte/s->byte/s,
Mhz->hz, Tbyte->byte, Tbyte/s->byte/s, ms->ns, us->ns, sector/ns|us|ms->sector/s, %/Kbyte->%/byte.
Prefixes are SI (powers of 1000), as ncu prints them; a byte also takes a binary prefix (``KiB``, ``Mibyte``:
powers of 1024), as tools that re-save an export print them. A prefix multiplies the printed number wherever it
sits (``%/Kbyte`` x 1000 -> ``%/byte``), matching ncu_report rather than dimensional analysis; a time in a
denominator converts to per second (``sector/ns`` x 1e9 -> ``sector/s``).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

MISSING_TOKENS = frozenset({"", "n/a", "nan", "no data", "-"})

# Digits with optional SI thousands separators ("1,935,473"), optional fraction and exponent.
_NUMBER_RE = re.compile(
    r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?|[+-]?\.\d+(?:[eE][+-]?\d+)?",
    re.ASCII,
)
_INF_TOKENS = frozenset({"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})

# Time: numerator unit -> (base unit, factor). ncu prints both short and long spellings.
_TIME = {
    "ns": 1.0, "nsecond": 1.0,
    "us": 1e3, "usecond": 1e3,
    "ms": 1e6, "msecond": 1e6,
    "s": 1e9, "second": 1e9,
}
# A time in a denominator: per <unit> -> per second.
_PER_TIME = {
    "ns": 1e9, "nsecond": 1e9,
    "us": 1e6, "usecond": 1e6,
    "ms": 1e3, "msecond": 1e3,
    "s": 1.0, "second": 1.0,
}
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_BYTE_RE = re.compile(r"([KMGTP]i?|k?)(?:byte|B)")
_HZ_RE = re.compile(r"([KMGTP]?)hz", re.IGNORECASE)

# Units that carry no scale; kept as printed. Anything else unknown is kept too, with a warning.
PLAIN_UNITS = frozenset({
    "", "%", "cycle", "cycles", "inst", "insts", "sector", "sectors", "warp", "warps", "block", "blocks",
    "thread", "threads", "register", "registers", "request", "requests", "branch", "branches", "pass",
    "passes", "cluster", "clusters", "SM", "TPC", "sample", "samples", "issue", "issues", "wavefront",
    "wavefronts", "instance", "instances", "transaction", "transactions", "packet", "packets",
    "msg", "byte", "hz", "ns", "lane", "lanes", "op", "ops", "flop", "event", "events", "count",
})


def parse_number(text: str) -> float | None:
    """Parse one ncu value (``1,935,473``, ``1.41``, ``2211869.712121``); None when ncu printed no value.

    Raises ValueError for anything else, including locale-formatted numbers such as ``65,77`` or
    ``27.595.520`` (their separators cannot be read without guessing).
    """
    s = text.strip()
    if s.lower() in MISSING_TOKENS:
        return None
    if _NUMBER_RE.fullmatch(s):
        return float(s.replace(",", ""))
    if s.lower() in _INF_TOKENS:
        return float(s.lower().replace("infinity", "inf"))
    raise ValueError(f"not a number: {text!r}")


def decimals(text: str) -> int:
    """Return how many decimal places ``text`` prints (``1.23`` -> 2, ``1,935,473`` -> 0, ``1.5e3`` -> -2)."""
    s = text.strip()
    exponent = 0
    for marker in ("e", "E"):
        if marker in s:
            s, _, exp_text = s.partition(marker)
            try:
                exponent = int(exp_text)
            except ValueError:
                exponent = 0
            break
    dot = s.find(".")
    places = len(s) - dot - 1 if dot >= 0 else 0
    # clamp: "0E310" would otherwise ask for 10**310 (OverflowError); no ncu value prints beyond +-300
    return max(-300, min(300, places - exponent))


@lru_cache(maxsize=4096)
def unit_scale(unit: str) -> tuple[float, str] | None:
    """Return (factor, base unit) so that value * factor is in the base unit; None for an unknown unit."""
    u = unit.strip()
    if u in PLAIN_UNITS and u not in _TIME:
        return 1.0, u
    parts = u.split("/")
    if len(parts) == 1:
        return _scale_atom(u)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    num, den = parts
    if den in _PER_TIME:
        if num == "cycle":  # cycle/nsecond etc. is a frequency
            return _PER_TIME[den], "hz"
        scaled = _scale_atom(num)
        if scaled is None:
            return None
        factor, base = scaled
        return factor * _PER_TIME[den], f"{base}/s"
    top = _scale_atom(num)
    bottom = _scale_atom(den)
    if top is None or bottom is None:
        return None
    # ncu's display prefix scales the printed number wherever it sits: 8190 %/byte prints as 8.19 %/Kbyte
    # (verified against ncu_report for derived__pct_occupancy_per_shared_mem_size), so multiply both.
    return top[0] * bottom[0], f"{top[1]}/{bottom[1]}"


def _scale_atom(atom: str) -> tuple[float, str] | None:
    """Scale one unit without '/': a time, a prefixed byte or hz, or a plain unit."""
    if atom in _TIME:
        return _TIME[atom], "ns"
    m = _BYTE_RE.fullmatch(atom)
    if m:
        prefix = m.group(1)
        return _BINARY[prefix] if prefix in _BINARY else _SI[prefix.upper()], "byte"
    m = _HZ_RE.fullmatch(atom)
    if m:
        return _SI[m.group(1).upper()], "hz"
    if atom in PLAIN_UNITS:
        return 1.0, atom
    return None


def power_of_ten(factor: float) -> int | None:
    """The exponent of a power-of-ten factor (``1e6`` -> 6); None for any other factor (a binary prefix: 1024)."""
    if factor <= 0 or not math.isfinite(factor):
        return None
    exp = round(math.log10(factor))
    return exp if 10.0**exp == factor else None


def rescale(value: float, factor: float, places: int | None = None) -> float:
    """Multiply by a power-of-ten factor without float noise (``1.2264 * 1e6`` -> ``1226400.0``).

    ``places`` is the number of decimals printed; the product is rounded to the digits it can carry. A binary
    factor (1024) multiplies exactly: a printed decimal times a power of two needs no rounding.
    """
    if factor == 1.0:
        return value
    product = value * factor
    if places is None or not math.isfinite(product):
        return product
    exp = power_of_ten(factor)
    return product if exp is None else round(product, places - exp)


def half_ulp(places: int, factor: float = 1.0) -> float:
    """Return the absolute rounding tolerance of a value printed with ``places`` decimals, in base units."""
    return 0.5 * 10.0 ** (-places) * factor
