"""Stage 3, join: load a campaign's per-cell JSON into an in-memory DuckDB, then create the views in sql/*.sql.

DuckDB reads the JSON itself (``read_json`` with an explicit STRUCT schema, into tables created with explicit
types, so a table whose files are all absent keeps its columns): faster than parsing the files in Python at all
(docs/warehouse.md has the numbers). See docs/warehouse.md for the tables, views and Amdahl bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from perfreport.config.campaign import Campaign, load_campaign
from perfreport.config.ceilings import Ceilings
from perfreport.config.context import is_not_applicable
from perfreport.errors import InputError, PerfReportError
from perfreport.kernels.cells import FILE_NAME
from perfreport.kernels.identity import normalize, simplify
from perfreport.kernels.labels import kernel_labels, name_bases
from perfreport.kernels.row import KERNEL_ROW
from perfreport.warehouse.amd import scored

SCHEMA_VERSION = 1
NCU_FILE = FILE_NAME  # the cell file every importer writes (kernels/cells.py)
TIMES_FILE = "kernel_times.json"
SAMPLES_FILE = "kernel_samples.json"

# (column, DuckDB type). `context` holds the whole effective context; a few fields are flattened for GROUP BY.
CELL_COLUMNS: list[tuple[str, str]] = [
    ("cell_id", "VARCHAR"), ("position", "INTEGER"), ("campaign", "VARCHAR"), ("hardware", "VARCHAR"),
    ("description", "VARCHAR"), ("context", "JSON"),
]
# (column, context section, key, DuckDB type)
CONTEXT_COLUMNS: list[tuple[str, str, str, str]] = [
    ("model", "identity", "model", "VARCHAR"), ("quant", "identity", "quant", "VARCHAR"),
    ("kv_cache_dtype", "identity", "kv_cache_dtype", "VARCHAR"), ("tp", "parallelism", "tp", "INTEGER"),
    ("dp", "parallelism", "dp", "INTEGER"), ("pp", "parallelism", "pp", "INTEGER"),
    ("ep", "parallelism", "ep", "INTEGER"), ("engine", "stack", "engine", "VARCHAR"),
    ("cudagraph_mode", "serving", "cudagraph_mode", "VARCHAR"), ("isl", "workload", "isl", "INTEGER"),
    ("osl", "workload", "osl", "INTEGER"), ("concurrency", "workload", "concurrency", "INTEGER"),
    ("num_prompts", "workload", "num_prompts", "INTEGER"), ("cache", "regime", "cache", "VARCHAR"),
    ("tier", "regime", "tier", "VARCHAR"),
]

# Fields read from the JSON files: (json key, column, type). Keys missing from a file load as NULL.
NCU_SOURCE_FIELDS: list[tuple[str, str, str]] = [
    ("id", "source", "VARCHAR"), ("file", "file", "VARCHAR"), ("format", "format", "VARCHAR"),
    ("sha256", "sha256", "VARCHAR"), ("ncu_version", "ncu_version", "VARCHAR"), ("gpu", "gpu", "VARCHAR"),
    ("section_set", "section_set", "VARCHAR"), ("kernels", "kernels", "INTEGER"),
    ("launches", "launches", "INTEGER"), ("command_line", "command_line", "VARCHAR"),
]
# The kernel row's loaded fields, in table order, with their DuckDB types (perfreport/kernels/row.py).
NCU_KERNEL_FIELDS: list[tuple[str, str, str]] = [
    (f.name, f.column or f.name, f.duckdb_type()) for f in KERNEL_ROW if f.warehouse
]
TIMELINE_SOURCE_FIELDS: list[tuple[str, str, str]] = [
    ("id", "source", "VARCHAR"), ("file", "file", "VARCHAR"), ("format", "source_format", "VARCHAR"),
    ("trial", "trial", "INTEGER"),
]
TIMES_FIELDS: list[tuple[str, str, str]] = [
    ("source", "source", "VARCHAR"), ("name", "name", "VARCHAR"), ("function", "function", "VARCHAR"),
    ("instances", "instances", "BIGINT"), ("total_ns", "total_ns", "DOUBLE"), ("avg_ns", "avg_ns", "DOUBLE"),
    ("min_ns", "min_ns", "DOUBLE"), ("max_ns", "max_ns", "DOUBLE"), ("share_pct", "share_pct", "DOUBLE"),
    ("op", "op", "VARCHAR"), ("shapes", "shapes", "VARCHAR"), ("useful_flops", "useful_flops", "DOUBLE[]"),
]
SAMPLES_FIELDS: list[tuple[str, str, str]] = [
    ("source", "source", "VARCHAR"), ("name", "name", "VARCHAR"), ("function", "function", "VARCHAR"),
    ("samples", "samples", "BIGINT"), ("share_pct", "share_pct", "DOUBLE"),
]

# Table schemas: created up front so a table with no files still has its columns.
TABLES: dict[str, list[tuple[str, str]]] = {
    "cells": CELL_COLUMNS + [(c, t) for c, _, _, t in CONTEXT_COLUMNS],
    "ncu_sources": [("cell_id", "VARCHAR")] + [(c, t) for _, c, t in NCU_SOURCE_FIELDS],
    "ncu_kernels": [("cell_id", "VARCHAR"), ("section_set", "VARCHAR"), ("flops_total", "DOUBLE")]
    + [(c, t) for _, c, t in NCU_KERNEL_FIELDS] + [("kernel", "VARCHAR")],  # INSERT BY NAME: order free
    "kernel_times": [("cell_id", "VARCHAR"), ("source_format", "VARCHAR"), ("trial", "INTEGER")]
    + [(c, t) for _, c, t in TIMES_FIELDS] + [("kernel", "VARCHAR"), ("label", "VARCHAR")],
    "kernel_samples": [("cell_id", "VARCHAR"), ("source_format", "VARCHAR"), ("trial", "INTEGER")]
    + [(c, t) for _, c, t in SAMPLES_FIELDS] + [("kernel", "VARCHAR"), ("label", "VARCHAR")],
    "kernel_aliases": [("name", "VARCHAR"), ("file_function", "VARCHAR"), ("function", "VARCHAR")],
    "kernel_keys": [("cell_id", "VARCHAR"), ("function", "VARCHAR"), ("name", "VARCHAR"), ("kernel", "VARCHAR")],
    "launch_floor": [("hardware", "VARCHAR"), ("floor_us", "DOUBLE"), ("key", "VARCHAR")],
}


@dataclass
class QueryResult:
    """Rows of one query, with the column names (and DuckDB types, e.g. 'DOUBLE', 'JSON') in select order."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    types: list[str] = field(default_factory=list)


