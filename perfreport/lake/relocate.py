"""Relocate an embedded lake after its folder was moved or copied: rewrite the absolute paths Iceberg keeps.

Iceberg metadata holds absolute locations at three levels: ``catalog.db`` points at each table's current
``*.metadata.json``; that file holds the table location, the metadata log and each snapshot's manifest list;
manifest lists hold manifest paths and manifests hold data file paths. Relocation writes NEW files for every
level under the lake's new place (the old ones are left as they are), checks that every data file of every
snapshot resolves there, and only then switches the catalog rows of all tables in one transaction. Interrupted
at any point, the lake is as before and the command can be run again.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from perfreport.errors import PerfReportError
from perfreport.lake.damage import broken_files, local, metadata_damaged, not_a_folder, read_errors, reason
from perfreport.lake.iceberg import catalog_rows, moved_from


@dataclass
class RelocateResult:
    """What relocation rewrote: per table, snapshots and manifests, plus the old and new lake folders."""

    lake: Path
    old: str
    snapshots: dict[str, int] = field(default_factory=dict)
    manifests: dict[str, int] = field(default_factory=dict)
    data_files: dict[str, int] = field(default_factory=dict)


class _Mover:
    """Map a location under the old lake folder to the same place under the new one, in any spelling."""

    def __init__(self, old: str, new: Path) -> None:
        old = unquote(urlparse(old).path) if old.startswith("file:") else old
        old = old.rstrip("/")
        # pyiceberg's local FileIO takes file:// paths literally (no percent-decoding): write them unencoded.
        self.forms = [(f"file://{old}/", f"file://{new}/"), (Path(old).as_uri() + "/", f"file://{new}/"),
                      (f"file:{old}/", f"file:{new}/"), (f"{old}/", f"{new}/")]

    def __call__(self, value: str) -> str:
        for old, new in self.forms:
            if value.startswith(old):
                return new + value[len(old):]
        return value

    def deep(self, doc: Any) -> Any:
        """Return doc (parsed JSON) with every string location moved."""
        if isinstance(doc, str):
            return self(doc)
        if isinstance(doc, list):
            return [self.deep(v) for v in doc]
        if isinstance(doc, dict):
            return {k: self.deep(v) for k, v in doc.items()}
        return doc


def _rewrite_manifest(io: Any, meta: Any, manifest: Any, move: _Mover, out: str, compression: Any) -> Any:
    """Write a copy of manifest with its data file paths moved; return its manifest-list entry."""
    from copy import copy

    from pyiceberg.manifest import ManifestContent, write_manifest

    if manifest.content != ManifestContent.DATA:
        raise PerfReportError(f"manifest {manifest.manifest_path}: delete files (merge-on-read) are not supported by "
                              f"lake relocate; rewrite the table with an engine first (Spark rewrite_data_files).")
    source = copy(manifest)
    source[0] = move(manifest.manifest_path)
    entries = source.fetch_manifest_entry(io, discard_deleted=False)
    with write_manifest(meta.format_version, meta.specs()[manifest.partition_spec_id], meta.schema(),
                        io.new_output(out), manifest.added_snapshot_id or 0, compression) as writer:
        for entry in entries:
            entry.data_file[1] = move(entry.data_file.file_path)
            writer.add_entry(entry)
    entry_copy = copy(manifest)  # same counts, sequence numbers and snapshot: only where it lives changes
    entry_copy[0], entry_copy[1] = out, writer.to_manifest_file().manifest_length
    return entry_copy


def _relocate_table(row: Any, move: _Mover, result: RelocateResult) -> str:
    """Write the moved manifests, manifest lists and metadata file of one table; return the new metadata path."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list, write_manifest_list
    from pyiceberg.serializers import FromInputFile
    from pyiceberg.table import StaticTable

    io = PyArrowFileIO()
    name = row.table_name
    current = move(row.metadata_location)
    try:
        meta = FromInputFile.table_metadata(io.new_input(current))
        doc = move.deep(json.loads(io.new_input(current).open().read()))
    except read_errors() as exc:
        raise metadata_damaged(name, current, None, None, exc) from None
    folder = doc["location"].rstrip("/") + "/metadata"
    compression: Any = meta.properties.get("write.avro.compression-codec", "gzip")
    done: dict[str, Any] = {}
    lists = {}
    for snap in meta.snapshots:
        moved = []
        try:
            for manifest in read_manifest_list(io.new_input(move(snap.manifest_list))):
                if manifest.manifest_path not in done:
                    done[manifest.manifest_path] = _rewrite_manifest(
                        io, meta, manifest, move, f"{folder}/{uuid.uuid4()}-m0-relocated.avro", compression)
                moved.append(done[manifest.manifest_path])
        except read_errors() as exc:
            raise PerfReportError(
                f"lake relocate: table {name}, snapshot {snap.snapshot_id}: its manifest list "
                f"{local(move(snap.manifest_list))!r} or a manifest it names cannot be read ({reason(exc)}). Nothing "
                f"was switched. The way back: copy the lake folder again from where it was moved from (or restore "
                f"it from a backup), then run `lake relocate` again.") from None
        lists[snap.snapshot_id] = f"{folder}/snap-{snap.snapshot_id}-0-{uuid.uuid4()}-relocated.avro"
        with write_manifest_list(meta.format_version, io.new_output(lists[snap.snapshot_id]), snap.snapshot_id,
                                 snap.parent_snapshot_id, snap.sequence_number, compression) as writer:
            writer.add_manifests(moved)
    for snap_doc in doc.get("snapshots", []):
        snap_doc["manifest-list"] = lists[snap_doc["snapshot-id"]]
    now = int(time.time() * 1000)
    doc["last-updated-ms"] = now
    doc["metadata-log"] = [*doc.get("metadata-log", []), {"timestamp-ms": now, "metadata-file": current}]
    version = int(Path(urlparse(current).path).name.split("-", 1)[0]) + 1
    new = f"{folder}/{version:05d}-{uuid.uuid4()}.metadata.json"
    with io.new_output(new).create() as out:
        out.write(json.dumps(doc).encode("utf-8"))
    table = StaticTable.from_metadata(new)
    for snap in table.metadata.snapshots:  # every file of every snapshot must be whole at the new place
        problems = broken_files(table, snap)
        if problems:
            raise PerfReportError(f"lake relocate: table {name}, snapshot {snap.snapshot_id}: " + "; ".join(problems)
                                  + " at the new place; was the whole lake folder copied? Nothing was switched. "
                                  "Copy it again (or restore it from a backup), then run `lake relocate` again.")
    result.snapshots[name] = len(meta.snapshots)
    result.manifests[name] = len(done)
    result.data_files[name] = len(list(table.scan().plan_files())) if table.current_snapshot() else 0
    return new


