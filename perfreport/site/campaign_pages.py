"""Build the campaign pages 01-07 from gathered data: tables, charts and "what to capture" notes. No I/O."""

from __future__ import annotations

from typing import Any

from perfreport.frontier.candidates import (
    EASE,
    KernelLever,
    bound_mix,
    campaign_weights,
    host_verdict,
    next_lever,
    rank_campaign,
    verdict_criteria,
    weights_note,
)
from perfreport.frontier.krhpa import LETTERS, LEVELS, krhpa_label, krhpa_problems, rubric_rows
from perfreport.frontier.levers import load_levers
from perfreport.frontier.value_view import build_view
from perfreport.kernels.labels import shortened
from perfreport.site import charts
from perfreport.site.comparison import Comparison, Mismatch, context_line, flatten, varying_fields
from perfreport.site.kernel_pages import kernel_href
from perfreport.site.page_model import Chart, Column, Missing, Page, Table
from perfreport.warehouse.gather import SERVING_GROUPS, SERVING_KEYS, CampaignData, CellData
from perfreport.warehouse.stats import number_text

C = Column
MISSING_TIMES = Missing("each kernel's share of end-to-end GPU time (and so its Amdahl bound)", [
    "perftunereport import_nsys --campaign DIR --cell-id ID report_cuda_gpu_kern_sum.csv "
    "(nsys stats --report cuda_gpu_kern_sum --format csv)",
    "or perftunereport import_torch_trace --campaign DIR --cell-id ID trace.json.gz (torch.profiler Chrome trace)",
    "or perftunereport import_samples --campaign DIR --cell-id ID samples.csv (continuous-profiler sample counts)",
])
MISSING_SERVING = Missing("throughput, TTFT and TPOT per cell", [
    "run the serving benchmark of each cell (e.g. `vllm bench serve` at the cell's concurrency, ISL and OSL)",
    "record its numbers in an evidence bundle's inference_perfbench_v1.json `results` (fields named `*throughput*`, "
    "`*ttft*`, `*tpot*` or `*itl*`; `perftunereport bundle init --id ID` creates the bundle)",
    "list the bundle folder under the cell's `captures:` in config.yaml (or copy the JSON to cells/<id>/), "
    "then render again",
])
MISSING_ROOFLINE = Missing("each kernel on the roofline: arithmetic intensity against achieved TFLOP/s", [
    "capture each cell's kernels with ncu `--set full` or `--set roofline` (their FLOP and DRAM-byte counters place "
    "a kernel; `--set basic` gives %SoL only)",
    "import the report with `perftunereport import_ncu --campaign DIR --cell-id ID --bundle REPORT.ncu-rep`, then "
    "render again",
])
ROOFLINE_POINTS_NOTE = ("Achieved TFLOP/s is measured only: a kernel whose AI was not measured has none (an em dash; "
                        "null in the downloads) and is the hollow marker of the AI-unmeasured strip, drawn at its SM "
                        "busy %, never at a TFLOP/s.")