def _struct(fields: list[tuple[str, str, str]]) -> str:
    return "STRUCT(" + ", ".join(f'"{key}" {typ}' for key, _, typ in fields) + ")"


def _select(alias: str, fields: list[tuple[str, str, str]]) -> str:
    return ", ".join(f'{alias}."{key}" AS "{col}"' for key, col, _ in fields)


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table, columns in TABLES.items():
        con.execute(f"CREATE TABLE {table} (" + ", ".join(f'"{c}" {t}' for c, t in columns) + ")")


def _load_cells(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> None:
    contexts = [c.effective_context(campaign) for c in campaign.cells]
    values: dict[str, list[Any]] = {
        "cell_id": [c.id for c in campaign.cells],
        "position": list(range(len(campaign.cells))),
        "campaign": [campaign.id] * len(campaign.cells),
        "hardware": [campaign.hardware] * len(campaign.cells),
        "description": [c.description for c in campaign.cells],
        "context": [json.dumps(ctx, sort_keys=True, default=str) for ctx in contexts],
    }
    for col, section, key, typ in CONTEXT_COLUMNS:  # the n/a marker is text: null in a typed column
        column = [(ctx.get(section) or {}).get(key) for ctx in contexts]
        values[col] = [None if typ != "VARCHAR" and is_not_applicable(v) else v for v in column]
    if not campaign.cells:
        return
    types = dict(TABLES["cells"])
    select = ", ".join(f'unnest(${i + 1}::{types[c]}[]) AS "{c}"' for i, c in enumerate(values))
    con.execute(f"INSERT INTO cells BY NAME SELECT {select}", list(values.values()))


def _read_raw(con: duckdb.DuckDBPyConnection, campaign: Campaign, file_name: str,
              sources: list[tuple[str, str, str]], kernels: list[tuple[str, str, str]]) -> bool:
    """Read every cell's file_name into temp table _raw(filename, cell_id, schema_version, sources, kernels)."""
    found = [(str(c.cell_dir(campaign) / file_name), c.id) for c in campaign.cells
             if (c.cell_dir(campaign) / file_name).is_file()]
    if not found:
        return False
    biggest = max(Path(f).stat().st_size for f, _ in found)
    columns = {"schema_version": "INTEGER", "sources": _struct(sources) + "[]", "kernels": _struct(kernels) + "[]"}
    columns_sql = "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"
    files = [f for f, _ in found]
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _raw AS SELECT m.cell_id, r.* FROM read_json($1, columns="
            f"{columns_sql}, format='auto', filename=true, maximum_object_size={max(biggest + 1, 16 * 2**20)}) r "
            "JOIN (SELECT unnest($1) AS filename, unnest($2) AS cell_id) m USING (filename)",
            [files, [cell for _, cell in found]],
        )
    except duckdb.Error as exc:
        raise InputError(
            f"campaign {campaign.id!r}: cannot load the cells' {file_name} files into DuckDB: {exc}. Each file "
            f"must be the JSON object written by perfreport; re-import the cell named in the message."
        ) from exc
    # A 0-byte file reads as no row and `kernels: null` as no kernel: either would render as an empty cell.
    rows = dict(con.execute("SELECT filename, count(*) FROM _raw GROUP BY filename").fetchall())
    nulls = {f for (f,) in con.execute("SELECT filename FROM _raw WHERE kernels IS NULL OR sources IS NULL").fetchall()}
    broken = [f for f in files if rows.get(f) != 1 or f in nulls]
    if broken:
        f = broken[0]
        got = ("no JSON object (0 bytes or whitespace)" if f not in rows else
               f"{rows[f]} JSON values, not one object" if rows[f] != 1 else "sources or kernels null or missing")
        raise InputError(f"'{f}': {got}; expected the {file_name} object that perfreport's importer writes "
                         f"(schema_version, sources[], kernels[]). Delete it and import the cell's sources again"
                         f"{f' ({len(broken) - 1} more file(s) like it)' if len(broken) > 1 else ''}.")
    bad = con.execute(f"SELECT filename, schema_version FROM _raw WHERE schema_version IS DISTINCT FROM "
                      f"{SCHEMA_VERSION} ORDER BY filename").fetchall()
    if bad:
        listed = "; ".join(f"{f} (schema_version {v!r})" for f, v in bad)
        raise InputError(f"campaign {campaign.id!r}: {file_name} with schema_version other than {SCHEMA_VERSION}: "
                         f"{listed}. Delete those files and import the cells again with this perfreport.")
    return True


def _load_ncu(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> None:
    if not _read_raw(con, campaign, NCU_FILE, NCU_SOURCE_FIELDS, NCU_KERNEL_FIELDS):
        return
    con.execute(f"INSERT INTO ncu_sources BY NAME SELECT cell_id, {_select('s', NCU_SOURCE_FIELDS)} "
                "FROM (SELECT cell_id, unnest(sources) AS s FROM _raw)")
    con.execute(
        f"INSERT INTO ncu_kernels BY NAME SELECT k.cell_id, src.section_set, "
        f"TRY_CAST(k.k.flops->>'$.total' AS DOUBLE) AS flops_total, {_select('k.k', NCU_KERNEL_FIELDS)} "
        "FROM (SELECT cell_id, unnest(kernels) AS k FROM _raw) k "
        "LEFT JOIN ncu_sources src ON src.cell_id = k.cell_id AND src.source = k.k.source"
    )


def _load_timeline(con: duckdb.DuckDBPyConnection, campaign: Campaign, table: str, file_name: str,
                   fields: list[tuple[str, str, str]]) -> None:
    if not _read_raw(con, campaign, file_name, TIMELINE_SOURCE_FIELDS, fields):
        return
    con.execute(
        f"INSERT INTO {table} BY NAME SELECT k.cell_id, s.s.format AS source_format, s.s.trial AS trial, "
        f"{_select('k.k', fields)} "
        "FROM (SELECT cell_id, unnest(kernels) AS k FROM _raw) k "
        "LEFT JOIN (SELECT cell_id, unnest(sources) AS s FROM _raw) s "
        "ON s.cell_id = k.cell_id AND s.s.id = k.k.source"
    )


KERNEL_TABLES = ("ncu_kernels", "kernel_times", "kernel_samples")  # the tables whose rows name a kernel


def match_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Re-key every row on its name's function identity (kernel_identity.normalize) before the views join.

    The files already carry `function`, and for names each tool prints demangled the two agree. They differ
    where a tool kept the mangled name (`_ZN2at6native29vectorized_elementwise_kernel...` stays whole in
    ncu_kernels.json but is `vectorized_elementwise_kernel` in a torch trace): those rows get the normalized
    function, and table kernel_aliases(name, file_function, function) records each change.
    """
    pairs = con.execute(" UNION ".join(f"SELECT DISTINCT name, function FROM {t}" for t in KERNEL_TABLES)).fetchall()
    aliases = [(name, function, key) for name, function in pairs
               if name is not None and (key := normalize(name)) and key != function]
    if not aliases:
        return
    _insert_rows(con, "kernel_aliases", aliases)
    for table in KERNEL_TABLES:
        con.execute(f"UPDATE {table} t SET function = a.function FROM kernel_aliases a "
                    "WHERE t.name = a.name AND t.function IS NOT DISTINCT FROM a.file_function")


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert rows (tuples in the table's column order) in one statement, a list per column."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    con.execute(f"INSERT INTO {table} SELECT " + ", ".join(f"unnest(${i + 1})" for i in range(len(columns))), columns)


def label_kernels(con: duckdb.DuckDBPyConnection) -> None:
    """Give every row the label import_ncu stores (kernels/labels.py), before match_functions re-keys any function.

    ncu rows carry theirs; those of a cell file written before labels were stored get kernel_labels over the cell's
    rows. Time and sample rows get their name's label in the cell's rows of that table (name_bases, no ` #n`: the
    views sum them per kernel key), the one import_nsys and import_torch_trace print.
    """
    rows: list[tuple[Any, ...]] = []
    cells = [c for (c,) in con.execute("SELECT DISTINCT cell_id FROM ncu_kernels WHERE label IS NULL").fetchall()]
    for cell in cells:
        kernels = [dict(zip(("kernel_id", "name", "function", "source", "launch_ids"), r, strict=True))
                   for r in con.execute("SELECT kernel_id, name, function, source, launch_ids FROM ncu_kernels "
                                        "WHERE cell_id = $1 ORDER BY kernel_id", [cell]).fetchall()]
        rows += [(cell, None, None, k["kernel_id"], label) for k, label in zip(kernels, kernel_labels(kernels),
                                                                                strict=True)]
    for table in ("kernel_times", "kernel_samples"):
        pairs: dict[str, set[tuple[str, str]]] = {}
        for cell, function, name in con.execute(f"SELECT DISTINCT cell_id, function, name FROM {table} "
                                                  "WHERE function IS NOT NULL AND name IS NOT NULL").fetchall():
            pairs.setdefault(cell, set()).add((function, name))
        rows += [(cell, function, name, table, label) for cell, found in pairs.items()
                 for (function, name), label in name_bases(found).items()]
    if not rows:
        return
    con.execute("CREATE TEMP TABLE _labels (cell_id VARCHAR, function VARCHAR, name VARCHAR, kernel_id VARCHAR, "
                "label VARCHAR)")  # kernel_id: the ncu row's id, or the time table a row is for
    _insert_rows(con, "_labels", rows)
    con.execute("UPDATE ncu_kernels t SET label = l.label FROM _labels l "
                "WHERE l.function IS NULL AND t.cell_id = l.cell_id AND t.kernel_id = l.kernel_id")
    for table in ("kernel_times", "kernel_samples"):
        con.execute(f"UPDATE {table} t SET label = l.label FROM _labels l WHERE l.kernel_id = '{table}' "
                    "AND t.cell_id = l.cell_id AND t.function = l.function AND t.name = l.name")
    con.execute("DROP TABLE _labels")


def assign_kernel_keys(con: duckdb.DuckDBPyConnection) -> None:
    """Key every row by the piece of code it ran (column `kernel`, what the views join on; table kernel_keys).

    A function that ran as one instantiation in a cell (on each source) is keyed by the function: spelling
    differences between tools cannot split it. A function several instantiations of which ran in one cell (the
    SiLU, mul and add `vectorized_elementwise_kernel`) keys each by its instantiation (kernel_identity.simplify),
    so their counters and time shares stay apart.
    """
    rows = con.execute(" UNION ".join(f"SELECT DISTINCT '{t}', cell_id, function, name FROM {t}"
                                      for t in KERNEL_TABLES)).fetchall()
    instantiation = {name: simplify(name) for name in {r[3] for r in rows}}  # once per distinct name
    seen: dict[tuple[str, str, str], set[str]] = {}
    for table, cell, function, name in rows:
        seen.setdefault((table, cell, function), set()).add(instantiation[name])
    several = {(cell, function) for (_, cell, function), names in seen.items() if len(names) > 1}
    keys = sorted({(cell, function, name, instantiation[name] if (cell, function) in several else function)
                   for _, cell, function, name in rows})
    if not keys:
        return
    _insert_rows(con, "kernel_keys", keys)
    for table in KERNEL_TABLES:
        con.execute(f"UPDATE {table} t SET kernel = k.kernel FROM kernel_keys k "
                    "WHERE t.cell_id = k.cell_id AND t.function = k.function AND t.name = k.name")


def _create_views(con: duckdb.DuckDBPyConnection) -> None:
    sql_dir = resources.files("perfreport.warehouse").joinpath("sql")
    for entry in sorted((e for e in sql_dir.iterdir() if e.name.endswith(".sql")), key=lambda e: e.name):
        try:
            con.execute(entry.read_text(encoding="utf-8"))
        except duckdb.Error as exc:
            raise PerfReportError(f"perfreport/warehouse/sql/{entry.name}: view creation failed: {exc}") from exc


def open_campaign(campaign_dir: Path) -> duckdb.DuckDBPyConnection:
    """Load config.yaml and every cell's JSON into an in-memory DuckDB: the tables and views of docs/warehouse.md."""
    return open_loaded(*scored(load_campaign(campaign_dir)))


def open_loaded(campaign: Campaign, ceilings: Ceilings) -> duckdb.DuckDBPyConnection:
    """open_campaign for a campaign and ceilings already loaded (gather reads both for itself too)."""
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # our verbs print their own progress, never DuckDB's bar
    _create_tables(con)
    _load_cells(con, campaign)
    _load_ncu(con, campaign)
    _load_timeline(con, campaign, "kernel_times", TIMES_FILE, TIMES_FIELDS)
    _load_timeline(con, campaign, "kernel_samples", SAMPLES_FILE, SAMPLES_FIELDS)
    con.execute("DROP TABLE IF EXISTS _raw")
    # One thread from here on: a parallel SUM adds its doubles in a varying order and rows that tie in an ORDER BY
    # come in a varying order, so two renders of one campaign differed in last digits and row order (200 cells);
    # the loads above read files in parallel, and the queries on ~10,000 rows take milliseconds either way.
    con.execute("SET threads = 1")
    label_kernels(con)
    match_functions(con)
    assign_kernel_keys(con)
    floor = ceilings.launch_floor(campaign.hardware)
    if floor is not None:  # the views hold a launch-bound kernel to it (one row: the campaign's hardware)
        con.execute("INSERT INTO launch_floor VALUES ($1, $2, $3)", [campaign.hardware, *floor])
    _create_views(con)
    return con


def describe(con: duckdb.DuckDBPyConnection) -> list[str]:
    """One line per view, then per table: `name (view|table): col1, col2, ...`, by name."""
    rows = con.execute(
        "SELECT c.table_name, t.table_type, string_agg(c.column_name, ', ' ORDER BY c.ordinal_position) "
        "FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE c.table_schema = 'main' GROUP BY ALL ORDER BY t.table_type DESC, c.table_name"
    ).fetchall()
    return [f"{name} ({'view' if kind == 'VIEW' else 'table'}): {cols}" for name, kind, cols in rows]


# A query verb answers questions about its tables: no file system (COPY TO could overwrite the lake's own Parquet,
# read_text/glob/ATTACH reach any file), no extension installs, and the settings locked so SQL cannot undo it.
READ_ONLY_SETTINGS = ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
                      "SET autoload_known_extensions = false", "SET allow_community_extensions = false",
                      "SET lock_configuration = true")


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> QueryResult:
    """Lock the connection down (READ_ONLY_SETTINGS), execute a user's sql and collect columns, DuckDB types and
    rows (raises duckdb.Error for the caller to explain; a blocked statement gets its own message)."""
    for setting in READ_ONLY_SETTINGS:
        con.execute(setting)
    try:
        cursor = con.execute(sql)
    except (duckdb.PermissionException, duckdb.InvalidInputException) as exc:
        if not isinstance(exc, duckdb.PermissionException) and "configuration has been locked" not in str(exc):
            raise
        raise PerfReportError(
            f"refused: {exc}\nSQL: {sql}\nThe query verbs read only their own tables: files, ATTACH, COPY TO, "
            f"INSTALL/LOAD of extensions and configuration changes are off. For unrestricted SQL open DuckDB "
            f"yourself (the warehouse tables are described in docs/warehouse.md)."
        ) from None
    if cursor.description is None:
        return QueryResult([], [])
    columns = [d[0] for d in cursor.description]
    types = [str(d[1]) for d in cursor.description]
    return QueryResult(columns, [tuple(r) for r in cursor.fetchall()], types)


def query(campaign_dir: Path, sql: str) -> QueryResult:
    """Run sql over the campaign's tables and views; a SQL error lists what can be queried."""
    con = open_campaign(campaign_dir)
    try:
        return run_sql(con, sql)
    except duckdb.Error as exc:
        listing = "\n".join(f"  {line}" for line in describe(con))
        raise PerfReportError(
            f"query failed: {exc}\nSQL: {sql}\nTables and views of campaign {str(campaign_dir)!r}:\n{listing}\n"
            f"Fix the SQL against these names (docs/warehouse.md describes each column)."
        ) from exc
    finally:
        con.close()
