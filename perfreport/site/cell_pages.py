"""Build one page per cell (cell-<id>.html) and one per comparable group (compare-<field>-<n>.html). No I/O."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfreport.site import charts
from perfreport.site.campaign_pages import (
    INTERNALS_COLUMNS,
    INTERNALS_PAGE,
    JOIN_COLUMNS,
    KERNEL_COLUMNS,
    TIME_SHARE_PAGE,
    kernel_label,
    time_share_chart,
    top_stall,
)
from perfreport.site.comparison import Comparison, flatten
from perfreport.site.page_model import Chart, Column, Missing, Page, Table
from perfreport.warehouse.gather import CampaignData, CellData, compare_samples

C = Column
CELL_JOIN_KEYS = ("label", "share_split", "op", "shapes", "time_share_pct", "sample_share_pct", "total_ms",
                  "time_source", "instances", "ncu_ms", "ncu_share_pct", "sol_pct", "pct_of_achievable",
                  "ceiling_exceeded", "executed_per_useful", "bound", "amdahl_bound_pct", "amdahl_bound_ms",
                  "amdahl_basis", "matched_sources")
MISSING_KERNELS = Missing("this cell's kernel rows (ncu), its roofline, time shares and warp stalls", [
    "capture the cell's workload under ncu (`perftunereport capture plan` prints the command; --set full for the "
    "roofline and warp stalls)",
    "list the report under the cell's `captures:` in config.yaml and run `perftunereport import_ncu --campaign DIR "
    "--cell-id ID --bundle REPORT.ncu-rep`, then render again",
])


def _without_cell(columns: list[Column]) -> list[Column]:
    """A cell page's tables drop the cell column (every row is this cell's)."""
    return [c for c in columns if c.key != "cell_id"]


def _campaign_download(cell_id: str, page: str) -> str:
    """The note of a cell table whose downloads are a campaign page's: one download per table, never a copy."""
    return (f"The downloads are the table of `{page}` (every cell, every column): this cell's rows are those with "
            f"cell_id `{cell_id}`.")


def cell_page(data: CampaignData, cd: CellData, groups: list[Comparison], contexts: dict[str, str]) -> Page:
    """cell-<id>.html: context (with what the cell overrides), sources, kernels, roofline, time share, internals."""
    page = Page(f"cell-{cd.id}.html", "cell.html", f"Cell {cd.id}")
    own = flatten(cd.cell.context)
    page.add_table(Table("context", "Effective context (campaign defaults + this cell's overrides)", [
        C("field", "field"), C("value", "value", "value", wrap=True), C("origin", "set by")],
        [{"field": f, "value": v, "origin": "cell" if own[f] is not None else "campaign"}
         for f, v in flatten(cd.context).items()]))
    page.add_table(Table("sources", "Imported captures", [
        C("id", "source"), C("format", "format"), C("section_set", "set"), C("ncu_version", "ncu"),
        C("gpu", "GPU"), C("kernels", "kernels", "num"), C("launches", "launches", "num"), C("sha256", "sha256"),
        C("command_line", "command line", wrap=True)], cd.sources))
    page.add_table(Table("kernels", "Kernel rows (ncu_kernels.json)", _without_cell(KERNEL_COLUMNS), cd.kernels,
                         link_key="id"))
    model = data.roofline
    cell_model = replace(model, points=data.points_by_cell.get(cd.id, []), notes=[])
    if cell_model.points:
        page.add_chart(Chart("cell-roofline", charts.roofline(cell_model, f"Roofline · {cd.id}", contexts=contexts),
                             "Click a kernel marker to open its kernel page.", kernel_links=True))
    join = data.join_by_cell.get(cd.id, [])
    share = time_share_chart(cd.id, join, "cell-time-share") if join else None
    if share is not None:
        page.add_chart(share)
    page.add_table(Table("join", "Time share and Amdahl bound (kernel_join)",
                         [c for c in JOIN_COLUMNS if c.key in CELL_JOIN_KEYS], join, link_key="label",
                         note=_campaign_download(cd.id, TIME_SHARE_PAGE)), downloads_of=(TIME_SHARE_PAGE, "join"))
    rows = [{**k, "top_stall": top_stall(k)} for k in cd.kernels]
    page.add_table(Table("internals", "Occupancy, resources and divergence", _without_cell(INTERNALS_COLUMNS), rows,
                         link_key="id", note=_campaign_download(cd.id, INTERNALS_PAGE)),
                   downloads_of=(INTERNALS_PAGE, "internals"))
    stalls = [{**r, "label": kernel_label(r)} for r in rows if r.get("warp_stalls_pct")]  # the chart's axis
    if stalls:
        page.add_chart(Chart("cell-warp-stalls", charts.warp_stalls(stalls, f"Warp-stall breakdown · {cd.id}")))
    page.context.update(cell=cd.cell, captures=cd.cell.captures, bundles=cd.bundles,
                        missing=None if cd.kernels else MISSING_KERNELS,
                        serving=len(cd.serving), steps=len(cd.steps),
                        groups=[g for g in groups if cd.id in g.cell_ids])
    return page