SHARE_CHART_CELLS = 12  # page 4 draws one chart per cell for this many cells; every cell page draws its own
SHARE_BARS = 30  # kernels per time-share chart (the largest); the tables list every kernel
MISSING_STEPS = Missing("GPU-busy vs host-gap time per decode step", [
    "capture a torch.profiler timeline of at least 20 steady-state decode steps of the serving engine, not of a "
    "single layer, calling prof.step() once per step (or one record_function per step)",
    "run `perftunereport import_step_budget --bundle BUNDLE trace.json.gz` (it writes each step's gpu_busy_ms and "
    "host_gap_ms into the bundle's inference_perfbench_v1.json), then render again",
])
TIME_SHARE_PAGE = "04-time-share.html"  # its join table's downloads are every cell page's too (one per table)
INTERNALS_PAGE = "06-kernel-internals.html"  # likewise its internals table
JOIN_COLUMNS = [
    C("cell_id", "cell"), C("label", "kernel", "kernel"), C("family", "family"),
    C("time_share_pct", "time share", "pct"), C("sample_share_pct", "sample share", "pct"),
    C("share_split", "share split by"), C("op", "launched by"), C("shapes", "input shapes", wrap=True),
    C("total_ms", "total by time source", "ms"), C("time_source", "time source"),
    C("instances", "instances", "num"), C("ncu_ms", "ncu duration", "ms"),
    C("ncu_share_pct", "ncu duration share", "pct"),
    C("sol_pct", "% of datasheet roof (%SoL)", "pct"), C("sol_ceiling_key", "datasheet roof (key)"),
    C("pct_of_achievable", "% of measured roof", "pct"), C("achievable_key", "measured roof (key)"),
    C("ceiling_exceeded", "ceiling to re-measure", "exceeded", wrap=True), C("bound", "bound"),
    C("arithmetic_intensity", "AI", "num", unit="FLOP/B"), C("ai_measured", "AI measured", "value"),
    C("executed_per_useful", "executed / useful FLOPs", "num"),
    C("dram_throughput_pct", "DRAM %peak", "pct"), C("sm_throughput_pct", "SM %peak", "pct"),
    C("amdahl_bound_pct", "Amdahl bound", "pct"), C("amdahl_bound_ms", "Amdahl bound", "ms"),
    C("amdahl_basis", "bound against", wrap=True),
    C("matched_sources", "matched sources", "value"),
]
# Page 4's columns for a campaign with timeline trials (gather.TRIAL_COLUMNS): mean [95% CI] (n) per kernel.
TRIAL_JOIN_COLUMNS = [
    C("share_trials", "time share over trials (%)", wrap=True),
    C("launch_us_trials", "time per launch over trials (µs)", wrap=True),
]
TRIAL_CELL_COLUMNS = [
    C("cell_id", "cell"), C("metric", "measured"), C("n", "trials", "num"), C("mean", "mean", "num"),
    C("ci", "95% CI of the mean"), C("std", "std", "num"), C("median", "median", "num"), C("min", "min", "num"),
]
KERNEL_COLUMNS = [
    C("cell_id", "cell"), C("id", "id"), C("label", "kernel", "kernel"), C("family", "family"),
    C("source_set", "set"), C("launches", "launches", "num"), C("duration_ns", "duration", "duration_ns"),
    C("arithmetic_intensity", "AI", "num", unit="FLOP/B"), C("achieved_tflops", "achieved", "num", unit="TFLOP/s"),
    C("sol_pct", "% of datasheet roof (%SoL)", "pct"), C("sol_ceiling_key", "datasheet roof (key)"),
    C("pct_of_achievable", "% of measured roof", "pct"), C("achievable_key", "measured roof (key)"),
    C("ceiling_exceeded", "ceiling to re-measure", "exceeded", wrap=True), C("sm_throughput_pct", "SM %peak", "pct"),
    C("dram_throughput_pct", "DRAM %peak", "pct"), C("bound", "bound"), C("name", "demangled name", wrap=True),
]
INTERNALS_COLUMNS = [
    C("cell_id", "cell"), C("id", "id"), C("label", "kernel", "kernel"), C("source_set", "set"),
    C("achieved_occupancy_pct", "occupancy achieved", "pct"),
    C("theoretical_occupancy_pct", "occupancy theoretical", "pct"),
    C("block_limit_factor", "binding limit"), C("block_limits", "blocks/SM per limit", "value", wrap=True),
    C("regs_per_thread", "registers/thread", "num"), C("smem_per_block_bytes", "shared mem/block", "bytes"),
    C("block_size", "block"), C("grid_size", "grid"), C("branch_divergence_pct", "branch divergence", "pct"),
    C("top_stall", "top warp stall"),
]


def demangled_names(data: CampaignData) -> dict[tuple[str, str], str]:
    """(cell id, kernel id) -> the kernel row's demangled name: the hover text of its shortened label in a table."""
    return {(cd.id, str(k["id"])): str(k["name"]) for cd in data.cells for k in cd.kernels}


