"""Stage 4, first half: gather everything a campaign site shows, before anything is written.

Sources: config.yaml (context, cells, krhpa); the DuckDB warehouse (perfreport.warehouse.db) over the cells' JSON:
table ncu_kernels (every kernel row of every capture), ncu_sources, and the views kernel_join (time shares, %SoL
and Amdahl bounds per cell and kernel function) and unmatched_kernels; evidence
bundles named by a cell's captures (inference_perfbench_v1.json: serving `results`, `step_budget`) and the
speed-of-light ceilings. Everything is sorted here, so the pages built from it are deterministic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

from perfreport.bundle.layout import BUNDLE_JSON
from perfreport.config.campaign import Campaign, Cell, load_campaign
from perfreport.config.capture_ceilings import FROM_CAPTURE
from perfreport.config.ceilings import Ceilings
from perfreport.errors import InputError
from perfreport.timeshare.step_budget import host_share_pct
from perfreport.warehouse import amd
from perfreport.warehouse.db import NCU_FILE, SAMPLES_FILE, TIMES_FILE, open_loaded
from perfreport.warehouse.roofline import RooflineModel, RoofPoint, build_roofline
from perfreport.warehouse.stats import Summary, compare, summarize

THROUGHPUT_TOKENS = ("throughput", "tok_s", "tokens_per_s", "req_s")
SERVING_GROUPS = (("throughput", THROUGHPUT_TOKENS), ("ttft", ("ttft",)), ("tpot", ("tpot", "itl")),
                  ("latency", ("latency",)))
SERVING_KEYS = ("cell_id", "bundle", "result")  # a serving row's labels; every other key is a metric
# Kernel metrics where a larger value is better; every other one (durations, bytes, launches) is better lower.
HIGHER_IS_BETTER = frozenset({"achieved_tflops", "sol_pct", "sm_throughput_pct", "dram_throughput_pct",
                              "achieved_occupancy_pct", "arithmetic_intensity"})


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of this kernel or serving metric is better (a throughput, a %SoL), for every verdict
    that says faster, slower, regression or improvement."""
    return metric in HIGHER_IS_BETTER or any(t in metric.lower() for t in THROUGHPUT_TOKENS)


@dataclass
class CellData:
    """One cell: its effective context, every ncu kernel row, and what its bundles add."""

    cell: Cell
    context: dict[str, Any]
    kernels: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    bundles: list[str] = field(default_factory=list)
    serving: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    kernels_json: str = ""  # the cell's ncu_kernels.json as written by import_ncu ("" when it has none)
    # Each repeated number of the cell (its timeline trials' kernel time, its bundles' per-trial results) summarised.
    trials: dict[str, Summary] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Return the cell id."""
        return self.cell.id


@dataclass
class CampaignData:
    """Everything the site renders for one campaign."""

    campaign: Campaign
    ceilings: Ceilings
    cells: list[CellData]
    join: list[dict[str, Any]]  # kernel_join rows + family, ncu_ms, ncu_share_pct, and the trial columns
    unmatched: list[dict[str, Any]]
    kernel_trials: list[dict[str, Any]] = field(default_factory=list)  # the kernel_trials view, by cell, kernel, trial

    @cached_property
    def roofline(self) -> RooflineModel:
        """The roofline model: one point per kernel row the warehouse chose for its cell, sized by time share.
        Built on first use (the site's pages use it; the CLI's next lever does not)."""
        shares = {(r["cell_id"], r["kernel_id"]): r["time_share_pct"] for r in self.join
                  if r.get("time_share_pct") is not None and r.get("kernel_id") is not None}
        chosen = {(r["cell_id"], r["kernel_id"]) for r in self.join if r.get("kernel_id") is not None}
        padding = {(r["cell_id"], r["kernel_id"]): r["executed_per_useful"] for r in self.join
                   if r.get("executed_per_useful") is not None and r.get("kernel_id") is not None}
        return build_roofline([k for cd in self.cells for k in cd.kernels], self.ceilings, self.campaign.hardware,
                              shares, chosen, padding)

    @cached_property
    def join_by_cell(self) -> dict[str, list[dict[str, Any]]]:
        """kernel_join rows per cell id."""
        return _by_cell(self.join)

    @cached_property
    def points_by_cell(self) -> dict[str, list[RoofPoint]]:
        """Roofline points per cell id."""
        out: dict[str, list[RoofPoint]] = {}
        for p in self.roofline.points:
            out.setdefault(p.cell_id, []).append(p)
        return out

    def trial_samples(self, cell_id: str) -> dict[str, list[float]]:
        """A cell's repeated numbers, one value per trial (samples_of), for comparisons of two cells."""
        cd = next(c for c in self.cells if c.id == cell_id)
        return samples_of(cd.serving, [t for t in self.kernel_trials if t["cell_id"] == cell_id])

    def timed(self, cell_id: str) -> bool:
        """Return True when the cell has an imported time share or sample share."""
        return any(r.get("time_share_pct") is not None or r.get("sample_share_pct") is not None
                   for r in self.join_by_cell.get(cell_id, []))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read it as JSON ({exc}); expected an evidence bundle's "
                         f"{BUNDLE_JSON} (docs/bundle.md). Fix or remove the file, then render again.") from exc


