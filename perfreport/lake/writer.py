"""Publish a campaign to the lake: an Iceberg SQL catalog on SQLite plus a local warehouse folder.

Each table gets ONE commit per publish: an overwrite filtered on the campaign and the published cell ids
(delete + append in one Iceberg transaction), so re-publishing a cell replaces its rows and readers never see
half a publish of a table. The ledger row in ``publications`` is appended last: a ledger row means every
table of that publish has committed. Concurrent writers are retried on CommitFailedException with backoff.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from perfreport.campaign import load_campaign
from perfreport.errors import PerfReportError
from perfreport.lake.gate import CellCheck, GateError, check_campaign
from perfreport.lake.rows import SCHEMAS, Rows, build_rows, publication_row, to_arrow

NAMESPACE = "perfreport"
LAKE_ENV = "PERFREPORT_LAKE"
DEFAULT_LAKE = Path("lake")
COMMIT_ATTEMPTS = 20  # a trial lost 13/100 commits with 4 retries under 4 writers, none with 20
SNAPSHOT_RETENTION = timedelta(days=7)
TABLE_PROPERTIES = {
    "format-version": "2",
    "commit.manifest-merge.enabled": "true",
    "history.expire.max-snapshot-age-ms": str(int(SNAPSHOT_RETENTION.total_seconds() * 1000)),
}


@dataclass
class PublishResult:
    """What a publish wrote (or, with dry_run, would write)."""

    campaign: str
    lake: Path
    publication_id: str
    checks: list[CellCheck]
    counts: dict[str, int]
    rejected: list[str] = field(default_factory=list)
    dry_run: bool = False
    attempts: dict[str, int] = field(default_factory=dict)  # table -> commit attempts used

    @property
    def problems(self) -> list[str]:
        """Every gate problem, cell by cell."""
        return [p for c in self.checks for p in c.problems()]


def resolve_lake(lake: str | Path | None) -> Path:
    """Return the lake folder: the option, else $PERFREPORT_LAKE, else ./lake (absolute)."""
    value = str(lake) if lake is not None else os.environ.get(LAKE_ENV) or str(DEFAULT_LAKE)
    if value.startswith("file://"):
        value = value[len("file://"):]
    elif "://" in value:
        raise PerfReportError(
            f"lake {value!r}: only the embedded lake (a folder path) is supported by this perfreport; got a URI "
            f"with a scheme. Pass a folder such as --lake lake/ (docs/lake.md shows how Spark/Trino read it).")
    return Path(value).expanduser().resolve()


def open_catalog(lake: Path) -> Any:
    """Open (creating the folders) the SQLite SQL catalog at <lake>/catalog.db, warehouse <lake>/warehouse."""
    from pyiceberg.catalog.sql import SqlCatalog

    (lake / "warehouse").mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(NAMESPACE, uri=f"sqlite:///{lake / 'catalog.db'}",
                         warehouse=(lake / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog


def _retryable() -> tuple[type[BaseException], ...]:
    from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError
    from sqlalchemy.exc import OperationalError

    # OperationalError: SQLite's "database is locked" when another writer holds the catalog.
    return CommitFailedException, TableAlreadyExistsError, OperationalError


def with_retry(action: Callable[[int], Any], what: str, attempts: int = COMMIT_ATTEMPTS) -> int:
    """Run action(attempt) until it commits, retrying conflicts with jittered backoff; return attempts used."""
    retryable = _retryable()
    for attempt in range(1, attempts + 1):
        try:
            action(attempt)
            return attempt
        except retryable as exc:
            if attempt == attempts:
                raise PerfReportError(
                    f"lake: {what}: commit still conflicting after {attempts} attempts ({exc}); another "
                    f"writer kept winning. Publish again: the overwrite is idempotent.") from exc
            time.sleep(min(2.0, 0.02 * 2 ** min(attempt, 7)) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def load_table(catalog: Any, name: str) -> Any:
    """Load perfreport.<name>, creating it (schema, properties, campaign partition) when absent."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    ident = f"{NAMESPACE}.{name}"
    try:
        return catalog.load_table(ident)
    except NoSuchTableError:
        pass
    try:
        with catalog.create_table_transaction(ident, schema=SCHEMAS[name], properties=TABLE_PROPERTIES) as tx, \
                tx.update_spec() as spec:
            spec.add_identity("campaign")
    except TableAlreadyExistsError:
        pass  # another writer created it first: same schema, use theirs
    return catalog.load_table(ident)


