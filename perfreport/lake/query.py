"""Query the lake with DuckDB: each Iceberg table (current, or as of a snapshot) is scanned to Arrow."""

from __future__ import annotations

from pathlib import Path

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
    con.execute("SET enable_progress_bar = false")  # a query prints its result, never DuckDB's bar
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
