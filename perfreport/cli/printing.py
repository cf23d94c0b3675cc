"""All terminal printing of the CLI: the tables after an import, a query, a render and the value view, each also
as CSV rows or one JSON document (--format; perfreport/cli/output.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from perfreport.cli.output import Rows, console, emit, print_table
from perfreport.errors import terminal_text

if TYPE_CHECKING:
    from pathlib import Path

    from perfreport.frontier.value_view import ValueView
    from perfreport.kernels.cells import ImportResult
    from perfreport.lake.regressions import RegressionsResult
    from perfreport.timeshare.step_budget import CellSteps, StepBudget


def _safe(text: str) -> str:
    """A table cell's text: control characters escaped, line breaks too (`\\x1b`, `\\n`)."""
    return terminal_text(text, keep_newlines=False)


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _duration(ns: float | None) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:.3f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"


def _short(name: str, width: int = 48) -> str:
    name = _safe(name)
    return name if len(name) <= width else name[: width - 1] + "…"


def _short_label(label: str, width: int) -> str:
    """A kernel label cut to width, its ` #n` kept (kernels/labels.py)."""
    from perfreport.kernels.labels import shortened

    return _safe(shortened(label, width))


def _leaf(key: Any) -> str:
    """A ceiling key without its hardware token (h200_sm90.empirical.device_copy_tbps -> device_copy_tbps): the
    column header says which roof, the campaign which GPU."""
    return str(key).rsplit(".", 1)[-1]


def kernel_rows(kernels: list[dict[str, Any]]) -> list[list[str]]:
    """Table cells per kernel: kernel, family, duration, AI, TFLOP/s, %SoL (key), occupancy, verdict."""
    rows = []
    for k in kernels:
        sol = "—" if k["sol_pct"] is None else f"{k['sol_pct']:.1f}% ({_leaf(k['sol_ceiling_key'])})"
        if k["sol_pct"] is None and k["sol_ceiling_key"]:
            sol = f"— ({k['sol_ceiling_key']})"
        if k.get("pct_of_achievable") is not None:  # the measured roof beside the datasheet one
            sol += f" / {k['pct_of_achievable']:.1f}% ({_leaf(k.get('achievable_key'))})"
        if k.get("ceiling_exceeded"):  # a % above 100 is not a value: its ceiling is named for re-measure
            sol += " / above " + ", ".join(key.rsplit(".", 1)[-1] for key in sorted(k["ceiling_exceeded"])) + \
                " (re-measure)"
        occ = f"{_num(k['achieved_occupancy_pct'], '.1f')}/{_num(k['theoretical_occupancy_pct'], '.1f')}%"
        ai = "null" if k["arithmetic_intensity"] is None else f"{k['arithmetic_intensity']:.3g}"
        times = f" ×{k['launches']}" if k["launches"] > 1 else ""
        rows.append([
            _short_label(str(k.get("label") or k["function"]), 44 - len(times)) + times,
            k["family"], _duration(k["duration_ns"]), ai, _num(k["achieved_tflops"], ".1f"), sol, occ,
            k["bound"],
        ])
    return rows


IMPORT_COLUMNS = ("label", "function", "instance", "launches", "family", "duration_ns", "arithmetic_intensity",
                  "achieved_tflops", "sol_pct", "sol_ceiling_key", "pct_of_achievable", "achieved_occupancy_pct",
                  "theoretical_occupancy_pct", "bound", "source", "name")


def print_import_summary(result: ImportResult, fmt: str = "table",
                         next_lever: str | None = None) -> None:
    """Print what an import wrote: a rich table, its kernels as CSV rows, or a JSON summary; the table ends with the
    campaign's next lever (frontier.candidates: the same one page 1, page 7 and value_view name)."""
    emit(fmt, lambda: _import_table(result, next_lever),
         lambda: (IMPORT_COLUMNS, [[k.get(c) for c in IMPORT_COLUMNS] for k in result.kernels]),
         lambda: {"path": str(result.path), "campaign": result.campaign, "cell_id": result.cell_id,
                  "sources": [s["id"] for s in result.sources], "kernels": len(result.kernels),
                  "warnings": result.warnings, "next_lever": next_lever})