def cell_contexts(data: CampaignData) -> dict[str, str]:
    """Cell id -> the context fields that differ between cells (hover text of the roofline)."""
    fields = varying_fields([cd.context for cd in data.cells])
    return {cd.id: context_line(cd.context, fields) for cd in data.cells}


def kernel_label(k: dict[str, Any]) -> str:
    """A kernel row on a chart axis: cell · id label (the id keeps the sources of one cell apart), the label cut to
    60 characters (the tables show it whole)."""
    return f"{k['cell_id']} · {k['id']} {shortened(str(k.get('label') or k['function']), 60)}"


def top_stall(k: dict[str, Any]) -> str | None:
    stalls = k.get("warp_stalls_pct") or {}
    if not stalls:
        return None
    reason = max(sorted(stalls), key=lambda r: stalls[r] or 0.0)
    return f"{reason} {stalls[reason]:.0f}%"


def summary_page(data: CampaignData, groups: list[Comparison], mismatches: list[Mismatch]) -> Page:
    """01: context descriptor, cells, headline verdicts, the next lever, comparisons."""
    page = Page("01-summary.html", "01-summary.html", "Summary")
    camp = data.campaign
    flat = flatten(camp.context)
    page.add_table(Table("context", "Context descriptor (config.yaml, campaign defaults)",
                         [C("field", "field"), C("value", "value", "value", wrap=True)],
                         [{"field": f, "value": v} for f, v in flat.items()]))
    cell_flat = {cd.id: flatten(cd.context) for cd in data.cells}
    varying = varying_fields([cd.context for cd in data.cells])
    cols = [C("cell_id", "cell"), C("description", "description", wrap=True), *[C(f, f, "value") for f in varying],
            C("sets", "captured sets"), C("kernels", "kernel rows", "num")]
    rows = [{"cell_id": cd.id, "href": f"cell-{cd.id}.html", "description": cd.cell.description,
             **{f: cell_flat[cd.id][f] for f in varying},
             "sets": ", ".join(sorted({str(s.get("section_set") or s.get("format")) for s in cd.sources})) or None,
             "kernels": len(cd.kernels)} for cd in data.cells]
    page.add_table(Table("cells", "Cells (fields that differ between cells)", cols, rows, link_key="cell_id"))
    ranked = rank_campaign(data)  # the one ranking: page 7, value_view and the import summary use it too
    firsts = _firsts(ranked)
    page.add_table(Table("headlines", "Headline verdicts per cell", [
        C("cell_id", "cell"), C("ncu_ms", "ncu-measured kernel time", "ms"),
        C("bound_mix", "time by bound verdict", wrap=True), C("top", "longest kernel", wrap=True),
        C("time_shares", "time shares", wrap=True), C("next_lever", "next lever", wrap=True),
        C("host", "host vs GPU", wrap=True),
    ], [_headline(data, cd, firsts) for cd in data.cells], link_key="cell_id"))
    trial_rows = [{"cell_id": cd.id, "href": f"cell-{cd.id}.html", "metric": name, "n": t.n, "mean": t.mean,
                   "ci": None if t.ci_low is None or t.ci_high is None
                   else f"[{number_text(t.ci_low)}, {number_text(t.ci_high)}]",
                   "std": t.std, "median": t.median, "min": t.min}
                  for cd in data.cells for name, t in cd.trials.items()]
    if trial_rows:
        page.add_table(Table("trials", "Repeated measurements per cell (trials: n, mean, 95% bootstrap CI)",
                             TRIAL_CELL_COLUMNS, trial_rows, link_key="cell_id"))
    lever = next_lever(ranked)
    page.context.update(next_lever=lever and lever.as_row(), groups=groups,
                        description=data.ceilings.description(camp.hardware), hardware=camp.hardware,
                        sol_rigor=camp.sol_rigor)
    page.add_table(Table("mismatches", "Cells not compared, with every field where they differ", [
        C("a", "cell"), C("b", "nearest cell"), C("fields", "mismatched fields (field: a vs b)", wrap=True)],
        [{"a": m.a, "b": m.b, "fields": "; ".join(f"{f}: {_v(x)} vs {_v(y)}" for f, x, y in m.fields)}
         for m in mismatches]))
    return page


