"""Diagnose an Nsight Compute report (.ncu-rep[.gz]), for diagnose.diagnose_path: its MAGIC, its kernel names read
through NVIDIA's ncu_report (imported only then), and the walk of its length-prefixed blocks that tells a truncated
file from a complete one. Standard library only at module level: this runs on the GPU machine.
"""

from __future__ import annotations

import gzip
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

from perfreport.capture.diagnose.log import Diagnosis
from perfreport.errors import InputError

MAGIC = b"NVR\x00"


def diagnose_report(path: Path) -> list[Diagnosis]:
    """Diagnose a report, gzipped or not: report-unreadable, no-kernels-profiled, or ok with its kernel names."""
    with tempfile.TemporaryDirectory(prefix="perfreport-diagnose-") as tmp:
        plain = Path(tmp) / "report.ncu-rep"  # ncu_report opens files, not streams: gunzip to a temp file
        try:
            with path.open("rb") as raw, plain.open("wb") as dst:
                gzipped = raw.read(2) == b"\x1f\x8b"
                raw.seek(0)
                shutil.copyfileobj(gzip.GzipFile(fileobj=raw) if gzipped else raw, dst)
        except (OSError, EOFError, zlib.error) as exc:
            return [_unreadable(path, f"cannot gunzip it ({exc})", 0)]
        return _inspect_report(path, plain)


def _inspect_report(path: Path, plain: Path) -> list[Diagnosis]:
    blob = plain.read_bytes()
    if not blob.startswith(MAGIC):
        why = f"it is not an Nsight Compute report (first bytes {blob[:4]!r}, expected {MAGIC!r})"
        return [_unreadable(path, why, 0)]
    try:
        names = _kernel_names(plain)
    except InputError:
        raise
    except Exception as exc:  # ncu_report raises plain RuntimeError and friends
        return [_unreadable(path, f"ncu_report could not load it ({exc})", 0)]
    readable = [n for n in names if n]
    if _structure(blob) == "truncated" or len(readable) < len(names):
        why = f"it ends inside a record ({len(blob):,} bytes); ncu_report read {len(readable)} kernel(s) from it"
        return [_unreadable(path, why, len(readable))]
    if not names:
        return [Diagnosis("no-kernels-profiled", (
            f"report '{path}' is complete but holds 0 profiled kernels: --kernel-name / --launch-skip matched no "
            f"launch. Diagnose the capture's ncu log: after `==WARNING== No kernels were profiled.` ncu lists the "
            f"available kernel names to pick the pattern from."), (), {"kernels_profiled": 0, "available_kernels": []})]
    return [Diagnosis("ok", f"report '{path}' holds {len(names)} profiled kernel(s); nothing to fix.", (),
                      {"kernels_profiled": len(names), "kernels": names, "report": str(path)})]


def _unreadable(path: Path, why: str, readable: int) -> Diagnosis:
    return Diagnosis("report-unreadable", (
        f"report '{path}' cannot be used: {why}. The file is truncated or damaged: copy it again after ncu printed "
        f"`==PROF== Report:` (an interrupted copy or a capture killed mid-write leaves a partial file), or capture "
        f"again; the capture's ncu log says why ncu stopped."), (), {"kernels_readable": readable})


def _kernel_names(plain: Path) -> list[str]:
    """Function names of every profiled kernel in the report, through NVIDIA's ncu_report module."""
    try:
        import ncu_report
    except ImportError as exc:
        raise InputError("capture diagnose: reading a report needs NVIDIA's `ncu_report` module, which is not "
                         "installed; run `pip install ncu-report`, or diagnose the capture log instead.") from exc
    ctx = ncu_report.load_report(str(plain))
    names = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            names.append(rng.action_by_idx(i).name(ncu_report.IAction.NameBase_FUNCTION) or "")
    return names


def _structure(blob: bytes) -> str:
    """'complete', 'truncated' or 'unknown': walk the report's length-prefixed blocks to the end of the file.

    Layout (seen in every ncu 2025.3.1 report here): magic, u32 header length + header, then blocks of
    u32 length + block header (protobuf; field 5 = payload bytes) + payload. A length past the end means a cut file.
    """
    (size,) = struct.unpack_from("<I", blob, 4) if len(blob) >= 8 else (len(blob),)
    pos = 8 + size
    while pos < len(blob):
        if pos + 4 > len(blob):
            return "truncated"
        (size,) = struct.unpack_from("<I", blob, pos)
        if pos + 4 + size > len(blob):
            return "truncated"
        payload = _payload_size(blob[pos + 4:pos + 4 + size])
        if payload is None:
            return "unknown"
        pos += 4 + size + payload
    return "complete" if pos == len(blob) else "truncated"


def _payload_size(header: bytes) -> int | None:
    """Field 5 (varint) of a block header, 0 when absent; None when the bytes are not a protobuf message."""
    pos, found = 0, 0
    try:
        while pos < len(header):
            key, pos = _varint(header, pos)
            if key & 7 not in (0, 1, 2, 5):
                return None
            value, pos = _varint(header, pos) if key & 7 in (0, 2) else ({1: 8, 5: 4}[key & 7], pos)
            found = value if key == (5 << 3) else found
            pos += value if key & 7 != 0 else 0
    except IndexError:
        return None
    return found if pos == len(header) else None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
