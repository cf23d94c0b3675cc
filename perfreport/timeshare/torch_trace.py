"""PyTorch profiler (kineto) Chrome trace -> per-kernel time rows.

GPU kernels are the complete events (`"ph": "X"`) with `"cat": "kernel"`; `dur` is in microseconds (Chrome
trace format), with nanosecond resolution in kineto's decimals. Memsets and memcpys (`gpu_memset`,
`gpu_memcpy`) are not kernels and are left out of the share. A trace recorded with shapes splits a kernel name's
row by the op that launched it and the op's input shapes (useful_flops.launching_ops): a GEMM kernel run for the
o-proj and for w2 gives two rows.
"""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.files import gunzip_bytes
from perfreport.timeshare.model import INT64_LIMIT, Parsed, decode_text, json_value, load_json, quoted
from perfreport.timeshare.useful_flops import launching_ops

EXPECTED = "a PyTorch profiler Chrome trace (.json or .json.gz from `prof.export_chrome_trace(...)`)"
PROFILE_HOW = ("Profile with `torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])` "
               "so CUDA kernels are recorded, then `prof.export_chrome_trace('trace.json')`.")


def _load(path: Path, data: bytes) -> Any:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gunzip_bytes(data, f"'{path}'")  # bounded: a gzip bomb must not fill memory
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"'{path}': gzip-compressed but cannot be decompressed ({exc}); expected {EXPECTED}. "
                             f"Re-copy the file or pass the uncompressed .json.") from None
    text = decode_text(path, data, EXPECTED)
    if not text.strip():
        raise InputError(f"'{path}': the trace is empty; expected {EXPECTED}.")
    return load_json(path, text, EXPECTED, " A trace cut short by a crash cannot be read; export it again.")


def load_events(path: Path, data: bytes) -> list[Any]:
    """The `traceEvents` of a Chrome trace (.json or gzipped), or a clear error for anything else."""
    obj = _load(path, data)
    events = obj.get("traceEvents") if isinstance(obj, dict) else obj
    if not isinstance(events, list):
        raise InputError(
            f"'{path}': JSON without a 'traceEvents' list: not a Chrome trace; expected {EXPECTED}."
        )
    return events


def _kernel_name(path: Path, i: int, e: dict[str, Any]) -> str:
    name = e.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"'{path}': traceEvents[{i}]: kernel event without a name; the trace is damaged.")
    return name


