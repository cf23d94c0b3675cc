"""Regressions over the lake's history: change points of one kernel metric across the publications of a cell.

A series is one metric of one kernel's piece of work (the kernel contract's identity, lake.compare.identity, with its
grid, block and instance) captured by one section set in one cell of one work and chip (every descriptor field but the
stack and grounding ones: a new engine commit is an event on the series, and grounding says how a measurement was
checked), ordered by publication time, read from `kernel_history` (every publication's rows, appended). Change points
come from warehouse.stats.change_points; each is labelled as PyTorch HUD labels its alerts: a shift for the worse held
by >= 2 publications is a `regression`, for the better an `improvement`, a shift only the latest publication shows is
`suspicious`; a series too short to test is one `insufficient data` row.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfreport.errors import PerfReportError
from perfreport.lake.compare import METRICS, identity
from perfreport.lake.history import table_names
from perfreport.lake.iceberg import load_tables, open_lake
from perfreport.lake.rows import MATCH_FIELDS
from perfreport.warehouse.gather import higher_is_better
from perfreport.warehouse.stats import MIN_SERIES, change_points

# A series is the same work on the same chip (rows.MATCH_FIELDS, as the prediction ledger matches): a new engine
# commit, image or engine is an event on the series (what a regression is found at), never the start of a new one.
SERIES_FIELDS = MATCH_FIELDS
LABELS = ("regression", "improvement", "suspicious", "insufficient data")
COLUMNS = ("campaign", "cell_id", "kernel", "set", "metric", "label", "publication_id", "published_at", "points",
           "before", "after", "change_pct", "p_value")


@dataclass
class Regression:
    """One row of `lake regressions`: a change point of a series, or its `insufficient data` row."""

    campaign: str
    cell_id: str
    kernel: str
    section_set: str | None  # a kernel captured by two section sets is two series (one value per publication each)
    metric: str
    label: str
    publication_id: str | None
    published_at: datetime | None
    points: int  # publications in the series
    before: float | None = None
    after: float | None = None
    change_pct: float | None = None
    p_value: float | None = None
    index: int | None = None  # the change point's first point in its series (not a column)

    def row(self) -> tuple[Any, ...]:
        """The row in COLUMNS order (time as ISO 8601)."""
        when = self.published_at.isoformat() if self.published_at else None
        return (self.campaign, self.cell_id, self.kernel, self.section_set, self.metric, self.label,
                self.publication_id, when,
                self.points, self.before, self.after, self.change_pct, self.p_value)


@dataclass
class Series:
    """One series: its points in publication order and its rows (change points, or its `insufficient data` row)."""

    campaign: str
    cell_id: str
    kernel: str
    section_set: str | None
    metric: str
    work: tuple[Any, ...]  # (identity, grid, block, instance): two series of one label differ here or in descriptor
    descriptor: dict[str, Any]
    points: list[tuple[datetime, str, float]]  # (published_at, publication_id, value), oldest first
    rows: list[Regression] = field(default_factory=list)
    trials: list[tuple[str, int]] = field(default_factory=list)  # a trial series: each point's (cell_id, trial)


@dataclass
class RegressionsResult:
    """Every series' change points, and how many series were read (`all_series`: each series with its points)."""

    metric: str
    series: int
    rows: list[Regression] = field(default_factory=list)
    all_series: list[Series] = field(default_factory=list)


def _label(change_pct: float, points_after: int, metric: str) -> str:
    if points_after < 2:
        return "suspicious"
    worse = change_pct < 0 if higher_is_better(metric) else change_pct > 0
    return "regression" if worse else "improvement"


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise PerfReportError(f"lake regressions --since {value!r}: expected an ISO date or time, e.g. --since "
                              f"2026-12-01 or --since 2026-12-01T08:00:00+00:00") from exc
    return when if when.tzinfo else when.replace(tzinfo=datetime.now().astimezone().tzinfo)


def _pattern(value: str | None, option: str, example: str) -> re.Pattern[str] | None:
    """The regular expression an option names (None when not given), refused in one line when it does not compile."""
    try:
        return re.compile(value) if value else None
    except re.error as exc:
        raise PerfReportError(f"{option} {value!r}: not a valid regular expression ({exc}). Example: {example}") \
            from exc


def check_metric(metric: str, option: str = "lake regressions --metric") -> None:
    """Refuse a metric that is no numeric kernel column, naming the option it came from."""
    if metric not in METRICS:
        raise PerfReportError(f"{option} {metric!r}: not a numeric kernel column; expected one of "
                              f"{', '.join(METRICS)}. Example: {option.rsplit(' ', 1)[-1]} duration_ns")


