"""Query the lake with DuckDB: each Iceberg table (current, or as of a snapshot) is scanned to Arrow."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb

from perfreport.errors import PerfReportError
from perfreport.lake.history import table_names, tables_as_of
from perfreport.lake.iceberg import open_lake
from perfreport.warehouse.db import QueryResult, run_sql

FORMATS = ("table", "csv", "json")


def lake_query(lake: str | Path | None, sql: str, snapshot: int | None = None) -> QueryResult:
    """Run sql over the lake's tables (kernels, cells, captures, publications), current or as of a snapshot."""
    where, catalog = open_lake(lake)
    names = table_names(catalog)
    arrow = tables_as_of(catalog, where, snapshot)
    con = duckdb.connect()
    try:
        for name in names:
            con.register(name, arrow[name])
        return run_sql(con, sql)
    except duckdb.Error as exc:
        raise PerfReportError(
            f"lake query failed: {exc}\nSQL: {sql}\nTables in lake {str(where)!r}: {', '.join(names) or '(none)'}"
            f". Fix the SQL against these names (docs/lake.md lists every column).") from exc
    finally:
        con.close()


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_csv(result: QueryResult) -> str:
    """Render rows as CSV with a header; lists become JSON, nulls empty cells."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(["" if v is None else json.dumps(_plain(v)) if isinstance(v, list | dict) else _plain(v)
                         for v in row])
    return buf.getvalue()


def to_json(result: QueryResult) -> str:
    """Render rows as a JSON list of objects, every digit kept."""
    rows = [dict(zip(result.columns, (_plain(v) for v in row), strict=True)) for row in result.rows]
    return json.dumps(rows, sort_keys=True, ensure_ascii=False, default=str)
