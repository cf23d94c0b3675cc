"""All terminal printing of the CLI: the tables after an import, a query, a render and the value view."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from perfreport.frontier.value_view import ValueView
    from perfreport.ncu.importer import ImportResult


def _console(width: int) -> Console:
    """A console that prints data as text: no markup (a kernel named `x[/]` or `[abi:cxx11]` prints as itself),
    no emoji codes, no highlighting."""
    return Console(width=width, markup=False, emoji=False, highlight=False)


def _safe(text: str) -> str:
    """Text with control characters escaped (`\\x1b`, `\\n`): a name never moves the cursor or splits a row."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _duration(ns: float | None) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:.3f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"


def _short(name: str, width: int = 48) -> str:
    name = _safe(name)
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_rows(kernels: list[dict[str, Any]]) -> list[list[str]]:
    """Table cells per kernel: kernel, family, duration, AI, TFLOP/s, %SoL (key), occupancy, verdict."""
    rows = []
    for k in kernels:
        sol = "—" if k["sol_pct"] is None else f"{k['sol_pct']:.1f}% ({k['sol_ceiling_key']})"
        if k["sol_pct"] is None and k["sol_ceiling_key"]:
            sol = f"— ({k['sol_ceiling_key']})"
        if k.get("pct_of_achievable") is not None:  # the measured roof beside the datasheet one
            sol += f" / {k['pct_of_achievable']:.1f}% achievable"
        occ = f"{_num(k['achieved_occupancy_pct'], '.1f')}/{_num(k['theoretical_occupancy_pct'], '.1f')}%"
        ai = "null" if k["arithmetic_intensity"] is None else f"{k['arithmetic_intensity']:.3g}"
        part = f" #{k['instance']}" if k.get("instance") else ""  # launches of one grid split by their work
        times = part + (f" ×{k['launches']}" if k["launches"] > 1 else "")
        rows.append([
            _short(k["function"], 44 - len(times)) + times,
            k["family"], _duration(k["duration_ns"]), ai, _num(k["achieved_tflops"], ".1f"), sol, occ,
            k["bound"],
        ])
    return rows


def print_import_summary(result: ImportResult, as_json: bool, console: Console | None = None,
                         next_lever: str | None = None) -> None:
    """Print what an import wrote: a rich table, or a JSON object for machines; then the campaign's next lever
    (frontier.candidates: the same one page 1, page 7 and value_view name)."""
    if as_json:
        print(json.dumps({
            "path": str(result.path), "campaign": result.campaign, "cell_id": result.cell_id,
            "sources": [s["id"] for s in result.sources], "kernels": len(result.kernels),
            "warnings": result.warnings, "next_lever": next_lever,
        }, sort_keys=True))
        return
    console = console or _console(200)
    srcs = ", ".join(f"{s['id']} [{s['format']}, set {s['section_set'] or '?'}]" for s in result.sources)
    table = Table(title=_safe(f"{result.campaign} / {result.cell_id} ← {srcs}"), title_justify="left")
    for col, just in (("kernel", "left"), ("family", "left"), ("duration", "right"), ("AI FLOP/B", "right"),
                      ("TFLOP/s", "right"), ("%SoL (ceiling key) / % of achievable", "left"),
                      ("occupancy ach/theo", "right"), ("verdict", "left")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for row in kernel_rows(result.kernels):
        table.add_row(*row)
    console.print(table)
    for w in result.warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", _safe(w)))
    console.print(_safe(f"wrote {result.path}"))
    if next_lever is not None:
        console.print(_safe(f"next lever (campaign): {next_lever}"))


if TYPE_CHECKING:
    from perfreport.warehouse.db import QueryResult


def _query_json_value(v: Any) -> Any:
    """json.dumps fallback for DuckDB values: DECIMAL as float, dates ISO, bytes hex, anything else str."""
    from decimal import Decimal

    if isinstance(v, Decimal):
        return float(v)
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, bytes | bytearray):
        return v.hex()
    return str(v)


QUERY_CELL_WIDTH = 100  # longer text (demangled kernel names run to 2,000 characters) is cut in the table


def _query_cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return format(v, ".6g")
    return _short(str(v), QUERY_CELL_WIDTH)


def print_query_result(result: QueryResult, as_json: bool, console: Console | None = None) -> None:
    """Print query rows: a rich table (floats to 6 significant digits), or JSON objects with every digit."""
    if as_json:
        is_json = [t == "JSON" for t in (result.types or [""] * len(result.columns))]
        rows = [{c: (json.loads(v) if j and isinstance(v, str) else v)
                 for c, v, j in zip(result.columns, row, is_json, strict=True)} for row in result.rows]
        print(json.dumps(rows, sort_keys=True, ensure_ascii=False, default=_query_json_value))
        return
    cells = [[_query_cell(v) for v in row] for row in result.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(result.columns)]
    console = console or _console(max(80, sum(widths) + 3 * len(widths) + 1))
    if not result.columns:
        console.print("(the statement returned no result set)")
        return
    table = Table(caption=f"{len(cells)} row(s); floats to 6 significant digits, text to {QUERY_CELL_WIDTH} "
                          f"characters (--json prints every value in full)", caption_justify="left")
    for i, col in enumerate(result.columns):
        numeric = any(isinstance(r[i], int | float) and not isinstance(r[i], bool) for r in result.rows)
        table.add_column(_safe(col), no_wrap=True, justify="right" if numeric else "left")
    for row in cells:
        table.add_row(*row)
    console.print(table)


