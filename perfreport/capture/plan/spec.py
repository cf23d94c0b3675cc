"""A capture spec: what to profile, how, and in which deployment, from CLI flags or a capture spec YAML.

The spec is plain data (frozen dataclass); `policy` judges it, `plan` turns it into argv lists. Loading collects
every problem with its path and aborts once, like the campaign config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from perfreport.errors import ConfigError, InputError

SECTION_SETS = ("basic", "roofline", "full")
REPLAY_MODES = ("kernel", "application", "range", "app-range")
KERNEL_NAME_BASES = ("function", "demangled", "mangled")
TARGET_PROCESSES = ("all", "application-only")
CLOCK_CONTROLS = ("none", "base", "reset")
GRAPH_PROFILING = ("node", "graph")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CaptureSpec:
    """One scoped capture. Defaults are the safe ones: basic set, one launch, kernel replay, clocks not locked."""

    kernel_patterns: tuple[str, ...] = ()
    kernel_name_base: str = "function"
    section_set: str | None = "basic"
    metrics: tuple[str, ...] = ()
    launch_skip: int = 0
    launch_count: int = 1
    replay_mode: str = "kernel"
    graph_profiling: str = "node"
    acknowledge_application_replay: bool = False
    nvtx_include: tuple[str, ...] = ()
    target_processes: str = "all"
    replicas: int = 1
    gpu_memory_utilization: float | None = None
    allow_unscoped: bool = False
    after_basic: bool = False
    clock_control: str = "none"
    profile_from_start: bool = True
    env: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()
    hostname: str = "127.0.0.1"
    port: int | None = None
    output: str = "capture"
    campaign: str | None = None
    cell_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def with_changes(self, **changes: Any) -> CaptureSpec:
        """A copy with some fields replaced (e.g. one kernel pattern of several)."""
        return replace(self, **changes)

    def env_dict(self) -> dict[str, str]:
        """The variables set on ncu's own process (inherited by the target), never via an `env` wrapper."""
        return dict(self.env)


SPEC_KEYS = {f.name for f in fields(CaptureSpec)} - {"extra"}
# YAML spellings users know from ncu, mapped to field names
_ALIASES = {"kernel_name": "kernel_patterns", "kernels": "kernel_patterns", "set": "section_set",
            "nvtx_include_ranges": "nvtx_include", "launch-skip": "launch_skip", "launch-count": "launch_count"}


class _Problems:
    """Collects `path: expected X, got Y` problems for one abort."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def bad(self, path: str, expected: str, got: Any) -> None:
        self.items.append(f"{path}: expected {expected}, got {got!r}")


def _int(p: _Problems, key: str, value: Any, low: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        p.bad(key, f"an integer >= {low}", value)
        return None
    return value


def _choice(p: _Problems, key: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if value not in choices:
        p.bad(key, f"one of {', '.join(choices)}", value)
        return None
    return str(value)


def _strings(p: _Problems, key: str, value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        p.bad(key, "a list of non-empty strings", value)
        return None
    return tuple(value)


def _env(p: _Problems, key: str, value: Any) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, Mapping):
        p.bad(key, "a mapping NAME: value (set on ncu's own process)", value)
        return None
    out = []
    for name, v in value.items():
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            p.bad(f"{key}.{name}", "an environment variable name [A-Za-z_][A-Za-z0-9_]*", name)
        elif isinstance(v, bool) or not isinstance(v, str | int | float):
            p.bad(f"{key}.{name}", "a string or number", v)
        else:
            out.append((name, str(v)))
    return tuple(sorted(out))


def _field(p: _Problems, key: str, value: Any) -> Any:
    """Check one spec field; None (with a problem recorded) when it is wrong."""
    if key in ("kernel_patterns", "metrics", "nvtx_include", "command"):
        return _strings(p, key, value)
    if key in ("launch_skip",):
        return _int(p, key, value, 0)
    if key in ("launch_count", "replicas"):
        return _int(p, key, value, 1)
    if key == "port":
        return None if value is None else _int(p, key, value, 1)
    if key == "section_set":
        return None if value is None else _choice(p, key, value, SECTION_SETS)
    if key == "replay_mode":
        return _choice(p, key, value, REPLAY_MODES)
    if key == "kernel_name_base":
        return _choice(p, key, value, KERNEL_NAME_BASES)
    if key == "target_processes":
        return _choice(p, key, value, TARGET_PROCESSES)
    if key == "clock_control":
        return _choice(p, key, value, CLOCK_CONTROLS)
    if key == "graph_profiling":
        return _choice(p, key, value, GRAPH_PROFILING)
    if key == "env":
        return _env(p, key, value)
    if key == "gpu_memory_utilization":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            p.bad(key, "a fraction in (0, 1] (vLLM's --gpu-memory-utilization)", value)
            return None
        return float(value)
    if key in ("acknowledge_application_replay", "allow_unscoped", "after_basic", "profile_from_start"):
        if not isinstance(value, bool):
            p.bad(key, "true or false", value)
            return None
        return value
    if not isinstance(value, str) or not value:
        p.bad(key, "a non-empty string", value)
        return None
    return value


def spec_from_mapping(raw: Mapping[str, Any], where: str, strict: bool = False) -> CaptureSpec:
    """Build a spec from a mapping (YAML or flags); every problem listed with its key, then one ConfigError."""
    p = _Problems()
    values: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in raw.items():
        name = _ALIASES.get(str(key), str(key).replace("-", "_"))
        if name not in SPEC_KEYS:
            unknown[str(key)] = value
            if strict:
                p.items.append(f"{key}: unknown key; known keys: {', '.join(sorted(SPEC_KEYS))}")
            continue
        checked = _field(p, name, value)
        if checked is not None or (value is None and name in ("port", "gpu_memory_utilization", "section_set")):
            values[name] = checked
    if p.items:
        raise ConfigError(where, p.items)
    return CaptureSpec(**values, extra=unknown)


def load_spec(path: Path, overrides: Mapping[str, Any] | None = None, strict: bool = False) -> CaptureSpec:
    """Read a capture spec YAML (a mapping of CaptureSpec fields); CLI flags in overrides win."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"capture spec {path}: no such file. Write one (docs/capture.md, 'Capture spec') or pass "
                         f"the options as flags.") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"capture spec {path}: cannot read it as YAML ({exc}). Fix the file.") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InputError(f"capture spec {path}: expected a mapping of capture fields (kernel_patterns, "
                         f"section_set, ...), got {type(raw).__name__}.")
    return spec_from_mapping({**raw, **(overrides or {})}, str(path), strict)
