"""Read .ncu-rep (and .ncu-rep.gz) files: their bytes directly, or through NVIDIA's ncu_report; no GPU needed."""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import re
import signal
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfreport.errors import InputError
from perfreport.files import gunzip_bounded
from perfreport.kernels.identity import MAX_NAME_CHARS
from perfreport.kernels.names import function_name
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.catalog.sets import infer_section_set
from perfreport.ncu.model import Capture, KernelLaunch, Rule
from perfreport.ncu.rep import wire
from perfreport.ncu.rep.proto import MAGIC, Damaged, ReportBytes, Truncated, UnknownLayout
from perfreport.ncu.rep.wire import Action
from perfreport.progress import Progress

_VERSION_RE = re.compile(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?) \(build \d+\)")
_CMDLINE_RE = re.compile(rb"/[!-~]*/ncu ")


@contextmanager
def _plain_report(path: Path) -> Iterator[Path]:
    """Yield a path ncu_report can open: gunzip .gz files into a temp folder first (files.gunzip_bounded: a gzip
    bomb is refused before it fills the disk)."""
    if path.suffix != ".gz":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="perfreport-rep-") as tmp:
        out = Path(tmp) / path.name[: -len(".gz")]
        try:
            with out.open("wb") as dst:
                gunzip_bounded(path, dst, f"report '{path}'")
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"report '{path}': cannot gunzip it ({exc}). Expected a gzip-compressed .ncu-rep; "
                f"re-compress the original report with `gzip -k R.ncu-rep` or pass the .ncu-rep itself."
            ) from exc
        yield out


def _varint_string(data: ReportBytes, start: int) -> str | None:
    """Decode the protobuf string at `start` from the length varint just before it (1 or 2 bytes)."""
    candidates = []
    if start >= 2 and data[start - 2] & 0x80 and not data[start - 1] & 0x80:
        candidates.append((data[start - 2] & 0x7F) | (data[start - 1] << 7))
    if start >= 1 and not data[start - 1] & 0x80:
        candidates.append(data[start - 1])
    for length in candidates:
        text = data[start : start + length]
        if len(text) == length and all(32 <= c < 127 for c in text):
            return text.decode()
    return None


def _session_facts(records: Sequence[ReportBytes]) -> tuple[str | None, str | None]:
    """ncu version and command line, stored as strings in the report's session records (or anywhere in it)."""
    version = cmdline = None
    for data in records:
        if version is None and (v := _VERSION_RE.search(data)):
            version = v.group(1).decode()
        if cmdline is None and (c := _CMDLINE_RE.search(data)):
            full = _varint_string(data, c.start())
            if full is not None:
                exe, _, args = full.partition("/ncu ")
                cmdline = "ncu " + args.strip()
    return version, cmdline


# read besides the catalog's metrics: a launch's identity and place (kept as text, as ncu prints them)
_GRID = tuple(f"launch__grid_dim_{a}" for a in "xyz")
_BLOCK = tuple(f"launch__block_dim_{a}" for a in "xyz")
_CC = ("device__attribute_compute_capability_major", "device__attribute_compute_capability_minor")
_ATTRS = ("launch__process_id", "launch__context_id", "launch__stream_id", "launch__device_id", *_GRID, *_BLOCK, *_CC)


def _wanted() -> frozenset[str]:
    return frozenset(load_catalog().needed()) | frozenset(_ATTRS)


_Layout = tuple[list[str], list[str], dict[str, str]]  # numeric metric names (sorted), text names, their units


def _layout(act: Action, needed: frozenset[str], units: dict[str, str] | None) -> _Layout:
    numeric: list[str] = []
    text: list[str] = []
    unit: dict[str, str] = {}
    for name in sorted(act.values.keys() & needed):
        if isinstance(act.values[name], str):
            text.append(name)
            continue
        numeric.append(name)
        got = act.units.get(name) if units is None else units.get(name)
        if got is None:
            raise UnknownLayout(f"no unit known for {name} (metrics.yaml rep_units)")
        unit[name] = got
    return numeric, text, unit


_Place = tuple[str, str, str, str, str, str, str]  # process, context, stream, device, cc, block size, grid size