def _v(v: Any) -> str:
    return "(not filled)" if v is None else str(v)


def _firsts(ranked: list[KernelLever]) -> dict[str, KernelLever]:
    """Each cell's first kernel of the ranking that saves anything (one pass over the ranking)."""
    out: dict[str, KernelLever] = {}
    for k in ranked:
        if k.saved_pct and k.cell_id not in out:
            out[k.cell_id] = k
    return out


def _headline(data: CampaignData, cd: CellData, firsts: dict[str, KernelLever]) -> dict[str, Any]:
    rows = data.join_by_cell.get(cd.id, [])
    mix = bound_mix(rows)
    longest = max(rows, key=lambda r: (r.get("ncu_ms") or 0.0, r["label"]), default=None)
    lever = firsts.get(cd.id)
    timed = sorted({str(r["time_source"]) for r in rows if r.get("time_source")})
    top = None
    if longest is not None and longest.get("ncu_ms"):
        sol = "—" if longest.get("sol_pct") is None else f"{longest['sol_pct']:.0f}% of datasheet roof"
        top = f"{longest['label']} ({longest.get('ncu_share_pct') or 0:.0f}% of ncu time, {sol}, " \
              f"{longest.get('bound') or 'bound unknown'})"
    return {
        "cell_id": cd.id, "href": f"cell-{cd.id}.html",
        "ncu_ms": sum(r.get("ncu_ms") or 0.0 for r in rows) or None,
        "bound_mix": ", ".join(f"{k} {v:.0f}%" for k, v in mix.items()) or None, "top": top,
        "time_shares": ", ".join(timed) if timed else "none imported (ncu durations only)",
        "next_lever": None if lever is None else lever.headline(),
        "host": host_verdict(cd.steps) or "unknown (no step budget captured)",
    }


def serving_page(data: CampaignData) -> Page:
    """02: throughput / TTFT / TPOT per cell from evidence bundles."""
    page = Page("02-serving.html", "02-serving.html", "Serving")
    rows = [r for cd in data.cells for r in cd.serving]
    page.context["missing"] = None if rows else MISSING_SERVING
    metrics = sorted({k for r in rows for k in r} - set(SERVING_KEYS))
    page.add_table(Table("serving", "Serving results per cell", [
        C("cell_id", "cell"), C("bundle", "bundle"), C("result", "result"), *[C(m, m, "num") for m in metrics]],
        rows))
    for group, tokens in SERVING_GROUPS:
        keys = [m for m in metrics if any(t in m.lower() for t in tokens)]
        if keys:
            xs = [{**r, "x": f"{r['cell_id']} · {r['result']}"} for r in rows]
            page.add_chart(Chart(f"serving-{group}", charts.grouped(xs, "x", [(k, k) for k in keys[:6]],
                                                                    f"{group} per cell", group)))
    page.context["bundles"] = [{"cell_id": cd.id, "bundles": ", ".join(cd.bundles) or "none"} for cd in data.cells]
    return page


def step_budget_page(data: CampaignData) -> Page:
    """03: GPU-busy vs host-gap per decode step; kernel work is moot when host-bound."""
    page = Page("03-step-budget.html", "03-step-budget.html", "Step budget")
    rows = [r for cd in data.cells for r in cd.steps]
    page.context["missing"] = None if rows else MISSING_STEPS
    page.context["verdicts"] = [{"cell_id": cd.id, "verdict": host_verdict(cd.steps)} for cd in data.cells
                                if cd.steps]
    page.add_table(Table("steps", "GPU busy vs host gap per step", [
        C("cell_id", "cell"), C("bundle", "bundle"), C("step", "step"), C("gpu_busy_ms", "GPU busy", "ms"),
        C("host_gap_ms", "host gap", "ms"), C("host_share_pct", "host share", "pct")], rows))
    if rows:
        xs = [{**r, "x": f"{r['cell_id']} · {r['step']}"} for r in rows]
        page.add_chart(Chart("step-budget-chart", charts.grouped(
            xs, "x", [("gpu_busy_ms", "GPU busy"), ("host_gap_ms", "host gap")], "Step budget", "ms", "stack")))
    return page


