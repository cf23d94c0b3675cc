"""Evidence bundle on disk: experiments/artifacts/inference-perf-bench/<id>/ and its kernel_internals.

Layout (see docs/bundle.md): ncu-profiles/, inference_perfbench_v1.json, SOURCE.md, summary.md, HANDOFF.md.
The JSON is shared with other tools, so perftunereport owns only its ``kernel_internals`` key: every other
field, including unknown ones, keeps its value and its position in the file.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from perfreport.bundle import CAPTURE_FILES, PROFILES_DIR
from perfreport.config import validate
from perfreport.errors import InputError
from perfreport.files import locked, write_text_atomic
from perfreport.ids import check_id

BUNDLES_SUBDIR = Path("experiments", "artifacts", "inference-perf-bench")
BUNDLE_JSON = "inference_perfbench_v1.json"
SCHEMA_FILE = "inference_perfbench_v1.schema.json"
SCHEMA_VERSION = 1
PROFILE_SUFFIXES = (".ncu-rep", ".ncu-rep.gz", ".csv", ".log")
MARKDOWN_FILES = ("SOURCE.md", "summary.md", "HANDOFF.md")


def load_schema() -> dict[str, Any]:
    """Return the shipped JSON Schema (draft 2020-12) for inference_perfbench_v1.json."""
    return validate.load_schema(SCHEMA_FILE)


def is_bundle(path: Path) -> bool:
    """Return True when path is a folder holding an ncu-profiles/ folder."""
    return Path(path).is_dir() and (Path(path) / PROFILES_DIR).is_dir()


def bundle_init(root: Path, bundle_id: str) -> Path:
    """Create root/experiments/artifacts/inference-perf-bench/<id>/ whole or not at all; never overwrite."""
    check_id("bundle", bundle_id)
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"bundle init: root {str(root)!r} is not an existing folder; expected the "
                         f"repository root under which {BUNDLES_SUBDIR.as_posix()}/ lives. Pass --root REPO.")
    parent = root / BUNDLES_SUBDIR
    target = parent / bundle_id
    if target.exists() or target.is_symlink():
        raise InputError(f"bundle {str(target)!r} already exists; refusing to overwrite it. Pick another id "
                         f"(e.g. add a date: {bundle_id}-2) or move the old bundle away first.")
    _create(target, bundle_id)
    return target


def prepare_bundle(path: Path, action: str = "capture run") -> bool:
    """Make path a bundle as `bundle init` would (id: its folder name); True when it was created, False when it
    already is one. Refused (InputError, nothing written) when path is a file or a non-empty folder that is not a
    bundle, or its name is not a bundle id."""
    path = Path(path)
    if is_bundle(path):
        return False
    if path.is_symlink() and not path.exists():
        raise InputError(f"{action}: --bundle {str(path)!r} is a dangling symlink; expected an evidence bundle "
                         f"folder ({PROFILES_DIR}/, {BUNDLE_JSON}) or a path to create one at. Fix or remove the link.")
    if path.exists() and not path.is_dir():
        raise InputError(f"{action}: --bundle {str(path)!r} is a file, not a folder; expected an evidence bundle "
                         f"folder ({PROFILES_DIR}/, {BUNDLE_JSON}) or a path to create one at. Pass another --bundle.")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(f"{action}: --bundle {str(path)!r} is a folder with other content and no {PROFILES_DIR}/, "
                         f"so not an evidence bundle; expected a bundle or a new or empty folder. Pass another "
                         f"--bundle, or create one with `perftunereport bundle init --id ID`.")
    bundle_id = path.resolve().name
    try:
        check_id("bundle", bundle_id)
    except InputError as exc:
        raise InputError(f"{action}: --bundle {str(path)!r} would be a new bundle whose id is its folder name "
                         f"{bundle_id!r}, which is not a valid id ({exc}). Pass a folder named like "
                         f"h200-decode.") from None
    _create(path, bundle_id)
    return True


def _create(target: Path, bundle_id: str) -> None:
    """Build the bundle in a hidden sibling, then rename it to target (absent or an empty folder): a reader never
    sees a half-made bundle."""
    data = {"schema_version": SCHEMA_VERSION, "bundle_id": bundle_id, "context": {}, "results": [],
            "kernel_internals": None}
    _raise_if_invalid(data, target / BUNDLE_JSON, "refusing to create the bundle")
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{bundle_id}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    try:
        (staging / PROFILES_DIR).mkdir()
        write_text_atomic(staging / BUNDLE_JSON, _dump(data))
        for name in MARKDOWN_FILES:
            template = resources.files("perfreport.bundle").joinpath("templates", f"{name}.tmpl")
            text = Template(template.read_text(encoding="utf-8")).substitute(bundle_id=bundle_id)
            write_text_atomic(staging / name, text)
        if target.is_dir():
            target.rmdir()  # empty (checked by the caller): the rename below takes its place
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def find_profiles(bundle_dir: Path) -> list[Path]:
    """Return the ncu exports under bundle_dir/ncu-profiles/ (recursively), sorted by relative path."""
    profiles_dir = Path(bundle_dir) / PROFILES_DIR
    if not profiles_dir.is_dir():
        raise InputError(f"bundle {str(bundle_dir)!r}: no {PROFILES_DIR}/ folder; expected an evidence "
                         f"bundle ({PROFILES_DIR}/, {BUNDLE_JSON}, ...). Create one with `perftunereport "
                         f"bundle init`, or pass the capture file itself.")
    found: list[Path] = []
    ignored: list[Path] = []
    for path in sorted(profiles_dir.rglob("*"), key=lambda p: p.relative_to(profiles_dir).as_posix()):
        rel = path.relative_to(profiles_dir)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        (found if path.name.lower().endswith(PROFILE_SUFFIXES) else ignored).append(path)
    if not found:
        seen = ", ".join(p.relative_to(profiles_dir).as_posix() for p in ignored[:10]) or "nothing"
        raise InputError(f"bundle {str(bundle_dir)!r}: {PROFILES_DIR}/ holds no ncu export; expected files "
                         f"ending in {', '.join(PROFILE_SUFFIXES)}, found {seen}. Copy the captures there "
                         f"(export CSVs with `ncu --import x.ncu-rep --csv --page raw`).")
    return found


def read_bundle_json(path: Path) -> dict[str, Any]:
    """Parse an inference_perfbench_v1.json, keeping key order; raise naming the path on any defect."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: not found; expected the bundle's {BUNDLE_JSON}. Create the bundle with "
                         f"`perftunereport bundle init --id <id>` or restore the file.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicates,
                          parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}. Fix the "
                         f"file (it must hold one JSON object) and retry.") from exc
    except (ValueError, OSError) as exc:  # UnicodeDecodeError is a ValueError
        raise InputError(f"{path}: cannot be used: {exc}. Fix the file and retry.") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}.")
    return data