@dataclass
class _Seen:
    """What the launches of one report repeat, worked out once (_launch)."""

    # by the action's shape (bulk.Shape), else its names and value types
    layouts: dict[object, _Layout] = field(default_factory=dict)
    places: dict[tuple[object, ...], _Place] = field(default_factory=dict)  # by the raw values of _ATTRS


def _place(raw: tuple[object, ...]) -> _Place:
    """Where a launch ran and its shape, as ncu prints them, from the values of _ATTRS (in that order)."""
    attr = ["" if v is None else str(v) for v in raw]
    grid, block, (major, minor) = attr[4:7], attr[7:10], attr[10:12]
    return (attr[0], attr[1], attr[2], attr[3], f"{major}.{minor}" if major and minor else "",
            f"({', '.join(block)})" if all(block) else "", f"({', '.join(grid)})" if all(grid) else "")


def _launch(act: Action, index: int, needed: frozenset[str], units: dict[str, str] | None,
            seen: _Seen) -> KernelLaunch:
    """The KernelLaunch of one action; `units` (the byte reader's): metrics.yaml rep_units, else act.units.

    `seen` caches which values are numbers or text and their units by the action's shape or names and value
    types (the launches of one kernel repeat them; with the byte reader's units, which depend on the name only),
    and the launch's place and shape by their raw values.
    """
    values = act.values
    if units is None:
        numeric, texts, unit = _layout(act, needed, None)
    else:
        key = act.shape if act.shape is not None else (tuple(values), tuple(map(type, values.values())))
        got = seen.layouts.get(key)
        if got is None:
            got = seen.layouts[key] = _layout(act, needed, units)
        numeric, texts, unit = got
    get = values.__getitem__
    metrics = dict(zip(numeric, map(float, map(get, numeric)), strict=True))
    text = dict(zip(texts, map(str, map(get, texts)), strict=True))
    unit = dict(unit)
    raw = tuple(map(values.get, _ATTRS))
    place = seen.places.get(raw)
    if place is None:
        place = seen.places[raw] = _place(raw)
    pid, ctx, stream, device, cc, block_size, grid_size = place
    return KernelLaunch(
        launch_id=index,
        name=act.demangled,
        function=act.function or function_name(act.demangled),
        mangled=act.name or None,
        process_id=pid,
        context=ctx,
        stream=stream,
        device=device,
        cc=cc,
        block_size=block_size,
        grid_size=grid_size,
        metrics=metrics,
        units=unit,
        text=text,
        rules=act.rules,
    )


PROGRESS_MIN_KERNELS = 20  # smaller reports load in well under a second: no progress lines


