"""cells/<id>/kernel_times.json and kernel_samples.json: rows, merge by source, schema check, atomic write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.config import validate
from perfreport.errors import InputError
from perfreport.files import write_json_atomic
from perfreport.kernels.cells import read_cell
from perfreport.kernels.identity import normalize
from perfreport.timeshare.model import INT64_LIMIT, Parsed

SCHEMA_VERSION = 1
FILES = {"kernel_times": "kernel_times.json", "kernel_samples": "kernel_samples.json"}


def load_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema shipped in perfreport/config/schemas/ for kind ("kernel_times" or "kernel_samples")."""
    return validate.load_schema(kind)


def source_record(parsed: Parsed, source: str, digest: str, n_kernels: int,
                  trial: int | None = None) -> dict[str, Any]:
    """The sources[] entry of one imported file; `source` is its id (ncu.cells.source_id): re-importing replaces.
    `trial`: which repetition of the cell's measurement the file is (written only when numbered)."""
    return {"id": source, "file": source, "format": parsed.format, "sha256": digest,
            "tool_version": parsed.tool_version, "report": parsed.report, "kernels": n_kernels,
            "warnings": list(parsed.warnings), **({"trial": trial} if trial is not None else {})}


def time_rows(parsed: Parsed, source: str, where: Path) -> list[dict[str, Any]]:
    """kernel_times rows; share_pct is 100 * total_ns / (sum of total_ns over this source's kernels). `op` and
    `shapes` (a torch trace recorded with shapes) and `useful_flops` are written only where known."""
    for r in parsed.rows:  # each reader checks its values; sums of many may still pass 64 bits
        big = [k for k in ("instances", "total_ns", "min_ns", "max_ns")
               if r[k] is not None and not 0 <= r[k] < INT64_LIMIT]
        if big:
            raise InputError(f"'{where}': kernel {r['name'][:80]!r}: {big[0]} is {r[big[0]]!r} summed over its rows; "
                             f"expected an integer from 0 to 2^63-1. The export is damaged; export it again.")
    total = sum(r["total_ns"] for r in parsed.rows)
    if total <= 0:
        raise InputError(f"'{where}': every kernel has 0 ns of total time, so no time share exists; the capture "
                         f"is empty or damaged. Re-capture with kernels running.")
    rows = [{
        "name": r["name"], "function": normalize(r["name"]), "source": source, "instances": r["instances"],
        "total_ns": r["total_ns"], "avg_ns": round(r["total_ns"] / r["instances"], 1), "min_ns": r["min_ns"],
        "max_ns": r["max_ns"], "share_pct": round(100.0 * r["total_ns"] / total, 4),
        **({"op": r["op"], "shapes": r["shapes"]} if r.get("op") else {}),
        **({"useful_flops": r["useful_flops"]} if r.get("useful_flops") else {}),
    } for r in parsed.rows]
    return sorted(rows, key=lambda k: (-k["total_ns"], *_name_key(k)))


def _name_key(row: dict[str, Any]) -> tuple[str, str, str]:
    """A row's name, then its launching op and shapes: rows of one kernel name split by op sort the same each run."""
    return row["name"], row.get("op") or "", row.get("shapes") or ""


def sample_rows(parsed: Parsed, source: str) -> list[dict[str, Any]]:
    """kernel_samples rows; share_pct as given by the profiler, else 100 * samples / sum of samples."""
    total = sum(r["samples"] for r in parsed.rows)
    rows = [{
        "name": r["name"], "function": normalize(r["name"]), "source": source, "samples": r["samples"],
        "share_pct": round(r["share_pct"] if r["share_pct"] is not None else 100.0 * r["samples"] / total, 4),
    } for r in parsed.rows]
    return sorted(rows, key=lambda k: (-k["samples"], -k["share_pct"], k["name"]))


def read_existing(path: Path) -> dict[str, Any] | None:
    """Load the cell's file if there is one (to keep the other sources), refusing a damaged or foreign one."""
    return read_cell(path, SCHEMA_VERSION)


def merge(existing: dict[str, Any] | None, header: dict[str, Any], source: dict[str, Any],
          kernels: list[dict[str, Any]], rank: str) -> dict[str, Any]:
    """Replace the rows of a re-imported source, keep the others; sources by id, rows by source then `rank`."""
    old_sources = [s for s in (existing or {}).get("sources", []) if s["id"] != source["id"]]
    old_kernels = [k for k in (existing or {}).get("kernels", []) if k["source"] != source["id"]]
    sources = sorted([*old_sources, source], key=lambda s: s["id"])
    order = {s["id"]: i for i, s in enumerate(sources)}
    rows = sorted([*old_kernels, *kernels], key=lambda k: (order[k["source"]], -k[rank], *_name_key(k)))
    return {**header, "schema_version": SCHEMA_VERSION, "sources": sources, "kernels": rows}


def write(path: Path, data: dict[str, Any], kind: str) -> None:
    """Validate against the shipped schema (a failure is a bug, reported with its paths), then write atomically."""
    problems = validate.check(data, kind)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise InputError(f"{path}: output does not match {kind}.schema.json, {len(problems)} problem(s):\n{lines}\n"
                         f"This is a bug in perfreport: please report it with this message; nothing was written.")
    write_json_atomic(path, data)