def validate_bundle_data(data: Any) -> list[str]:
    """Return every schema problem of an inference_perfbench_v1 document, each with its field path."""
    problems = [_describe(p) for p in validate.problems(data, SCHEMA_FILE)] + _non_finite(data, "")
    return list(dict.fromkeys(problems))


def fill_kernel_internals(
    bundle_dir: Path, per_kernel: list[dict[str, Any]], captured_at: str | None, method: str
) -> Path:
    """Replace only kernel_internals in the bundle JSON (validated, atomic); leave every other field as is."""
    internals = _sorted_keys({"captured_at": captured_at, "method": method, "per_kernel": per_kernel})
    return write_bundle_fields(bundle_dir, {"kernel_internals": internals})


def write_bundle_fields(bundle_dir: Path, fields: dict[str, Any]) -> Path:
    """Replace only the given top-level fields of the bundle JSON (validated, atomic); keep every other one."""
    path = Path(bundle_dir) / BUNDLE_JSON
    with locked(path):  # a concurrent writer of other fields keeps its fields
        data = read_bundle_json(path)
        updated = {key: fields.get(key, value) for key, value in data.items()}
        for key, value in fields.items():
            updated.setdefault(key, value)
        _raise_if_invalid(updated, path, f"refusing to write {', '.join(fields)}; the file was left unchanged")
        write_text_atomic(path, _dump(updated))
    return path


