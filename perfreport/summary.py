"""Terminal summaries: the kernel table printed after an import."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from perfreport.importer import ImportResult


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _duration(ns: float | None) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:.3f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_rows(kernels: list[dict[str, Any]]) -> list[list[str]]:
    """Table cells per kernel: kernel, family, duration, AI, TFLOP/s, %SoL (key), occupancy, verdict."""
    rows = []
    for k in kernels:
        sol = "—" if k["sol_pct"] is None else f"{k['sol_pct']:.1f}% ({k['sol_ceiling_key']})"
        if k["sol_pct"] is None and k["sol_ceiling_key"]:
            sol = f"— ({k['sol_ceiling_key']})"
        occ = f"{_num(k['achieved_occupancy_pct'], '.1f')}/{_num(k['theoretical_occupancy_pct'], '.1f')}%"
        ai = "null" if k["arithmetic_intensity"] is None else f"{k['arithmetic_intensity']:.3g}"
        times = f" ×{k['launches']}" if k["launches"] > 1 else ""
        rows.append([
            _short(k["function"], 44 - len(times)) + times,
            k["family"], _duration(k["duration_ns"]), ai, _num(k["achieved_tflops"], ".1f"), sol, occ,
            k["bound"],
        ])
    return rows


def print_import_summary(result: ImportResult, as_json: bool, console: Console | None = None) -> None:
    """Print what an import wrote: a rich table, or a JSON object for machines."""
    if as_json:
        print(json.dumps({
            "path": str(result.path), "campaign": result.campaign, "cell_id": result.cell_id,
            "sources": [s["id"] for s in result.sources], "kernels": len(result.kernels),
            "warnings": result.warnings,
        }, sort_keys=True))
        return
    console = console or Console(width=170)
    srcs = ", ".join(f"{s['id']} [{s['format']}, set {s['section_set'] or '?'}]" for s in result.sources)
    table = Table(title=f"{result.campaign} / {result.cell_id} ← {srcs}", title_justify="left")
    for col, just in (("kernel", "left"), ("family", "left"), ("duration", "right"), ("AI FLOP/B", "right"),
                      ("TFLOP/s", "right"), ("%SoL (ceiling key)", "left"), ("occupancy ach/theo", "right"),
                      ("verdict", "left")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for row in kernel_rows(result.kernels):
        table.add_row(*row)
    console.print(table)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    console.print(f"wrote {result.path}", highlight=False)
