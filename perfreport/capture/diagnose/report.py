"""Diagnose an Nsight Compute report (.ncu-rep[.gz]), for diagnose.diagnose_path: its MAGIC, its kernel names read
through NVIDIA's ncu_report (imported only then), and the walk of its length-prefixed blocks (perfreport.ncu.rep.walk)
that tells a truncated file from a complete one. Standard library only at module level: this runs on the GPU machine.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import zlib
from pathlib import Path

from perfreport.capture.diagnose.log import Diagnosis
from perfreport.errors import InputError
from perfreport.ncu.rep.proto import MAGIC, Truncated, UnknownLayout
from perfreport.ncu.rep.walk import blocks, file_header

__all__ = ["diagnose_report"]


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
    """'complete', 'truncated' or 'unknown': walk the report's blocks to the end of the file (ncu.rep.walk), each
    skipped by its header's PayloadSize: a size, header or payload past the end of the file is a cut file."""
    try:
        for _ in blocks(blob, file_header(blob)[1]):
            pass
    except Truncated:
        return "truncated"
    except UnknownLayout:
        return "unknown"
    return "complete"
