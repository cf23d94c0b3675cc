"""The prediction ledger: every publish records its "next lever" predictions; a later measurement settles them.

Recorded per published cell (docs/architecture.md, "Predictions"): the Amdahl bound of the cell's first-ranked kernel
(frontier.candidates: time share x distance to its roof), ncu's own estimate for that kernel (its rules' largest
global "Est. Speedup" x its share) and the expected unlock of each open lever of levers.yaml valued in that cell
(fraction x share, bounded by Amdahl). Each is % of the cell's kernel timeline, with the kernels it names.

A prediction is settled by the first later publication of a cell doing the same work on the same chip (every
descriptor field equal but the software stack and the grounding) on another stack: a lever was pulled. Realized:
kernel = the named kernels' ncu time removed, as % of the before cell's ncu kernel time (a kernel absent after ran
no more: fused or dropped, and counted as removed, said in `note`); GPU = the whole cell's ncu kernel time;
end to end = the cell's end-to-end median (warehouse.gather.e2e_metric over its trials). Errors are realized minus
predicted, in percentage points.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign
from perfreport.errors import PerfReportError
from perfreport.frontier.candidates import KernelLever, rank_campaign
from perfreport.frontier.levers import load_levers, rank_frontier
from perfreport.lake.compare import identity, one_set_each
from perfreport.lake.history import table_names
from perfreport.lake.iceberg import load_tables, open_lake
from perfreport.lake.rows import MATCH_FIELDS, STACK_FIELDS, descriptor
from perfreport.warehouse.gather import CampaignData, e2e_metric, gather, higher_is_better, samples_of
from perfreport.warehouse.stats import FASTER, NO_CHANGE, SLOWER, compare

KINDS = ("amdahl bound", "ncu rule estimate", "expected unlock")
COLUMNS = ("campaign", "cell_id", "hardware", "kind", "lever", "kernel", "predicted_pct", "settled_by",
           "realized_kernel_pct", "realized_gpu_pct", "realized_e2e_pct", "e2e_metric", "error_kernel_pp",
           "error_e2e_pp", "outcome", "note", "publication_id")
SUMMARY_COLUMNS = ("kind", "hardware", "predictions", "settled", "mean_predicted_pct", "mean_realized_e2e_pct",
                   "mean_abs_error_kernel_pp", "mean_abs_error_e2e_pp")


def _rule_estimate(kernel: dict[str, Any] | None) -> float | None:
    """ncu's largest global estimated speedup (% of the kernel's time) among its rules; None without one."""
    rules = (kernel or {}).get("rules") or []
    found = [float(r["speedup_pct"]) for r in rules if isinstance(r, dict) and r.get("speedup_type") == "global"
             and isinstance(r.get("speedup_pct"), int | float)]
    return max(found) if found else None


def _names(data: CampaignData, cell_id: str, functions: set[str]) -> list[str]:
    """The kernel identities (lake.compare.identity) of a cell's join rows with these functions."""
    return sorted({identity(r) for r in data.join if r["cell_id"] == cell_id and str(r["function"]) in functions})


def _top(ranked: list[KernelLever]) -> dict[str, KernelLever]:
    out: dict[str, KernelLever] = {}
    for k in ranked:
        if k.saved_pct and k.cell_id not in out:
            out[k.cell_id] = k
    return out


