"""The context descriptor: the fields every published number must carry (model, hardware, quant, parallelism,
serving config, workload, regime, stack, grounding), their checks, and what makes a value publishable.
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

SOL_RIGOR_LEVELS = ("L1", "L2", "L3", "L4")

# A check returns None when the value is fine, else what was expected (used in "expected X, got Y").
Check = Callable[[Any], "str | None"]


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


# The warehouse stores context counts as 32-bit INTEGER columns: a larger value would validate, then crash
# render, query and publish.
INT_MAX = 2**31 - 1


def pos_int(v: Any) -> str | None:
    """Check: an int from 1 to INT_MAX."""
    return None if is_int(v) and 1 <= v <= INT_MAX else f"int from 1 to {INT_MAX}"


def fraction(v: Any) -> str | None:
    """Check: a number in (0, 1]."""
    ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1
    return None if ok else "float in (0, 1]"


# Code points that print nothing though Unicode files them as letters or symbols (fillers, the blank braille cell,
# the combining grapheme joiner): with the format (Cf) and control (Cc) ones, dropped before any emptiness check.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")


def visible_text(v: str) -> str:
    """The text a reader sees: NFKC-normalised (full-width ＴＢＤ -> TBD, N／A -> N/A), with format, control and
    blank-printing code points (zero-width space, BOM, soft hyphen, U+3164, U+2800) removed, whitespace stripped."""
    text = unicodedata.normalize("NFKC", v)
    return "".join(ch for ch in text if ch not in _INVISIBLE and unicodedata.category(ch) not in ("Cf", "Cc")
                   or ch in "\t\n").strip()


def nonempty_text(v: Any) -> str | None:
    """Check: a string with something visible besides whitespace (visible_text)."""
    return None if isinstance(v, str) and visible_text(v) else "non-empty string"


def flag(v: Any) -> str | None:
    """Check: true or false."""
    return None if isinstance(v, bool) else "true or false"


def one_of(*choices: str) -> Check:
    """Check: one of the given strings."""
    def check(v: Any) -> str | None:
        return None if isinstance(v, str) and v in choices else "one of " + ", ".join(choices)

    return check


CONTEXT_FIELDS: dict[str, dict[str, Check]] = {
    "identity": {"model": nonempty_text, "hf_path": nonempty_text, "hardware": nonempty_text, "quant": nonempty_text,
                 "kv_cache_dtype": nonempty_text},
    "parallelism": {"tp": pos_int, "dp": pos_int, "pp": pos_int, "ep": pos_int, "strategy": nonempty_text},
    "serving": {
        "max_num_seqs": pos_int, "max_num_batched_tokens": pos_int, "gpu_memory_utilization": fraction,
        "max_model_len": pos_int, "cudagraph_mode": nonempty_text, "enforce_eager": flag,
        "async_scheduling": flag, "prefix_caching": flag,
    },
    "workload": {"dataset": nonempty_text, "isl": pos_int, "osl": pos_int, "concurrency": pos_int,
                 "num_prompts": pos_int},
    "regime": {"cache": one_of("warm", "cold"), "tier": one_of("latency", "throughput")},
    "stack": {"image": nonempty_text, "engine_commit": nonempty_text, "bench_backend": nonempty_text,
              "engine": nonempty_text},
    "grounding": {"sol_rigor": one_of(*SOL_RIGOR_LEVELS), "trials": pos_int, "same_node": flag,
                  "baseline": nonempty_text},
}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return a new dict: override merged into base, recursing into mappings; None values are skipped."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def missing_context_fields(context: Mapping[str, Any]) -> list[str]:
    """Return the dotted paths of context fields still null or absent, in schema order (for publish)."""
    missing = []
    for section, fields in CONTEXT_FIELDS.items():
        values = context.get(section) or {}
        missing += [f"{section}.{name}" for name in fields if values.get(name) is None]
    return missing


# Compared after visible_text, lower-cased and without trailing dots: `TBD.`, `ＴＢＤ`; the dashes are what the site
# prints for an empty value.
PLACEHOLDERS = frozenset({"tbd", "todo", "unknown", "na", "?", "-", "--", "xxx", "\u2014", "\u2013", "\u2012",
                          "\u2015", "\u2212", "\u2026"})

# A field that does not apply to the cell (no serving engine ran, so max_num_seqs has no value) is set to this
# marker, best with why: `max_num_seqs: "n/a: PyTorch eager layer, no serving engine"`. It is a value, not a gap: the
# strict gate accepts it for the fields below, the site shows it, numeric columns store null. Elsewhere it is
# refused: every published number has a model, a GPU, a dtype, a parallelism and a stack.
NOT_APPLICABLE = "n/a"
CAN_BE_INAPPLICABLE = frozenset({
    "identity.hf_path", *(f"serving.{name}" for name in CONTEXT_FIELDS["serving"]),
    "workload.isl", "workload.osl", "workload.concurrency", "workload.num_prompts", "regime.tier",
    "stack.engine_commit",
})


def is_not_applicable(value: Any) -> bool:
    """Whether a context value is the not-applicable marker: `n/a`, or `n/a: why` (any case)."""
    if not isinstance(value, str):
        return False
    text = visible_text(value).lower()
    return text == NOT_APPLICABLE or text.startswith(NOT_APPLICABLE + ":")


def inapplicable_problem(path: str, value: Any) -> str | None:
    """Why the marker may not stand at `path` (section.name), or None where it may (or value is no marker)."""
    if not is_not_applicable(value) or path in CAN_BE_INAPPLICABLE:
        return None
    return (f"{value!r} (not applicable) is allowed only where a field can be inapplicable "
            f"({', '.join(sorted(CAN_BE_INAPPLICABLE))}); {path} applies to every cell: write the real value")
# Fields whose checks are "int >= 1" or a fraction in (0, 1]: a 0 there is a placeholder, not a measurement.
ZERO_IMPOSSIBLE = frozenset(
    name for fields in CONTEXT_FIELDS.values() for name, check in fields.items()
    if check(0) is not None and check(1) is None
)


def context_value_problem(name: str, value: Any, section: str | None = None) -> str | None:
    """Return why a context value cannot be published (missing, empty, a placeholder, an impossible 0, the n/a
    marker where the field always applies), or None. `section` names the field's section (else found by name)."""
    if value is None:
        return "missing"
    if is_not_applicable(value):
        if section is None:
            section = next((s for s, fields in CONTEXT_FIELDS.items() if name in fields), "")
        return inapplicable_problem(f"{section}.{name}", value)
    if isinstance(value, str):
        text = visible_text(value)
        if not text:
            return "empty" if not value.strip() else f"{value!r} shows nothing (invisible characters only)"
        bare = text.lower().rstrip(".!")
        if not bare or bare in PLACEHOLDERS or text.lower() in PLACEHOLDERS:
            return f"placeholder {value!r}; write the real value"
    if name in ZERO_IMPOSSIBLE and not isinstance(value, bool) and isinstance(value, int | float) and value <= 0:
        return f"{value!r} is impossible here (expected > 0); write the real value"
    return None