def _microseconds(path: Path, i: int, name: str, key: str, value: Any) -> float:
    """A kernel event's time field (`dur`, `ts`) as a number of microseconds, or an error naming its JSON type."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value * 1000 < INT64_LIMIT:
        raise InputError(f"'{path}': traceEvents[{i}] ({name[:60]}): expected {key!r} a JSON number >= 0 "
                         f"(microseconds, below 2^63 ns), got {json_value(value)}; the trace is damaged.")
    return float(value)


def _key(v: Any) -> Any:
    """An event field as part of a dict key: a JSON scalar as it is, a list or object (not hashable) by its repr."""
    return v if isinstance(v, str | int | float | bool | None) else repr(v)


def _lane(e: dict[str, Any]) -> tuple[Any, Any]:
    """The (pid, tid) a kernel ran on."""
    return _key(e.get("pid")), _key(e.get("tid"))


def _kernel_spans(path: Path, events: list[Any]) -> tuple[list[tuple[int, str, int]], list[str]]:
    """Each GPU kernel of the trace once, as (event index, name, duration ns), and the warnings of reading them.

    Complete events ("ph": "X") and begin/end pairs ("B" then "E" on the same pid and tid, the other spelling of
    the Chrome trace format) are kernels. A copy of an event already seen (same pid, tid, name, start and
    duration: a trace merged or concatenated twice) is counted once and named in a warning; a "B" without its
    "E" (or the reverse) is not counted and is named too."""
    spans: list[tuple[int, str, int]] = []
    seen: set[tuple[Any, ...]] = set()
    copies: Counter[str] = Counter()
    open_begins: dict[tuple[Any, Any], list[tuple[int, str, float]]] = {}
    unmatched: Counter[str] = Counter()

    def add(i: int, e: dict[str, Any], name: str, dur: float) -> None:
        key = (*_lane(e), name, _key(e.get("ts")), dur)
        if key in seen:
            copies[name] += 1
            return
        seen.add(key)
        spans.append((i, name, round(dur * 1000)))

    for i, e in enumerate(events):
        if not (isinstance(e, dict) and e.get("cat") == "kernel"):
            continue
        ph = e.get("ph")
        if ph == "X":
            name = _kernel_name(path, i, e)
            add(i, e, name, _microseconds(path, i, name, "dur", e.get("dur")))
        elif ph in ("B", "E"):
            lane = _lane(e)
            stack = open_begins.setdefault(lane, [])
            if ph == "B":
                name = _kernel_name(path, i, e)
                stack.append((i, name, _microseconds(path, i, name, "ts", e.get("ts"))))
                continue
            if not stack:
                unmatched[quoted(e.get("name", "<no name>"))] += 1
                continue
            b, name, start = stack.pop()
            end = _microseconds(path, i, name, "ts", e.get("ts"))
            if end < start:
                raise InputError(f"'{path}': traceEvents[{i}] ({name[:60]}): its 'E' (ts {end}) comes before its "
                                 f"'B' (traceEvents[{b}], ts {start}); the trace is damaged.")
            add(b, events[b], name, end - start)
    for stack in open_begins.values():
        unmatched.update(name for _, name, _ in stack)
    warnings = []
    if copies:
        warnings.append(f"{sum(copies.values())} kernel event(s) appear more than once (same stream, name, start "
                        f"and duration), each counted once: {_named(copies)}. A trace merged or concatenated "
                        f"twice holds such copies; export it again from one profiler run.")
    if unmatched:
        warnings.append(f"{sum(unmatched.values())} kernel 'B'/'E' event(s) without their pair on the same stream "
                        f"are not counted: {_named(unmatched)}. The trace was cut short or edited.")
    return spans, warnings


def _named(counts: Counter[str]) -> str:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{name[:60]!r} x{n}" for name, n in top[:3])
    return shown + (f" and {len(top) - 3} more" if len(top) > 3 else "")


def read_torch_trace(path: Path, data: bytes) -> Parsed:
    """Aggregate the kernel events of a Chrome trace per kernel name, and per launching op and shapes where the
    trace records them."""
    events = load_events(path, data)
    ops = launching_ops(events)  # empty without record_shapes: one row per name, useful FLOPs unknown
    cats = Counter(c if isinstance(c := e.get("cat"), str | None) else f"<{type(c).__name__}>"
                   for e in events if isinstance(e, dict))
    spans, warnings = _kernel_spans(path, events)
    merged: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
    for i, name, ns in spans:
        op = ops.get(i)
        key = (name, op.op, op.shapes) if op else (name, None, None)
        row = merged.setdefault(key, {"name": name, "op": key[1], "shapes": key[2], "instances": 0, "total_ns": 0,
                                      "min_ns": ns, "max_ns": ns, "useful_flops": set()})
        if op and op.useful_flops is not None:
            row["useful_flops"].add(op.useful_flops)
        row["instances"] += 1
        row["total_ns"] += ns
        row["min_ns"], row["max_ns"] = min(row["min_ns"], ns), max(row["max_ns"], ns)
    if not merged:
        seen = ", ".join(f"{c} x{n}" for c, n in sorted(cats.items(), key=lambda kv: str(kv[0]))) or "none"
        raise InputError(
            f"'{path}': a Chrome trace with no GPU kernel events (\"cat\": \"kernel\"); event categories seen: "
            f"{seen}. {PROFILE_HOW}"
        )
    other_gpu = {c: n for c, n in cats.items() if c in ("gpu_memset", "gpu_memcpy")}
    if other_gpu:
        warnings.append(" and ".join(f"{n} {c}" for c, n in sorted(other_gpu.items())) +
                        " event(s) are not kernels and are not counted in the kernel time share.")
    for row in merged.values():
        row["useful_flops"] = sorted(row["useful_flops"]) or None
    rows = [merged[k] for k in sorted(merged, key=lambda k: (k[0], k[1] or "", k[2] or ""))]
    return Parsed("torch-trace", rows, report="chrome-trace:kernel", warnings=warnings)