def lake_relocate(lake: str | Path, old: str | None = None) -> RelocateResult:
    """Rewrite an embedded lake's metadata so it opens at `lake` after being moved from `old` (detected if None)."""
    from pyiceberg.catalog.sql import IcebergTables
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from perfreport.lake.iceberg import NAMESPACE, open_catalog, resolve_lake

    where = resolve_lake(lake)
    if isinstance(where, Path) and where.exists() and not where.is_dir():
        raise not_a_folder(where)
    if isinstance(where, str) or not (where / "catalog.db").is_file():
        raise PerfReportError(f"lake relocate --lake {lake}: expected an embedded lake folder holding catalog.db; "
                              f"a named catalog is not moved this way. Example: --lake /new/place/lake")
    catalog = open_catalog(where, check_moved=False)
    source = old or moved_from(where, catalog)
    result = RelocateResult(where, source or str(where))
    if source is None:
        return result
    move = _Mover(source, where)
    rows = catalog_rows(catalog)
    if not any(move(r.metadata_location) != r.metadata_location for r in rows):
        raise PerfReportError(f"lake relocate --from {source}: no table of {where} points under that folder; "
                              f"leave --from out to detect it.")
    switched = {r.table_name: (r.metadata_location, _relocate_table(r, move, result)) for r in rows}
    with Session(catalog.engine) as session, session.begin():
        for name, (before, after) in switched.items():
            updated = session.execute(update(IcebergTables).where(
                IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == NAMESPACE,
                IcebergTables.table_name == name, IcebergTables.metadata_location == before,
            ).values(metadata_location=after, previous_metadata_location=move(before)))
            if getattr(updated, "rowcount", 1) < 1:
                raise CommitFailedException(f"{NAMESPACE}.{name} changed during relocation; run it again")
    return result


def relocate_summary(result: RelocateResult) -> str:
    """Return one line per table rewritten, or that the lake is already at its place."""
    if not result.snapshots:
        return f"lake {result.lake}: already at its place (metadata points under it); nothing to do"
    lines = [f"lake {result.lake}: relocated from {result.old}"]
    lines += [f"  {name}: {result.snapshots[name]} snapshot(s), {result.manifests[name]} manifest(s) rewritten, "
              f"{result.data_files[name]} data file(s) in the current snapshot" for name in sorted(result.snapshots)]
    return "\n".join(lines)