def _bundle_jsons(campaign: Campaign, cell: Cell) -> list[Path]:
    """inference_perfbench_v1.json files of the bundles a cell's captures name (or sit inside), and cells/<id>/."""
    found: list[Path] = []
    candidates = [cell.cell_dir(campaign)]
    for capture in cell.capture_paths(campaign):
        candidates += [capture] + list(capture.parents)[:3]
    for folder in candidates:
        path = folder / BUNDLE_JSON
        if path.is_file() and path not in found:
            found.append(path)
    return found


def trial_count(campaign: Campaign, cell: Cell) -> int | None:
    """How many trials the cell holds: the distinct `trial` numbers of its bundles' `results` and of its imported
    timeline and sample files (--trial N, trials:); None when nothing carries one (the data cannot say, and
    grounding.trials stands as typed)."""
    docs = [d for d in map(_read_json, _bundle_jsons(campaign, cell)) if isinstance(d, Mapping)]
    trials = {r.get("trial") for d in docs for r in d.get("results") or [] if isinstance(r, Mapping)}
    for name in (TIMES_FILE, SAMPLES_FILE):
        path = cell.cell_dir(campaign) / name
        doc = _read_json(path) if path.is_file() else None
        if isinstance(doc, Mapping):
            trials |= {s.get("trial") for s in doc.get("sources") or [] if isinstance(s, Mapping)}
    trials.discard(None)
    return len(trials) or None