def progress_steps(total: int, parts: int = 10) -> set[int]:
    """The counts (1-based) after which progress is reported: about every tenth, and the last; none when small."""
    if total < PROGRESS_MIN_KERNELS:
        return set()
    step = -(-total // parts)
    return {*range(step, total, step), total}


REP_READERS = ("auto", "ncu_report")


def read_rep(path: Path, progress: Progress | None = None, reader: str = "auto",
             digest: FileHash | None = None, rules: bool = True) -> Capture:
    """Read every kernel action of a .ncu-rep[.gz] into a Capture (base units, full precision).

    `reader` "auto" reads the report's bytes directly (wire) and hands it to ncu_report when their layout
    is one it does not know; "ncu_report" always uses NVIDIA's module. Both give the same Capture.
    `progress` gets "NAME: k/N kernels read" about every tenth of a report of 20 kernels or more.
    `digest`: the file's hash, already started by the caller (FileHash(path)), who also collects it: the
    Capture's sha256 is left "" for the caller to set from digest.result() once it has used the parse time
    (the importer does after the derivation). Without it the hash starts here, beside the parse, and is set.
    `rules` False: ncu's rule results (guided analysis) are not read, and every launch's rules stay empty; the
    importer asks for none, as ncu_kernels.json holds none (a raw CSV export has none either).
    """
    if reader not in REP_READERS:
        raise InputError(f"report reader {reader!r}: expected one of {', '.join(REP_READERS)}.")
    sha = digest if digest is not None and digest.path == path else FileHash(path)
    own = sha is not digest
    try:
        return _read_rep(path, progress, reader, sha, own, rules)
    finally:
        if own:
            sha.close()  # no read of the file outlives the read (the caller may rewrite it next)


def _read_rep(path: Path, progress: Progress | None, reader: str, sha: FileHash, own: bool,
              rules: bool) -> Capture:
    with _report_bytes(path, sha.data()) as (data, plain):
        if data[:4] != MAGIC:
            raise InputError(
                f"report '{path}': not an Nsight Compute report (first bytes {data[:4]!r}, expected {MAGIC!r}). "
                f"Pass the file written by `ncu -o NAME` (NAME.ncu-rep), or an ncu CSV export."
            )
        wanted = _wanted()
        needed = frozenset(load_catalog().needed())
        launches: list[KernelLaunch] | None = None
        sections: set[str] = set()
        seen = _Seen()
        handed: str | None = None
        if reader == "auto":
            try:
                report = wire.read_report(data, wanted, rules=rules)
                _check_names(path, report.actions)
                units = load_catalog().rep_units
                launches = [_launch(a, i, needed, units, seen) for i, a in enumerate(report.actions)]
                sections = {s for a in report.actions for s in a.sections}
                version, cmdline = _session_facts(report.sessions)
            except Truncated as cut:
                raise _truncated(path, len(data), cut) from None
            except Damaged as exc:
                raise _damaged(path, len(data), exc) from None
            except UnknownLayout as exc:
                launches, handed = None, str(exc)
                if progress is not None:
                    progress(f"{path.name}: layout not known to the byte reader ({exc}); reading with ncu_report")
            if launches is not None and progress is not None:  # read in well under a second: the lines at once
                for k in sorted(progress_steps(len(launches))):
                    progress(f"{path.name}: {k}/{len(launches)} kernels read")
        else:
            _check_framing(path, data)
        if launches is None:
            version, cmdline = _session_facts([data])  # the first matches in the mapped file, as ncu_report reads it
            actions = _read_ncu_report(path, plain, wanted, progress, rules, handed)
            _check_names(path, actions)
            launches = [_launch(a, i, needed, None, seen) for i, a in enumerate(actions)]
            sections = {s for a in actions for s in a.sections}
    if not launches:
        raise InputError(
            f"report '{path}': holds no profiled kernel ({path.stat().st_size} bytes): the file is truncated, "
            f"was copied while ncu was still writing it, or the capture matched no kernel. Re-copy the "
            f"report after ncu prints '==PROF== Report:', or re-capture with a --kernel-name that matches."
        )
    gpu = next((k.text.get(load_catalog().text["gpu"]) for k in launches if k.text), None)
    return Capture(
        source_path=str(path),
        source_format="ncu-rep",
        sha256=sha.result() if own else "",
        ncu_version=version,
        gpu=gpu,
        section_set=infer_section_set(sorted(sections), cmdline, ncu_version=version),
        sections=sorted(sections),
        launches=launches,
        command_line=cmdline,
    )


_HASHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfreport-sha")
_HASH_CHUNK = 128 << 20


def _sha256_mapped(mm: mmap.mmap | None) -> str:
    """SHA-256 of a mapped file (None: an empty one), updated 128 MB at a time, each piece's pages mapped first.

    Each update frees the GIL for its whole piece, so the hash (C) runs beside the parse (pure Python); it also maps
    the file's pages for the parse, which reads the same mapping (FileHash). Not into a buffer: zeroing one holds the
    GIL and the read copies (docs/ncu_rep.md). The mapping must not outlive the import (FileHash.close).
    """
    h = hashlib.sha256()
    if mm is None:
        return h.hexdigest()
    view = memoryview(mm)
    try:
        for at in range(0, len(mm), _HASH_CHUNK):
            piece = view[at : at + _HASH_CHUNK]
            _map_pages(piece)
            h.update(piece)
            piece.release()
    finally:
        view.release()
    return h.hexdigest()


def _map_pages(piece: memoryview) -> None:
    """Touch one byte of every page of a piece of the mapping (one numpy reduction: the GIL is free meanwhile), so
    the kernel maps them here, on the hash's core, before the parse reads them; the parse would otherwise spend that
    time faulting them in as it walks (the hash then reads mapped pages)."""
    pages = np.frombuffer(piece, dtype=np.uint8)[:: mmap.PAGESIZE]
    pages.max()
    del pages


def _unmap(mm: mmap.mmap) -> None:
    with suppress(BufferError):  # a view is still referenced (an error's traceback): the GC unmaps it
        mm.close()


def _lease(fd: int) -> bool:
    """Take a read lease on the open report (Linux): while it is held, another process's (or thread's) truncate or
    open for writing waits, up to /proc/sys/fs/lease-break-time (45 s by default), instead of cutting the file
    under the mapping, which would end this process (SIGBUS). False where none is granted: not the file's owner,
    a file system without leases, the file open for writing somewhere (still being written), another OS."""
    setlease = getattr(fcntl, "F_SETLEASE", None)
    if setlease is None:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)  # the notice of a waiting writer: ignored (SIGIO would kill)
        fcntl.fcntl(fd, setlease, fcntl.F_RDLCK)
    except OSError:
        return False
    return True


