"""Diagnose an Nsight Compute report (.ncu-rep[.gz]), for diagnose.diagnose_path: its MAGIC, the walk of its
length-prefixed blocks (perfreport.ncu.rep.walk) that tells a truncated or damaged file from a whole one, with the
byte offset where it stops, and, for a whole one, its kernel names read through NVIDIA's ncu_report in a child
process (perfreport.ncu.rep.child: a crash inside it is a diagnosis, not the end). Standard library only at module
level: this runs on the GPU machine.
"""

from __future__ import annotations

import importlib.util
import tempfile
import zlib
from pathlib import Path

from perfreport.capture.diagnose.log import Diagnosis
from perfreport.errors import InputError
from perfreport.files import gunzip_bounded
from perfreport.ncu.rep.proto import MAGIC, Damaged, Truncated, UnknownLayout
from perfreport.ncu.rep.walk import blocks, file_header

__all__ = ["diagnose_report"]


def diagnose_report(path: Path) -> list[Diagnosis]:
    """Diagnose a report, gzipped or not: report-unreadable, no-kernels-profiled, or ok with its kernel names."""
    with path.open("rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    if not gzipped:
        return _inspect_report(path, path)
    with tempfile.TemporaryDirectory(prefix="perfreport-diagnose-") as tmp:
        plain = Path(tmp) / "report.ncu-rep"  # ncu_report opens files, not streams: gunzip to a temp file
        try:
            with plain.open("wb") as dst:
                gunzip_bounded(path, dst, f"capture diagnose: report '{path}'")
        except (OSError, EOFError, zlib.error) as exc:
            return [_unreadable(path, f"cannot gunzip it ({exc})", 0)]
        return _inspect_report(path, plain)


def _inspect_report(path: Path, plain: Path) -> list[Diagnosis]:
    blob = plain.read_bytes()  # read, not mapped: a file cut short meanwhile is a shorter file, not SIGBUS
    if not blob.startswith(MAGIC):
        why = f"it is not an Nsight Compute report (first bytes {blob[:4]!r}, expected {MAGIC!r})"
        return [_unreadable(path, why, 0)]
    stop = _walk_stop(blob)
    if isinstance(stop, Truncated):
        why = (f"it ends inside a record ({len(blob):,} bytes): the record at byte {stop.offset:,} needs "
               f"{stop.needed:,} bytes; {stop.results} whole kernel(s) before it")
        return [_unreadable(path, why, stop.results)]
    damaged = _damaged(blob)
    if damaged is not None:
        return [_unreadable(path, f"its framing does not add up: {damaged}", 0)]
    if importlib.util.find_spec("ncu_report") is None:
        raise InputError("capture diagnose: reading a report needs NVIDIA's `ncu_report` module, which is not "
                         "installed; run `pip install ncu-report`, or diagnose the capture log instead.")
    from perfreport.ncu.rep.child import kernel_names

    try:
        names = kernel_names(path, plain)
    except InputError as exc:  # ncu_report could not load it, or crashed on it
        return [_unreadable(path, exc.message.removeprefix(f"report '{path}': "), 0)]
    readable = [n for n in names if n]
    if len(readable) < len(names):
        why = f"{len(names) - len(readable)} of its {len(names)} kernel(s) have no name ({len(blob):,} bytes)"
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


def _walk_stop(blob: bytes) -> Truncated | UnknownLayout | None:
    """Why the walk of the report's blocks (ncu.rep.walk), each skipped by its header's PayloadSize, stops before
    the end of the file: a size, header or payload past the end (Truncated, at its byte), or bytes that are not the
    framing (UnknownLayout); None when it reaches the end."""
    try:
        for _ in blocks(blob, file_header(blob)[1]):
            pass
    except (Truncated, UnknownLayout) as exc:
        return exc
    return None


def _damaged(blob: bytes) -> Damaged | None:
    """Where the framing's sizes do not add up, in a file format version the byte reader knows (ncu.rep.wire.frame:
    another version's framing is ncu_report's to judge)."""
    from perfreport.ncu.rep.wire import frame  # numpy: imported only for a report

    try:
        frame(blob, frozenset())
    except Damaged as exc:
        return exc
    except (Truncated, UnknownLayout):
        return None
    return None


def _structure(blob: bytes) -> str:
    """'complete', 'truncated' or 'unknown': how the walk of the report's blocks ends (_walk_stop)."""
    stop = _walk_stop(blob)
    return "complete" if stop is None else "truncated" if isinstance(stop, Truncated) else "unknown"