def time_share_chart(cell_id: str, rows: list[dict[str, Any]], div_id: str) -> Chart | None:
    """One cell's kernels by their share of that cell's time (the shares of a cell add up to 100%, so cells are
    never mixed in one bar list): the imported time share, else the sample share, else the share of ncu-measured
    duration, titled as NOT a time share. None when the cell has no share at all."""
    for key, what in (("time_share_pct", "time share"), ("sample_share_pct", "sample share")):
        if any(r.get(key) is not None for r in rows):
            fig = charts.bars(rows, "label", key, f"{what.capitalize()} per kernel · {cell_id}",
                              f"{what} of the cell's GPU time (%)", limit=SHARE_BARS)
            return Chart(div_id, fig, _shown(rows, key))
    if any(r.get("ncu_share_pct") is not None for r in rows):
        fig = charts.bars(rows, "label", "ncu_share_pct", f"ncu-measured duration share · {cell_id} (NOT a time "
                          "share)", "share of the cell's ncu-measured kernel time (%)", limit=SHARE_BARS)
        note = ("No time share imported for this cell: each kernel's share of the durations ncu measured, with "
                "kernels serialized under the profiler. It ranks kernels; it is not a share of wall time.")
        return Chart(div_id, fig, " ".join(filter(None, [note, _shown(rows, "ncu_share_pct")])))
    return None


def _shown(rows: list[dict[str, Any]], key: str) -> str:
    n = sum(r.get(key) is not None for r in rows)
    return "" if n <= SHARE_BARS else f"The {SHARE_BARS} largest of {n} kernels; the table below lists them all."


def time_share_page(data: CampaignData) -> Page:
    """04: the warehouse join (time shares, %SoL, Amdahl bound) and one time-share chart per cell."""
    page = Page(TIME_SHARE_PAGE, TIME_SHARE_PAGE, "Time share")
    without = [cd.id for cd in data.cells if not data.timed(cd.id)]
    page.context["missing"] = None if not without else Missing(
        f"{MISSING_TIMES.what}; cells without one: {', '.join(without)}", MISSING_TIMES.capture)
    trialled = any(r.get("share_trials") for r in data.join)
    columns = JOIN_COLUMNS[:4] + TRIAL_JOIN_COLUMNS + JOIN_COLUMNS[4:] if trialled else JOIN_COLUMNS
    page.add_table(Table("join", "Kernel join (warehouse view kernel_join)", columns, data.join, link_key="label"))
    drawn = [cd.id for cd in data.cells if data.join_by_cell.get(cd.id)]
    for cell_id in drawn[:SHARE_CHART_CELLS]:
        chart = time_share_chart(cell_id, data.join_by_cell[cell_id], f"time-share-{cell_id}")
        if chart is not None:
            page.add_chart(chart)
    page.context["more_cells"] = drawn[SHARE_CHART_CELLS:]
    unmatched_cols = [C(k, k, "value") for k in sorted({k for r in data.unmatched for k in r})]
    page.add_table(Table("unmatched", "Kernels not matched across sources (warehouse view unmatched_kernels)",
                         unmatched_cols, data.unmatched))
    return page


