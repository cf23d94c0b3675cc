"""What one site page is made of, before it is rendered: tables (with their CSV/JSON downloads) and charts."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from perfreport.files import csv_cell
from perfreport.site.templating import CELL_FORMATTERS, NUM_COLUMN_RULES, NUMERIC_FORMATS, header

TABLE_SCHEMA_VERSION = 1


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
    """

    head: list[tuple[str, bool]]
    rows: list[list[tuple[str, str | None, str]]]
    num_columns: str


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
                 " ".join(n for n, on in (("num", num and not by_css), ("wrap", c.wrap)) if on))
                for c, num, by_css in zip(self.columns, numeric, ruled, strict=True)]
        head = [(c.header, num) for c, num in zip(self.columns, numeric, strict=True)]
        rows = [[(f(row.get(key)), row.get("href") if link else None, cls) for key, f, link, cls in cols]
                for row in self.rows[:limit]]
        return HtmlTable(head, rows, " ".join(str(i) for i, on in enumerate(ruled, start=1) if on))


@dataclass
class Chart:
    """A plotly figure with a fixed div id (stable across renders)."""

    div_id: str
    figure: go.Figure
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

    def add_table(self, table: Table) -> Table:
        """Register a table; its downloads are named <page stem>.<table id>.csv / .json."""
        stem = self.filename.rsplit(".", 1)[0]
        table.csv_name, table.json_name = f"{stem}.{table.id}.csv", f"{stem}.{table.id}.json"
        self.tables[table.id] = table
        return table

    def add_chart(self, chart: Chart) -> Chart:
        """Register a chart under its div id."""
        self.charts[chart.div_id] = chart
        return chart


def _encode_row(dump: Any, row: dict[str, Any]) -> str:
    """Encode one row; a non-finite float (never expected) becomes null rather than invalid JSON."""
    try:
        return str(dump(row))
    except ValueError:
        return str(dump({k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}))
