"""What every time-share reader returns, and what an import reports back."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.errors import InputError


@dataclass
class Parsed:
    """One input file read into per-kernel rows (one row per distinct kernel name).

    Time rows: name, instances, total_ns, min_ns, max_ns (ints; min/max None when the input lacks them).
    Sample rows: name, samples, share_pct (None when the input gives no share).
    """

    format: str
    rows: list[dict[str, Any]]
    report: str | None = None
    tool_version: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class TimeshareResult:
    """What one import wrote, for the CLI summary."""

    path: Path
    campaign: str
    cell_id: str
    kind: str  # "kernel_times" | "kernel_samples"
    sources: list[dict[str, Any]]  # the source(s) imported now
    kernels: list[dict[str, Any]]  # the rows imported now
    warnings: list[str] = field(default_factory=list)


def read_input(path: Path, expected: str) -> bytes:
    """Return the file's bytes, or raise naming what was expected when it is missing, a folder or empty."""
    if path.is_dir():
        raise InputError(f"'{path}': a folder; expected one file: {expected}.")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"'{path}': no such file; expected {expected}. Check the path.") from None
    except OSError as exc:
        raise InputError(f"'{path}': cannot be read ({exc.strerror}); expected {expected}.") from None
    if not data.strip():
        raise InputError(f"'{path}': the file is empty ({len(data)} bytes); expected {expected}.")
    return data


def sha256(data: bytes) -> str:
    """Hex SHA-256 of the input bytes, recorded so a re-import of a changed file is visible."""
    return hashlib.sha256(data).hexdigest()


def decode_text(path: Path, data: bytes, expected: str) -> str:
    """UTF-8 text (a BOM is dropped); binary input is refused with what was expected."""
    if b"\x00" in data[:65536]:
        raise InputError(f"'{path}': binary data (NUL bytes); expected {expected}.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"'{path}':{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); expected {expected}. "
            f"Re-export the file as UTF-8."
        ) from None
