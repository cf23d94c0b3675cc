"""One publish is ONE commit across the lake's tables, refused when another publish took the same cells.

Atomic by catalog kind:
- SQL catalogs (the embedded SQLite one, PostgreSQL): every table's data, manifests and new metadata file are
  written first; then the catalog rows of all tables are switched in ONE database transaction, each UPDATE
  guarded by the metadata location this publish started from. Killed before that transaction commits, the
  catalog still points at the old metadata everywhere (the new files are unreferenced orphans).
- REST catalogs that advertise ``POST /v1/{prefix}/transactions/commit``: one multi-table commit request.
- Any other catalog: one commit per table in TABLES order, the ledger last (not atomic across tables).

A publish whose rows the lake already holds for its cells (the same content digest, publication_id aside, every
publication stamped on them in the ledger) commits nothing: an identical re-publish adds no second publication.

Columns that rows.py gained since a table was created are added in the same commit (schema evolution by name).
Every snapshot a publish creates carries a ``perfreport.publish`` summary property (who, when, publication,
campaign, cells, a per-run token). When the commit loses a race, the tables are reloaded and the snapshots
committed since this publish read the tables are checked: another publish of any of the same (campaign, cell)
keys is a PublishConflictError (nothing written); other cells are fine and the commit is rebuilt and retried.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from perfreport.errors import PerfReportError, PublishConflictError
from perfreport.lake.iceberg import APPEND_ONLY, NAMESPACE, SNAPSHOT_RETENTION, TABLES, load_tables
from perfreport.lake.rows import content_digest

MARK = "perfreport.publish"
COMMIT_ATTEMPTS = 20  # a trial lost 13/100 commits with 4 retries under 4 writers, none with 20
HOOK_ENV = "PERFREPORT_LAKE_TEST_HOOK"  # tests only: "<point>:<folder>" pauses the writer at <point>
REST_TRANSACTIONS = "transactions/commit"
CLOCK_SKEW = timedelta(minutes=10)  # NTP keeps hosts within milliseconds; minutes apart is a wrong clock


@dataclass
class Publish:
    """What one publish commits: rows per table, the cells it owns, and its ledger facts."""

    campaign: str
    cells: list[str]
    rows: dict[str, pa.Table]  # table name -> rows; the data tables are overwritten, the ledger appended
    publication_id: str
    who: str
    when: datetime
    token: str = field(default_factory=lambda: os.urandom(8).hex())

    def mark(self) -> str:
        """Return the snapshot summary property that identifies this publish."""
        return json.dumps({"token": self.token, "publication_id": self.publication_id, "who": self.who,
                           "at": self.when.isoformat(), "campaign": self.campaign, "cells": self.cells},
                          sort_keys=True, separators=(",", ":"))


@dataclass
class CommitResult:
    """How the publish committed: attempts used and whether all tables switched at once."""

    attempts: int
    atomic: bool
    held_by: list[str] = field(default_factory=list)  # nothing committed: these publications hold the rows


class _Recording:
    """A table's FileIO that notes every file it creates, so that a publish that fails deletes what it wrote."""

    def __init__(self, inner: Any, written: list[tuple[Any, str]]) -> None:
        self._inner, self._written = inner, written

    def new_output(self, location: str) -> Any:
        self._written.append((self._inner, location))  # before the file exists: a half-written one is noted too
        return self._inner.new_output(location)

    def note(self, io: Any, location: str) -> None:
        """Note a file written through another FileIO (the new metadata file of a staged commit)."""
        self._written.append((io, location))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _recorded(tables: dict[str, Any], written: list[tuple[Any, str]]) -> dict[str, Any]:
    for table in tables.values():
        if not isinstance(table.io, _Recording):
            table.io = _Recording(table.io, written)
    return tables


def _delete(written: list[tuple[Any, str]]) -> None:
    """Delete every file a publish wrote and did not commit (a failed write leaves no partial file behind)."""
    for io, location in reversed(written):
        with contextlib.suppress(Exception):
            io.delete(location)
    written.clear()


def hook(point: str) -> None:
    """Pause here while $PERFREPORT_LAKE_TEST_HOOK names this point (tests kill or race the writer here)."""
    spec = os.environ.get(HOOK_ENV, "")
    want, _, folder = spec.partition(":")
    if want != point or not folder:
        return
    where = Path(folder)
    (where / f"{point}.{os.getpid()}.reached").touch()
    deadline = time.monotonic() + 120
    while not (where / f"{point}.go").exists():
        if time.monotonic() > deadline:
            raise PerfReportError(f"{HOOK_ENV}={spec}: nobody created {where / (point + '.go')} within 120 s")
        time.sleep(0.02)


