"""Per-cell ncu_kernels.json: read, merge sources, validate against the shipped schema, write atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfreport.bundle import PROFILES_DIR
from perfreport.config import validate as schemas
from perfreport.errors import InputError
from perfreport.files import write_json_atomic
from perfreport.kernels.labels import kernel_labels


@dataclass
class ImportResult:
    """What one import of a cell wrote (any importer: import_ncu, import_rocprof), for the CLI summary."""

    path: Path
    campaign: str
    cell_id: str
    hardware: str
    sources: list[dict[str, Any]]
    kernels: list[dict[str, Any]]  # the kernels of the sources imported now
    warnings: list[str] = field(default_factory=list)

SCHEMA_VERSION = 1
FILE_NAME = "ncu_kernels.json"
SCHEMA_FILE = "ncu_kernels.schema.json"  # its kernel item is generated from perfreport/kernels/row.py


def load_schema() -> dict[str, Any]:
    """The JSON Schema of ncu_kernels.json shipped in perfreport/config/schemas/ (do not mutate)."""
    return schemas.load_schema(SCHEMA_FILE)


def read_cell(path: Path, schema_version: int = SCHEMA_VERSION) -> dict[str, Any] | None:
    """Load an existing cell file (ncu_kernels.json, or a time-share file with its `schema_version`) to merge into,
    or None when there is none yet; a damaged or foreign one is refused, never merged over."""
    if not path.exists():
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"'{path}': not valid JSON ({exc.msg} at line {exc.lineno}); delete it and import its sources again."
        ) from exc
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise InputError(f"'{path}': not valid JSON, not a cell file perfreport wrote ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); delete it and import its sources again.") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in ("sources", "kernels")):
        got = type(data).__name__ if not isinstance(data, dict) else "an object without sources[] and kernels[]"
        raise InputError(f"'{path}': expected the {path.name} object perfreport writes (schema_version, sources[], "
                         f"kernels[]), got {got}; delete it and import the cell's sources again.")
    if data.get("schema_version") != schema_version:
        raise InputError(
            f"'{path}': schema_version {data.get('schema_version')!r}, expected {schema_version}; "
            f"delete it and import its sources again with this perfreport version."
        )
    return data


def source_id(path: Path, campaign_dir: Path, bundle_dir: Path | None = None) -> tuple[str, bool]:
    """(id of an input within its cell, whether the id is its path in the campaign folder).

    Unique per file and the same for the same file imported again: its path relative to the campaign folder when it
    lies inside it; else its path in the bundle's ncu-profiles/ after the bundle's name; else its file name.
    An id not anchored in the campaign may name another file elsewhere: `check_source` guards that case.
    """
    resolved, root = path.resolve(), campaign_dir.resolve()
    if resolved.is_relative_to(root) and resolved != root:
        return resolved.relative_to(root).as_posix(), True
    if bundle_dir is not None and bundle_dir.is_dir():
        bundle = bundle_dir.resolve()
        inside = resolved.relative_to(bundle)
        if inside.parts[:1] == (PROFILES_DIR,):  # every bundle keeps its captures there: the bundle name says it
            inside = inside.relative_to(PROFILES_DIR)
        return f"{bundle.name}/{inside.as_posix()}", False
    return path.name, False


def check_source(existing: dict[str, Any] | None, source: dict[str, Any], where: Path, replace: bool) -> None:
    """Refuse to replace a source by a different file outside the campaign that only shares its id.

    Two folders' `run.ncu-rep` are two captures, never one replacing the other; `replace` says it is a new version.
    """
    old = next((s for s in (existing or {}).get("sources", []) if s["id"] == source["id"]), None)
    if old is None or replace or old.get("sha256") == source.get("sha256"):
        return
    raise InputError(
        f"'{where}': the cell already holds a source '{source['id']}' with other content (sha256 "
        f"{str(old.get('sha256'))[:12]}..., this file {str(source.get('sha256'))[:12]}...); outside the campaign "
        f"folder a file is known by its name only. If this file is a new version of that source, pass --replace; "
        f"if it is another capture, rename it or move it into the campaign folder (its path there becomes its id). "
        f"Nothing was written."
    )


def merge_sources(
    existing: dict[str, Any] | None, header: dict[str, Any], sources: list[dict[str, Any]],
    kernels: list[dict[str, Any]],
) -> dict[str, Any]:
    """Replace the kernels of re-imported sources, keep the others; order by source id, then capture order; number
    and label every kernel of the cell (labels depend on the cell's other kernels, so a merge relabels them all)."""
    new_ids = {s["id"] for s in sources}
    old_sources = [s for s in (existing or {}).get("sources", []) if s["id"] not in new_ids]
    old_kernels = [k for k in (existing or {}).get("kernels", []) if k["source"] not in new_ids]
    all_sources = sorted(old_sources + sources, key=lambda s: s["id"])
    order = {s["id"]: i for i, s in enumerate(all_sources)}
    all_kernels = sorted(old_kernels + kernels, key=lambda k: (order[k["source"]], k["launch_ids"][0]))
    for i, (k, label) in enumerate(zip(all_kernels, kernel_labels(all_kernels), strict=True)):
        k["id"] = f"k{i:03d}"
        k["label"] = label
    return {**header, "schema_version": SCHEMA_VERSION, "sources": all_sources, "kernels": all_kernels}


# Per-launch lists whose items the schema checks one by one with a simple type (2,000 launches of one kernel).
_PER_ITEM = {"launch_ids": {"type": "integer", "minimum": 0}, "per_launch": {"type": "object"}}


@lru_cache(maxsize=1)
def _mirrored() -> bool:
    """Whether the schema's per-launch item rules are still the ones `_one_item` mirrors."""
    kernel = load_schema().get("properties", {}).get("kernels", {}).get("items", {}).get("properties", {})
    return all(kernel.get(name, {}).get("items") == rule for name, rule in _PER_ITEM.items())


def _one_item(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each kernel's per-launch lists cut to their first item when every item passes its rule.

    The schema then finds exactly the errors it finds in `data` (the cut items had none), without descending into
    every launch; a list with any other item is left whole, so the error is reported as before.
    """
    kernels = data.get("kernels")
    if not isinstance(kernels, list):
        return data
    cut = []
    for k in kernels:
        if isinstance(k, dict):
            ids, rows = k.get("launch_ids"), k.get("per_launch")
            if isinstance(ids, list) and all(type(i) is int and i >= 0 for i in ids):
                k = {**k, "launch_ids": ids[:1]}
            if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
                k = {**k, "per_launch": rows[:1]}
        cut.append(k)
    return {**data, "kernels": cut}


def validate(data: dict[str, Any], where: str) -> None:
    """Raise if data does not match the shipped schema (a bug, reported with every failing path)."""
    problems = schemas.check(_one_item(data) if _mirrored() else data, SCHEMA_FILE)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise InputError(f"{where}: output does not match {SCHEMA_FILE}, {len(problems)} problem(s):\n{lines}\n"
                         f"This is a bug in perfreport: please report it with this message; nothing was written.")


def write_cell(path: Path, data: dict[str, Any]) -> None:
    """Validate, then write deterministically (sorted keys) via temp file + rename."""
    validate(data, str(path))
    write_json_atomic(path, data)
