"""`nsys export --type sqlite` -> per-kernel time rows.

Kernel executions are rows of CUPTI_ACTIVITY_KIND_KERNEL (start, end in ns; demangledName / shortName /
mangledName are ids into StringIds(id, value)), the tables nsys's own cuda_gpu_kern_sum report queries.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.timeshare.model import Parsed

MAGIC = b"SQLite format 3\x00"
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
NAME_COLUMNS = ("demangledName", "shortName", "mangledName")
_RERUN = "Re-run `nsys profile --trace=cuda ...` (add nvtx,osrt as needed), then `nsys export --type sqlite`."


def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"'{path}': an SQLite file that cannot be read ({exc}); re-export it with "
                         f"`nsys export --type sqlite R.nsys-rep`.") from None
    return con


def read_nsys_sqlite(path: Path) -> Parsed:
    """Aggregate kernel executions per name from an nsys SQLite export."""
    con = _connect(path)
    try:
        return _read(path, con)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"'{path}': query of {KERNEL_TABLE} failed ({exc}); the export is damaged or not from "
                         f"nsys. Re-export it with `nsys export --type sqlite R.nsys-rep`.") from None
    finally:
        con.close()


def _read(path: Path, con: sqlite3.Connection) -> Parsed:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if KERNEL_TABLE not in tables:
        raise InputError(
            f"'{path}': no {KERNEL_TABLE} table: the capture had no CUDA trace (nsys creates the table only when "
            f"it traced kernels). {_RERUN}"
        )
    if "StringIds" not in tables:
        raise InputError(f"'{path}': {KERNEL_TABLE} is there but StringIds (kernel names) is missing; expected "
                         f"a complete `nsys export --type sqlite` file. Re-export it.")
    cols = {r[1] for r in con.execute(f"PRAGMA table_info({KERNEL_TABLE})")}
    missing = [c for c in ("start", "end") if c not in cols]
    name_col = next((c for c in NAME_COLUMNS if c in cols), None)
    if missing or name_col is None:
        need = ", ".join(missing + ([] if name_col else ["one of " + "/".join(NAME_COLUMNS)]))
        raise InputError(f"'{path}': {KERNEL_TABLE} lacks column(s) {need}; expected the nsys export schema "
                         f"(start, end, demangledName -> StringIds.id). Re-export with a current nsys.")
    query = (
        f'SELECT k.{name_col}, s.value, COUNT(*), SUM(k."end" - k.start), MIN(k."end" - k.start), '
        f'MAX(k."end" - k.start) FROM {KERNEL_TABLE} AS k LEFT JOIN StringIds AS s ON s.id = k.{name_col} '
        f'WHERE k."end" >= k.start GROUP BY k.{name_col}'
    )
    (untyped,) = con.execute(f'SELECT COUNT(*) FROM {KERNEL_TABLE} WHERE typeof(start) != \'integer\' '
                             f'OR typeof("end") != \'integer\'').fetchone()
    if untyped:
        raise InputError(f"'{path}': {untyped} row(s) of {KERNEL_TABLE} have a start or end that is not an integer "
                         f"(NULL, REAL or TEXT); expected integer nanoseconds, as nsys writes them. The export is "
                         f"damaged; re-export it with `nsys export --type sqlite R.nsys-rep`.")
    merged: dict[str, dict[str, Any]] = {}
    unnamed = 0
    for name_id, value, count, total, lo, hi in con.execute(query):
        name = value if isinstance(value, str) and value.strip() else f"<StringIds id {name_id}>"
        unnamed += name != value
        row = merged.setdefault(name, {"name": name, "instances": 0, "total_ns": 0, "min_ns": lo, "max_ns": hi})
        row["instances"] += count
        row["total_ns"] += total
        row["min_ns"], row["max_ns"] = min(row["min_ns"], lo), max(row["max_ns"], hi)
    (negative,) = con.execute(f'SELECT COUNT(*) FROM {KERNEL_TABLE} WHERE "end" < start').fetchone()
    if not merged:
        raise InputError(f"'{path}': {KERNEL_TABLE} has no kernel execution rows: no kernel ran while nsys traced. "
                         f"{_RERUN}")
    warnings = []
    if name_col != "demangledName":
        warnings.append(f"{KERNEL_TABLE} has no demangledName column; kernel names come from {name_col}.")
    if unnamed:
        warnings.append(f"{unnamed} kernel name id(s) are missing from StringIds; shown as '<StringIds id N>'.")
    if negative:
        warnings.append(f"{negative} kernel row(s) with end < start were skipped (clock glitch in the capture).")
    return Parsed("nsys-sqlite", sorted(merged.values(), key=lambda r: r["name"]), report=KERNEL_TABLE,
                  warnings=warnings)