def roofline_page(data: CampaignData) -> Page:
    """05: the campaign roofline with key-path-labelled roofs, and the table behind it."""
    page = Page("05-roofline.html", "05-roofline.html", "Roofline")
    model = data.roofline
    page.context["missing"] = None if model.points else MISSING_ROOFLINE
    if model.points:
        page.add_chart(Chart("roofline", charts.roofline(model, f"Roofline · {data.campaign.id} · {model.hardware}",
                                                         contexts=cell_contexts(data)),
                             "Click a kernel marker to open its kernel page.", kernel_links=True))
    page.context["notes"] = model.notes
    page.context["counts"] = {"measured": sum(p.measured for p in model.points),
                              "unmeasured": sum(not p.measured for p in model.points)}
    page.add_table(Table("roofs", "Roofs drawn (sol-ceilings.yaml key paths)", [
        C("key", "key path"), C("value", "peak", "num"), C("unit", "unit"), C("level", "level"),
        C("source", "source", wrap=True)],
        [{"key": r.key, "value": r.value, "unit": "TB/s" if r.is_memory else "TFLOP/s", "level": r.level,
          "source": data.ceilings.entry(r.key).get("source") or data.ceilings.entry(r.key).get("method")}
         for r in model.roofs]))
    names = demangled_names(data)
    page.add_table(Table("points", "Kernels on the roofline", [
        C("cell_id", "cell"), C("kernel_id", "id"), C("label", "kernel", "kernel"), C("source", "set"),
        C("measured", "AI measured", "value"), C("ai", "AI", "num", unit="FLOP/B"),
        C("achieved_tflops", "achieved", "num", unit="TFLOP/s"),
        C("pct_of_roof", "% of datasheet roof at its AI", "pct"), C("sm_pct", "SM busy", "pct"),
        C("ceiling_key", "datasheet compute roof (key)"), C("sol_pct", "% of datasheet roof (%SoL)", "pct"),
        C("bound", "bound"), C("time_share_pct", "time share", "pct")],
        [{**p.__dict__, "href": kernel_href(p.cell_id, p.kernel_id), "name": names.get((p.cell_id, p.kernel_id))}
         for p in model.points],
        note=ROOFLINE_POINTS_NOTE, link_key="kernel_id"))
    return page


def internals_page(data: CampaignData) -> Page:
    """06: occupancy and its binding limit, registers, shared memory, warp stalls, divergence."""
    page = Page(INTERNALS_PAGE, INTERNALS_PAGE, "Kernel internals")
    rows = [{**k, "top_stall": top_stall(k)} for cd in data.cells for k in cd.kernels]
    page.add_table(Table("internals", "Occupancy, resources and divergence per kernel row", INTERNALS_COLUMNS, rows,
                         link_key="id"))
    with_stalls = [{**r, "label": kernel_label(r)} for r in rows if r.get("warp_stalls_pct")]  # the chart's axis
    page.context["missing"] = None if with_stalls else Missing("warp-stall breakdown per kernel", [
        "capture with --set full (WarpStateStats section) and import it with perftunereport import_ncu"])
    if with_stalls:
        page.add_chart(Chart("warp-stalls-chart", charts.warp_stalls(with_stalls, "Warp-stall breakdown"),
                             "Kernel rows without WarpStateStats (e.g. --set basic) are left out."))
    return page


FRONTIER_COLUMNS = [
    C("rank", "#", "num"), C("id", "lever id"), C("lever", "lever", wrap=True), C("status", "status"),
    C("kernel", "kernel pattern"), C("cell_id", "cell"), C("unlock", "expected unlock"),
    C("value_pct", "estimated value", "pct"), C("bound_pct", "bound on it", "pct"), C("cost", "cost"),
    C("score", "score", "num"), C("basis", "estimate basis", wrap=True), C("gate", "gate", wrap=True),
    C("evidence", "evidence", wrap=True), C("why_lost", "why it lost", wrap=True),
]
MISSING_LEVERS = Missing("the campaign's levers ranked by value × ease, with the gate that proves or refutes each", [
    "write levers.yaml next to config.yaml: per lever an id, the lever, the kernels it works on (a name pattern "
    "such as regex:^nvjet_sm90_), unlock {direction, fraction, moves_roof}, cost, gate and status "
    "(docs/frontier.md; schema perfreport/config/schemas/levers.schema.json)",
    "import a timeline per cell (import_torch_trace or import_nsys) so each value is bounded by a measured share",
    "check it with `perftunereport value_view --campaign DIR`, then render again",
])
MISSING_KRHPA = Missing("the K/R/H/P/A rubric, candidate vs baseline, and its DRAFT/VERDICT label", [
    "add a `krhpa:` block to config.yaml: `krhpa: {candidate: {name: ..., K: 1..4, R: 1..4, H: 1..4, P: 1..4, "
    "A: 1..4}, baseline: {name: <the production-representative kernel or library>, K: ..., R: ..., H: ..., P: ..., "
    "A: ...}, speedup: <baseline time / candidate time>}` (docs/frontier.md; required at sol_rigor L4)",
    "measure the candidate and the baseline on the same shapes and record `speedup:`, then render again",
])


