"""A continuous profiler's per-kernel sample counts ("how often") -> sample rows. Schema: docs/timeshare.md.

CSV: a header with `kernel` and `samples` (optional `share_pct`), one row per kernel, `#` comment lines.
JSON: `{"kernels": [{"kernel": ..., "samples": ..., "share_pct": ...}], "profiler": ..., "tool_version": ...}`
or a bare list of those objects. `samples` is an integer >= 0; `share_pct` is a percent in [0, 100], given on
every row or on none (then it is computed as 100 * samples / sum of samples).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.timeshare.model import INT64_LIMIT, Parsed, csv_row, decode_text, load_json, quoted

EXPECTED = ("a per-kernel sample export: CSV with columns kernel,samples[,share_pct] or JSON "
            '{"kernels": [{"kernel": ..., "samples": ..., "share_pct": ...}]} (docs/timeshare.md)')
COLUMNS = ("kernel", "samples", "share_pct")


def read_samples(path: Path, data: bytes) -> Parsed:
    """Read a CSV or JSON sample export; the format is told by its first character, not the extension."""
    text = decode_text(path, data, EXPECTED)
    if text.lstrip()[:1] in "[{":
        return _read_json(path, text)
    return _read_csv(path, text)


def _samples(where: str, value: Any) -> int:
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if len(text) <= 20 else None  # a longer count is no int64 (and int() caps digits)
        except ValueError:
            value = None
        if value is None:
            raise InputError(f"{where}: samples: expected an integer >= 0, got '{quoted(text)}'.")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < INT64_LIMIT:
        raise InputError(f"{where}: samples: expected an integer >= 0, got {quoted(value)}. Sample counts cannot "
                         f"be negative, fractional or 2^63 and beyond (64 bits); export raw counts.")
    return value


def _share(where: str, value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().removesuffix("%"))  # 'nan', 'inf', '1e400' parse: the range refuses them
        except ValueError:
            raise InputError(f"{where}: share_pct: expected a percent in [0, 100], got '{quoted(value)}'.") from None
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 100:
        raise InputError(f"{where}: share_pct: expected a percent in [0, 100], got {quoted(value)}.")
    return float(value)


def _kernel(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: kernel: expected a non-empty kernel name, got {quoted(value)}.")
    return value.strip()


def _read_csv(path: Path, text: str) -> Parsed:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"'{path}': only comments and blank lines; expected {EXPECTED}.")
    header_n, header_line = lines[0]
    header = [h.strip().lower() for h in csv_row(f"{path}:{header_n}", header_line, EXPECTED)]
    _check_header(f"{path}:{header_n}", header, header_line)
    rows = []
    for n, line in lines[1:]:
        where = f"{path}:{n}"
        fields = csv_row(where, line, EXPECTED)
        if len(fields) != len(header):
            raise InputError(f"{where}: expected {len(header)} columns like the header, got {len(fields)}. Quote "
                             f'kernel names that contain commas ("void k<int, float>(...)").')
        rec = dict(zip(header, fields, strict=True))
        rows.append({"name": _kernel(where, rec["kernel"]), "samples": _samples(where, rec["samples"]),
                     "share_pct": _share(where, rec.get("share_pct"))})
    extra = [h for h in header if h not in COLUMNS]
    warnings = [f"column(s) {', '.join(extra)} are not part of the samples schema and were ignored."] if extra else []
    return _finish(path, "samples-csv", rows, None, None, warnings)


def _check_header(where: str, header: list[str], line: str) -> None:
    if "share" in header or "share_fraction" in header:
        raise InputError(f"{where}: a 'share' column is ambiguous (fraction or percent?); expected 'share_pct' in "
                         f"percent (0-100), or no share column (it is then computed from samples).")
    missing = [c for c in ("kernel", "samples") if c not in header]
    if missing:
        shown = line if len(line) <= 120 else line[:117] + "..."
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}; expected a header with kernel,samples"
                         f"[,share_pct], got '{shown}'. See docs/timeshare.md for the samples schema.")


def _read_json(path: Path, text: str) -> Parsed:
    obj = load_json(path, text, EXPECTED)
    meta: dict[str, Any] = obj if isinstance(obj, dict) else {}
    items = obj.get("kernels") if isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise InputError(f"'{path}': JSON without a 'kernels' list; expected {EXPECTED}.")
    rows = []
    for i, item in enumerate(items):
        where = f"'{path}': kernels[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object with kernel and samples, got {quoted(item)}.")
        for key in ("kernel", "samples"):
            if key not in item:
                raise InputError(f"{where}: missing '{key}'; expected {{\"kernel\": ..., \"samples\": ...}}.")
        rows.append({"name": _kernel(where, item["kernel"]), "samples": _samples(where, item["samples"]),
                     "share_pct": _share(where, item.get("share_pct"))})
    profiler = meta.get("profiler") if isinstance(meta.get("profiler"), str) else None
    version = meta.get("tool_version") if isinstance(meta.get("tool_version"), str) else None
    return _finish(path, "samples-json", rows, profiler, version, [])


def _finish(path: Path, fmt: str, rows: list[dict[str, Any]], report: str | None, version: str | None,
            warnings: list[str]) -> Parsed:
    if not rows:
        raise InputError(f"'{path}': no kernel rows; expected {EXPECTED}.")
    given = [r["share_pct"] is not None for r in rows]
    if any(given) and not all(given):
        raise InputError(f"'{path}': share_pct is given for {sum(given)} of {len(rows)} kernels; give it on every "
                         f"row or on none (then it is computed from samples).")
    merged: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["name"] in merged:
            m = merged[r["name"]]
            m["samples"] += r["samples"]
            m["share_pct"] = None if m["share_pct"] is None else m["share_pct"] + r["share_pct"]
        else:
            merged[r["name"]] = dict(r)
    if len(merged) < len(rows):
        warnings.append(f"{len(rows) - len(merged)} duplicate kernel row(s) were summed per kernel name.")
    total = sum(r["samples"] for r in merged.values())
    big = [r["name"] for r in merged.values() if r["samples"] >= INT64_LIMIT]
    if big:
        raise InputError(f"'{path}': kernel {quoted(big[0])}: its rows' samples add up beyond 2^63-1; expected "
                         f"raw counts of one window. The export is damaged; export it again.")
    if not all(given) and total == 0:
        raise InputError(f"'{path}': every kernel has 0 samples, so no share can be computed; export a window "
                         f"in which the profiler sampled the GPU.")
    shares = sum(r["share_pct"] for r in merged.values()) if all(given) else 100.0
    if shares > 100.5:
        raise InputError(f"'{path}': the share_pct values add up to {shares:.2f}% (> 100); expected percents of "
                         f"one total. Drop the column to compute shares from samples.")
    return Parsed(fmt, list(merged.values()), report=report, tool_version=version, warnings=warnings)