def _retryable() -> tuple[type[BaseException], ...]:
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy.exc import OperationalError

    # OperationalError: SQLite's "database is locked" while another writer holds the catalog.
    return CommitFailedException, OperationalError


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.02 * 2 ** min(attempt, 7)) * (0.5 + random.random()))


def expiry_cutoff(when: datetime, snapshot_ms: list[int]) -> datetime | None:
    """Snapshots older than this expire: SNAPSHOT_RETENTION before the lake's own newest snapshot, or before this
    publish's clock where that is earlier. A host whose clock runs days ahead never expires what the lake's record
    says is younger than the window (one publish from it expired every snapshot before). None: an empty table."""
    if not snapshot_ms:
        return None
    newest = datetime.fromtimestamp(max(snapshot_ms) / 1000, UTC)
    return min(when, newest) - SNAPSHOT_RETENTION


def catalog_clock(catalog: Any) -> datetime | None:
    """The catalog server's own time (PostgreSQL's now()): the lake's reference clock. None for a catalog with no
    clock of its own (SQLite runs in this process: its clock is this host's)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy import text

    if not isinstance(catalog, SqlCatalog) or catalog.engine.dialect.name != "postgresql":
        return None
    with catalog.engine.connect() as con:
        value = con.execute(text("SELECT now()")).scalar()
    return value.astimezone(UTC) if isinstance(value, datetime) else None


def check_clock(catalog: Any, when: datetime) -> None:
    """Refuse a publish whose clock is more than CLOCK_SKEW from the catalog server's: its publication and
    snapshots would be misdated in the lake's history (and, ahead, would age every other snapshot toward expiry)."""
    server = catalog_clock(catalog)
    if server is None or abs(when - server) <= CLOCK_SKEW:
        return
    gap = when - server
    hours = abs(gap).total_seconds() / 3600
    raise PerfReportError(
        f"publish_to_lake: this host's clock reads {when.isoformat(timespec='seconds')}, {hours:,.1f} h "
        f"{'ahead of' if gap > timedelta(0) else 'behind'} the lake's catalog server "
        f"({server.isoformat(timespec='seconds')}, PostgreSQL now()); expected them within "
        f"{CLOCK_SKEW.total_seconds() / 60:.0f} min. A publication stamped by a wrong clock misdates the lake's "
        f"history and its snapshot expiry. Set this host's clock (timedatectl set-ntp true, or chrony) and publish "
        f"again; nothing was written.")


def _own_cells(pub: Publish) -> Any:
    """The row filter of pub's (campaign, cell) keys: what its commit replaces and what it compares against."""
    from pyiceberg.expressions import And, EqualTo, In

    # pyiceberg's predicates are pydantic models whose positional __init__ mypy cannot see.
    return And(EqualTo("campaign", pub.campaign), In("cell_id", pub.cells))  # type: ignore[call-arg, arg-type]


def held_by(tables: dict[str, Any], pub: Publish) -> list[str]:
    """The publications whose rows the lake holds for pub's cells, when they are pub's rows (content_digest of every
    data table equal) and each is in the ledger; [] when anything differs, and the publish writes."""
    from pyiceberg.expressions import EqualTo

    if any(name not in tables for name in TABLES):
        return []
    mine = _own_cells(pub)
    held: dict[str, pa.Table] = {}
    for name in (n for n in TABLES if n not in APPEND_ONLY):
        columns = pub.rows[name].schema.names
        if set(columns) - {f.name for f in tables[name].schema().fields}:
            return []  # an older table lacks a column these rows carry
        held[name] = tables[name].scan(row_filter=mine, selected_fields=tuple(columns)).to_arrow()
    if content_digest(held) != content_digest({name: pub.rows[name] for name in held}):
        return []
    ids = {i for t in held.values() for i in t.column("publication_id").to_pylist()}
    campaign = EqualTo("campaign", pub.campaign)  # type: ignore[call-arg, arg-type]
    ledger = tables["publications"].scan(row_filter=campaign, selected_fields=("publication_id",)).to_arrow()
    return sorted(ids) if ids and ids <= set(ledger.column("publication_id").to_pylist()) else []


def _transaction(table: Any, name: str, pub: Publish) -> Any:
    """Stage this publish's change of one table (data and manifests written, nothing committed)."""
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    props = {MARK: pub.mark()}
    tx = table.transaction()
    if set(pub.rows[name].schema.names) - {f.name for f in table.schema().fields}:
        # Columns added to rows.py since the table was created: add them in the same commit (old rows read null).
        with tx.update_schema() as update:
            update.union_by_name(pub.rows[name].schema)
    if name in APPEND_ONLY:
        tx.append(pub.rows[name], snapshot_properties=props)
    else:
        where = _own_cells(pub)
        with warnings.catch_warnings():
            # A first publish of a cell deletes nothing: expected, not worth a warning.
            warnings.filterwarnings("ignore", message="Delete operation did not match any records")
            tx.overwrite(pub.rows[name], overwrite_filter=where, snapshot_properties=props)
    cutoff = expiry_cutoff(pub.when, [s.timestamp_ms for s in table.snapshots()])
    if cutoff is not None and any(s.timestamp_ms < cutoff.timestamp() * 1000 for s in table.snapshots()):
        ExpireSnapshots(tx).older_than(cutoff).commit()  # staged in the same commit
    return tx