def trial_comparisons(data: CampaignData, cell_ids: list[str]) -> list[dict[str, Any]]:
    """Every repeated number (page 2's `results`, the trials' kernel time, each kernel's time per launch) of each
    cell against the first cell's: ratio of medians with its CI, p and the verdict (gather.compare_samples)."""
    base, rows = data.trial_samples(cell_ids[0]), []
    for cell_id in cell_ids[1:]:
        for metric, c in compare_samples(base, data.trial_samples(cell_id)):
            rows.append({"metric": metric, "before": cell_ids[0], "after": cell_id, "n_before": c.n_before,
                         "n_after": c.n_after, "ratio": c.ratio, "p_value": c.p_value, "verdict": c.verdict,
                         "ci": None if c.ci_low is None else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"})
    return rows


def compare_page(data: CampaignData, group: Comparison) -> Page:
    """compare-<field>-<n>.html: cells equal on every context field but one, side by side per kernel."""
    page = Page(f"{group.slug}.html", "compare.html", f"Compare {group.field}")
    by_id = {cd.id: cd for cd in data.cells}
    first = flatten(by_id[group.cell_ids[0]].context)
    page.add_table(Table("varied", f"The varied field: {group.field}", [
        C("cell_id", "cell"), C("value", group.field, "value")],
        [{"cell_id": c, "href": f"cell-{c}.html", "value": v} for c, v in zip(group.cell_ids, group.values,
                                                                               strict=True)],
        link_key="cell_id"))
    page.add_table(Table("shared", "Fields shared by every cell of this comparison", [
        C("field", "field"), C("value", "value", "value", wrap=True)],
        [{"field": f, "value": v} for f, v in first.items() if f != group.field]))
    join = {(r["cell_id"], r["label"]): r for c in group.cell_ids for r in data.join_by_cell.get(c, [])}
    kernels = sorted({k for _, k in join})
    timed = any(r.get("time_share_pct") is not None for r in join.values())
    metric, label = ("time_share_pct", "time share") if timed else ("ncu_ms", "ncu ms")
    cols: list[Column] = [C("label", "kernel", "kernel")]
    rows: list[dict[str, Any]] = [{"label": k} for k in kernels]
    for i, cell in enumerate(group.cell_ids):
        cols += [C(f"c{i}_{metric}", f"{cell} {label}", "pct" if timed else "ms"),
                 C(f"c{i}_sol", f"{cell} %SoL", "pct"), C(f"c{i}_bound", f"{cell} bound")]
        for row in rows:
            r = join.get((cell, row["label"]), {})
            row.update({f"c{i}_{metric}": r.get(metric), f"c{i}_sol": r.get("sol_pct"), f"c{i}_bound": r.get("bound")})
    page.add_table(Table("kernels", "Kernels side by side", cols, rows))
    page.add_table(Table("trials", "Repeated numbers compared over trials (each cell against the first in "
                               "config.yaml): end-to-end results, kernel time, each kernel's time per launch", [
        C("metric", "metric", wrap=True), C("before", "before (cell)"), C("after", "after (cell)"),
        C("n_before", "n before", "num"), C("n_after", "n after", "num"),
        C("ratio", "ratio of medians (after / before)", "num"),
        C("ci", "95% bootstrap CI"), C("p_value", "Mann-Whitney U p", "num"), C("verdict", "verdict")],
        trial_comparisons(data, [c.id for c in data.campaign.cells if c.id in group.cell_ids])))  # config order
    series = [(f"c{i}_{metric}", cell) for i, cell in enumerate(group.cell_ids)]
    page.add_chart(Chart("compare-chart", charts.grouped(rows, "label", series, f"{label} per kernel",
                                                         label)))
    page.context.update(group=group)
    return page