def _numbers(obj: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, v in obj.items():
        name = f"{prefix}{key}"
        if isinstance(v, Mapping):
            out.update(_numbers(v, f"{name}."))
        elif isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out[name] = float(v)
    return out


def serving_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Numeric fields of one free-form `results` entry whose names say throughput, TTFT or TPOT/ITL."""
    metrics = {}
    for name, v in _numbers(result).items():
        low = name.lower()
        if any(token in low for _, tokens in SERVING_GROUPS for token in tokens):
            metrics[name] = v
    return metrics


def _bundle_rows(cell_id: str, paths: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    serving: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    for path in paths:
        data = _read_json(path)
        if not isinstance(data, Mapping):
            continue
        bundle = str(data.get("bundle_id") or path.parent.name)
        for i, result in enumerate(data.get("results") or []):
            if isinstance(result, Mapping) and (metrics := serving_metrics(result)):
                label = result.get("name") or result.get("label") or f"results[{i}]"
                serving.append({"cell_id": cell_id, "bundle": bundle, "result": str(label), **metrics})
        for i, step in enumerate(data.get("step_budget") or []):
            busy, gap = (step.get("gpu_busy_ms"), step.get("host_gap_ms")) if isinstance(step, Mapping) else (None,) * 2
            if isinstance(busy, int | float) and isinstance(gap, int | float):
                row = {"cell_id": cell_id, "bundle": bundle, "step": str(step.get("step", i)),
                       "gpu_busy_ms": float(busy), "host_gap_ms": float(gap), "wall_ms": float(busy + gap)}
                steps.append({**row, "host_share_pct": host_share_pct([row])})  # the step budget's one formula
    return serving, steps


KERNEL_SQL = (
    "SELECT k.* EXCLUDE (per_launch, stats, ncu_peaks, flops, launch_ids, kernel_id, section_set), "
    "k.kernel_id AS id, coalesce(k.section_set, s.format, '?') AS source_set "
    "FROM ncu_kernels k LEFT JOIN ncu_sources s ON s.cell_id = k.cell_id AND s.source = k.source "
    "ORDER BY k.cell_id, k.kernel_id"
)
JSON_COLUMNS = ("warp_stalls_pct", "block_limits")


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _warehouse(campaign: Campaign, ceilings: Ceilings) -> dict[str, list[dict[str, Any]]]:
    """Kernel rows, sources, kernel_join (+ ncu_ms, ncu_share_pct) and unmatched_kernels from the warehouse."""
    con = open_loaded(campaign, ceilings)
    try:
        kernels = _dicts(con, KERNEL_SQL)
        for k in kernels:
            for col in JSON_COLUMNS:
                k[col] = json.loads(k[col]) if isinstance(k[col], str) else k[col]
        join = _dicts(con, "SELECT *, ncu_duration_ns * ncu_launches / 1e6 AS ncu_ms FROM kernel_join "
                           "ORDER BY cell_id, label")
        totals: dict[str, float] = {}
        for r in join:
            totals[r["cell_id"]] = totals.get(r["cell_id"], 0.0) + (r["ncu_ms"] or 0.0)
        for r in join:
            whole = totals[r["cell_id"]]
            r["ncu_share_pct"] = 100.0 * r["ncu_ms"] / whole if r["ncu_ms"] is not None and whole > 0 else None
        trials = _dicts(con, "SELECT * FROM kernel_trials ORDER BY cell_id, kernel, trial")
        add_trial_columns(join, trials)
        return {
            "kernels": kernels, "join": join, "trials": trials,
            "cell_trials": _dicts(con, "SELECT * FROM cell_trials ORDER BY cell_id, trial"),
            "sources": _dicts(con, "SELECT * FROM ncu_sources ORDER BY cell_id, source"),
            "unmatched": _dicts(con, "SELECT * FROM unmatched_kernels ORDER BY cell_id, label, missing_from"),
        }
    finally:
        con.close()


# A kernel's repeated numbers over its cell's trials (kernel_trials column, join-row prefix, unit scale): each gives
# the join row <prefix>_n, _mean, _ci_low, _ci_high (numbers, for the downloads) and <prefix>_trials (the text shown).
TRIAL_COLUMNS = (("ns_per_launch", "launch_us", 1e-3), ("share_pct", "share", 1.0))


def add_trial_columns(join: list[dict[str, Any]], trials: list[dict[str, Any]]) -> None:
    """Summarise each kernel's trials onto its join rows; a key split into parts gets the whole key's, said in its
    text (trials time the key, not a part); a kernel without trials gets nulls, never a summary of nothing."""
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in trials:
        samples.setdefault((t["cell_id"], t["kernel"]), []).append(t)
    parts: dict[tuple[str, str], int] = {}
    for r in join:
        if r.get("part") is not None:
            parts[(r["cell_id"], r["kernel"])] = parts.get((r["cell_id"], r["kernel"]), 0) + 1
    for r in join:
        rows = samples.get((r["cell_id"], r["kernel"]))
        for column, prefix, scale in TRIAL_COLUMNS:
            s = summarize([t[column] * scale for t in rows if t[column] is not None]) if rows else None
            r[f"{prefix}_n"] = s.n if s else None
            r[f"{prefix}_mean"], r[f"{prefix}_ci_low"], r[f"{prefix}_ci_high"] = (
                (s.mean, s.ci_low, s.ci_high) if s else (None, None, None))
            split = parts.get((r["cell_id"], r["kernel"])) if r.get("part") is not None else None
            whole = f" for the whole key (all {split} parts)" if s and split else ""
            r[f"{prefix}_trials"] = s.text() + whole if s else None


def cell_trial_stats(cell_trials: list[dict[str, Any]], serving: list[dict[str, Any]]) -> dict[str, Summary]:
    """A cell's repeated numbers: the kernel time of each timeline trial (ms) and each end-to-end result metric of
    its bundles (page 2's numbers, one per trial result)."""
    out: dict[str, Summary] = {}
    if s := summarize([t["kernel_ns"] / 1e6 for t in cell_trials]):
        out[KERNEL_TIME] = s
    for name, values in sorted(serving_samples(serving).items()):
        if len(values) > 1 and (s := summarize(values)):
            out[name] = s
    return out


KERNEL_TIME = "kernel time per trial (ms)"


def serving_samples(serving: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each end-to-end metric of a cell's serving rows with one value per row (a trial's result)."""
    out: dict[str, list[float]] = {}
    for r in serving:
        for k, v in r.items():
            if k not in SERVING_KEYS and isinstance(v, int | float):
                out.setdefault(k, []).append(float(v))
    return out


def samples_of(serving: list[dict[str, Any]], kernel_trials: list[dict[str, Any]]) -> dict[str, list[float]]:
    """A cell's repeated numbers, one value per trial: its end-to-end results, its trials' kernel time (ms) and each
    kernel's time per launch (`<label> time per launch (µs)`), from its serving rows and kernel_trials rows."""
    out = serving_samples(serving)
    per_trial: dict[int, float] = {}
    for t in kernel_trials:
        per_trial[t["trial"]] = per_trial.get(t["trial"], 0.0) + t["total_ns"] / 1e6
        if t["ns_per_launch"] is not None:
            out.setdefault(f"{t['label']} time per launch (µs)", []).append(t["ns_per_launch"] / 1e3)
    if per_trial:
        out[KERNEL_TIME] = [per_trial[k] for k in sorted(per_trial)]
    return out


def campaign_trial_samples(campaign: Campaign) -> dict[str, dict[str, list[float]]]:
    """samples_of for every cell with trials, for the lake (publish) and the K/R/H/P/A verdict; the warehouse is
    opened only when some cell holds timeline trials."""
    trials = {c.id: trial_count(campaign, c) for c in campaign.cells}
    if not any(trials.values()):
        return {}
    rows: list[dict[str, Any]] = []
    if any(c.trials or (c.cell_dir(campaign) / TIMES_FILE).is_file() for c in campaign.cells):
        con = open_loaded(*amd.scored(campaign))
        try:
            rows = _dicts(con, "SELECT * FROM kernel_trials ORDER BY cell_id, kernel, trial")
        finally:
            con.close()
    out = {}
    for cell in sorted(campaign.cells, key=lambda c: c.id):
        if trials[cell.id]:
            serving, _ = _bundle_rows(cell.id, _bundle_jsons(campaign, cell))
            if samples := samples_of(serving, [t for t in rows if t["cell_id"] == cell.id]):
                out[cell.id] = samples
    return out


LATENCY_TOKENS = ("latency", "tpot", "ttft", "itl", "_ms")  # an end-to-end time among a cell's repeated numbers


def e2e_metric(names: Iterable[str]) -> str | None:
    """The end-to-end number a verdict or a realized gain is read from: the first latency-like result (sorted), else
    the trials' kernel time; None when neither was measured. A kernel's time per launch is never end to end."""
    shared = sorted(names)
    latency = [m for m in shared if any(t in m.lower() for t in LATENCY_TOKENS) and "time per launch" not in m]
    return next(iter(latency), KERNEL_TIME if KERNEL_TIME in shared else None)


def compare_samples(before: Mapping[str, list[float]], after: Mapping[str, list[float]]) -> list[tuple[str, Any]]:
    """Each metric the two sides both measured, compared (stats.compare: ratio of medians after / before, its CI,
    Mann-Whitney U, the verdict), lower is better unless higher_is_better says otherwise; sorted by metric."""
    return [(m, compare(before[m], after[m], lower_is_better=not higher_is_better(m)))
            for m in sorted(set(before) & set(after))]


def _by_cell(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["cell_id"], []).append(row)
    return out


def _kernels_json(campaign: Campaign, cell: Cell) -> str:
    """The cell's ncu_kernels.json text (the warehouse loaded and checked it already), for the kernel pages."""
    path = cell.cell_dir(campaign) / NCU_FILE
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except OSError as exc:
        raise InputError(f"'{path}': cannot be read ({exc.strerror}); check its permissions and render again.") \
            from None


def gather(campaign_dir: Path) -> CampaignData:
    """Load the campaign, its cells' kernels and bundles and the warehouse join (the roofline model on first use)."""
    campaign, ceilings = amd.scored(load_campaign(campaign_dir))  # an AMD workload names its chip
    if campaign.hardware == FROM_CAPTURE and campaign.capture_ceilings is None:  # nor ncu's device peaks
        raise InputError(f"{campaign.config_path}: hardware: {FROM_CAPTURE} takes its ceilings from the captures "
                         f"(ncu's device peaks, or an AMD workload's chip), and no capture is imported yet; import "
                         f"one with `perftunereport import_ncu --campaign {campaign.dir} --cell-id ID --bundle "
                         f"FILE` (or import_rocprof for an AMD workload), then render.")
    ceilings.key_paths(campaign.hardware)  # an unknown hardware token raises here, naming the known ones
    wh = _warehouse(campaign, ceilings)
    kernels, sources = _by_cell(wh["kernels"]), _by_cell(wh["sources"])
    cell_trials = _by_cell(wh["cell_trials"])
    cells = []
    for cell in sorted(campaign.cells, key=lambda c: c.id):
        paths = _bundle_jsons(campaign, cell)
        serving, steps = _bundle_rows(cell.id, paths)
        cells.append(CellData(cell, cell.effective_context(campaign), kernels.get(cell.id, []),
                              sources.get(cell.id, []), [str(p.parent.name) for p in paths], serving, steps,
                              _kernels_json(campaign, cell), cell_trial_stats(cell_trials.get(cell.id, []), serving)))
    return CampaignData(campaign, ceilings, cells, wh["join"], wh["unmatched"], wh["trials"])