def frontier_page(data: CampaignData) -> Page:
    """07: levers.yaml ranked by value x ease, the K/R/H/P/A rubric with DRAFT vs VERDICT, kernel candidates."""
    page = Page("07-frontier.html", "07-frontier.html", "Frontier")
    camp = data.campaign
    per_cell = [data.timed(cd.id) for cd in data.cells]
    trials = (flatten(camp.context)).get("grounding.trials")
    criteria = verdict_criteria(per_cell, data.join, camp.sol_rigor, trials)
    page.context.update(label="VERDICT" if all(ok for _, ok in criteria) else "DRAFT", criteria=criteria,
                        ease=EASE)
    levers = load_levers(camp)  # the one read of page 7: campaigns/<c>/levers.yaml, validated as a whole file
    view = build_view(camp, data, levers)
    page.context.update(next_lines=view.final_lines(), levers_missing=None if levers else MISSING_LEVERS)
    page.add_table(Table("levers", "Levers (levers.yaml: hand-written estimates) ranked by estimated value x ease",
                         FRONTIER_COLUMNS, [
        {"rank": i, **v.as_row(), "evidence": ", ".join(v.spec.evidence) or None,
         "unlock": f"{v.spec.direction} ~{v.spec.fraction:.0%} (estimate)" + (", moves the roof" if v.spec.moves_roof
                                                                              else "")}
        for i, v in enumerate(view.levers, start=1)]))
    label, reasons = krhpa_label(camp)
    names = demangled_names(data)
    page.context.update(krhpa_missing=None if camp.krhpa is not None else MISSING_KRHPA, krhpa_label=label,
                        krhpa_reasons=reasons, krhpa_problems=krhpa_problems(camp), sol_rigor=camp.sol_rigor)
    page.add_table(Table("krhpa", "K/R/H/P/A rubric: candidate vs baseline (1..4, higher = stronger)", [
        C("letter", "letter"), C("meaning", "meaning"), C("candidate", "candidate", "value", wrap=True),
        C("baseline", "baseline", "value", wrap=True)], rubric_rows(camp.krhpa)))
    page.add_table(Table("krhpa-levels", "What each level means", [
        C("letter", "letter"), C("meaning", "meaning"), *[C(f"level_{n}", str(n), wrap=True) for n in LEVELS]],
        [{"letter": k, "meaning": meaning, **{f"level_{n}": names[n - 1] for n in LEVELS}}
         for k, (meaning, names) in LETTERS.items()]))
    page.add_table(Table("kernels", "Kernels ranked by time saved: measured savings first, then estimates (the one "
                                    "ranking: its first is the next lever)", [
        C("rank", "#", "num"), C("cell_id", "cell"), C("label", "kernel", "kernel"), C("family", "family"),
        C("bound", "bound"), C("pct_of_roof", "% of roof", "pct"), C("against", "against the roof", wrap=True),
        C("time_share_pct", "time share", "pct"), C("saving", "saving"),
        C("campaign_saved_pct", "saved on the campaign base", "pct"), C("cell_weight_pct", "cell weight", "pct"),
        C("saved_pct", "saved of the cell's timeline", "pct"), C("saved_ms", "time saved", "ms"),
        C("basis", "assumption", wrap=True), C("action", "lever", wrap=True), C("cost", "cost")],
        [{"rank": i, **lv.as_row(), "href": kernel_href(lv.cell_id, lv.kernel_id) if lv.kernel_id else None,
          "name": names.get((lv.cell_id, lv.kernel_id or ""))}  # the hover text of a shortened label
         for i, lv in enumerate(view.kernels, start=1)], link_key="label",
        note=weights_note(campaign_weights(data), any(cd.cell.weight is not None for cd in data.cells))))
    return page
