"""Lake rows: explicit pyarrow schemas for the four tables and the gate-checked rows that fill them.

Unmeasured values stay null (never 0). Descriptor fields are flattened into columns named after the field
(``model``, ``tp``, ``isl``, ...); the full effective context also travels as sorted JSON in ``cells``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from perfreport.config.campaign import Campaign
from perfreport.config.context import CONTEXT_FIELDS
from perfreport.frontier.krhpa import krhpa_label
from perfreport.kernels.row import FIELDS as KERNEL_FIELDS
from perfreport.lake.gate import CellCheck
from perfreport.rocprof.context import FORMAT as ROCPROF_FORMAT
from perfreport.rocprof.derive import ROCPROF_KEY
from perfreport.warehouse.gather import campaign_trial_samples

DEFAULT_VENDOR = "nvidia"  # a kernel row without `vendor` was written by import_ncu before the field (kernels/row.py)
BOOL_FIELDS = frozenset({"enforce_eager", "async_scheduling", "prefix_caching", "same_node"})
FLOAT_FIELDS = frozenset({"gpu_memory_utilization"})
INT_FIELDS = frozenset({"tp", "dp", "pp", "ep", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                        "isl", "osl", "concurrency", "num_prompts", "trials"})


def _descriptor_type(name: str) -> pa.DataType:
    if name in BOOL_FIELDS:
        return pa.bool_()
    if name in FLOAT_FIELDS:
        return pa.float64()
    return pa.int64() if name in INT_FIELDS else pa.string()


DESCRIPTOR = [(name, _descriptor_type(name)) for fields in CONTEXT_FIELDS.values() for name in fields]
KEYS = [pa.field("campaign", pa.string(), nullable=False), pa.field("cell_id", pa.string(), nullable=False)]
GATE = [("context_complete", pa.bool_()), ("problems", pa.list_(pa.string())), ("publication_id", pa.string())]
# The campaign's candidate-vs-baseline label (DRAFT | VERDICT | null) from its krhpa block (frontier/krhpa.py).
KRHPA = [("krhpa_label", pa.string())]

ARROW_TYPES = {"string": pa.string(), "number": pa.float64(), "integer": pa.int64(), "boolean": pa.bool_()}
# Kernel-row fields the lake keeps, typed from the row table (perfreport/kernels/row.py), plus two the lake computes.
# The order is the lake schema's and must not change: committed lakes are read with it.
LAKE_ONLY_MEASURES = {"flops_total": pa.float64(), "sol_pct_note": pa.string()}
MEASURE_NAMES = (
    "launches", "duration_ns", "flops_total", "dram_bytes", "arithmetic_intensity", "ai_measured",
    "achieved_tflops", "sol_pct", "sol_ceiling_key", "sol_pct_note", "sm_throughput_pct", "dram_throughput_pct",
    "achieved_occupancy_pct", "theoretical_occupancy_pct", "regs_per_thread", "smem_per_block_bytes",
    "block_limit_factor", "bound",
)
KERNEL_MEASURES: list[tuple[str, pa.DataType]] = [
    (name, LAKE_ONLY_MEASURES[name] if name in LAKE_ONLY_MEASURES else ARROW_TYPES[KERNEL_FIELDS[name].type])
    for name in MEASURE_NAMES
]
KERNELS = pa.schema(KEYS + [
    pa.field("kernel_id", pa.string(), nullable=False), ("name", pa.string()), ("function", pa.string()),
    ("label", pa.string()), ("grid_size", pa.string()), ("block_size", pa.string()), ("instance", pa.int64()),
    ("family", pa.string()), ("vendor", pa.string()), ("source_id", pa.string()), ("source_file", pa.string()),
    ("source_sha256", pa.string()), ("ncu_version", pa.string()), ("section_set", pa.string()),
    *KERNEL_MEASURES, *DESCRIPTOR, *GATE, *KRHPA,
])
CELLS = pa.schema(KEYS + [("description", pa.string()), ("kernel_count", pa.int64()), *DESCRIPTOR,
                          ("context_json", pa.string()), *GATE, *KRHPA,
                          ("krhpa_reasons", pa.list_(pa.string()))])
CAPTURES = pa.schema(KEYS + [
    pa.field("source_id", pa.string(), nullable=False), ("file", pa.string()), ("sha256", pa.string()),
    ("format", pa.string()), ("ncu_version", pa.string()), ("gpu", pa.string()), ("section_set", pa.string()),
    ("kernels", pa.int64()), ("publication_id", pa.string()),
    # the GPU's vendor, and the source's vendor-specific measurement record (AMD: rocprof-compute and ROCm
    # versions, chip, sysinfo.csv clocks) as sorted JSON; null for an ncu report, whose ncu_version and gpu say it
    ("vendor", pa.string()), ("measurement_json", pa.string()),
])
PUBLICATIONS = pa.schema([
    pa.field("publication_id", pa.string(), nullable=False), pa.field("campaign", pa.string(), nullable=False),
    ("cells", pa.list_(pa.string())), ("kernel_rows", pa.int64()), ("cell_rows", pa.int64()),
    ("capture_rows", pa.int64()), ("incomplete_cells", pa.int64()), ("problem_count", pa.int64()),
    ("rejected", pa.list_(pa.string())), ("strict", pa.bool_()), ("who", pa.string()),
    ("published_at", pa.timestamp("us", tz="UTC")),
])
# Each cell's repeated numbers (warehouse.gather.samples_of: end-to-end results, the trials' kernel time, each
# kernel's time per launch), one row per metric with its values in trial order: what `lake compare` tests.
TRIALS = pa.schema(KEYS + [pa.field("metric", pa.string(), nullable=False), ("n", pa.int64()),
                           ("values", pa.list_(pa.float64())), ("publication_id", pa.string())])
# The prediction ledger (lake/predictions.py), appended by every publish: each "next lever" prediction of a cell,
# matched later by match_key (the descriptor without the software a lever changes) on another stack.
SOFTWARE = ("stack", "grounding")
MATCH_FIELDS = tuple(n for section, names in CONTEXT_FIELDS.items() if section not in SOFTWARE for n in names)
STACK_FIELDS = tuple(CONTEXT_FIELDS["stack"])
PREDICTIONS = pa.schema([
    pa.field("publication_id", pa.string()), pa.field("campaign", pa.string(), nullable=False),
    pa.field("cell_id", pa.string(), nullable=False), ("hardware", pa.string()),
    pa.field("kind", pa.string(), nullable=False), ("lever", pa.string()), ("is_next", pa.bool_()),
    ("kernel", pa.string()), ("kernels", pa.list_(pa.string())), ("predicted_pct", pa.float64()),
    ("basis", pa.string()), ("match_key", pa.string()), ("stack", pa.string()), ("e2e_metric", pa.string()),
    ("e2e_before", pa.float64()), ("published_at", pa.timestamp("us", tz="UTC")),
])
# Every publication's kernel rows, appended and never replaced (kernels holds each cell's latest): the series that
# `lake regressions` reads in one scan, stamped with the publication's time.
KERNEL_HISTORY = pa.schema([*KERNELS, pa.field("published_at", pa.timestamp("us", tz="UTC"))])
SCHEMAS = {"kernels": KERNELS, "cells": CELLS, "captures": CAPTURES, "trials": TRIALS,
           "kernel_history": KERNEL_HISTORY, "predictions": PREDICTIONS, "publications": PUBLICATIONS}


@dataclass
class Rows:
    """Rows of one publish, per table, before the publication id is stamped on them."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    captures: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def publication_id(self, campaign: str) -> str:
        """Return a content hash of every row: the same content published twice has the same id."""
        body = json.dumps({"campaign": campaign, "kernels": self.kernels, "cells": self.cells,
                           "captures": self.captures, "rejected": self.rejected,
                           **({"trials": self.trials} if self.trials else {})},
                          sort_keys=True, ensure_ascii=False, default=str)
        return "pub-" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]

    def stamp(self, publication_id: str) -> None:
        """Set publication_id on every row."""
        for row in (*self.kernels, *self.cells, *self.captures, *self.trials):
            row["publication_id"] = publication_id


