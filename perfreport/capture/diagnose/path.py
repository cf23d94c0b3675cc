"""diagnose_path: diagnose a capture log or a report on disk, whichever the file is."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

from perfreport.capture.diagnose.log import Diagnosis, diagnose_text
from perfreport.capture.diagnose.report import diagnose_report
from perfreport.errors import InputError
from perfreport.files import gunzip_bounded
from perfreport.ncu.rep.proto import MAGIC


def diagnose_path(path: Path, kernel_pattern: str | None = None) -> list[Diagnosis]:
    """Diagnose a capture log (.log/.txt, optionally .gz) or a report (.ncu-rep[.gz]) on disk."""
    path = Path(path)
    _check_input(path)
    if path.name.endswith((".ncu-rep", ".ncu-rep.gz")):
        return diagnose_report(path)
    data = _read_log(path)
    if data.startswith(MAGIC):
        return diagnose_report(path)
    if not data.strip():
        raise InputError(f"capture diagnose: '{path}' holds no text (only whitespace after decompression): there is "
                         f"no ncu output to diagnose. Re-run the capture with ncu's output saved "
                         f"(`ncu ... > capture.log 2>&1`).")
    return diagnose_text(data.decode("utf-8", errors="replace"), kernel_pattern)


def _check_input(path: Path) -> None:
    expected = "Expected an ncu capture log (.log/.txt, optionally .gz) or a report (.ncu-rep[.gz])"
    if not path.exists():
        raise InputError(f"capture diagnose: '{path}' does not exist. {expected}; check the path (a capture run "
                         f"writes them into the bundle's ncu-profiles/).")
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix in {".log", ".txt", ".gz", ".ncu-rep"})
        hint = f" Candidates inside: {', '.join(inside[:5])}." if inside else ""
        raise InputError(f"capture diagnose: '{path}' is a directory. {expected}: pass one file inside it.{hint}")
    if path.stat().st_size == 0:
        raise InputError(f"capture diagnose: '{path}' is empty (0 bytes): there is no ncu output to diagnose. "
                         f"{expected}; re-run the capture with ncu's output saved (`ncu ... > capture.log 2>&1`).")


def _read_log(path: Path) -> bytes:
    if path.suffix != ".gz":
        return path.read_bytes()
    out = io.BytesIO()
    try:
        gunzip_bounded(path, out, f"capture diagnose: '{path}'")  # a gzip bomb must not fill memory
        return out.getvalue()
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"capture diagnose: '{path}': cannot gunzip it ({exc}). Expected a gzip-compressed log; "
                         f"pass the uncompressed log, or re-compress it with `gzip -k`.") from exc