class _Shrunk(Exception):
    """The file ended before the size it had when it was opened."""

    def __init__(self, size: int, got: int) -> None:
        super().__init__(f"shrank from {size:,} to {got:,} bytes")
        self.size, self.got = size, got


def _load_private(fd: int, size: int) -> mmap.mmap:
    """The file's bytes read into memory of this process's own (an anonymous mapping: zeroed by the kernel as the
    read fills it, the GIL free), which nothing done to the file can take away. Raises _Shrunk when it ends early."""
    buf = mmap.mmap(-1, size)
    view = memoryview(buf)
    got = 0
    try:
        while got < size:
            n = os.preadv(fd, [view[got : got + _HASH_CHUNK]], got)
            if n == 0:
                raise _Shrunk(size, got)
            got += n
    except BaseException:
        view.release()
        _unmap(buf)
        raise
    view.release()
    return buf


def _load_and_hash(fd: int, size: int, loaded: Future[mmap.mmap | None]) -> str:
    try:
        buf = _load_private(fd, size)
    except BaseException as exc:
        loaded.set_exception(exc)
        raise
    loaded.set_result(buf)
    return _sha256_mapped(buf)


class FileHash:
    """A file's SHA-256 computed on a second core, started as early as the caller knows the file, and its bytes.

    The file is leased (_lease) and mapped here, once: the hash reads the mapping and, for a plain report, the parse
    reads the same one (`data`; _report_bytes), so each page is mapped into the process once, mostly by the hash,
    which starts first, on the other core (first-touch page mapping is a cost the size of the parse), and unmapped
    once, also on the hash's core. The lease keeps the file whole while it is read. Where no lease is granted the
    file is read into memory of our own on the hash's core first (slower: the copy), so that a file cut short by
    another process is an error (it ends before its size), never SIGBUS.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None  # held open until close: a lease lasts as long as its descriptor
        self._loaded: Future[mmap.mmap | None] = Future()
        self._future: Future[str] = Future()
        try:
            self._fd = os.open(path, os.O_RDONLY)
            size = os.fstat(self._fd).st_size
            leased = bool(size) and _lease(self._fd)
            if leased:
                self._loaded.set_result(mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ))
        except OSError as exc:
            for future in (self._loaded, self._future):
                if not future.done():
                    future.set_exception(exc)
            return
        if not size:
            self._loaded.set_result(None)
        if self._loaded.done():
            self._future = _HASHER.submit(_sha256_mapped, self._loaded.result())
        else:
            self._future = _HASHER.submit(_load_and_hash, self._fd, size, self._loaded)

    def data(self) -> mmap.mmap | None:
        """The file's bytes for the parse (its mapping, or our copy of it); None for an empty file."""
        return self._wait(self._loaded)

    def result(self) -> str:
        return self._wait(self._future)

    def _wait(self, future: Future[Any]) -> Any:
        try:
            return future.result()
        except _Shrunk as exc:
            raise InputError(
                f"report '{self.path}': {exc} while it was read: another process is writing or cutting it (ncu "
                f"still writing it, or a copy still running). Import it once it is whole (ncu printed "
                f"'==PROF== Report:' and the copy ended)."
            ) from None
        except OSError as exc:
            raise InputError(f"report '{self.path}': cannot read it ({exc.strerror or exc}).") from exc

    def close(self) -> None:
        """Drop it: cancelled if not started, else waited for, so no read of the file outlives the caller; the
        bytes are then unmapped on the hash's thread (nothing reads them any more) and the lease let go."""
        if not self._future.cancel():
            with suppress(Exception):
                self._future.result()
        if self._loaded.done() and not self._loaded.exception():
            mapped = self._loaded.result()
            if mapped is not None:
                _HASHER.submit(_unmap, mapped)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def _report_bytes(path: Path, shared: mmap.mmap | None = None) -> Iterator[tuple[ReportBytes, Path]]:
    """The report's bytes, mapped (not copied), and the plain file they come from (a .gz is first streamed into
    a temporary file of ours: a multi-GB report is never held in memory). `shared`: the plain report's bytes from
    its FileHash (FileHash.data), read as they are (its FileHash unmaps them)."""
    if shared is not None and path.suffix != ".gz":
        yield shared, path
        return
    with _plain_report(path) as plain:
        try:
            fh = plain.open("rb")
        except OSError as exc:
            raise InputError(f"report '{path}': cannot read it ({exc.strerror or exc}).") from exc
        with fh:
            size = os.fstat(fh.fileno()).st_size
            raw: ReportBytes = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            try:
                yield raw, plain
            finally:
                if isinstance(raw, mmap.mmap):
                    _unmap(raw)