def _typed(value: Any, typ: pa.DataType) -> Any:
    """Return value when it fits typ, else None (a placeholder string never lands in a numeric column)."""
    if value is None:
        return None
    if pa.types.is_boolean(typ):
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if pa.types.is_integer(typ):
        return int(value) if isinstance(value, int | float) and float(value).is_integer() else None
    if pa.types.is_floating(typ):
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def descriptor(ctx: dict[str, Any]) -> dict[str, Any]:
    """Flatten the effective context into one typed column per descriptor field."""
    flat = {name: (ctx.get(section) or {}).get(name) for section, fields in CONTEXT_FIELDS.items()
            for name in fields}
    return {name: _typed(flat[name], typ) for name, typ in DESCRIPTOR}


def _source_vendor(source: dict[str, Any]) -> str:
    """The vendor of a cell-file source: a rocprof-compute workload's is amd, every other format is ncu's."""
    return "amd" if source.get("format") == ROCPROF_FORMAT else DEFAULT_VENDOR


def _kernel_row(campaign: Campaign, check: CellCheck, k: dict[str, Any], src: dict[str, Any],
                desc: dict[str, Any]) -> dict[str, Any]:
    kid = str(k["id"])
    flops = k.get("flops")
    raw = {**k, "flops_total": flops.get("total") if isinstance(flops, dict) else None,
           "sol_pct_note": check.kernel_notes.get(kid)}
    measures = {name: _typed(raw.get(name), typ) for name, typ in KERNEL_MEASURES}
    return {
        "campaign": campaign.id, "cell_id": check.cell_id, "kernel_id": kid, "name": k.get("name"),
        "function": k.get("function"), "label": k.get("label"), "grid_size": k.get("grid_size"),
        "block_size": k.get("block_size"), "instance": _typed(k.get("instance"), pa.int64()),
        "family": k.get("family"), "vendor": k.get("vendor") or _source_vendor(src),
        "source_id": k.get("source"),
        "source_file": src.get("file"), "source_sha256": src.get("sha256"), "ncu_version": src.get("ncu_version"),
        "section_set": src.get("section_set"), **measures, **desc,
        "context_complete": check.context_complete,
        "problems": check.context_problems + check.kernel_problems.get(kid, []),
    }