def _import_table(result: ImportResult, next_lever: str | None) -> None:
    out = console()
    srcs = ", ".join(f"{s['id']} [{s['format']}, set {s['section_set'] or '?'}]" for s in result.sources)
    table = Table(title=_safe(f"{result.campaign} / {result.cell_id} ← {srcs}"), title_justify="left")
    for col, just in (("kernel", "left"), ("family", "left"), ("duration", "right"), ("AI FLOP/B", "right"),
                      ("TFLOP/s", "right"), ("% of datasheet roof / of measured roof (key)", "left"),
                      ("occupancy ach/theo", "right"), ("verdict", "left")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for row in kernel_rows(result.kernels):
        table.add_row(*row)
    print_table(table, out)
    for w in result.warnings:
        out.print(Text.assemble(("warning:", "yellow"), " ", _safe(w)))
    out.print(_safe(f"wrote {result.path}"))
    if next_lever is not None:
        out.print(_safe(f"next lever (campaign): {next_lever}"))


if TYPE_CHECKING:
    from perfreport.warehouse.db import QueryResult


QUERY_CELL_WIDTH = 100  # longer text (demangled kernel names run to 2,000 characters) is cut in the table


def _query_cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return format(v, ".6g")
    return _short(str(v), QUERY_CELL_WIDTH)


def print_query_result(result: QueryResult, fmt: str = "table", title: str | None = None) -> None:
    """Print query rows: a rich table (floats to 6 significant digits, text cut), CSV rows or JSON objects, both
    with every value in full (JSON columns as JSON)."""
    def doc() -> list[dict[str, Any]]:
        is_json = [t == "JSON" for t in (result.types or [""] * len(result.columns))]
        return [{c: (json.loads(v) if j and isinstance(v, str) else v)
                 for c, v, j in zip(result.columns, row, is_json, strict=True)} for row in result.rows]

    emit(fmt, lambda: _query_table(result, title), lambda: (result.columns, result.rows), doc)


def _query_table(result: QueryResult, title: str | None = None) -> None:
    out = console()
    if title is not None:
        out.print(_safe(title))
    if not result.columns:
        out.print("(the statement returned no result set)")
        return
    table = Table()
    for i, col in enumerate(result.columns):
        numeric = any(isinstance(r[i], int | float) and not isinstance(r[i], bool) for r in result.rows)
        table.add_column(_safe(col), no_wrap=True, justify="right" if numeric else "left")
    for row in result.rows:
        table.add_row(*[_query_cell(v) for v in row])
    print_table(table, out)
    out.print(f"{len(result.rows)} row(s); floats to 6 significant digits, text to {QUERY_CELL_WIDTH} characters "
              f"(--format csv or --format json prints every value in full)")


if TYPE_CHECKING:
    from perfreport.timeshare import TimeshareResult


TIMESHARE_COLUMNS = {
    "kernel_times": ("function", "op", "shapes", "instances", "total_ns", "share_pct", "source", "name"),
    "kernel_samples": ("function", "samples", "share_pct", "source", "name"),
}


def print_timeshare_summary(result: TimeshareResult, fmt: str = "table") -> None:
    """Print the kernels of a time-share import by share (desc): instances and total ms, or sample counts; as a
    table, CSV rows or a JSON summary."""
    rows = sorted(result.kernels, key=lambda k: (-k["share_pct"], k["name"], k.get("op") or "", k.get("shapes") or ""))
    cols = TIMESHARE_COLUMNS.get(result.kind, TIMESHARE_COLUMNS["kernel_times"])
    emit(fmt, lambda: _timeshare_table(result, rows), lambda: (cols, [[k.get(c) for c in cols] for k in rows]),
         lambda: {"path": str(result.path), "campaign": result.campaign, "cell_id": result.cell_id,
                  "kind": result.kind, "sources": [s["id"] for s in result.sources], "kernels": len(rows),
                  "warnings": result.warnings})


def _timeshare_table(result: TimeshareResult, rows: list[dict[str, Any]]) -> None:
    from perfreport.kernels.labels import name_bases

    out = console()
    srcs = ", ".join(f"{s['id']} [{s['format']}{', ' + s['report'] if s['report'] else ''}]" for s in result.sources)
    out.print(_safe(f"{result.campaign} / {result.cell_id} ← {srcs}"))
    table = Table()
    times = result.kind == "kernel_times"
    ops = any(k.get("op") for k in result.kernels)  # a trace recorded with shapes: rows per launching op
    cols = ("kernel", "instances", "total ms", "share %") if times else ("kernel", "samples", "share %")
    for i, col in enumerate(cols + (("launched by",) if ops else ())):
        table.add_column(col, justify="right" if 0 < i < len(cols) else "left", no_wrap=True)
    labels = name_bases((k["function"], k["name"]) for k in rows)  # the labels the warehouse gives these rows
    for k in rows:
        label = _short(labels[(k["function"], k["name"])], 60 if ops else 90)
        nums = ([f"{k['instances']:,}", f"{k['total_ns'] / 1e6:,.3f}"] if times else [f"{k['samples']:,}"])
        op = [_short(f"{k['op']} {k['shapes']}" if k.get("op") else "—", 56)] if ops else []
        table.add_row(label, *nums, f"{k['share_pct']:.2f}", *op)
    print_table(table, out)
    for w in result.warnings:
        out.print(Text.assemble(("warning:", "yellow"), " ", _safe(w)))
    out.print(_safe(f"wrote {result.path}"))


if TYPE_CHECKING:
    from perfreport.site.render import RenderResult


PROGRESS_FROM = 100  # pages: a render this long reports its progress on stderr, every PROGRESS_STEP of it
PROGRESS_STEP = 0.1


def render_progress() -> Callable[[int, int], None]:
    """report_render's progress callback: `report_render: 120/438 pages` on stderr at each tenth of a long render."""
    shown = {"at": 0.0}

    def report(done: int, total: int) -> None:
        if total >= PROGRESS_FROM and (done == total or done / total >= shown["at"] + PROGRESS_STEP):
            shown["at"] = done / total
            click.echo(f"report_render: {done}/{total} pages", err=True)

    return report


def timing_text(result: RenderResult) -> str:
    """Where a render's time went: the wall time, then each step (summed over the workers when there are several)."""
    s = result.seconds
    steps = ", ".join(f"{step} {v:.2f} s" for step, v in s.items() if step != "wall")  # in report_render's order
    workers = f"; build to write summed over {result.jobs} worker processes" if result.jobs > 1 else ""
    kept = (f"; {result.kept} of {len(result.pages)} pages kept from the last render (their inputs unchanged)"
            if result.kept else "")
    return f"rendered in {s.get('wall', 0.0):.2f} s: {steps}{workers}{kept}"


def print_render_summary(result: RenderResult, fmt: str = "table", max_rows: int = 30) -> None:
    """Print what report_render wrote: each page with its size (cell pages summed past max_rows in the table), the
    index; CSV: one row per page; JSON: the pages and the totals."""
    emit(fmt, lambda: _render_table(result, max_rows),
         lambda: (("page", "bytes"), [(str(p), n) for p, n in result.pages]),
         lambda: {"campaign": result.campaign, "site": str(result.campaign_site), "index": str(result.index_path),
                  "pages": [{"page": str(p), "bytes": n} for p, n in result.pages], "downloads": result.downloads,
                  "download_bytes": result.download_bytes, "static": [str(p) for p in result.static],
                  "seconds": {k: round(v, 3) for k, v in result.seconds.items()}, "jobs": result.jobs,
                  "kept": result.kept})


def _render_table(result: RenderResult, max_rows: int) -> None:
    out = console()
    out.print(_safe(f"{result.campaign}: site written to {result.campaign_site}"))
    table = Table(show_header=True)
    table.add_column("page", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    kinds = {prefix: [(p, n) for p, n in result.pages if p.name.startswith(prefix)]
             for prefix in ("cell-", "compare-", "kernel-")}  # the pages there is one of per cell or comparison
    folded = {prefix for prefix, pages in kinds.items() if len(result.pages) > max_rows and len(pages) > 1}
    for path, size in result.pages:
        if not any(path.name.startswith(prefix) for prefix in folded):
            table.add_row(_safe(path.name), f"{size / 1024:,.1f} KiB")
    for prefix in sorted(folded):
        big = max(kinds[prefix], key=lambda c: (c[1], c[0].name))
        table.add_row(_safe(f"{prefix}*.html x {len(kinds[prefix])} (largest {big[0].name}, {big[1] / 1024:,.1f} "
                            f"KiB)"), f"{sum(n for _, n in kinds[prefix]) / 1024:,.1f} KiB")
    print_table(table, out)
    total = sum(size for _, size in result.pages)
    largest = max(result.pages, key=lambda p: (p[1], p[0].name))
    out.print(f"{len(result.pages)} pages, {total / 1024:,.1f} KiB (largest {largest[0].name}, "
                  f"{largest[1] / 1024:,.1f} KiB); {result.downloads} CSV/JSON downloads (gzip), "
                  f"{result.download_bytes / 1024:,.1f} KiB; static: {', '.join(p.name for p in result.static)}")
    out.print(timing_text(result))
    out.print(_safe(f"index: {result.index_path}"))


VALUE_VIEW_COLUMNS = ("rank", "cell_id", "kernel", "kernel_id", "pct_of_roof", "roof", "ceiling_key", "saving",
                      "cell_weight", "campaign_saved_pct", "saved_pct", "saved_ms", "saved_us_per_step", "basis")


def print_value_view(view: ValueView, fmt: str = "table") -> None:
    """Print the frontier: rich tables ending with the three closing lines, the kernel ranking as CSV rows (every
    kernel), or the whole view as JSON (perfreport/config/schemas/value_view.schema.json)."""
    from perfreport.frontier.value_view import view_json

    if fmt == "csv":  # the table prints them too; JSON carries them
        for w in view.warnings:
            click.echo(terminal_text(f"warning: {w}"), err=True)
    emit(fmt, lambda: _value_view_tables(view),
         lambda: (VALUE_VIEW_COLUMNS, [(i, k.cell_id, k.label, k.kernel_id, k.pct_of_roof, k.roof, k.ceiling_key,
                                        k.saving, k.cell_weight, k.campaign_saved_pct, k.saved_pct, k.saved_ms,
                                        k.saved_us_per_step, k.basis)
                                       for i, k in enumerate(view.kernels, start=1)]),
         lambda: view_json(view), indent=2)


def _value_view_tables(view: ValueView) -> None:
    from perfreport.frontier.value_view import pct_text

    for w in view.warnings:
        click.echo(terminal_text(f"warning: {w}"), err=True)
    out = console()
    if view.kernels:
        ranked = Table(title=_safe(f"{view.campaign}: kernels by time saved, measured before estimated (the one "
                                   f"ranking; top 10)"), title_justify="left")
        for col in ("#", "cell", "kernel", "% of roof", "against", "saving", "on base", "of cell", "assumption"):
            ranked.add_column(col, justify="right" if col in ("#", "% of roof", "on base", "of cell") else "left")
        for i, k in enumerate(view.kernels[:10], start=1):
            ranked.add_row(str(i), k.cell_id, _short_label(k.label, 48), pct_text(k.pct_of_roof),
                           _safe(k.against or "—"), k.saving, pct_text(k.campaign_saved_pct), pct_text(k.saved_pct),
                           _safe(k.basis))
        print_table(ranked, out)
    if not view.levers:
        for line in view.final_lines():
            click.echo(terminal_text(line))
        return
    table = Table(title=_safe(f"{view.campaign}: levers ranked by estimated value x ease ({view.levers_path.name}: "
                              f"hand-written estimates)"),
                  title_justify="left")
    for col in ("#", "lever", "status", "kernel", "cell", "estimate", "bound", "cost", "score", "gate / why lost"):
        table.add_column(col, justify="right" if col in ("#", "estimate", "bound", "score") else "left")
    for i, v in enumerate(view.levers, start=1):
        table.add_row(str(i), _safe(f"{v.spec.id}: {v.spec.lever}"), v.spec.status, _safe(v.spec.kernel),
                      v.cell_id or "—", pct_text(v.value_pct), pct_text(v.bound_pct), _safe(v.spec.cost),
                      "—" if v.score is None else f"{v.score:.2f}", _safe(v.spec.why_lost or v.spec.gate))
    print_table(table, out)
    for line in view.final_lines():
        click.echo(terminal_text(line))


if TYPE_CHECKING:
    from perfreport.lake.compare import CompareResult
    from perfreport.lake.history import Commit
    from perfreport.lake.predictions import PredictionsResult

HISTORY_COLUMNS = ("table", "snapshot_id", "parent_id", "timestamp_utc", "operation", "counts", "folded")


def print_history(commits: list[Commit], fmt: str = "table") -> None:
    """Print a lake table's commits, oldest first: a table, CSV rows (counts as a JSON object) or JSON objects."""
    def row(c: Commit) -> tuple[Any, ...]:
        return (c.table, c.snapshot_id, c.parent_id, c.timestamp.isoformat(), c.operation, c.counts, c.folded)

    emit(fmt, lambda: _history_table(commits), lambda: (HISTORY_COLUMNS, [row(c) for c in commits]),
         lambda: [dict(zip(HISTORY_COLUMNS, row(c), strict=True)) for c in commits])


def _history_table(commits: list[Commit]) -> None:
    out = console()
    if not commits:
        out.print("(no snapshots)")
        return
    table = Table(title=_safe(f"lake table {commits[0].table}: commits, oldest first"), title_justify="left")
    for col, just in (("snapshot_id", "right"), ("parent_id", "right"), ("timestamp (UTC)", "left"),
                      ("operation", "left"), ("counts", "left")):
        table.add_column(col, justify=just, no_wrap=True, min_width=23 if col.startswith("time") else None)  # type: ignore[arg-type]
    for c in commits:
        folded = f" (folds {', '.join(map(str, c.folded))})" if c.folded else ""
        table.add_row(str(c.snapshot_id), "-" if c.parent_id is None else str(c.parent_id),
                      c.timestamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3], c.operation,
                      ", ".join(f"{k} {v}" for k, v in c.counts.items()) + folded)
    print_table(table, out)


def compare_rows(result: CompareResult) -> Rows:
    """One row per (group, kernel, cell): the groups' wide tables as one long table, one header for all."""
    from perfreport.lake.compare import KEY_COLUMNS

    keys = len(KEY_COLUMNS)
    columns = ("group", *KEY_COLUMNS, "campaign", "cell_id", result.vary, result.metric)
    rows = [(g_i, *row[:keys], camp, cell, value, row[keys + c_i])
            for g_i, g in enumerate(result.groups, start=1) for row in g.rows
            for c_i, (camp, cell, value) in enumerate(g.cells)]
    return columns, rows


def print_compare(result: CompareResult, fmt: str = "table") -> None:
    """Print a lake comparison: one table per comparable group, the section-set notes and the cells not comparable;
    CSV: the groups as one long table (notes and cells not comparable go to stderr); JSON: all of them."""
    from perfreport.lake.compare import TRIAL_COLUMNS
    from perfreport.warehouse.db import QueryResult

    lines = [f"note: {n}" for n in result.notes] + [f"not comparable: {n}" for n in result.not_comparable]

    def table() -> None:
        for g in result.groups:
            cells = ", ".join(f"{camp}/{cid}" for camp, cid, _ in g.cells)
            _query_table(QueryResult(g.columns, g.rows), title=f"{result.metric} by {result.vary}: {cells}")
            if g.trials:
                _query_table(QueryResult(list(TRIAL_COLUMNS), g.trials),
                             title=f"trials by {result.vary}: each cell against {g.cells[0][0]}/{g.cells[0][1]}")
        for line in lines:
            click.echo(line)

    if fmt == "csv":
        for line in lines:
            click.echo(terminal_text(line), err=True)
    emit(fmt, table, lambda: compare_rows(result),
         lambda: {"metric": result.metric, "vary": result.vary, "notes": result.notes,
                  "not_comparable": result.not_comparable,
                  "groups": [{"cells": [{"campaign": camp, "cell_id": cid, result.vary: value}
                                        for camp, cid, value in g.cells],
                              "rows": [dict(zip(g.columns, r, strict=True)) for r in g.rows],
                              "trials": [dict(zip(TRIAL_COLUMNS, r, strict=True)) for r in g.trials]}
                             for g in result.groups]})


def print_step_budget(budget: StepBudget, target: Path, prefix: str = "") -> None:
    """One step budget: its warnings (stderr), then steps, GPU busy, host gap and the time-weighted host share."""
    for w in budget.warnings:
        click.echo(terminal_text(f"warning: {w}"), err=True)
    busy = sum(s["gpu_busy_ms"] for s in budget.steps)
    gap = sum(s["host_gap_ms"] for s in budget.steps)
    click.echo(f"{prefix}{len(budget.steps)} step(s) ({budget.method}): GPU busy {busy:.3f} ms, host gap {gap:.3f} "
               f"ms ({budget.host_share_pct:.1f}% host, time-weighted); wrote step_budget into {target}")


def print_cell_steps(result: CellSteps) -> None:
    """A cell's `steps:` traces as `make demo` imported them: one step-budget line per trace."""
    for path, budget in result.budgets:
        print_step_budget(budget, result.target, _safe(f"{result.campaign} / {result.cell_id} ← {path.name}: "))


def print_regressions(result: RegressionsResult, fmt: str = "table") -> None:
    """Print `lake regressions`: one row per change point (COLUMNS), then how many series were read."""
    from perfreport.lake.regressions import COLUMNS, TRIAL_KERNEL
    from perfreport.warehouse.db import QueryResult

    rows = [r.row() for r in result.rows]

    def table() -> None:
        _query_table(QueryResult(list(COLUMNS), rows), title=f"{result.metric}: change points over publications"
                     + (" (trials)" if result.rows and result.rows[0].kernel == TRIAL_KERNEL else ""))
        found = sum(r.label in ("regression", "improvement", "suspicious") for r in result.rows)
        click.echo(f"{result.series} series read, {found} change point(s)")

    emit(fmt, table, lambda: (list(COLUMNS), rows),
         lambda: {"metric": result.metric, "series": result.series,
                  "rows": [dict(zip(COLUMNS, r, strict=True)) for r in rows]})


def print_predictions(result: PredictionsResult, fmt: str = "table") -> None:
    """Print `lake predictions`: every prediction with its outcome (COLUMNS), then the error per kind and chip."""
    from perfreport.lake.predictions import COLUMNS, SUMMARY_COLUMNS, as_dicts
    from perfreport.warehouse.db import QueryResult

    shown = ("cell_id", "kind", "lever", "kernel", "predicted_pct", "realized_kernel_pct", "realized_gpu_pct",
             "realized_e2e_pct", "error_e2e_pp", "outcome")  # the terminal's columns; csv and json carry all
    at = [COLUMNS.index(c) for c in shown]

    def table() -> None:
        rows = [tuple(r[i] for i in at) for r in result.rows]
        _query_table(QueryResult(list(shown), rows), title="predictions: predicted vs realized gain (% of the cell's "
                                                           "time; errors in points)")
        _query_table(QueryResult(list(SUMMARY_COLUMNS), result.summary), title="error per prediction kind and chip")

    if fmt == "csv":
        for r in result.summary:
            click.echo(terminal_text("summary: " + ", ".join(f"{k}={v}" for k, v in zip(SUMMARY_COLUMNS, r,
                                                                                         strict=True))), err=True)
    emit(fmt, table, lambda: (list(COLUMNS), result.rows), lambda: as_dicts(result))