def _check_framing(path: Path, data: ReportBytes) -> None:
    """Refuse a cut or damaged report before ncu_report reads it, with the byte reader's words: its protobuf code
    aborts the process on some such files, or reads them as holding fewer kernels. The framing is checked only in
    a file format version the byte reader knows (wire.frame); ncu_report reads the others as they are."""
    try:
        wire.frame(data, frozenset())
    except Truncated as cut:
        raise _truncated(path, len(data), cut) from None
    except Damaged as exc:
        raise _damaged(path, len(data), exc) from None
    except UnknownLayout:
        pass


def _damaged(path: Path, size: int, exc: Damaged) -> InputError:
    return InputError(
        f"report '{path}': damaged ({size} bytes): {exc}: its framing (the sizes and headers that say where each "
        f"kernel lies) does not add up, so no reader can trust what it holds. Copy the report again from where "
        f"ncu wrote it (after ncu printed '==PROF== Report:'), or capture again."
    )


def _check_names(path: Path, actions: Sequence[Action]) -> None:
    """Refuse a kernel name past MAX_NAME_CHARS: the bytes are no name, and a name cut to fit could merge two
    kernels into one row."""
    for i, act in enumerate(actions):
        longest = max(len(act.name), len(act.function), len(act.demangled))
        if longest > MAX_NAME_CHARS:
            raise InputError(
                f"report '{path}': kernel #{i} has a name of {longest:,} characters (at most {MAX_NAME_CHARS:,} "
                f"are read): no compiler writes such a name, so the file is damaged. Copy the report again from "
                f"where ncu wrote it, or capture again."
            )


def _truncated(path: Path, size: int, cut: Truncated) -> InputError:
    where = f"an entry at byte {cut.offset} needs {cut.needed} bytes, the file ends at {size}"
    if cut.results == 0:
        return InputError(
            f"report '{path}': holds no profiled kernel ({size} bytes): the file is truncated or damaged ({where}). "
            f"Re-copy the report after ncu prints '==PROF== Report:'."
        )
    return InputError(
        f"report '{path}': truncated or damaged ({size} bytes): kernel #{cut.results} is cut off ({where}); "
        f"{cut.results} whole kernel(s) before it. Copy the report again after ncu prints '==PROF== Report:'."
    )


def _read_ncu_report(path: Path, plain: Path, wanted: frozenset[str], progress: Progress | None,
                     rules: bool = True, handed: str | None = None) -> list[Action]:
    """Every action through NVIDIA's ncu_report (the authority the byte reader is held equal to), read in a child
    process (rep.child: a crash inside it is an InputError); `plain`: the report as ncu wrote it (`path` itself,
    or its gunzipped copy); `handed`: why the byte reader left it to ncu_report."""
    from perfreport.ncu.rep.child import read_kernels

    steps: set[int] = set()

    def read(k: int, total: int) -> None:
        if k == 1:
            steps.update(progress_steps(total))
        if progress is not None and k in steps:
            progress(f"{path.name}: {k}/{total} kernels read")

    return [Action(name, function, demangled, values, units, [Rule(*r) for r in found], sections)
            for name, function, demangled, values, units, found, sections
            in read_kernels(path, plain, wanted, rules, read, handed)]