def lake_regressions(lake: str | Path | None, metric: str = "duration_ns", kernel: str | None = None,
                     since: str | None = None, campaign: str | None = None) -> RegressionsResult:
    """Change points of `metric` per series of the lake's kernel_history (publications since `since`, kernels whose
    label or name matches the regular expression `kernel`, only campaign `campaign` when given)."""
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    check_metric(metric)
    pattern = _pattern(kernel, "lake regressions --kernel", "--kernel 'nvjet|gemm'")
    start = _since(since)
    where, catalog = open_lake(lake)
    if "kernel_history" not in table_names(catalog):
        raise PerfReportError(f"lake {str(where)!r}: no kernel_history table (a lake from before publications were "
                              f"kept); publish a campaign once and every later publish is kept there.")
    table = load_tables(catalog, ["kernel_history"])["kernel_history"]
    columns = ("campaign", "cell_id", "name", "function", "label", "instance", "grid_size", "block_size",
               "section_set", "publication_id", "published_at",
               metric, *SERIES_FIELDS)
    # one campaign is one partition: the scan skips the other campaigns' files
    only = AlwaysTrue() if campaign is None else EqualTo("campaign", campaign)  # type: ignore[call-arg, arg-type]
    scan = table.scan(selected_fields=columns, row_filter=only)
    data = scan.to_arrow().to_pydict()  # columns: 50,000 rows read in ~0.1 s
    series: dict[tuple[Any, ...], list[tuple[datetime, str, float]]] = defaultdict(list)
    names: dict[tuple[Any, ...], str] = {}
    ids: dict[tuple[Any, Any], str] = {}  # identity per (name, function): its regexes once per kernel, not per row
    descriptors = list(zip(*(data[f] for f in SERIES_FIELDS), strict=True))
    for i, value in enumerate(data[metric]):
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue  # a missing counter is no point of the series, never a zero
        when = data["published_at"][i]
        if start is not None and when < start:
            continue
        name, function = data["name"][i], data["function"][i]
        label = str(data["label"][i] or function or name)
        if pattern is not None and not (pattern.search(label) or pattern.search(str(name or ""))):
            continue
        kid = ids.get((name, function))
        if kid is None:
            kid = ids[(name, function)] = identity({"name": name, "function": function})
        work = (kid, data["grid_size"][i], data["block_size"][i], data["instance"][i])  # one piece of work
        key = (data["campaign"][i], data["cell_id"][i], work, data["section_set"][i], descriptors[i])
        series[key].append((when, data["publication_id"][i], float(value)))
        names.setdefault(key, label)
    result = RegressionsResult(metric, len(series))
    def order(k: tuple[Any, ...]) -> tuple[Any, ...]:
        return k[0], k[1], names[k], str(k[2]), str(k[3]), json.dumps(k[4], default=str)

    for key in sorted(series, key=order):
        points = sorted(series[key])
        camp, cell_id, kset = key[0], key[1], key[3]
        line = Series(camp, cell_id, names[key], kset, metric, key[2], dict(zip(SERIES_FIELDS, key[4], strict=True)),
                      points)
        result.all_series.append(line)
        line.rows = _series_rows(line)
        result.rows += line.rows
    return result


def _series_rows(line: Series) -> list[Regression]:
    points, metric = line.points, line.metric
    head = (line.campaign, line.cell_id, line.kernel, line.section_set, metric)
    if len(points) < MIN_SERIES:
        return [Regression(*head, "insufficient data", points[-1][1], points[-1][0], len(points))]
    rows = []
    for cp in change_points([v for _, _, v in points]):
        when, pub, _ = points[cp.index]
        cell = line.trials[cp.index][0] if line.trials else line.cell_id  # a trial series: the cell it starts at
        rows.append(Regression(line.campaign, cell, *head[2:], _label(cp.change_pct, cp.points_after, metric), pub,
                               when, len(points), cp.before, cp.after, cp.change_pct,
                               None if math.isnan(cp.p_value) else cp.p_value, cp.index))
    return rows


TRIAL_TABLES = frozenset({"trials", "cells", "publications"})  # what trial_regressions reads
TRIAL_KERNEL = "trials"  # the kernel column of a trial series: a cell's repeated numbers, not one kernel's capture


