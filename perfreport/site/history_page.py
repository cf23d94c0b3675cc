"""08 History: each kernel series of the campaign over its lake publications, with its change points.

The series come from the lake (lake.regressions.history_series) as plain dicts, handed over by the CLI: the site and
the lake are one layer and never import each other. Without a lake the page says how to get one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfreport.kernels.labels import shortened
from perfreport.site import charts
from perfreport.site.page_model import Chart, Column, Missing, Page, Table
from perfreport.warehouse.gather import higher_is_better
from perfreport.warehouse.stats import MIN_SERIES

C = Column
FILENAME = "08-history.html"
MAX_CHARTS = 30  # charts drawn, series with a change point first; the tables list every series
RANK = {"regression": 0, "improvement": 1, "suspicious": 2}  # a series sorts by its worst label; none: 3
MISSING_LAKE = Missing(
    "each kernel's metric over this campaign's publications in the lake, with its change points labelled "
    "regression, improvement or suspicious", [
        "publish the campaign to a lake after each change you measure: `perftunereport publish_to_lake --campaign "
        "DIR --lake LAKE` (the lake's kernel_history keeps every publication)",
        "render with that lake: `perftunereport report_render --campaign DIR --out site --lake LAKE` "
        "(`--history-metric sol_pct` for another kernel column); the lake must hold publications of this campaign",
        f"a series is tested from {MIN_SERIES} publications on; a shorter one is listed as insufficient data",
    ])


@dataclass(frozen=True)
class History:
    """The History page's input: the lake as the user named it, the metric and the campaign's series."""

    lake: str
    metric: str
    series: list[dict[str, Any]]
    predictions: list[dict[str, Any]] = field(default_factory=list)  # lake.predictions.as_dicts rows, this campaign's


def _scale(metric: str) -> tuple[float, str, str]:
    """How the chart shows a metric (factor, axis title) and the table format of its values."""
    if metric == "duration_ns":
        return 1e-3, "duration (µs)", "duration_ns"
    return 1.0, metric, "pct" if metric.endswith("_pct") else "num"


def _rank(s: dict[str, Any]) -> int:
    return min((RANK.get(c["label"], 3) for c in s["changes"]), default=3)


def _status(s: dict[str, Any]) -> str:
    if s["insufficient"]:
        return f"insufficient data (fewer than {MIN_SERIES} publications)"
    labels = sorted({c["label"] for c in s["changes"]}, key=lambda lb: RANK.get(lb, 3))
    return ", ".join(labels) or "no change point"


def _varying(series: list[dict[str, Any]]) -> list[str]:
    """Descriptor fields whose value differs between the series: what tells two series of one kernel apart."""
    fields = sorted({f for s in series for f in s["descriptor"]})
    return [f for f in fields if len({repr(s["descriptor"].get(f)) for s in series}) > 1]


def history_page(history: History | None, campaign: str) -> Page:
    """08: per series a chart of the metric over publications with its change points, then every change point."""
    page = Page(FILENAME, FILENAME, "History")
    metric = history.metric if history else "duration_ns"
    page.context.update(lake=history.lake if history else None, metric=metric, summary=None, cap=None,
                        better="higher" if higher_is_better(metric) else "lower", min_series=MIN_SERIES)
    everything = history.series if history else []
    series = [s for s in everything if not s.get("trials")]
    if history is None:
        page.context["missing"] = MISSING_LAKE
    elif not series:
        page.context["missing"] = Missing(
            f"{metric} over this campaign's publications; lake `{history.lake}` holds none of campaign "
            f"`{campaign}`", [
                f"publish it: `perftunereport publish_to_lake --campaign DIR --lake {history.lake}` (once per change "
                f"you measure; every publication is kept)",
                f"render again with `--lake {history.lake}`"])
    else:
        page.context["missing"] = None
    ordered = sorted(enumerate(series), key=lambda e: (_rank(e[1]), e[1]["cell_id"], e[1]["kernel"],
                                                       str(e[1]["set"]), e[0]))
    ordered_series = [s for _, s in ordered]
    number = {pub: n for n, pub in enumerate(sorted({(p["published_at"], p["publication_id"])
                                                     for s in series for p in s["points"]}), start=1)}
    by_id = {pub: n for (_, pub), n in number.items()}
    varying = _varying(series)
    factor, axis, value_fmt = _scale(metric)
    drawn: dict[int, str] = {}
    for i, s in enumerate(ordered_series[:MAX_CHARTS]):
        div_id = f"history-{i + 1:03d}"
        drawn[i] = div_id
        points = [{**p, "x": by_id[p["publication_id"]], "value": p["value"] * factor} for p in s["points"]]
        changes = [{**c, "x": by_id.get(c["publication_id"])} for c in s["changes"]]
        page.add_chart(Chart(div_id, charts.history(points, changes, _title(s, varying), axis), _note(s)))
    _tables(page, ordered_series, drawn, varying, by_id, value_fmt)
    _trials(page, [s for s in everything if s.get("trials")])
    _predictions(page, history.predictions if history else [])
    if series:
        found = [c["label"] for s in series for c in s["changes"]]
        page.context["summary"] = (
            f"{len(series)} series of {metric} over {len(number)} publication(s); {len(found)} change point(s): "
            + ", ".join(f"{found.count(lb)} {lb}" for lb in RANK)
            + f"; {sum(s['insufficient'] for s in series)} series too short to test.")
        if len(series) > MAX_CHARTS:
            page.context["cap"] = (f"Charts for the first {MAX_CHARTS} of {len(series)} series (regressions first, "
                                   f"then improvements, suspicious, the rest); the tables list every series.")
    return page


def _title(s: dict[str, Any], varying: list[str]) -> str:
    context = ", ".join(f"{f}={s['descriptor'].get(f)}" for f in varying)
    return " · ".join(filter(None, [s["cell_id"], shortened(s["kernel"], 70), s["set"] and f"--set {s['set']}",
                                    context]))


def _note(s: dict[str, Any]) -> str:
    if not s["changes"]:
        return "No change point." if not s["insufficient"] else \
            f"Too short to test: fewer than {MIN_SERIES} publications."
    return "; ".join(f"{c['label']} at publication `{c['publication_id']}`: {c['change_pct']:+.1f}%"
                     for c in s["changes"])


def _tables(page: Page, series: list[dict[str, Any]], drawn: dict[int, str], varying: list[str],
            by_id: dict[str, int], value_fmt: str) -> None:
    context = [C("context", "context", wrap=True)] if varying else []

    def head(i: int, s: dict[str, Any]) -> dict[str, Any]:
        return {"cell_id": s["cell_id"], "kernel": s["kernel"], "set": s["set"],
                "context": "; ".join(f"{f}={s['descriptor'].get(f)}" for f in varying) or None,
                "href": f"#{drawn[i]}" if i in drawn else None}

    page.add_table(Table("changes", "Change points (every series)", [
        C("cell_id", "cell"), C("kernel", "kernel", "kernel"), C("set", "set"), *context, C("label", "label"),
        C("publication", "publication", "num"), C("publication_id", "publication id"),
        C("published_at", "published at"), C("points", "points", "num"), C("before", "before", value_fmt),
        C("after", "after", value_fmt), C("change_pct", "change", "pct"), C("p_value", "p-value", "num")],
        [{**head(i, s), **c, "publication": by_id.get(c["publication_id"]), "points": len(s["points"])}
         for i, s in enumerate(series) for c in s["changes"]], link_key="kernel",
        note="A change point is the first publication of a new level. A click on a kernel opens its chart (drawn for "
             f"the first {MAX_CHARTS} series)."))
    page.add_table(Table("series", "Every series", [
        C("cell_id", "cell"), C("kernel", "kernel", "kernel"), C("set", "set"), *context,
        C("grid_size", "grid"), C("block_size", "block"), C("instance", "instance", "num"),
        C("points", "points", "num"), C("first", "first", value_fmt), C("latest", "latest", value_fmt),
        C("first_at", "first published"), C("latest_at", "latest published"), C("status", "change points")],
        [{**head(i, s), "grid_size": s["grid_size"], "block_size": s["block_size"], "instance": s["instance"],
          "points": len(s["points"]), "first": s["points"][0]["value"], "latest": s["points"][-1]["value"],
          "first_at": s["points"][0]["published_at"], "latest_at": s["points"][-1]["published_at"],
          "status": _status(s)} for i, s in enumerate(series)], link_key="kernel"))
    page.add_table(Table("points", "Every point (one row per series and publication)", [
        C("cell_id", "cell"), C("kernel", "kernel", "kernel"), C("set", "set"), *context,
        C("publication", "publication", "num"), C("publication_id", "publication id"),
        C("published_at", "published at"), C("value", "value", value_fmt)],
        [{**head(i, s), **p, "publication": by_id[p["publication_id"]]} for i, s in enumerate(series)
         for p in s["points"]]))


def _trials(page: Page, series: list[dict[str, Any]]) -> None:
    """The cells' trials across publications (lake regressions --trials): a chart per repeated number of one work
    (x the trial, cells in publication order), its change points first, then every change point."""
    page.context["trial_series"] = len(series)
    ordered = sorted(series, key=lambda s: (_rank(s), s["metric"]))
    for i, s in enumerate(ordered[:MAX_CHARTS]):
        points = [{**p, "x": n, "publication_id": f"{p['cell_id']} trial {p['trial']} · {p['publication_id']}"}
                  for n, p in enumerate(s["points"], start=1)]
        changes = [{**c, "x": c["index"] + 1} for c in s["changes"]]
        note = "; ".join(f"{c['label']} from cell `{c['cell_id']}` (publication `{c['publication_id']}`): "
                         f"{c['change_pct']:+.1f}%" for c in s["changes"]) or _note(s)
        page.add_chart(Chart(f"trials-{i + 1:03d}", charts.history(points, changes, f"{s['metric']} · {s['cell_id']}",
                                                                  s["metric"], unit="trial"), note))
    page.add_table(Table("trial_changes", "Change points over the trials (lake regressions --trials)", [
        C("metric", "repeated number", wrap=True), C("cells", "cells (publication order)", wrap=True),
        C("label", "label"), C("cell_id", "new level from cell"), C("publication_id", "its publication"),
        C("points", "trials", "num"), C("before", "before", "num"), C("after", "after", "num"),
        C("change_pct", "change", "pct"), C("p_value", "p-value", "num")],
        [{"metric": s["metric"], "cells": s["cell_id"], "points": len(s["points"]), **c} for s in ordered
         for c in s["changes"]] + [
        {"metric": s["metric"], "cells": s["cell_id"], "points": len(s["points"]), "label": _status(s)}
         for s in ordered if not s["changes"]],
        note="One series per repeated number of one work on one chip: each cell's trials in order, its cells in "
             "publication order, so a before/after pair is one series and a change point names the cell of the new "
             "level."))


PREDICTION_COLUMNS = [
    C("cell_id", "cell"), C("kind", "kind"), C("lever", "lever"), C("kernel", "kernel", "kernel"),
    C("predicted_pct", "predicted", "pct"), C("settled_by", "settled by", wrap=True),
    C("realized_kernel_pct", "realized: its kernels", "pct"), C("realized_gpu_pct", "realized: GPU", "pct"),
    C("realized_e2e_pct", "realized: end to end", "pct"), C("e2e_metric", "end-to-end number"),
    C("error_e2e_pp", "error end to end (points)", "num"), C("outcome", "outcome", wrap=True),
    C("note", "note", wrap=True)]


def _predictions(page: Page, rows: list[dict[str, Any]]) -> None:
    """The prediction ledger of this campaign (`lake predictions`): a chart of the settled ones, the whole table."""
    page.context["predictions"] = bool(rows)
    settled = [r for r in rows if r["settled_by"]]
    if settled:
        page.add_chart(Chart("predicted-vs-realized", charts.predicted_vs_realized(settled),
                             "On the dotted line a prediction came true; below it the lever gave back less."))
    page.add_table(Table("predictions", "Predictions and what a later measurement realized (lake predictions)",
                         PREDICTION_COLUMNS, rows))
