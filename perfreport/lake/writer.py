"""Publish a campaign to the lake: the embedded Iceberg lake (SQLite catalog + folder) or a named catalog.

A publish is ONE commit across ``kernels``, ``captures``, ``cells`` and the ``publications`` ledger
(perfreport/lake/commit.py): the data tables get an overwrite filtered on the campaign and the published cell
ids (delete + append), the ledger one appended row. Re-publishing a cell replaces its rows, and re-publishing
the rows the lake already holds writes nothing (no second publication); a publish killed half-way changes
nothing; a concurrent publish of other cells is retried on top, one of the same cells is refused with
PublishConflictError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from perfreport.config.campaign import load_campaign
from perfreport.lake.commit import Publish, commit_publish
from perfreport.lake.damage import explained
from perfreport.lake.gate import CellCheck, GateError, check_campaign
from perfreport.lake.iceberg import TABLES, Lake, load_tables, open_catalog, resolve_lake
from perfreport.lake.predictions import prediction_rows, stamp
from perfreport.lake.rows import Rows, build_rows, publication_row, to_arrow


@dataclass
class PublishResult:
    """What a publish wrote (or, with dry_run, would write)."""

    campaign: str
    lake: Lake
    publication_id: str
    checks: list[CellCheck]
    counts: dict[str, int]
    rejected: list[str] = field(default_factory=list)
    dry_run: bool = False
    attempts: dict[str, int] = field(default_factory=dict)  # table -> commit attempts used
    atomic: bool = False  # all tables switched in one catalog commit
    held_by: list[str] = field(default_factory=list)  # nothing written: these publications hold the same rows

    @property
    def problems(self) -> list[str]:
        """Every gate problem, cell by cell."""
        return [p for c in self.checks for p in c.problems()]


def publish_to_lake(campaign_dir: Path, lake: str | Path | None = None, strict: bool = False,
                    dry_run: bool = False, who: str | None = None,
                    cell_ids: list[str] | None = None) -> PublishResult:
    """Gate the campaign's cells, then replace their rows in the lake (nothing written on dry_run/strict)."""
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
    published = [c.cell_id for c in checks]
    publisher = who or os.environ.get("USER") or "unknown"
    ledger = publication_row(campaign.id, pub_id, rows, checks, strict, publisher, now)
    pub = Publish(campaign.id, [c.cell_id for c in checks],
                  {"kernels": to_arrow("kernels", rows.kernels), "captures": to_arrow("captures", rows.captures),
                   "cells": to_arrow("cells", rows.cells), "trials": to_arrow("trials", rows.trials),
                   "kernel_history": to_arrow("kernel_history", [{**k, "published_at": now} for k in rows.kernels]),
                   "predictions": to_arrow("predictions", stamp(prediction_rows(campaign, published), pub_id, now)),
                   "publications": to_arrow("publications", [ledger])},
                  pub_id, publisher, now)
    catalog = open_catalog(where)
    with explained(str(where), lambda: load_tables(catalog, TABLES)):  # a publish reads the files it replaces
        committed = commit_publish(catalog, pub)
    result.attempts = dict.fromkeys(pub.rows, committed.attempts)
    result.atomic = committed.atomic
    result.held_by = committed.held_by
    result.counts["publications"] = 0 if committed.held_by else 1
    return result


def publish_summary(result: PublishResult) -> str:
    """Return the human summary of a publish: per cell completeness and problems, row counts, the ledger id."""
    verb = "would write (dry run, nothing written)" if result.dry_run else "wrote"
    counts = ", ".join(f"{n} {t}" for t, n in result.counts.items() if t != "publications" or not result.held_by)
    lines = [f"campaign {result.campaign}: {verb} {counts} to lake {result.lake} "
             f"(publication {result.publication_id})"]
    if result.held_by:
        held = ", ".join(result.held_by)
        owner = f"publication {held} already holds" if len(result.held_by) == 1 else \
            f"publications {held} already hold"
        lines = [f"campaign {result.campaign}: nothing changed: {owner} these rows ({counts}) in lake {result.lake}; "
                 f"nothing written"]
    elif not result.dry_run:
        how = "one atomic commit of all tables" if result.atomic else "one commit per table, the ledger last"
        lines.append(f"  committed: {how}, attempt {max(result.attempts.values(), default=1)}")
    for c in result.checks:
        state = "context complete" if c.context_complete else "context INCOMPLETE"
        lines.append(f"  cell {c.cell_id}: {state}, {len(c.problems())} problem(s)")
        lines += [f"    - {p}" for p in c.problems()]
    lines += [f"  rejected: {r}" for r in result.rejected]
    return "\n".join(lines)