def build_rows(campaign: Campaign, checks: list[CellCheck]) -> Rows:
    """Turn gate-checked cells into table rows; a kernel without an id is rejected with its reason."""
    rows = Rows()
    label, reasons = krhpa_label(campaign)
    for check in checks:
        desc = descriptor(check.context)
        ncu = check.ncu or {}
        sources = {s["id"]: s for s in ncu.get("sources", [])}
        kernels = ncu.get("kernels", [])
        cell = campaign.cell(check.cell_id)
        rows.cells.append({
            "campaign": campaign.id, "cell_id": check.cell_id, "description": cell.description,
            "kernel_count": len(kernels) if check.ncu is not None else None, **desc,
            "context_json": json.dumps(check.context, sort_keys=True, ensure_ascii=False),
            "context_complete": check.context_complete, "problems": check.problems(),
            "krhpa_label": label, "krhpa_reasons": reasons,
        })
        for sid in sorted(sources):
            s = sources[sid]
            record = s.get(ROCPROF_KEY) if s.get("format") == ROCPROF_FORMAT else None
            rows.captures.append({
                "campaign": campaign.id, "cell_id": check.cell_id, "source_id": sid,
                **{c: _typed(s.get(c), CAPTURES.field(c).type)
                   for c in ("file", "sha256", "format", "ncu_version", "gpu", "section_set", "kernels")},
                "vendor": _source_vendor(s),
                "measurement_json": json.dumps(record, sort_keys=True, ensure_ascii=False) if record else None,
            })
        for i, k in enumerate(kernels):
            if not k.get("id"):
                rows.rejected.append(f"cells[{check.cell_id}].kernels[{i}]: no kernel id; re-import the cell")
                continue
            rows.kernels.append({**_kernel_row(campaign, check, k, sources.get(k.get("source"), {}), desc),
                                 "krhpa_label": label})
    published = {c.cell_id for c in checks}
    for cell_id, samples in sorted(campaign_trial_samples(campaign).items()):
        if cell_id in published:
            rows.trials += [{"campaign": campaign.id, "cell_id": cell_id, "metric": m, "n": len(v), "values": v}
                            for m, v in sorted(samples.items()) if len(v) > 1]  # repeated numbers only
    rows.kernels.sort(key=lambda r: (r["cell_id"], r["kernel_id"]))
    rows.cells.sort(key=lambda r: r["cell_id"])
    rows.captures.sort(key=lambda r: (r["cell_id"], r["source_id"]))
    return rows


def content_digest(tables: dict[str, pa.Table]) -> str:
    """SHA-256 of the rows' content, table by table: publication_id (a stamp, not content), row order and column
    order left out, so rows built for a publish and the same rows read back from the lake give the same digest."""
    digest = hashlib.sha256()
    for name in sorted(tables):
        columns = sorted(c for c in tables[name].schema.names if c != "publication_id")
        rows = sorted(json.dumps(r, sort_keys=True, ensure_ascii=False, default=str)
                      for r in tables[name].select(columns).to_pylist())
        digest.update(json.dumps([name, rows], ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def to_arrow(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Build a pyarrow table with the table's explicit schema (missing keys become null)."""
    schema = SCHEMAS[table]
    # Column by column, not from_pylist: the faster build (docs/benchmarks.md, benchmarks/bench_lake.py).
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema}, schema=schema)


def publication_row(campaign: str, publication_id: str, rows: Rows, checks: list[CellCheck], strict: bool,
                    who: str, when: datetime) -> dict[str, Any]:
    """Return the ledger row: what was published, how complete it was, who and when (captured facts)."""
    return {
        "publication_id": publication_id, "campaign": campaign, "cells": [c.cell_id for c in checks],
        "kernel_rows": len(rows.kernels), "cell_rows": len(rows.cells), "capture_rows": len(rows.captures),
        "incomplete_cells": sum(not c.context_complete for c in checks),
        "problem_count": sum(len(c.problems()) for c in checks), "rejected": rows.rejected, "strict": strict,
        "who": who, "published_at": when,
    }