def prediction_rows(campaign: Campaign, cell_ids: list[str]) -> list[dict[str, Any]]:
    """The predictions a publish of these cells records (publication_id and published_at stamped later)."""
    data = gather(campaign.dir)
    ranked = rank_campaign(data)
    first = next((k for k in ranked if k.saved_pct), None)
    levers = load_levers(campaign)
    valued = rank_frontier(levers.levers, data.join) if levers else []
    rows: list[dict[str, Any]] = []
    for cd in data.cells:
        if cd.id not in cell_ids:
            continue
        desc = descriptor(cd.context)
        samples = samples_of(cd.serving, [t for t in data.kernel_trials if t["cell_id"] == cd.id])
        metric = e2e_metric(samples)
        base = {"campaign": campaign.id, "cell_id": cd.id, "hardware": campaign.hardware,
                "match_key": json.dumps({f: desc[f] for f in MATCH_FIELDS}, sort_keys=True, default=str),
                "stack": json.dumps({f: desc[f] for f in STACK_FIELDS}, sort_keys=True, default=str),
                "e2e_metric": metric, "e2e_before": statistics.median(samples[metric]) if metric else None}
        top = _top(ranked).get(cd.id)
        if top is not None:
            names = _names(data, cd.id, {top.function})
            row = {**base, "lever": None, "is_next": top is first, "kernel": top.label, "kernels": names}
            rows.append({**row, "kind": "amdahl bound", "predicted_pct": top.saved_pct, "basis": top.basis})
            share = top.time_share_pct
            doc = json.loads(cd.kernels_json) if cd.kernels_json else {}  # the rows as imported, with ncu's rules
            kernel = next((k for k in doc.get("kernels", []) if k.get("id") == top.kernel_id), None)
            if (est := _rule_estimate(kernel)) is not None and share is not None:
                rows.append({**row, "kind": "ncu rule estimate", "predicted_pct": share * est / 100,
                             "basis": f"ncu's largest global estimated speedup {est:.1f}% of the kernel x its "
                                      f"{share:.1f}% share"})
        for v in valued:
            if v.spec.status == "open" and v.cell_id == cd.id and v.value_pct is not None:
                rows.append({**base, "kind": "expected unlock", "lever": v.spec.id, "is_next": False,
                             "kernel": v.spec.kernel, "kernels": _names(data, cd.id, set(v.matched)),
                             "predicted_pct": v.value_pct, "basis": v.basis})
    return sorted(rows, key=lambda r: (r["cell_id"], KINDS.index(r["kind"]), r["lever"] or ""))


@dataclass
class PredictionsResult:
    """Every prediction with its outcome (COLUMNS), and the error per kind and chip (SUMMARY_COLUMNS)."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    summary: list[tuple[Any, ...]] = field(default_factory=list)


def _cell_times(history: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, float]]:
    """ncu kernel time (ns, duration x launches) per identity, per (publication, campaign, cell): each kernel from
    its largest section set (a kernel captured by --set full and --set basic counts once)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for k in history:
        groups[(k["publication_id"], k["campaign"], k["cell_id"])].append(k)
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    for key, rows in groups.items():
        kept, _ = one_set_each(rows)
        times: dict[str, float] = defaultdict(float)
        for k in kept:
            if k["duration_ns"] is not None and k["launches"] is not None:
                times[identity(k)] += float(k["duration_ns"]) * float(k["launches"])
        out[key] = dict(times)
    return out


def _pct(before: float | None, after: float | None, base: float | None) -> float | None:
    if before is None or after is None or not base:
        return None
    return 100.0 * (before - after) / base


def lake_predictions(lake: str | Path | None, campaign: str | None = None,
                     missing_ok: bool = False) -> PredictionsResult:
    """Each recorded prediction with what the first later matching measurement realized, and the errors; a lake
    from before the ledger is an error, or no prediction at all with missing_ok (the site's History page)."""
    where, catalog = open_lake(lake)
    if "predictions" not in table_names(catalog):
        if missing_ok:
            return PredictionsResult()
        raise PerfReportError(f"lake {str(where)!r}: no predictions table (a lake from before the prediction ledger); "
                              f"publish a campaign once and every later publish records its predictions.")
    tables = load_tables(catalog, ["predictions", "kernel_history", "trials", "cells"])
    preds = [p for p in tables["predictions"].scan().to_arrow().to_pylist()
             if campaign is None or p["campaign"] == campaign]
    history = tables["kernel_history"].scan(selected_fields=(
        "publication_id", "published_at", "campaign", "cell_id", "name", "function", "section_set", "duration_ns",
        "launches", *MATCH_FIELDS, *STACK_FIELDS)).to_arrow().to_pylist()
    times = _cell_times(history)
    pubs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for k in history:
        pubs.setdefault((k["publication_id"], k["campaign"], k["cell_id"]), k)
    trials = {(t["campaign"], t["cell_id"], t["metric"]): t["values"]
              for t in tables["trials"].scan().to_arrow().to_pylist()}
    result = PredictionsResult()
    for p in sorted(preds, key=lambda p: (p["published_at"], p["campaign"], p["cell_id"], KINDS.index(p["kind"]),
                                          p["lever"] or "")):
        result.rows.append(_settle(p, pubs, times, trials))
    result.summary = _summary(result.rows)
    return result


