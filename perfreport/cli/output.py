"""How the CLI writes what it found: a table fitted to the terminal, CSV or one JSON document (--format)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table

from perfreport.cli.options import PIPE_WIDTH
from perfreport.files import csv_cell, json_default

TEXT_MIN_WIDTH = 10  # a text column is folded down to this width before the table gives up fitting
WORD_MAX_WIDTH = 24  # a text column of single words no longer than this (ids, families, verdicts) is never folded


def terminal_width() -> int:
    """COLUMNS when set; the terminal's width when stdout is one; else PIPE_WIDTH.

    The stream is the one click writes to now (CliRunner's in tests and cog), never the process's own terminal:
    a table written into the README does not change with the width of the terminal that ran `make docs`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stdout
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        pass
    return PIPE_WIDTH


def console() -> Console:
    """A console that prints data as text at the terminal's width: no markup (a kernel named `x[/]` or
    `[abi:cxx11]` prints as itself), no emoji codes, no highlighting."""
    return Console(width=terminal_width(), markup=False, emoji=False, highlight=False)


def _overhead(table: Table) -> int:
    """Columns of a table spent on borders and padding."""
    return int(table._extra_width) + sum(table._get_padding_width(i) for i in range(len(table.columns)))


def _water_fill(natural: list[int], floor: list[int], room: int) -> list[int]:
    """Widths that fit `room`: the widest columns are narrowed first, none below its floor."""
    lo, hi = 0, max(natural, default=0)
    while lo < hi:  # the largest cap whose widths fit
        cap = (lo + hi + 1) // 2
        if sum(max(f, min(n, cap)) for n, f in zip(natural, floor, strict=True)) <= room:
            lo = cap
        else:
            hi = cap - 1
    return [max(f, min(n, lo)) for n, f in zip(natural, floor, strict=True)]


def _floor(column: Column, numeric: bool) -> int:
    """The narrowest a column gets: its widest number, word-only value (an id) or min_width; else TEXT_MIN_WIDTH."""
    values = [str(v) for v in column._cells]
    header = max((cell_len(w) for w in str(column.header).split()), default=0)
    if numeric or all(len(v.split()) <= 1 and cell_len(v) <= WORD_MAX_WIDTH for v in values):
        return max([header, column.min_width or 0] + [cell_len(v) for v in values])
    natural = max([cell_len(str(column.header))] + [cell_len(v) for v in values])
    return max(min(natural, TEXT_MIN_WIDTH), column.min_width or 0)


def fit(table: Table, width: int) -> list[str]:
    """Fit a table into width columns: numbers (right-aligned columns), ids and min_width keep every character,
    other text folds (the widest column first, down to TEXT_MIN_WIDTH); when that is not enough the borders go, and
    then the last columns. Returns the names of the columns left out."""
    cols = table.columns
    numeric = [c.justify == "right" for c in cols]
    natural = [max([cell_len(str(c.header))] + [cell_len(str(v)) for v in c._cells]) for c in cols]
    floor = [_floor(c, num) for c, num in zip(cols, numeric, strict=True)]
    if sum(natural) + _overhead(table) <= width:
        return []
    hidden: list[str] = []
    if sum(floor) + _overhead(table) > width:  # compact: one space between columns, a rule under the header
        table.box, table.show_edge, table.padding = box.SIMPLE_HEAD, False, (0, 0, 0, 0)
        while len(cols) > 1 and sum(floor) + _overhead(table) > width:  # too many for this terminal: the last go
            hidden.insert(0, str(cols.pop().header))
            for kept in (numeric, natural, floor):
                kept.pop()
        table.show_lines = True  # a blank line between rows: folded text shows where each row ends
    room = width - _overhead(table) - sum(f for f, num in zip(floor, numeric, strict=True) if num)
    text = [i for i, num in enumerate(numeric) if not num]
    fitted = _water_fill([natural[i] for i in text], [floor[i] for i in text], room)
    for i, c in enumerate(cols):
        c.no_wrap, c.overflow = False, "fold"
        c.width = max(1, min(floor[i], width - _overhead(table))) if numeric[i] else fitted[text.index(i)]
    return hidden


def print_table(table: Table, out: Console | None = None) -> None:
    """Print a table fitted to the console's width; name the columns that did not fit."""
    out = out or console()
    hidden = fit(table, out.width)
    out.print(table)
    if hidden:
        ctx = click.get_current_context(silent=True)
        formats = ctx is not None and any(p.name == "fmt" for p in ctx.command.params)  # name only real options
        out.print(f"{len(hidden)} more column(s) do not fit in {out.width} columns: {', '.join(hidden)} "
                  f"({'--format csv or --format json prints them all; ' if formats else ''}COLUMNS sets the width)")


def _finite(v: Any) -> Any:
    """v with NaN and infinities as null (JSON has no spelling for them), in lists and objects too."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


def json_text(doc: Any, indent: int | None = None) -> str:
    """One JSON document: keys sorted, text as itself (no \\u escapes), every digit kept, NaN as null."""
    try:
        return json.dumps(doc, sort_keys=True, ensure_ascii=False, default=json_default, indent=indent,
                          allow_nan=False)
    except ValueError:
        return json.dumps(_finite(doc), sort_keys=True, ensure_ascii=False, default=json_default, indent=indent)


def csv_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A header line and one line per row, quoted as RFC 4180 says (the csv module), lines ending in \\n."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return buf.getvalue()


Rows = tuple[Sequence[str], Sequence[Sequence[Any]]]


def emit(fmt: str, table: Callable[[], None], rows: Callable[[], Rows], doc: Callable[[], Any],
         indent: int | None = None) -> None:
    """Write one verb's result in the --format asked for: table (for people), csv (rows), json (one document)."""
    if fmt == "table":
        table()
    elif fmt == "csv":
        click.echo(csv_text(*rows()), nl=False)
    else:
        click.echo(json_text(doc(), indent))
