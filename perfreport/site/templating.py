"""Jinja2 environment for the site: autoescape, StrictUndefined, and every formatting filter in one place.

Templates do no computation beyond loops and these filters; a missing variable is an error, never an empty
string. Kernel names carry `<` and `>`: autoescape is what turns them into text.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from perfreport.kernels.labels import short_name

EMPTY = "—"
# Table cells carry the number only; its unit is in the column header ("duration (µs)"), so a column reads as one
# scale and sorts as one. Formats not listed here have no unit of their own (a Column may name one).
UNITS = {"pct": "%", "ms": "ms", "duration_ns": "µs", "bytes": "KiB"}
NUMERIC_FORMATS = frozenset({"num", "pct", "ms", "duration_ns", "bytes"})  # right-aligned, sorted as numbers
NUM_COLUMN_RULES = 64  # site.css right-aligns numeric columns 1..64 by position (page_model.HtmlTable)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def num(v: Any, digits: int = 3) -> str:
    """Format a number with `digits` significant digits (thousands separated); None or NaN as an em dash."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return EMPTY
    if isinstance(v, bool) or not _is_number(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    text = f"{v:.{digits}g}"
    return f"{v:,.0f}" if "e+" in text else text  # 999.7 rounds up to 1e+03 at 3 digits


def pct(v: Any, decimals: int = 1) -> str:
    """Format a percentage: 12.3%."""
    return EMPTY if not _is_number(v) else f"{v:.{decimals}f}%"


def duration_ns(v: Any) -> str:
    """Format nanoseconds as µs or ms."""
    if not _is_number(v):
        return EMPTY
    return f"{v / 1e6:.3f} ms" if v >= 1e6 else f"{v / 1e3:.1f} µs"


def ms(v: Any) -> str:
    """Format milliseconds."""
    return EMPTY if not _is_number(v) else f"{v:.3f} ms"


def size_bytes(v: Any) -> str:
    """Format a byte count with a binary unit (KiB, MiB)."""
    if not _is_number(v):
        return EMPTY
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{v:.0f} B"


def value(v: Any) -> str:
    """Format a context or free-form value: null as 'not filled', booleans as yes/no."""
    if v is None:
        return "(not filled)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return num(v, 4)
    if isinstance(v, list | tuple):
        return ", ".join(value(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}: {value(x)}" for k, x in sorted(v.items(), key=lambda kv: str(kv[0])))
    return str(v)


def exceeded(v: Any) -> str:
    """Ceilings a kernel ran above (kernel row `ceiling_exceeded`, a mapping or its JSON text): each named with the
    rate it was beaten by, as a ceiling to re-measure, never as a % of achievable."""
    if isinstance(v, str):
        v = json.loads(v)
    if not v:
        return EMPTY
    return "; ".join(f"{key}: ran at {pct_v:.1f}% of it, re-measure" for key, pct_v in sorted(v.items()))


FORMATTERS = {
    "num": num, "pct": pct, "duration_ns": duration_ns, "ms": ms, "bytes": size_bytes, "value": value,
    "text": lambda v: EMPTY if v is None else str(v), "exceeded": exceeded,
    "kernel": lambda v: EMPTY if v is None else short_name(str(v)),  # the whole name on hover (page_model)
}
# The same formats in a table cell: the number without its unit (UNITS puts it in the header), one scale per column.
CELL_FORMATTERS = {
    **FORMATTERS,
    "pct": lambda v: EMPTY if not _is_number(v) else f"{v:.1f}",
    "ms": lambda v: EMPTY if not _is_number(v) else f"{v:.3f}",
    "duration_ns": lambda v: EMPTY if not _is_number(v) else f"{v / 1e3:,.1f}",
    "bytes": lambda v: EMPTY if not _is_number(v) else f"{v / 2**10:,.1f}",
}


def fmt(v: Any, kind: str) -> str:
    """Format v with the formatter named kind (a Table column's fmt)."""
    return FORMATTERS[kind](v)


def header(label: str, kind: str, unit: str | None = None) -> str:
    """A column header with its unit: "time share (%)"; `unit` names one where the format has none."""
    unit = unit or UNITS.get(kind)
    return f"{label} ({unit})" if unit else label


_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def md(text: Any) -> Markup:
    """Inline markdown of prose (what-to-capture steps, notes): `code` and **bold**; everything else escaped."""
    html = str(escape(text))
    html = _CODE.sub(r"<code>\1</code>", html)
    return Markup(_STRONG.sub(r"<strong>\1</strong>", html))  # noqa: S704 - built from the escaped text


def templates_dir() -> Path:
    """Return the templates folder: packaged in the wheel (perfreport/templates) or the repository's templates/."""
    packaged = Path(str(resources.files("perfreport"))) / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Return the site's jinja2 Environment (autoescape on for every template, StrictUndefined)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FORMATTERS)
    env.filters["fmt"] = fmt
    env.filters["md"] = md
    return env
