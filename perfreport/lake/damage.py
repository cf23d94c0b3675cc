"""A damaged lake explained: which file is wrong, how, and the way back, instead of a reader's traceback.

A lake is a chain of files: ``catalog.db`` names each table's current ``*.metadata.json``; that names each
snapshot's manifest list; manifests name the Parquet data files with their sizes. A reader fails at the first
broken link with an error that names neither the file nor the table (pyarrow's "Parquet magic bytes not found"),
so on any read failure the chain is walked and checked here: every file must exist with the size the level
above recorded, and be readable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from perfreport.errors import PerfReportError

INTACT_SHOWN = 3  # intact older snapshots named in a message


def read_errors() -> tuple[type[BaseException], ...]:
    """What a reader of a damaged file raises: missing (OSError), cut or garbage (pyarrow, avro, pydantic)."""
    from pyarrow.lib import ArrowException
    from pyiceberg.exceptions import ValidationError

    return OSError, ValueError, EOFError, ArrowException, ValidationError


def reason(exc: BaseException) -> str:
    """The first line of an error, for a message (pydantic's errors span several)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    detail = next((ln for ln in lines if "Invalid JSON" in ln or "Errno" in ln), lines[0] if lines else "")
    return f"{type(exc).__name__}: {detail}"[:300]


def local(location: str) -> str:
    """A file:// location as a plain path (what a user finds on disk); other schemes unchanged."""
    return unquote(urlparse(location).path) if location.startswith("file:") else location


def not_a_folder(lake: Path) -> PerfReportError:
    """The lake path names a file, not a folder."""
    return PerfReportError(
        f"lake {str(lake)!r}: is a file, not a lake folder (a lake folder holds catalog.db and warehouse/). Pass "
        f"the lake folder (--lake or $PERFREPORT_LAKE), or move this file away if the lake should live there.")


def newest_metadata(lake: Path) -> list[str]:
    """The newest metadata file of each table under <lake>/warehouse (what a lost catalog pointed at)."""
    out = []
    for folder in sorted((lake / "warehouse" / "perfreport").glob("*/metadata")):
        files = sorted(folder.glob("*.metadata.json"))
        if files:
            out.append(f"{folder.parent.name}: {files[-1]}")
    return out


def catalog_damaged(db: Path, exc: BaseException | None) -> PerfReportError:
    """catalog.db is not a readable SQLite catalog (garbage, cut, or emptied while the tables remain)."""
    what = (f"cannot be read as an SQLite catalog ({reason(exc)})" if exc else
            "is missing, empty or a new catalog, but warehouse/ holds the tables")
    tables = newest_metadata(db.parent)
    listed = "".join(f"\n  {t}" for t in tables) or " (none found)"
    return PerfReportError(
        f"lake catalog {str(db)!r}: {what}. catalog.db names each table's current metadata file; without "
        f"it the lake can be neither read nor published to (a publish would start a new history beside the old "
        f"one). The way back: restore catalog.db from a backup of the lake folder. The data files under "
        f"{db.parent / 'warehouse'} are untouched; the newest metadata file of each table is:{listed}\n"
        f"Register them into a fresh catalog.db with pyiceberg (SqlCatalog.register_table('perfreport.<table>', "
        f"'<file>')), then check with `perftunereport lake history --lake {db.parent}`.")


def storage_refused(table: str, location: str, exc: BaseException) -> PerfReportError | None:
    """The object store refused or did not answer (a key, the endpoint): not a damaged file; None otherwise.

    Only remote locations; a missing object is FileNotFoundError (pyarrow and s3fs alike), so it stays damage.
    """
    if location.startswith("file:") or "://" not in location or not isinstance(exc, OSError) or isinstance(
            exc, FileNotFoundError):
        return None
    return PerfReportError(
        f"lake table {table}: the object store did not serve {location!r} ({reason(exc)}). The catalog answered, so "
        f"the files are likely intact: check that the endpoint is up and that the catalog's s3.endpoint, "
        f"s3.access-key-id and s3.secret-access-key are right (PYICEBERG_CATALOG__<NAME>__S3__* or .pyiceberg.yaml; "
        f"docs/lake.md, 'Shared catalogs'), then run the command again.")


def metadata_damaged(table: str, location: str, previous: str | None, db: str | None,
                     exc: BaseException) -> PerfReportError:
    """A table's current metadata file is missing, cut or not Iceberg metadata (or its object store refused)."""
    refused = storage_refused(table, location, exc)
    if refused is not None:
        return refused
    back = "restore it from a backup of the lake folder"
    if previous and db:
        back += (f"; or point the table at its previous metadata file {local(previous)!r}, which drops the "
                 f"table's last commit: sqlite3 {db!r} \"UPDATE iceberg_tables SET metadata_location = "
                 f"'{previous}' WHERE table_namespace = 'perfreport' AND table_name = '{table}'\", then check with "
                 f"`perftunereport lake history --table {table}`")
    return PerfReportError(
        f"lake table {table}: its current metadata file {local(location)!r} cannot be read ({reason(exc)}). Every "
        f"lake verb, `lake history` included, reads it first. The way back: {back}.")


def _check(io: Any, location: str, size: int | None, what: str, problems: list[str]) -> bool:
    path = local(location)
    try:
        found = io.new_input(location)
        if not found.exists():
            problems.append(f"{what} {path!r} is missing")
            return False
        length = len(found)
    except read_errors() as exc:
        problems.append(f"{what} {path!r} cannot be read ({reason(exc)})")
        return False
    if size is not None and length != size:
        problems.append(f"{what} {path!r} holds {length:,} bytes where {size:,} were written (cut or overwritten)")
        return False
    return True


def _parquet_readable(io: Any, location: str, problems: list[str]) -> None:
    import pyarrow.parquet as pq

    try:
        with io.new_input(location).open() as fh:
            pq.ParquetFile(fh).metadata  # noqa: B018 - reading the footer is the check
    except read_errors() as exc:
        problems.append(f"data file {local(location)!r} is not readable Parquet ({reason(exc)})")


def broken_files(table: Any, snapshot: Any) -> list[str]:
    """Every missing, cut or unreadable file that reading `snapshot` of `table` needs (empty: all intact)."""
    io, problems = table.io, list[str]()
    if not _check(io, snapshot.manifest_list, None, "manifest list", problems):
        return problems
    try:
        manifests = snapshot.manifests(io)
    except read_errors() as exc:
        return [f"manifest list {local(snapshot.manifest_list)!r} cannot be read ({reason(exc)})"]
    for manifest in manifests:
        if not _check(io, manifest.manifest_path, manifest.manifest_length, "manifest", problems):
            continue
        try:
            entries = manifest.fetch_manifest_entry(io, discard_deleted=True)
        except read_errors() as exc:
            problems.append(f"manifest {local(manifest.manifest_path)!r} cannot be read ({reason(exc)})")
            continue
        for entry in entries:
            data = entry.data_file
            if _check(io, data.file_path, data.file_size_in_bytes, "data file", problems):
                _parquet_readable(io, data.file_path, problems)
    return problems


def committed_ids(table: Any) -> set[int]:
    """Return the snapshot ids that were current after some commit (current snapshot of each metadata file).

    A re-publish commits two snapshots at once (a delete, then an append); the in-between one was never read.
    """
    from pyiceberg.serializers import FromInputFile

    ids = {table.metadata.current_snapshot_id}
    for entry in table.metadata.metadata_log:
        try:
            ids.add(FromInputFile.table_metadata(table.io.new_input(entry.metadata_file)).current_snapshot_id)
        except read_errors():
            continue  # an expired or damaged metadata file: its snapshot is shown unfolded
    return {i for i in ids if i is not None}


def files_damaged(lake: str, name: str, table: Any, snapshot: Any, problems: list[str]) -> PerfReportError:
    """The error for a snapshot whose files are damaged: each file, then the intact snapshots to go back to."""
    intact, committed = [], committed_ids(table)
    for snap in sorted(table.snapshots(), key=lambda s: s.timestamp_ms, reverse=True):
        if snap.snapshot_id in committed - {snapshot.snapshot_id} and not broken_files(table, snap):
            intact.append(str(snap.snapshot_id))
        if len(intact) == INTACT_SHOWN:
            break
    older = (f"snapshots of {name} with every file intact: {', '.join(intact)}; read one with `perftunereport "
             f"lake query --lake {lake} --snapshot {intact[0]} SQL`" if intact else
             f"no other snapshot of {name} has every file intact")
    listed = "".join(f"\n  - {p}" for p in problems)
    return PerfReportError(
        f"lake {lake!r}: table {name}, snapshot {snapshot.snapshot_id}: {len(problems)} damaged file(s):{listed}\n"
        f"The way back: restore these files from a backup of the lake folder (a publish reads them too, so it "
        f"cannot repair them). `perftunereport lake history --lake {lake} --table {name}` lists the snapshots; "
        f"{older}.")


@contextlib.contextmanager
def explained_scan(lake: str, name: str, table: Any, snapshot: Any) -> Iterator[None]:
    """Turn a failed read of one table's snapshot into files_damaged; a failure with every file intact passes."""
    try:
        yield
    except read_errors() as exc:
        refused = storage_refused(name, table.location(), exc)
        if refused is not None:
            raise refused from None
        problems = broken_files(table, snapshot) if snapshot is not None else []
        if not problems:
            raise
        raise files_damaged(lake, name, table, snapshot, problems) from None


@contextlib.contextmanager
def explained(lake: str, load: Callable[[], dict[str, Any]], every_snapshot: bool = False) -> Iterator[None]:
    """Turn a failed read anywhere in the lake into files_damaged for the first table found damaged.

    `load` returns the tables (name -> table) afresh; current snapshots are checked, or all with every_snapshot.
    """
    try:
        yield
    except read_errors() as exc:
        for name, table in sorted(load().items()):
            refused = storage_refused(name, table.location(), exc)
            if refused is not None:
                raise refused from None
            snaps = table.snapshots() if every_snapshot else [table.current_snapshot()]
            for snap in (s for s in snaps if s is not None):
                problems = broken_files(table, snap)
                if problems:
                    raise files_damaged(lake, name, table, snap, problems) from None
        raise