def _settle(p: dict[str, Any], pubs: dict[tuple[str, str, str], dict[str, Any]],
            times: dict[tuple[str, str, str], dict[str, float]],
            trials: dict[tuple[str, str, str], list[float]]) -> tuple[Any, ...]:
    key = json.loads(p["match_key"])
    stack = json.loads(p["stack"])
    later = sorted((k for k in pubs.values() if k["published_at"] > p["published_at"]
                    and all(_same(k[f], key[f]) for f in MATCH_FIELDS)
                    and any(not _same(k[f], stack[f]) for f in STACK_FIELDS)),
                   key=lambda k: (k["published_at"], k["campaign"], k["cell_id"]))
    before = times.get((p["publication_id"], p["campaign"], p["cell_id"]), {})
    if not later:
        return _row(p, None, None, None, None, None, None, "open: no later measurement of this work on another stack")
    after_pub = later[0]
    after = times.get((after_pub["publication_id"], after_pub["campaign"], after_pub["cell_id"]), {})
    named = p["kernels"] or []
    gone = [n for n in named if n not in after]
    kernel_before = sum(before.get(n, 0.0) for n in named) if named and all(n in before for n in named) else None
    realized_kernel = _pct(kernel_before, sum(after.get(n, 0.0) for n in named), sum(before.values()))
    realized_gpu = _pct(sum(before.values()), sum(after.values()), sum(before.values()))
    metric = p["e2e_metric"]
    values = trials.get((after_pub["campaign"], after_pub["cell_id"], metric or ""))
    e2e_after = statistics.median(values) if values else None
    outcome = None
    if values and (earlier := trials.get((p["campaign"], p["cell_id"], metric or ""))):
        c = compare(earlier, values, lower_is_better=not higher_is_better(str(metric)))
        word = "won" if c.verdict == FASTER else "refuted" if c.verdict in (SLOWER, NO_CHANGE) else c.verdict
        outcome = f"{word}: {metric} {c.text()}"
    realized_e2e = _pct(p["e2e_before"], e2e_after, p["e2e_before"])
    if realized_e2e is not None and metric and any(t in metric.lower() for t in ("throughput", "tok_s")):
        realized_e2e = -realized_e2e  # a throughput gained is a time saved
    note = (f"{len(gone)} of {len(named)} named kernel(s) absent after (fused or dropped; counted as removed)"
            if gone else "")
    if values is None:
        note = "; ".join(x for x in (note, f"no end-to-end trials ({metric or 'none'}) in the later cell") if x)
    settled = f"{after_pub['campaign']}/{after_pub['cell_id']} ({after_pub['publication_id']})"
    return _row(p, settled, realized_kernel, realized_gpu, realized_e2e, metric, outcome, note)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, default=str) == json.dumps(b, default=str)


def _row(p: dict[str, Any], settled: str | None, kernel: float | None, gpu: float | None, e2e: float | None,
         metric: str | None, outcome: str | None, note: str) -> tuple[Any, ...]:
    pred = p["predicted_pct"]
    err_k = None if kernel is None or pred is None else kernel - pred
    err_e = None if e2e is None or pred is None else e2e - pred
    return (p["campaign"], p["cell_id"], p["hardware"], p["kind"], p["lever"], p["kernel"], pred, settled, kernel,
            gpu, e2e, metric or p["e2e_metric"], err_k, err_e, outcome, note or None, p["publication_id"])


def _summary(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Error per prediction kind and chip across the lake: counts, mean predicted and realized, mean |error|."""
    col = {c: i for i, c in enumerate(COLUMNS)}
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for r in rows:
        groups[(r[col["kind"]], r[col["hardware"]])].append(r)

    def mean(values: list[Any]) -> float | None:
        xs = [float(v) for v in values if v is not None]
        return statistics.fmean(xs) if xs else None

    out = []
    for (kind, chip), rs in sorted(groups.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1] or "")):
        settled = [r for r in rs if r[col["settled_by"]]]
        out.append((kind, chip, len(rs), len(settled), mean([r[col["predicted_pct"]] for r in settled]),
                    mean([r[col["realized_e2e_pct"]] for r in settled]),
                    mean([abs(r[col["error_kernel_pp"]]) if r[col["error_kernel_pp"]] is not None else None
                          for r in settled]),
                    mean([abs(r[col["error_e2e_pp"]]) if r[col["error_e2e_pp"]] is not None else None
                          for r in settled])))
    return out


def as_dicts(result: PredictionsResult) -> dict[str, list[dict[str, Any]]]:
    """The result as JSON-able rows (for --format json and the site's History page)."""
    return {"predictions": [dict(zip(COLUMNS, r, strict=True)) for r in result.rows],
            "summary": [dict(zip(SUMMARY_COLUMNS, r, strict=True)) for r in result.summary]}


def stamp(rows: list[dict[str, Any]], publication_id: str, when: datetime) -> list[dict[str, Any]]:
    """The rows with their publication and its time."""
    return [{**r, "publication_id": publication_id, "published_at": when} for r in rows]

