"""The capture receipt (capture_receipt/1): what one ncu capture ran, on what, and what it wrote.

Schema: perfreport/config/schemas/capture_receipt.schema.json, checked by perfreport/config/validate.py: jsonschema
when it is importable, else its stdlib fallback (a GPU host may lack jsonschema), so the schema stays the one source
of truth; the schema keeps to the keywords that fallback knows (SUPPORTED_KEYWORDS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfreport.config import validate
from perfreport.errors import InputError, PerfReportError
from perfreport.files import write_json_atomic

SCHEMA_VERSION = 1
SCHEMA_FILE = "capture_receipt.schema.json"
CAPTURE_KINDS = ("local", "k8s-debug", "k8s-sister")
TARGET_KEYS = ("pid", "pod", "namespace", "deployment", "container")
SUPPORTED_KEYWORDS = validate.CHECKED  # what the engine's stdlib fallback checks (GPU hosts without jsonschema)
ANNOTATIONS = validate.ANNOTATIONS
Problem = tuple[str, str]  # (path, what is wrong)


def load_schema() -> dict[str, Any]:
    """The shipped capture_receipt JSON Schema (2020-12); callers must not mutate it."""
    return validate.load_schema(SCHEMA_FILE)


def new_receipt(
    *, campaign: str | None, cell_id: str | None, mode: str, ncu_version: str | None,
    driver_version: str | None, cuda_version: str | None, gpu_name: str | None, kernel_patterns: Sequence[str],
    kernel_name_base: str, section_set: str | None, metrics: Sequence[str], launch_skip: int,
    launch_count: int | None, replay_mode: str, target_processes: str, deployment_revision: str | None,
    started_at: str, ended_at: str, kernels_profiled: int, kernel_names: Sequence[str], exit_status: int | None,
    outputs: Sequence[Mapping[str, Any]], diagnosis: Sequence[Mapping[str, Any]],
    steps: Sequence[Mapping[str, Any]], cleanup: Sequence[Mapping[str, Any]],
    plan_findings: Sequence[Mapping[str, Any]], argv: Sequence[str] | None = None, kind: str = "local",
    target: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a receipt from plain values (copied); write_receipt validates it against the schema."""
    steps_out = [_plain(s) for s in steps]
    cleanup_out = [_plain(c) for c in cleanup]
    return {
        "schema_version": SCHEMA_VERSION, "kind": "capture_receipt", "capture_kind": kind,
        "campaign": campaign, "cell_id": cell_id, "mode": mode, "target": _target(target),
        "argv": list(argv) if argv is not None else _capture_argv(steps_out),
        "ncu_version": ncu_version, "driver_version": driver_version, "cuda_version": cuda_version,
        "gpu_name": gpu_name, "kernel_patterns": list(kernel_patterns), "kernel_name_base": kernel_name_base,
        "section_set": section_set, "metrics": list(metrics), "launch_skip": launch_skip,
        "launch_count": launch_count, "replay_mode": replay_mode, "target_processes": target_processes,
        "deployment_revision": deployment_revision, "started_at": started_at, "ended_at": ended_at,
        "kernels_profiled": kernels_profiled, "kernel_names": list(kernel_names), "exit_status": exit_status,
        "outputs": [_plain(o) for o in outputs], "diagnosis": [_plain(d) for d in diagnosis],
        "steps": steps_out, "cleanup": cleanup_out,
        "cleanup_done": all(isinstance(c, Mapping) and c.get("ok") is True for c in cleanup_out),
        "plan_findings": [_plain(f) for f in plan_findings],
    }


def _plain(value: Any) -> Any:
    """A JSON-shaped deep copy: mappings -> dicts, tuples/lists -> lists (so later edits of the input don't leak)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _target(target: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Keep the known target fields (pid, pod, ...); None when none is known."""
    if target is None:
        return None
    known = {k: v for k, v in target.items() if v is not None}
    return _plain(known) if known else None


def _capture_argv(steps: list[Any]) -> list[str] | None:
    """The argv of the first step named 'capture' (the ncu command line itself)."""
    for step in steps:
        if isinstance(step, Mapping) and step.get("step") == "capture" and isinstance(step.get("argv"), list):
            return list(step["argv"])
    return None


def validate_receipt(receipt: Any) -> list[str]:
    """Every problem of a receipt as 'path: expected X, got Y', in path order; [] when it matches the schema."""
    problems = validate.check(receipt, SCHEMA_FILE)
    if not problems and isinstance(receipt, Mapping):
        problems = [f"{path}: {what}" for path, what in sorted(_consistency_problems(receipt))]
    return problems


def _consistency_problems(receipt: Mapping[str, Any]) -> list[Problem]:
    """What a schema cannot say: counts and derived flags agree with the lists they summarize."""
    out: list[Problem] = []
    if receipt["kernels_profiled"] != len(receipt["kernel_names"]):
        out.append(("kernels_profiled", f"is {receipt['kernels_profiled']} but kernel_names lists "
                                        f"{len(receipt['kernel_names'])} kernel(s)"))
    done = all(c["ok"] for c in receipt["cleanup"])
    if receipt["cleanup_done"] != done:
        out.append(("cleanup_done", f"is {receipt['cleanup_done']} but the cleanup entries say {done}"))
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else type(value).__name__


def write_receipt(path: Path, receipt: Mapping[str, Any]) -> None:
    """Validate and write the receipt atomically; an invalid one is a perfreport bug and writes nothing."""
    problems = validate_receipt(receipt)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise PerfReportError(
            f"capture receipt {path}: not written: it does not match {SCHEMA_FILE} (schema_version "
            f"{SCHEMA_VERSION}), {len(problems)} problem(s):\n{lines}\nThis is a bug in perfreport (the capture "
            f"code builds the receipt, not you): please report it with this message. Nothing was written; the "
            f"capture's other files are in place.")
    write_json_atomic(Path(path), dict(receipt))


def load_receipt(path: Path) -> dict[str, Any]:
    """Read and validate a receipt; InputError (saying what is wrong and where) for a missing or bad file."""
    path = Path(path)
    where = f"capture receipt {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{where}: no such file. Expected NAME.receipt.json as `perftunereport capture run` "
                         f"writes it into <bundle>/ncu-profiles/; check the path.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: cannot read it ({exc}). Check the file's permissions and encoding.") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). The file "
                         f"is damaged or truncated; restore it or re-run the capture.") from None
    _check_loaded(where, data)
    return dict(data)


def _check_loaded(where: str, data: Any) -> None:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object (a capture receipt), got {_json_type(data)}.")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version {version} is newer than this perfreport reads "
                         f"({SCHEMA_VERSION}). Upgrade perfreport.")
    problems = validate_receipt(data)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise InputError(f"{where}: does not match {SCHEMA_FILE} (schema_version {SCHEMA_VERSION}), "
                         f"{len(problems)} problem(s):\n{lines}\nRe-run the capture, or restore the file as "
                         f"written (receipts are not meant to be edited).")
