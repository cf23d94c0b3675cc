"""What one site page is made of, before it is rendered: tables (with their CSV/JSON downloads) and charts."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfreport.files import csv_cell
from perfreport.kernels.labels import ELIDED
from perfreport.site.templating import CELL_FORMATTERS, NUM_COLUMN_RULES, NUMERIC_FORMATS, header

TABLE_SCHEMA_VERSION = 1
# Every download is gzip-compressed (CSV and JSON text ~7x smaller; DuckDB, pandas, zcat and archive tools read it
# as is): the 200 x 50 site's 1,480 downloads were 47 MiB as text, 6 MiB compressed (docs/benchmarks.md).
DOWNLOAD_SUFFIX = ".gz"
DOWNLOAD_LEVEL = 6


@dataclass(frozen=True)
class Column:
    """A table column: row key, header label, formatter name (templating.FORMATTERS), and the unit its header shows
    where the format has none of its own (templating.UNITS: %, ms, µs, KiB)."""

    key: str
    label: str
    fmt: str = "text"
    wrap: bool = False  # long free text (descriptions, demangled names): wraps; other cells stay on one line
    unit: str | None = None

    @property
    def header(self) -> str:
        """The header text: label and unit, "duration (µs)"."""
        return header(self.label, self.fmt, self.unit)


@dataclass(frozen=True)
class HtmlTable:
    """A table as the template writes it: per column (header, numeric), per cell (text, link, class), and the
    numeric columns (1-based, space-separated) for the table's data-num attribute.

    A numeric column is right-aligned by a rule of site.css per column position (`table[data-num~="4"]
    td:nth-child(4)`), not by a class on each cell: on a 400-row table that class alone weighs tens of KB. Past
    templating.NUM_COLUMN_RULES columns the cells carry class "num". The browser sorts a numeric column on the
    number each cell shows (site-tables.js); a null cell shows an em dash, kept last.

    Kernel-name columns (format "kernel", data-name) are capped in width by site.css, so a long name wraps instead
    of pushing the numbers out of view; a cell whose name is shown with `…` carries the whole name as its title.
    """

    head: list[tuple[str, bool]]
    rows: list[list[tuple[str, str | None, str, str | None]]]  # text, link, class, hover text
    num_columns: str
    name_columns: str = ""


@dataclass
class Table:
    """Rows shown as an HTML table and downloadable as CSV and JSON next to the page."""

    id: str
    title: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]]
    note: str = ""
    link_key: str | None = None  # a column whose cell links to row["href"]
    csv_name: str = ""
    json_name: str = ""
    shared: bool = False  # its downloads are another page's table (rows and columns a superset): written there once

    def downloads(self) -> dict[str, bytes]:
        """This table's download files (name -> gzip bytes; mtime 0 so a render is byte-identical to the last)."""
        return {self.csv_name: gzip.compress(self.csv_text().encode("utf-8"), DOWNLOAD_LEVEL, mtime=0),
                self.json_name: gzip.compress(self.json_text().encode("utf-8"), DOWNLOAD_LEVEL, mtime=0)}

    def csv_text(self) -> str:
        """Return the rows as CSV (raw values, header = column keys)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c.key for c in self.columns])
        keys = [c.key for c in self.columns]
        plain = (int, float, type(None))  # numbers stay numbers; text goes through csv_cell (formulas)
        for row in self.rows:
            values = list(map(row.get, keys))
            writer.writerow(v if v.__class__ in plain else csv_cell(v) for v in values)
        return buf.getvalue()

    def json_text(self) -> str:
        """Return the rows as a JSON document (schema_version, table, title, columns, rows), one row per line."""
        keys = [c.key for c in self.columns]
        head = {"columns": [{"key": c.key, "label": c.label} for c in self.columns],
                "schema_version": TABLE_SCHEMA_VERSION, "table": self.id, "title": self.title}
        lines = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
        dump = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        rows = ",\n".join("    " + _encode_row(dump, dict(zip(keys, map(row.get, keys), strict=True)))
                           for row in self.rows)
        return "{\n" + "\n".join(lines) + '\n  "rows": [' + (f"\n{rows}\n  " if rows else "") + "]\n}\n"

    def numeric(self, column: Column) -> bool:
        """Numbers in this column: a numeric format, or a free-form value column whose every value is a number."""
        if column.fmt in NUMERIC_FORMATS:
            return True
        if column.fmt != "value":
            return False
        values = [v for v in (r.get(column.key) for r in self.rows) if v is not None]
        return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)

    def html(self, limit: int) -> HtmlTable:
        """The header and the first `limit` rows, formatted with the registered cell formatters (units in the
        header), so the template only loops and escapes."""
        numeric = [self.numeric(c) for c in self.columns]
        ruled = [num and i <= NUM_COLUMN_RULES for i, num in enumerate(numeric, start=1)]  # site.css aligns them
        cols = [(c.key, CELL_FORMATTERS[c.fmt], c.key == self.link_key,
                 " ".join(n for n, on in (("num", num and not by_css), ("wrap", c.wrap)) if on), c.fmt == "kernel")
                for c, num, by_css in zip(self.columns, numeric, ruled, strict=True)]
        head = [(c.header, num) for c, num in zip(self.columns, numeric, strict=True)]
        rows = [[(text := f(row.get(key)), row.get("href") if link else None, cls,
                  _hover(row, key, text) if name else None) for key, f, link, cls, name in cols]
                for row in self.rows[:limit]]
        names = " ".join(str(i) for i, c in enumerate(self.columns, start=1) if c.fmt == "kernel")
        return HtmlTable(head, rows, " ".join(str(i) for i, on in enumerate(ruled, start=1) if on), names)


@dataclass(frozen=True)
class Figure:
    """A plotly figure as plotly's own JSON (traces and layout as plain dicts): go.Figure deep-copies and wraps every
    trace on construction, a third of a 200-cell render; tests validate each chart kind with go.Figure once."""

    data: list[dict[str, Any]]
    layout: dict[str, Any]

    def to_plotly_json(self) -> dict[str, Any]:
        """The figure as plotly.js reads it: {"data": [...], "layout": {...}}."""
        return {"data": self.data, "layout": self.layout}

    def trace_types(self) -> set[str]:
        """The trace types it draws (a trace without a type is plotly's default, scatter)."""
        return {str(t.get("type", "scatter")) for t in self.data}


@dataclass
class Chart:
    """A plotly figure with a fixed div id (stable across renders)."""

    div_id: str
    figure: Figure
    note: str = ""
    kernel_links: bool = False  # a click on a kernel marker opens its kernel page (kernel_pages.CLICK_SCRIPT)


@dataclass
class Missing:
    """A section with no data: what it would show and what to capture to fill it."""

    what: str
    capture: list[str]


@dataclass
class Page:
    """One HTML page of a campaign site: file name, template, title and its parts."""

    filename: str
    template: str
    title: str
    context: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    charts: dict[str, Chart] = field(default_factory=dict)

    def add_table(self, table: Table, downloads_of: tuple[str, str] | None = None) -> Table:
        """Register a table; its downloads are named <page stem>.<table id>.csv.gz / .json.gz, or with `downloads_of`
        (page file, table id) are that page's table, which holds every row and column of this one: one download
        per table, not one per page showing part of it."""
        page, table_id = downloads_of or (self.filename, table.id)
        stem = page.rsplit(".", 1)[0]
        table.csv_name, table.json_name = (f"{stem}.{table_id}.csv{DOWNLOAD_SUFFIX}",
                                           f"{stem}.{table_id}.json{DOWNLOAD_SUFFIX}")
        table.shared = downloads_of is not None
        self.tables[table.id] = table
        return table

    def add_chart(self, chart: Chart) -> Chart:
        """Register a chart under its div id."""
        self.charts[chart.div_id] = chart
        return chart


def _hover(row: dict[str, Any], key: str, text: str) -> str | None:
    """A kernel name shown with `…` gets the row's whole demangled name (or its own whole value) as hover text."""
    if ELIDED not in text:
        return None
    full = str(row.get("name") or row.get(key))
    return full if full != text else None


def _encode_row(dump: Any, row: dict[str, Any]) -> str:
    """Encode one row; a non-finite float (never expected) becomes null rather than invalid JSON."""
    try:
        return str(dump(row))
    except ValueError:
        return str(dump({k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}))
