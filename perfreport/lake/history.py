"""Lake history and time travel: one entry per commit, and the tables as of a snapshot.

pyiceberg commits a re-publish's overwrite as TWO snapshots (a delete, then an append) in one metadata
commit; no reader ever saw the in-between state. History therefore lists the snapshots that were current
after a commit (read from the table's metadata log) and folds the in-between ones into them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfreport.errors import PerfReportError
from perfreport.lake.damage import committed_ids, explained_scan
from perfreport.lake.iceberg import NAMESPACE, load_tables, open_lake
from perfreport.lake.rows import SCHEMAS

COUNTS = ("added-records", "deleted-records", "total-records", "added-data-files", "deleted-data-files")


@dataclass
class Commit:
    """One commit of a table: the snapshot current after it, and the summary counts of every folded snapshot."""

    table: str
    snapshot_id: int
    parent_id: int | None  # the snapshot current before this commit
    timestamp: datetime
    operation: str
    counts: dict[str, int]
    folded: list[int]  # in-between snapshot ids of the same commit


def table_names(catalog: Any) -> list[str]:
    """Return the lake's table names, sorted."""
    return sorted(ident[-1] for ident in catalog.list_tables(NAMESPACE))


def lake_history(lake: str | Path | None, table: str = "kernels") -> list[Commit]:
    """Return the commits of one lake table, oldest first."""
    where, catalog = open_lake(lake)
    names = table_names(catalog)
    if table not in names:
        raise PerfReportError(f"lake {str(where)!r}: no table {table!r}; expected one of "
                              f"{', '.join(names) or '(none)'}. Example: --table kernels")
    tbl = load_tables(catalog, [table])[table]
    snapshots = sorted(tbl.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    committed = committed_ids(tbl)
    oldest_logged = min((s.timestamp_ms for s in snapshots if s.snapshot_id in committed), default=0)
    commits: list[Commit] = []
    pending: list[Any] = []
    for snap in snapshots:
        pending.append(snap)
        if snap.snapshot_id not in committed and snap.timestamp_ms >= oldest_logged and snap is not snapshots[-1]:
            continue
        counts: dict[str, int] = {}
        for s in pending:
            for key in COUNTS:
                value = s.summary.additional_properties.get(key) if s.summary else None
                if value is not None and key != "total-records":
                    counts[key] = counts.get(key, 0) + int(value)
        total = snap.summary.additional_properties.get("total-records") if snap.summary else None
        if total is not None:
            counts["total-records"] = int(total)
        ops = [s.summary.operation.value if s.summary else "unknown" for s in pending]
        commits.append(Commit(table, snap.snapshot_id, commits[-1].snapshot_id if commits else
                              pending[0].parent_snapshot_id,
                              datetime.fromtimestamp(snap.timestamp_ms / 1000, UTC),
                              ops[0] if len(ops) == 1 else "+".join(ops), counts,
                              [s.snapshot_id for s in pending[:-1]]))
        pending = []
    return commits


def tables_as_of(catalog: Any, where: Path | str, snapshot_id: int | None) -> dict[str, Any]:
    """Return name -> Arrow table: current snapshots, or the tables as of snapshot_id.

    The table owning snapshot_id is read at it; every other table at its snapshot current at that
    snapshot's timestamp (empty when it had none yet).
    """
    names = table_names(catalog)
    tables = load_tables(catalog, names)  # one moment of the catalog: a publish switches all tables at once
    if snapshot_id is None:
        return {name: _scan(where, name, t, t.current_snapshot()) for name, t in tables.items()}
    owner = next(((n, t.snapshot_by_id(snapshot_id)) for n, t in tables.items()
                  if t.snapshot_by_id(snapshot_id) is not None), None)
    if owner is None:
        raise PerfReportError(
            f"lake {str(where)!r}: no snapshot {snapshot_id} in tables {', '.join(names) or '(none)'} (expired "
            f"after 7 days, or mistyped). List them with `perftunereport lake history --lake {where} "
            f"--table kernels`.")
    at_ms = owner[1].timestamp_ms
    out = {}
    for name, t in tables.items():
        snap = owner[1] if name == owner[0] else t.snapshot_as_of_timestamp(at_ms)
        out[name] = (_scan(where, name, t, snap) if snap is not None
                     else SCHEMAS[name].empty_table() if name in SCHEMAS else t.schema().as_arrow().empty_table())
    return out


def _scan(where: Path | str, name: str, table: Any, snapshot: Any) -> Any:
    """One table as Arrow at `snapshot` (None: an empty table); a damaged file is named with the way back."""
    with explained_scan(str(where), name, table, snapshot):
        return table.scan(snapshot_id=snapshot.snapshot_id if snapshot is not None else None).to_arrow()