if TYPE_CHECKING:
    from perfreport.timeshare import TimeshareResult


def print_timeshare_summary(result: TimeshareResult, console: Console | None = None) -> None:
    """Print the kernels of a time-share import by share (desc): instances and total ms, or sample counts."""
    from perfreport.ncu.kernel_identity import simplify

    console = console or _console(170)
    srcs = ", ".join(f"{s['id']} [{s['format']}{', ' + s['report'] if s['report'] else ''}]" for s in result.sources)
    console.print(_safe(f"{result.campaign} / {result.cell_id} ← {srcs}"), soft_wrap=True)
    table = Table()
    times = result.kind == "kernel_times"
    ops = any(k.get("op") for k in result.kernels)  # a trace recorded with shapes: rows per launching op
    cols = ("kernel", "instances", "total ms", "share %") if times else ("kernel", "samples", "share %")
    for i, col in enumerate(cols + (("launched by",) if ops else ())):
        table.add_column(col, justify="right" if 0 < i < len(cols) else "left", no_wrap=True)
    rows = sorted(result.kernels, key=lambda k: (-k["share_pct"], k["name"], k.get("op") or "", k.get("shapes") or ""))
    shared = {k["function"] for k in rows if sum(r["function"] == k["function"] for r in rows) > 1}
    for k in rows:
        label = _short(simplify(k["name"]) if k["function"] in shared else k["function"], 60 if ops else 90)
        nums = ([f"{k['instances']:,}", f"{k['total_ns'] / 1e6:,.3f}"] if times else [f"{k['samples']:,}"])
        op = [_short(f"{k['op']} {k['shapes']}" if k.get("op") else "—", 56)] if ops else []
        table.add_row(label, *nums, f"{k['share_pct']:.2f}", *op)
    console.print(table)
    for w in result.warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", _safe(w)))
    console.print(_safe(f"wrote {result.path}"))


if TYPE_CHECKING:
    from perfreport.site.render import RenderResult


def print_render_summary(result: RenderResult, console: Console | None = None, max_rows: int = 30) -> None:
    """Print what report_render wrote: each page with its size (cell pages summed past max_rows), the index."""
    console = console or _console(120)
    console.print(_safe(f"{result.campaign}: site written to {result.campaign_site}"))
    table = Table(show_header=True)
    table.add_column("page", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    cells = [(p, n) for p, n in result.pages if p.name.startswith("cell-")]
    fold = len(result.pages) > max_rows and len(cells) > 1
    for path, size in result.pages:
        if not (fold and path.name.startswith("cell-")):
            table.add_row(_safe(path.name), f"{size / 1024:,.1f} KiB")
    if fold:
        big = max(cells, key=lambda c: (c[1], c[0].name))
        table.add_row(f"cell-*.html x {len(cells)} (largest {big[0].name}, {big[1] / 1024:,.1f} KiB)",
                      f"{sum(n for _, n in cells) / 1024:,.1f} KiB")
    console.print(table)
    total = sum(size for _, size in result.pages)
    largest = max(result.pages, key=lambda p: (p[1], p[0].name))
    console.print(f"{len(result.pages)} pages, {total / 1024:,.1f} KiB (largest {largest[0].name}, "
                  f"{largest[1] / 1024:,.1f} KiB); {result.downloads} CSV/JSON downloads, "
                  f"{result.download_bytes / 1024:,.1f} KiB; plotly.js: {result.plotly_js}")
    console.print(_safe(f"index: {result.index_path}"))


def print_value_view(view: ValueView, as_json: bool = False) -> None:
    from perfreport.frontier.value_view import pct_text, view_json

    """Print the frontier (a rich table, or JSON); the text always ends with the three closing lines."""
    if as_json:
        click.echo(json.dumps(view_json(view), sort_keys=True, ensure_ascii=False, indent=2))
        return
    for w in view.warnings:
        click.echo(f"warning: {w}", err=True)
    console = _console(170)
    if view.kernels:
        ranked = Table(title=_safe(f"{view.campaign}: kernels by measured time saved (the one ranking; top 10)"),
                       title_justify="left")
        for col in ("#", "cell", "kernel", "% of roof", "time saved", "assumption"):
            ranked.add_column(col, justify="right" if col in ("#", "% of roof", "time saved") else "left")
        for i, k in enumerate(view.kernels[:10], start=1):
            ranked.add_row(str(i), k.cell_id, _short(k.label, 48), pct_text(k.pct_of_roof), pct_text(k.saved_pct),
                           _safe(k.basis))
        console.print(ranked)
    if not view.levers:
        for line in view.final_lines():
            click.echo(line)
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
    console.print(table)
    for line in view.final_lines():
        click.echo(line)