def _abandon(txs: list[Any], metadata: list[tuple[Any, str]]) -> None:
    """Delete what a commit that did not land wrote: manifests, manifest lists, data and metadata files."""
    for tx in txs:
        for producer in getattr(tx, "_snapshot_producers", []):
            with contextlib.suppress(Exception):
                producer._clean_all_uncommitted()
            for data_file in getattr(producer, "_added_data_files", []):
                with contextlib.suppress(Exception):
                    tx._table.io.delete(data_file.file_path)
    for io, path in metadata:
        with contextlib.suppress(Exception):
            io.delete(path)


def _requirements(tx: Any) -> tuple[Any, ...]:
    from pyiceberg.table.update import AssertTableUUID

    return (*tx._requirements, AssertTableUUID(uuid=tx._table.metadata.table_uuid))


def _commit_sql(catalog: Any, txs: list[Any]) -> None:
    """Write every new metadata file, then switch all catalog rows in one database transaction."""
    from pyiceberg.catalog.sql import IcebergTables
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy import CursorResult, update
    from sqlalchemy.orm import Session

    staged = []
    for tx in txs:
        old = tx._table
        new = catalog._update_and_stage_table(old, old.name(), _requirements(tx), tx._updates)
        if isinstance(old.io, _Recording):
            old.io.note(new.io, new.metadata_location)
        catalog._write_metadata(new.metadata, new.io, new.metadata_location)
        staged.append((old, new))
    hook("before-commit")
    try:
        with Session(catalog.engine) as session, session.begin():
            for i, (old, new) in enumerate(staged):
                result = cast(CursorResult[Any], session.execute(update(IcebergTables).where(
                    IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == NAMESPACE,
                    IcebergTables.table_name == old.name()[-1],
                    IcebergTables.metadata_location == old.metadata_location,
                ).values(metadata_location=new.metadata_location, previous_metadata_location=old.metadata_location)))
                if result.rowcount < 1:
                    raise CommitFailedException(f"Table has been updated by another process: {old.name()}")
                if i == 0:
                    hook("mid-commit")
    except _retryable():
        _abandon(txs, [(new.io, new.metadata_location) for _, new in staged])
        raise


def rest_payload(txs: list[Any]) -> dict[str, Any]:
    """Return the REST catalog's multi-table commit body: one CommitTableRequest per table."""
    from pyiceberg.table import CommitTableRequest, Namespace, TableIdentifier

    changes = []
    for tx in txs:
        ident = tx._table.name()
        table = TableIdentifier(namespace=Namespace(root=list(ident[:-1])), name=ident[-1])
        request = CommitTableRequest(identifier=table, requirements=_requirements(tx), updates=tx._updates)
        changes.append(json.loads(request.model_dump_json()))
    return {"table-changes": changes}


def _rest_atomic(catalog: Any) -> bool:
    from pyiceberg.catalog.rest import Endpoint, HttpMethod, RestCatalog

    endpoint = Endpoint(http_method=HttpMethod.POST, path=f"/v1/{{prefix}}/{REST_TRANSACTIONS}")
    return isinstance(catalog, RestCatalog) and endpoint in getattr(catalog, "_supported_endpoints", ())


def _commit_rest(catalog: Any, txs: list[Any]) -> None:
    from pyiceberg.exceptions import CommitFailedException

    hook("before-commit")
    response = catalog._session.post(catalog.url(REST_TRANSACTIONS),
                                     data=json.dumps(rest_payload(txs)).encode("utf-8"))
    if response.status_code == 409:
        _abandon(txs, [])
        raise CommitFailedException(f"REST catalog: {response.text}")
    if response.status_code >= 300:
        raise PerfReportError(
            f"lake: REST multi-table commit {catalog.url(REST_TRANSACTIONS)} answered {response.status_code}: "
            f"{response.text[:500]}. The commit state is unknown: check `lake history`, then publish again "
            f"(idempotent).")


def atomic_committer(catalog: Any) -> Callable[[Any, list[Any]], None] | None:
    """Return the all-tables-at-once commit for this catalog, or None when it has none."""
    from pyiceberg.catalog.sql import SqlCatalog

    if isinstance(catalog, SqlCatalog) and catalog.engine.dialect.supports_sane_rowcount:
        return _commit_sql
    return _commit_rest if _rest_atomic(catalog) else None


