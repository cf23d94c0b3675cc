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
from perfreport.timeshare.model import INT64_LIMIT, Parsed, decode_text, load_json, quoted
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


def read_torch_trace(path: Path, data: bytes) -> Parsed:
    """Aggregate the kernel events of a Chrome trace per kernel name, and per launching op and shapes where the
    trace records them."""
    events = load_events(path, data)
    ops = launching_ops(events)  # empty without record_shapes: one row per name, useful FLOPs unknown
    cats = Counter(c if isinstance(c := e.get("cat"), str | None) else f"<{type(c).__name__}>"
                   for e in events if isinstance(e, dict))
    merged: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
    for i, e in enumerate(events):
        if not (isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X"):
            continue
        name, dur = e.get("name"), e.get("dur")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"'{path}': traceEvents[{i}]: kernel event without a name; the trace is damaged.")
        if not isinstance(dur, int | float) or isinstance(dur, bool) or not 0 <= dur * 1000 < INT64_LIMIT:
            raise InputError(f"'{path}': traceEvents[{i}] ({name[:60]}): expected 'dur' a number >= 0 "
                             f"(microseconds, below 2^63 ns), got {quoted(dur)}; the trace is damaged.")
        ns = round(dur * 1000)
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
    warnings = []
    other_gpu = {c: n for c, n in cats.items() if c in ("gpu_memset", "gpu_memcpy")}
    if other_gpu:
        warnings.append(" and ".join(f"{n} {c}" for c, n in sorted(other_gpu.items())) +
                        " event(s) are not kernels and are not counted in the kernel time share.")
    for row in merged.values():
        row["useful_flops"] = sorted(row["useful_flops"]) or None
    rows = [merged[k] for k in sorted(merged, key=lambda k: (k[0], k[1] or "", k[2] or ""))]
    return Parsed("torch-trace", rows, report="chrome-trace:kernel", warnings=warnings)