def trial_regressions(lake: str | Path | None, metric: str | None = None, since: str | None = None,
                      campaign: str | None = None, missing_ok: bool = False) -> RegressionsResult:
    """Change points over trials: one series per repeated number (the lake's trials table: end-to-end results, the
    kernel time, each kernel's time per launch) of one work on one chip (rows.MATCH_FIELDS of the cells table), its
    cells in publication order and each cell's trials in trial order. A before/after pair of cells is one series and
    its change point names the cell and publication whose trials start the new level; `metric` is a regular
    expression over the repeated numbers' names; a lake without trials is an error, or no series with missing_ok."""
    pattern = _pattern(metric, "lake regressions --trials --metric", "--metric tpot")
    start = _since(since)
    where, catalog = open_lake(lake)
    if not set(table_names(catalog)) >= TRIAL_TABLES:
        if missing_ok:
            return RegressionsResult(metric or "trials", 0)
        raise PerfReportError(f"lake {str(where)!r}: no trials table; publish a campaign whose cells have trials "
                              f"(`trials:` in its config, or import_torch_trace --trial N) and run it again.")
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    only = AlwaysTrue() if campaign is None else EqualTo("campaign", campaign)  # type: ignore[call-arg, arg-type]
    tables = load_tables(catalog, sorted(TRIAL_TABLES))
    cells = tables["cells"].scan(selected_fields=("campaign", "cell_id", *SERIES_FIELDS), row_filter=only)
    work = {(r["campaign"], r["cell_id"]): tuple(r[f] for f in SERIES_FIELDS) for r in cells.to_arrow().to_pylist()}
    pubs = tables["publications"].scan(selected_fields=("publication_id", "published_at")).to_arrow().to_pylist()
    when_of = {p["publication_id"]: p["published_at"] for p in pubs}
    grouped: dict[tuple[Any, ...], list[tuple[datetime, str, str, list[float]]]] = defaultdict(list)
    for r in tables["trials"].scan(row_filter=only).to_arrow().to_pylist():
        when = when_of.get(r["publication_id"])
        descriptor = work.get((r["campaign"], r["cell_id"]))
        if when is None or descriptor is None or (start is not None and when < start):
            continue
        if pattern is not None and not pattern.search(r["metric"]):
            continue
        values = [float(v) for v in r["values"] or [] if v is not None and math.isfinite(v)]
        grouped[(r["campaign"], r["metric"], descriptor)].append((when, r["cell_id"], r["publication_id"], values))
    result = RegressionsResult(metric or "trials", len(grouped))
    for key in sorted(grouped, key=lambda k: (k[0], k[1], json.dumps(k[2], default=str))):
        camp, name, descriptor = key
        members = sorted(grouped[key], key=lambda m: (m[0], m[1]))
        line = Series(camp, ", ".join(dict.fromkeys(m[1] for m in members)), TRIAL_KERNEL, None, name, (),
                      dict(zip(SERIES_FIELDS, descriptor, strict=True)),
                      [(when, pub, v) for when, _, pub, vs in members for v in vs],
                      trials=[(cell, i) for _, cell, _, vs in members for i in range(1, len(vs) + 1)])
        line.rows = _series_rows(line)
        result.rows += line.rows
        result.all_series.append(line)
    return result


def history_series(result: RegressionsResult, campaign: str) -> list[dict[str, Any]]:
    """The series of one campaign as plain JSON-able dicts (times as ISO 8601), the site's History page input: the
    site may not import the lake, so the CLI hands this over."""
    def when(t: datetime | None) -> str | None:
        return t.isoformat() if t else None

    def work(s: Series, i: int) -> Any:
        return s.work[i] if s.work else None

    return [{
        "cell_id": s.cell_id, "kernel": s.kernel, "set": s.section_set, "metric": s.metric,
        "grid_size": work(s, 1), "block_size": work(s, 2), "instance": work(s, 3), "descriptor": s.descriptor,
        "points": [{"published_at": when(t), "publication_id": pub, "value": v,
                    **({"cell_id": s.trials[i][0], "trial": s.trials[i][1]} if s.trials else {})}
                   for i, (t, pub, v) in enumerate(s.points)],
        "changes": [{"label": r.label, "publication_id": r.publication_id, "published_at": when(r.published_at),
                     "before": r.before, "after": r.after, "change_pct": r.change_pct, "p_value": r.p_value,
                     "cell_id": r.cell_id, "index": r.index}
                    for r in s.rows if r.label != "insufficient data"],
        "insufficient": any(r.label == "insufficient data" for r in s.rows), "trials": bool(s.trials),
    } for s in result.all_series if s.campaign == campaign]


def campaign_series(lake: str | Path, campaign_dir: str | Path, metric: str = "duration_ns") -> list[dict[str, Any]]:
    """The series of the campaign in `campaign_dir` (its config's id) in the lake, for `report_render --lake`."""
    from perfreport.config.campaign import load_campaign

    check_metric(metric, "report_render --history-metric")
    campaign = load_campaign(Path(campaign_dir)).id
    return (history_series(lake_regressions(lake, metric, campaign=campaign), campaign)
            + history_series(trial_regressions(lake, campaign=campaign, missing_ok=True), campaign))