def _newer_marks(table: Any, start_id: int | None) -> list[tuple[Any, dict[str, Any]]]:
    """Return (snapshot, mark) of every publish snapshot committed after start_id, newest first."""
    out = []
    snap = table.current_snapshot()
    while snap is not None and snap.snapshot_id != start_id:
        raw = snap.summary.additional_properties.get(MARK) if snap.summary else None
        if raw:
            with contextlib.suppress(ValueError):
                out.append((snap, json.loads(raw)))
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return out


def check_conflicts(tables: dict[str, Any], start: dict[str, int | None], pub: Publish) -> None:
    """Raise PublishConflictError when a publish committed since `start` holds any of pub's cells."""
    mine = set(pub.cells)
    found: dict[str, tuple[str, int, dict[str, Any], list[str]]] = {}
    for name in TABLES:  # the ledger last: its snapshot id is the one to report when present
        if name not in tables:
            continue
        for snap, mark in _newer_marks(tables[name], start.get(name)):
            overlap = sorted(mine & set(mark.get("cells", []))) if mark.get("campaign") == pub.campaign else []
            if overlap and mark.get("token") != pub.token:
                found[mark.get("token", "")] = (name, snap.snapshot_id, mark, overlap)
    if not found:
        return
    name, snap_id, mark, overlap = min(found.values(), key=lambda f: f[2].get("at", ""))
    cells = ", ".join(f"{pub.campaign}/{c}" for c in overlap)
    raise PublishConflictError(
        f"publish_to_lake: conflict on {cells}: another publish committed these cells while this one was running "
        f"(publication {mark.get('publication_id')} by {mark.get('who')!r} at {mark.get('at')}, {name} snapshot "
        f"{snap_id}). Nothing was written by this publish; the lake keeps the other one. To replace it with this "
        f"campaign's rows deliberately, run publish_to_lake again (a publish that no other writer overlaps "
        f"replaces the cells).")


def commit_publish(catalog: Any, pub: Publish) -> CommitResult:
    """Commit pub to every table (atomically where the catalog allows), retrying races on other cells.

    Any failure (a full disk, a read-only lake, Ctrl-C) deletes every file this publish wrote and did not commit:
    the lake folder is left as it was.
    """
    check_clock(catalog, pub.when)
    written: list[tuple[Any, str]] = []
    try:
        return _commit(catalog, pub, written)
    except BaseException:
        _delete(written)
        raise


def _commit(catalog: Any, pub: Publish, written: list[tuple[Any, str]]) -> CommitResult:
    tables = _recorded(load_tables(catalog, TABLES, create=True), written)
    start = {name: t.metadata.current_snapshot_id for name, t in tables.items()}
    hook("after-read")
    committer = atomic_committer(catalog)
    if held := held_by(tables, pub):
        return CommitResult(0, committer is not None, held)
    if committer is None:
        return CommitResult(_commit_sequential(catalog, pub, tables, start, written), atomic=False)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        txs = [_transaction(tables[name], name, pub) for name in TABLES]
        try:
            committer(catalog, txs)
            written.clear()  # committed: the files are the lake's now
            return CommitResult(attempt, atomic=True)
        except _retryable() as exc:
            _give_up_after(attempt, exc, pub)
        _backoff(attempt)
        tables = _recorded(load_tables(catalog, TABLES), written)
        if held := held_by(tables, pub):  # the publish that won the race wrote these very rows
            return CommitResult(attempt, atomic=True, held_by=held)
        check_conflicts(tables, start, pub)
    raise AssertionError("unreachable")


def _give_up_after(attempt: int, exc: BaseException, pub: Publish) -> None:
    if attempt == COMMIT_ATTEMPTS:
        raise PerfReportError(
            f"lake: publish of campaign {pub.campaign!r}: commit still conflicting after {attempt} attempts ({exc});"
            f" other writers kept winning. Publish again: the overwrite is idempotent.") from exc


def _commit_sequential(catalog: Any, pub: Publish, tables: dict[str, Any], start: dict[str, int | None],
                       written: list[tuple[Any, str]]) -> int:
    """One commit per table, the ledger last; returns the most attempts any table needed."""
    most = 0
    for i, name in enumerate(TABLES):
        if i:
            hook("between-tables")
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            tx = _transaction(tables[name], name, pub)
            try:
                hook("before-commit")
                catalog.commit_table(tx._table, _requirements(tx), tx._updates)
                written.clear()  # this table's files are committed; a later failure must not delete them
                most = max(most, attempt)
                break
            except _retryable() as exc:
                _abandon([tx], [])
                _give_up_after(attempt, exc, pub)
            _backoff(attempt)
            tables = {**tables, **_recorded(load_tables(catalog, [name]), written)}
            check_conflicts({name: tables[name]}, start, pub)
    return most