def _expire_old_snapshots(table: Any, now: datetime) -> None:
    """Expire snapshots older than SNAPSHOT_RETENTION; best effort (a conflict just leaves them)."""
    from pyiceberg.exceptions import CommitFailedException

    with contextlib.suppress(CommitFailedException):
        table.maintenance.expire_snapshots().older_than(now - SNAPSHOT_RETENTION).commit()


def _overwrite(catalog: Any, name: str, campaign: str, cell_ids: list[str], rows: list[dict[str, Any]],
               now: datetime) -> int:
    from pyiceberg.expressions import And, EqualTo, In

    df = to_arrow(name, rows)
    # pyiceberg's predicates are pydantic models whose positional __init__ mypy cannot see.
    where = And(EqualTo("campaign", campaign), In("cell_id", cell_ids))  # type: ignore[call-arg, arg-type]

    def commit(_attempt: int) -> None:
        table = load_table(catalog, name)  # reload: a retry must build on the latest snapshot
        with warnings.catch_warnings():
            # A first publish of a cell deletes nothing: expected, not worth a warning.
            warnings.filterwarnings("ignore", message="Delete operation did not match any records")
            with table.transaction() as tx:
                tx.overwrite(df, overwrite_filter=where)

    used = with_retry(commit, f"overwrite {NAMESPACE}.{name} for campaign {campaign!r}")
    _expire_old_snapshots(load_table(catalog, name), now)
    return used


def _append(catalog: Any, name: str, row: dict[str, Any]) -> int:
    df = to_arrow(name, [row])
    return with_retry(lambda _a: load_table(catalog, name).append(df), f"append to {NAMESPACE}.{name}")


def publish_to_lake(campaign_dir: Path, lake: str | Path | None = None, strict: bool = False,
                    dry_run: bool = False, who: str | None = None,
                    cell_ids: list[str] | None = None) -> PublishResult:
    """Gate the campaign's cells, then overwrite their rows in the lake (nothing written on dry_run/strict)."""
    campaign = load_campaign(Path(campaign_dir), strict=strict)
    checks = check_campaign(campaign, cell_ids)
    problems = [p for c in checks for p in c.problems()]
    if strict and problems:
        raise GateError(f"publish_to_lake --strict {campaign.config_path}", problems)
    rows: Rows = build_rows(campaign, checks)
    pub_id = rows.publication_id(campaign.id)
    rows.stamp(pub_id)
    where = resolve_lake(lake)
    counts = {"kernels": len(rows.kernels), "cells": len(rows.cells), "captures": len(rows.captures)}
    result = PublishResult(campaign.id, where, pub_id, checks, counts, rows.rejected, dry_run)
    if dry_run:
        return result
    now = datetime.now(UTC)
    catalog = open_catalog(where)
    published = [c.cell_id for c in checks]
    for name in ("kernels", "captures", "cells"):
        result.attempts[name] = _overwrite(catalog, name, campaign.id, published, getattr(rows, name), now)
    ledger = publication_row(campaign.id, pub_id, rows, checks, strict,
                             who or os.environ.get("USER") or "unknown", now)
    result.attempts["publications"] = _append(catalog, "publications", ledger)
    result.counts["publications"] = 1
    return result


def publish_summary(result: PublishResult) -> str:
    """Return the human summary of a publish: per cell completeness and problems, row counts, the ledger id."""
    verb = "would write (dry run, nothing written)" if result.dry_run else "wrote"
    counts = ", ".join(f"{n} {t}" for t, n in result.counts.items())
    lines = [f"campaign {result.campaign}: {verb} {counts} to lake {result.lake} "
             f"(publication {result.publication_id})"]
    for c in result.checks:
        state = "context complete" if c.context_complete else "context INCOMPLETE"
        lines.append(f"  cell {c.cell_id}: {state}, {len(c.problems())} problem(s)")
        lines += [f"    - {p}" for p in c.problems()]
    lines += [f"  rejected: {r}" for r in result.rejected]
    return "\n".join(lines)
