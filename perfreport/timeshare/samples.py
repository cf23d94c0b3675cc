"""A continuous profiler's samples ("how often") -> per-kernel sample rows. Formats and rules: docs/timeshare.md.

Stack formats, each sample attributed to the CUDA-kernel frame of its stack (perfreport/timeshare/stacks.py):
pprof: `profile.proto`, gzip-compressed (`.pb.gz`, as pprof writes it) or plain, one sample type of it.
Folded stacks: `frame;frame;leaf COUNT` lines (flamegraph.pl input), plain or gzip-compressed.
Per-kernel formats:
CSV: a header with `kernel` and `samples` (optional `share_pct`), one row per kernel, `#` comment lines.
JSON: `{"kernels": [{"kernel": ..., "samples": ..., "share_pct": ...}], "profiler": ..., "tool_version": ...}`
or a bare list of those objects. `samples` is an integer >= 0; `share_pct` is a percent in [0, 100], given on
every row or on none (then it is computed as 100 * samples / sum of samples).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.files import gunzip_bytes
from perfreport.timeshare.model import INT64_LIMIT, Parsed, csv_row, decode_text, load_json, quoted
from perfreport.timeshare.pprof import NotPprof, pick_type, read_profile
from perfreport.timeshare.stacks import KnownKernels, attribute, known_kernels, looks_folded, read_folded

EXPECTED = ("a continuous profiler's samples: a pprof profile (profile.proto, .pb.gz), folded stacks "
            "('frame;...;leaf COUNT'), or a per-kernel CSV (kernel,samples[,share_pct]) or JSON (docs/timeshare.md)")
TABLE_EXPECTED = ("a per-kernel sample export: CSV with columns kernel,samples[,share_pct] or JSON "
                  '{"kernels": [{"kernel": ..., "samples": ..., "share_pct": ...}]} (docs/timeshare.md)')
COLUMNS = ("kernel", "samples", "share_pct")
HEAD = 1 << 16  # a file whose first 64 KiB hold a NUL or are not UTF-8 is binary: a pprof profile or nothing


def read_samples(path: Path, data: bytes, cell_dir: Path | None = None, sample_type: str | None = None) -> Parsed:
    """Read a pprof profile, folded stacks, or a CSV or JSON per-kernel export, told by content, not extension.

    `cell_dir` holds the cell's kernel names that stack samples are attributed by (none when None);
    `sample_type` picks a pprof profile's sample type (default: the profile's own default).
    """
    gzipped = data[:2] == b"\x1f\x8b"
    if gzipped:
        try:
            data = gunzip_bytes(data, f"'{path}'")  # bounded: a gzip bomb must not fill memory
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"'{path}': gzip-compressed but cannot be decompressed ({exc}); expected {EXPECTED}. "
                             f"The file was cut short or damaged: copy or export it again.") from None
    if _binary(data[:HEAD]):
        try:
            return _read_pprof(path, data, cell_dir, sample_type)
        except NotPprof:
            if not gzipped and _mostly_text(data[:HEAD]):
                decode_text(path, data, EXPECTED)  # text in another encoding: say so, with its line
            raise
    text = decode_text(path, data, EXPECTED)
    if sample_type is not None:
        raise InputError(f"'{path}': --sample-type picks a sample type of a pprof profile; this file is text (folded "
                         f"stacks, CSV or JSON) with one count per row. Drop --sample-type.")
    if looks_folded(text):
        stacks = read_folded(path, text)
        done = attribute(path, stacks, _known(cell_dir), f"{sum(n for _, n in stacks):,} samples")
        return _finish(path, "samples-folded", done.rows, None, None, done.warnings)
    if text.lstrip()[:1] in "[{":
        return _read_json(path, text)
    return _read_csv(path, text)


def _binary(head: bytes) -> bool:
    """A NUL, or bytes that are not UTF-8 before the last (maybe cut) character of the head."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3
    return False


def _mostly_text(head: bytes) -> bool:
    """No NUL and at least 90% printable ASCII or whitespace: text in another encoding, not binary data."""
    printable = sum(1 for b in head if 0x20 <= b < 0x7F or b in (9, 10, 13))
    return b"\x00" not in head and printable >= 0.9 * len(head)


def _known(cell_dir: Path | None) -> KnownKernels:
    return known_kernels(cell_dir) if cell_dir is not None else KnownKernels(frozenset(), ())


def _read_pprof(path: Path, data: bytes, cell_dir: Path | None, sample_type: str | None) -> Parsed:
    profile = read_profile(path, data)
    index = pick_type(profile, sample_type)
    chosen = profile.types[index]
    done = attribute(path, profile.stacks(index), _known(cell_dir), f"sample type {chosen}, of {len(profile.types)}: "
                     f"{', '.join(profile.types)}")
    unit = chosen.split("/", 1)[1]
    if unit != "count":
        done.warnings.insert(0, f"sample type {chosen}: its values ({unit or 'no unit'}) are summed as `samples`; the "
                                f"shares are shares of {unit or 'them'}, not of sample counts.")
    return _finish(path, "samples-pprof", done.rows, f"sample_type {chosen}", None, done.warnings)


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
        raise InputError(f"'{path}': only comments and blank lines; expected {TABLE_EXPECTED}.")
    header_n, header_line = lines[0]
    header = [h.strip().lower() for h in csv_row(f"{path}:{header_n}", header_line, TABLE_EXPECTED)]
    _check_header(f"{path}:{header_n}", header, header_line)
    rows = []
    for n, line in lines[1:]:
        where = f"{path}:{n}"
        fields = csv_row(where, line, TABLE_EXPECTED)
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
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:  # a dict of the row keeps the last column of a name: the other's values would vanish unseen
        raise InputError(f"{where}: column(s) {', '.join(repr(h) for h in twice)} given twice in the header; "
                         f"expected each column once (kernel,samples[,share_pct]). Drop the repeated column.")
    missing = [c for c in ("kernel", "samples") if c not in header]
    if missing:
        shown = line if len(line) <= 120 else line[:117] + "..."
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}; expected a header with kernel,samples"
                         f"[,share_pct], got '{shown}'. See docs/timeshare.md for the samples schema.")


def _read_json(path: Path, text: str) -> Parsed:
    obj = load_json(path, text, TABLE_EXPECTED)
    meta: dict[str, Any] = obj if isinstance(obj, dict) else {}
    items = obj.get("kernels") if isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise InputError(f"'{path}': JSON without a 'kernels' list; expected {TABLE_EXPECTED}.")
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
        raise InputError(f"'{path}': no kernel rows; expected {TABLE_EXPECTED}.")
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
    if all(given) and total > 0 and 0.99 <= shares <= 1.01 and all(
            abs(r["share_pct"] - r["samples"] / total) <= 0.005 for r in merged.values()):
        # fractions of one (0.62, 0.31, ...) read as percents would store every share 100x too small
        raise InputError(f"'{path}': the share_pct values add up to {shares:.3g}: fractions of 1, not percents "
                         f"(0-100). Multiply them by 100, or drop the column to compute shares from samples.")
    return Parsed(fmt, list(merged.values()), report=report, tool_version=version, warnings=warnings)
