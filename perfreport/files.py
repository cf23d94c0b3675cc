"""File plumbing shared by every stage: atomic deterministic writes, content digests."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import json
import math
import os
import re
import stat
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from perfreport.errors import InputError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (os.umask only reads by setting: swapped back at once, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def check_regular(path: Path, what: str) -> None:
    """Refuse an input that is not a regular file (a FIFO, /dev/zero behind a link, a socket): reading one has no
    end. A missing path or a folder is left to the caller's own message."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        target = f" (a link to '{os.path.realpath(path)}')" if os.path.islink(path) else ""
        raise InputError(f"'{path}'{target}: {kind}, not a regular file; expected {what}. Pass the file itself.")


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to path via a temp file + rename so readers never see half a file.

    The file gets the mode a plain open() would give (0666 less the umask), not mkstemp's 0600: sites, cells and
    bundles are served and shared.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a write past the disk or size limit names no file
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc
        raise


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def dumps_json(data: Any) -> str:
    """Serialize deterministically: sorted keys, no NaN, trailing newline.

    A top-level object gets one key per line and one line per record of its lists of objects (one kernel per
    line: diffs stay readable, and json's C encoder is used, which `indent` would turn off; docs/benchmarks.md).
    """
    if not isinstance(data, dict):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    parts = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            body = ",\n".join(f"    {_compact(v)}" for v in value)
            parts.append(f"  {_compact(key)}: [\n{body}\n  ]")
        else:
            parts.append(f"  {_compact(key)}: {_compact(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write data as deterministic JSON atomically."""
    write_text_atomic(path, dumps_json(data))


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (provenance of every imported source)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def locked(path: Path, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the folder of `path` for one read-merge-write: writers of one cell (or bundle) take
    turns and none is lost. flock on the folder itself leaves no lock file behind and is released when the holder
    exits, even on kill -9. `waiting` hears one line when another writer holds it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(f"waiting for another writer in '{path.parent}' to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


GUNZIP_RATIO = 100  # a .gz may expand to 100x its size: ncu reports and logs expand 4-13x, a gzip bomb ~1000x
GUNZIP_FLOOR = 64 << 20  # and to 64 MiB whatever its size


def gunzip_limit(compressed: int) -> int:
    """The most bytes a .gz of `compressed` bytes may expand to: max(GUNZIP_FLOOR, GUNZIP_RATIO x its size)."""
    return max(GUNZIP_FLOOR, GUNZIP_RATIO * compressed)


def gzip_bomb(label: str, compressed: int) -> InputError:
    """The error for a .gz that expands past gunzip_limit (every gzip reader raises this one)."""
    return InputError(
        f"{label}: expands past {gunzip_limit(compressed):,} bytes from {compressed:,} compressed (more than "
        f"{GUNZIP_RATIO}x, or {GUNZIP_FLOOR >> 20} MiB): ncu exports, logs and traces expand 4-13x, so this .gz is "
        f"damaged or not what it claims (a gzip bomb). If it is genuine, gunzip it yourself (`gunzip -k`) and "
        f"pass the uncompressed file.")


def gunzip_bounded(src: Path, dst: IO[bytes], label: str) -> int:
    """Decompress the gzip file `src` into `dst` 1 MiB at a time, at most gunzip_limit(its size) bytes, so that a
    gzip bomb fills neither memory nor disk; return the bytes written. Raises InputError past the bound, naming
    `label` (e.g. "report 'R.ncu-rep.gz'"); gzip's own errors (OSError, EOFError, zlib.error) are left to the
    caller to word."""
    size = src.stat().st_size
    limit = gunzip_limit(size)
    written = 0
    with gzip.open(src, "rb") as fh:
        while piece := fh.read(min(1 << 20, limit + 1 - written)):
            written += len(piece)
            if written > limit:
                raise gzip_bomb(label, size)
            try:
                dst.write(piece)
            except OSError as exc:  # the scratch disk, not the .gz: say so (re-compressing would not help)
                raise scratch_full(label, dst, exc, written) from exc
    return written


def scratch_full(label: str, dst: IO[bytes], exc: OSError, written: int) -> InputError:
    """The error for a gunzip whose temporary copy cannot be written (ENOSPC, EFBIG, EDQUOT): the .gz is fine."""
    where = os.path.dirname(os.fsdecode(getattr(dst, "name", ""))) or tempfile.gettempdir()
    code = errno.errorcode.get(exc.errno or 0, "")
    return InputError(
        f"{label}: cannot write its uncompressed copy into the temporary folder '{where}' after {written:,} "
        f"bytes: {exc.strerror or exc}{f' ({code})' if code else ''}. The .gz itself is fine: the disk holding the "
        f"temporary folder is full or limits file size. Free space there, or point TMPDIR at a disk with room "
        f"(`TMPDIR=/path/with/room perftunereport ...`), or gunzip it yourself and pass the uncompressed file.")


def gunzip_bytes(data: bytes, label: str) -> bytes:
    """gzip-compressed `data` decompressed, at most gunzip_limit(len(data)) bytes (InputError past it); damaged
    data raises OSError or EOFError for the caller to word."""
    limit = gunzip_limit(len(data))
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, limit + 1)
    except zlib.error as exc:  # "Error -3 while decompressing data: incorrect header check": keep the reason
        raise OSError(f"not valid gzip data: {str(exc).rpartition(': ')[2]}") from None
    if len(out) > limit:
        raise gzip_bomb(label, len(data))
    if not inflate.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    return out


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what Excel, LibreOffice and Sheets run as a formula
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def defused(text: str) -> str:
    """A text cell a spreadsheet would run as a formula gets a leading single quote (shown as text, never run);
    a number spelled as text (-1.5) is left as it is: no formula can hide in it. A carriage return becomes a line
    feed: the csv module quotes a field holding the line terminator (\\n) but not a bare \\r, which would split
    the row in every reader."""
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        text = "'" + text
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def json_default(v: Any) -> Any:
    """json.dumps fallback for database values: DECIMAL as float, dates ISO, bytes hex, sets sorted, the rest str."""
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, datetime | date) or hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, set | frozenset):
        return sorted(v, key=str)
    return str(v)


def csv_cell(v: Any) -> str:
    """One CSV cell, for the site's downloads and the CLI's --format csv: numbers unformatted, null empty, lists and
    objects as JSON, formula-looking text defused (a spreadsheet shows `=cmd|...` as text, never runs it)."""
    if v.__class__ is str:  # most cells of a download: the cheap test first
        return defused(v)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    if isinstance(v, int | Decimal):
        return str(v)
    if isinstance(v, dict | list | tuple):
        return defused(json.dumps(v, sort_keys=True, ensure_ascii=False, default=json_default))
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, bytes | bytearray):
        return v.hex()
    return defused(str(v))