def write_bundle_json(path: Path, data: dict[str, Any]) -> Path:
    """Write a whole bundle JSON that perftunereport owns (validated, atomic), e.g. a cell's step budget."""
    _raise_if_invalid(data, path, "refusing to write it")
    write_text_atomic(path, _dump(data))
    return path


def _raise_if_invalid(data: Any, path: Path, action: str) -> None:
    problems = validate_bundle_data(data)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise InputError(f"{path}: {action}; {len(problems)} problem(s) against {SCHEMA_FILE}:\n{lines}\n"
                         f"Use null for a metric that was not measured; field names are in docs/bundle.md.")


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _sorted_keys(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _sorted_keys(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, list | tuple):
        return [_sorted_keys(v) for v in obj]
    return obj


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in one object (JSON readers would silently keep one)")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; use null for a value that was not measured")


def _describe(problem: validate.Problem) -> str:
    """The engine's problem line; an unknown field also lists the fields allowed there."""
    if problem.keyword == "additionalProperties":
        return f"{problem}; allowed: {', '.join(problem.node.get('properties', {}))}"
    return str(problem)


def _join(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key


def _non_finite(obj: Any, where: str) -> list[str]:
    if isinstance(obj, float) and not math.isfinite(obj):
        return [f"{where or '(top level)'}: expected a finite number or null, got {obj!r}"]
    if isinstance(obj, Mapping):
        return [p for k, v in obj.items() for p in _non_finite(v, _join(where, str(k)))]
    if isinstance(obj, list | tuple):
        return [p for i, v in enumerate(obj) for p in _non_finite(v, f"{where}[{i}]")]
    return []


# The files `capture run` writes for one capture NAME, best source first (a report carries every metric).
CAPTURE_FORMS = (".ncu-rep", ".ncu-rep.gz", "-raw.csv", "-details.csv", "-sol.csv")
RECEIPT_SUFFIX = CAPTURE_FILES["receipt"]


def _capture_name(path: Path) -> tuple[str, int] | None:
    """(capture NAME, rank of this form) when path is one of the forms `capture run` writes."""
    for rank, suffix in enumerate(CAPTURE_FORMS):
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)], rank
    return None


def one_per_capture(paths: list[Path]) -> list[Path]:
    """Keep one file per capture that has a receipt (NAME.receipt.json beside it): the report, else the raw page.

    `capture run` writes the same kernels as NAME.ncu-rep, NAME-raw.csv and NAME-sol.csv; importing all three
    would list each kernel three times. Files without a receipt are kept as they are (hand-made bundles).
    """
    best: dict[Path, tuple[int, Path]] = {}
    out: list[Path] = []
    for path in paths:
        named = _capture_name(path)
        if named is None or not (path.parent / f"{named[0]}{RECEIPT_SUFFIX}").is_file():
            out.append(path)
            continue
        key = path.parent / named[0]
        if key not in best or named[1] < best[key][0]:
            best[key] = (named[1], path)
    return sorted([*out, *(p for _, p in best.values())], key=lambda p: p.as_posix())


def captured_at(paths: list[Path]) -> str | None:
    """The earliest `started_at` of the capture receipts beside paths (a captured fact), or None without one."""
    from perfreport.bundle.receipt import load_receipt

    starts = []
    for path in paths:
        named = _capture_name(path)
        receipt = path.parent / f"{named[0]}{RECEIPT_SUFFIX}" if named else None
        if receipt is not None and receipt.is_file():
            starts.append(str(load_receipt(receipt)["started_at"]))
    return min(starts) if starts else None
