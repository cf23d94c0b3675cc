"""Issue 18, part A: the .ncu-rep reader and `capture diagnose` never abort, and tell the truth about damaged files.

Every case mutates a real H200 report from tests/data (attach_basic: 2 kernels, 192,223 bytes; range_replay: a
range-replay result the byte reader leaves to ncu_report). Where a process could die (ncu_report's protobuf CHECK
is SIGABRT, a file cut under a mapping is SIGBUS) the real CLI runs in a subprocess, so a regression fails the test
instead of killing pytest. Each refusal: exit 2, one message naming the file and the problem, no traceback, and the
cell's ncu_kernels.json byte-identical to before.
"""

from __future__ import annotations

import gzip
import os
import shlex
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.capture.diagnose.path import diagnose_path
from perfreport.errors import PerfReportError
from perfreport.ncu.rep import reader as rep
from perfreport.ncu.rep.walk import blocks, entries, file_header

ROOT = Path(__file__).resolve().parents[1]
SMALL_GZ = ROOT / "tests/data/h200_shared/attach_basic.ncu-rep.gz"
SMALL = gzip.decompress(SMALL_GZ.read_bytes())
RANGE_GZ = ROOT / "tests/data/h200_rep_layouts/range_replay.ncu-rep.gz"
GOOD_CELL_SOURCE = ROOT / "tests/data/h200_oracle/oracle_basic.ncu-rep.gz"
BLOCKS = list(blocks(SMALL, file_header(SMALL)[1]))  # blocks at bytes 10, 145, 24898, ..., 138399 (the 2nd kernel)


def _cli(*args: str, env: dict[str, str] | None = None, script: str = "") -> tuple[int, str]:
    """`perftunereport ARGS` in a child process (an abort ends it, not pytest); `script`: Python run first in it."""
    code = (f"{textwrap.dedent(script)}\nimport sys\nfrom perfreport.cli.main import main\n"
            f"sys.argv = ['perftunereport', *{list(args)!r}]\nmain()\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, **(env or {})}, timeout=300)
    return run.returncode, run.stdout + run.stderr


@pytest.fixture()
def cell(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A campaign whose cell c1 holds a good import: (campaign, its ncu_kernels.json, that file's bytes)."""
    camp = write_config(tmp_path / "camp")
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(GOOD_CELL_SOURCE), ok=True)
    target = camp / "cells/c1/ncu_kernels.json"
    return camp, target, target.read_bytes()


def _refused(cell: tuple[Path, Path, bytes], report: Path, *needles: str, reader: str = "auto",
             script: str = "") -> str:
    camp, target, before = cell
    code, out = _cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(report),
                     "--rep-reader", reader, script=script)
    assert code == 2, out
    assert "Traceback" not in out and f"report '{report}'" in out, out
    for needle in needles:
        assert needle in out, out
    assert target.read_bytes() == before
    return out


def _u32(data: bytes, at: int, delta: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<I", out, at, (struct.unpack_from("<I", out, at)[0] + delta) % (1 << 32))
    return bytes(out)


# --- 2. sizes that do not add up: refused with the byte reader's words, never handed to ncu_report (which aborts)

FIRST_ENTRY = entries(SMALL, BLOCKS[2])[0][0] - 4  # the u32 size of the first kernel's entry


@pytest.mark.parametrize(("at", "delta", "said"), [
    (BLOCKS[1].at, 1, "block header ends at byte 294, its size says 197"),
    (BLOCKS[2].at, -1, "block header ends at byte 51899, its size says 51898"),
    (FIRST_ENTRY, 1, "block payload ends at byte 105673, its header says 105672"),  # ncu_report: SIGABRT
    (FIRST_ENTRY, -1, "block payload ends at byte 105671, its header says 105672"),
    (entries(SMALL, BLOCKS[1])[0][0] - 4, 100_000, "block payload ends at byte 124898, its header says 24898"),
], ids=["block-size+1", "block-size-1", "entry-size+1", "entry-size-1", "entry-size+100000"])
@pytest.mark.parametrize("reader", ["auto", "ncu_report"])
def test_a_report_whose_sizes_do_not_add_up_is_refused_with_where(cell: tuple[Path, Path, bytes], tmp_path: Path,
                                                                  at: int, delta: int, said: str,
                                                                  reader: str) -> None:
    bad = tmp_path / "flipped.ncu-rep"
    bad.write_bytes(_u32(SMALL, at, delta))
    _refused(cell, bad, "damaged (192223 bytes)", said, "does not add up", "Copy the report again", reader=reader)


@pytest.mark.parametrize(("cut", "said"), [
    (10, "holds no profiled kernel (10 bytes): the file is truncated or damaged (an entry at byte 10 needs 4"),
    (9, "holds no profiled kernel (9 bytes)"),
    (1_000, "(an entry at byte 196 needs 24698 bytes, the file ends at 1000)"),
    (BLOCKS[-1].at + 2, "kernel #1 is cut off (an entry at byte 138399 needs 4 bytes"),
    (len(SMALL) - 1, "kernel #1 is cut off (an entry at byte 138450 needs 53769 bytes, the file ends at 192222)"),
])
@pytest.mark.parametrize("reader", ["auto", "ncu_report"])
def test_a_cut_report_is_refused_with_the_byte_offset(cell: tuple[Path, Path, bytes], tmp_path: Path, cut: int,
                                                      said: str, reader: str) -> None:
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(SMALL[:cut])
    _refused(cell, bad, "truncated or damaged", said, reader=reader)


def _range_report_that_crashes_ncu_report(tmp_path: Path) -> Path:
    """range_replay with its range result's u32 size grown by 100: a layout the byte reader leaves to ncu_report,
    whose protobuf code then fails `Check failed: count >= 0` (SIGABRT, exit 134 in process)."""
    data = gzip.decompress(RANGE_GZ.read_bytes())
    block = next(b for b in blocks(data, file_header(data)[1]) if b.other is not None)
    bad = tmp_path / "range_replay.ncu-rep"
    bad.write_bytes(_u32(data, block.payload[0], 100))
    return bad


@pytest.mark.parametrize("reader", ["auto", "ncu_report"])
def test_a_crash_inside_ncu_report_is_a_clear_error(cell: tuple[Path, Path, bytes], tmp_path: Path,
                                                    reader: str) -> None:
    bad = _range_report_that_crashes_ncu_report(tmp_path)
    out = _refused(cell, bad, "ncu_report crashed reading it (killed by SIGABRT",
                   "Check failed: count >= 0 (-100 vs. 0)", "The file is damaged", reader=reader)
    if reader == "auto":  # the byte reader's own diagnosis is kept
        assert "the byte reader left it to ncu_report: block header field 7 = 1 (range or graph results" in out


# --- 2. a report cut by another process while it is read: never SIGBUS

_SHRINK_WHILE_LEASED = """
import fcntl, os, threading, time
from perfreport.ncu.rep import reader
opened = reader.FileHash.__init__
def init(self, path):
    opened(self, path)  # the report is open, leased and mapped: now another thread cuts it to 10 bytes
    cutter = threading.Thread(target=os.truncate, args=(path, 10), daemon=True)
    cutter.start()
    while fcntl.fcntl(self._fd, fcntl.F_GETLEASE) != fcntl.F_UNLCK:  # the cut waits on the lease
        time.sleep(0.01)
    assert os.stat(path).st_size > 10
reader.FileHash.__init__ = init
"""


def test_a_report_cut_while_it_is_read_waits_for_the_read(cell: tuple[Path, Path, bytes], tmp_path: Path) -> None:
    """The lease holds the cut back until the import let go of the file: the import reads the report whole."""
    camp, target, _ = cell
    report = tmp_path / "attach_basic.ncu-rep"
    report.write_bytes(SMALL)
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(report), ok=True)
    whole = target.read_bytes()
    code, out = _cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(report),
                     script=_SHRINK_WHILE_LEASED)
    assert code == 0 and "Traceback" not in out, out
    assert target.read_bytes() == whole and report.stat().st_size == 10  # read whole, cut after


_SHRINK_UNLEASED = """
import os
from perfreport.ncu.rep import reader
path = os.environ["CUT_REPORT"]
writer = os.open(path, os.O_WRONLY)  # held open for writing (a copy still running): no lease is granted
load = reader._load_private
def cut_then_load(fd, size):
    os.ftruncate(writer, 10)  # cut between the open and the read
    return load(fd, size)
reader._load_private = cut_then_load
"""


def test_a_report_cut_while_it_is_read_without_a_lease_is_an_error(cell: tuple[Path, Path, bytes],
                                                                   tmp_path: Path) -> None:
    camp, target, before = cell
    report = tmp_path / "attach_basic.ncu-rep"
    report.write_bytes(SMALL)
    code, out = _cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(report),
                     env={"CUT_REPORT": str(report)}, script=_SHRINK_UNLEASED)
    assert code == 2 and "Traceback" not in out, out
    assert f"report '{report}': shrank from 192,223 to 10 bytes while it was read" in out
    assert "another process is writing or cutting it" in out
    assert target.read_bytes() == before


# --- 14. gzip expansion, kernel-name length, the quoted --kernel-name suggestion, a 10-byte cut in diagnose

def _bomb(tmp_path: Path, name: str, head: bytes, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real file with 8 MiB of zeros after it, gzipped (about 8 KB more): past a 1 MiB floor at 100x."""
    import perfreport.files

    monkeypatch.setattr(perfreport.files, "GUNZIP_FLOOR", 1 << 20)
    path = tmp_path / name
    path.write_bytes(gzip.compress(head + bytes(8 << 20)))
    return path


def test_a_gzip_bomb_is_refused_before_it_expands(cell: tuple[Path, Path, bytes], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    camp, target, before = cell
    bomb = _bomb(tmp_path, "bomb.ncu-rep.gz", SMALL, monkeypatch)
    size = bomb.stat().st_size
    res = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(bomb), ok=False)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"report '{bomb}': expands past {100 * size:,} bytes from {size:,} compressed" in res.output
    assert "gunzip it yourself" in res.output
    assert target.read_bytes() == before
    for path in (bomb, _bomb(tmp_path, "capture.log.gz", (ROOT / "tests/data/h200_oracle/empty.log").read_bytes(),
                             monkeypatch)):
        res = run_cli("capture", "diagnose", str(path), ok=False)
        assert res.exit_code == 2 and "Traceback" not in res.output and f"'{path}': expands past" in res.output


def test_a_kernel_name_past_the_bound_is_refused(cell: tuple[Path, Path, bytes], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The real names are 46 characters; with the bound at 40 the first is refused, by either reader."""
    camp, target, before = cell
    monkeypatch.setattr(rep, "MAX_NAME_CHARS", 40)
    for reader in ("auto", "ncu_report"):
        res = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(SMALL_GZ),
                      "--rep-reader", reader, ok=False)
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert f"report '{SMALL_GZ}': kernel #0 has a name of 46 characters (at most 40 are read)" in res.output
        assert target.read_bytes() == before
    monkeypatch.undo()
    assert len(rep.read_rep(SMALL_GZ).launches) == 2  # at the real bound it is read


def test_the_suggested_kernel_name_can_be_pasted_into_a_shell() -> None:
    found = diagnose_path(ROOT / "tests/data/h200_capture/empty_pattern.log", "regex:kernel$")  # both names hold it
    suggested = found[0].details["suggested_patterns"]
    assert suggested == ["regex:reduce_kernel", "regex:vectorized_elementwise_kernel"]
    offered = found[0].message.split("Capture again with ")[1].split(";")[0]
    commands = [c.strip("`") for c in offered.split(" or ")]
    assert commands == [f"--kernel-name {shlex.quote(p)}" for p in suggested]
    assert [shlex.split(c) for c in commands] == [["--kernel-name", p] for p in suggested]


@pytest.mark.parametrize(("cut", "said", "whole"), [
    (10, "it ends inside a record (10 bytes): the record at byte 10 needs 4 bytes; 0 whole kernel(s)", 0),
    (9, "it ends inside a record (9 bytes): the record at byte 8 needs 2 bytes", 0),
    (BLOCKS[-1].at + 20, "the record at byte 138,399 needs 47 bytes; 1 whole kernel(s) before it", 1),
])
def test_diagnose_says_a_cut_report_is_truncated_and_where(tmp_path: Path, cut: int, said: str, whole: int) -> None:
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(SMALL[:cut])
    code, out = _cli("capture", "diagnose", str(bad), "--json")
    assert code == 1 and "Traceback" not in out, out  # 1: something other than `ok` was found
    assert '"code": "report-unreadable"' in out and said in out and f'"kernels_readable": {whole}' in out, out
    assert "complete" not in out


def test_diagnose_says_where_a_damaged_report_stops_and_survives_an_ncu_report_crash(tmp_path: Path) -> None:
    bad = tmp_path / "flipped.ncu-rep"
    bad.write_bytes(_u32(SMALL, FIRST_ENTRY, 1))  # ncu_report: SIGABRT
    code, out = _cli("capture", "diagnose", str(bad))
    assert code == 1 and "Traceback" not in out, out
    assert f"report-unreadable: report '{bad}' cannot be used: its framing does not add up: block payload ends " \
           f"at byte 105673, its header says 105672" in out
    crash = _range_report_that_crashes_ncu_report(tmp_path)
    code, out = _cli("capture", "diagnose", str(crash))
    assert code == 1 and "Traceback" not in out, out
    assert "report-unreadable" in out and "ncu_report crashed reading it (killed by SIGABRT" in out


# --- the importer under random damage: a Capture or one PerfReportError, nothing else

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_reports_give_a_capture_or_one_clear_error(tmp_path_factory: pytest.TempPathFactory,
                                                           data: st.DataObject) -> None:
    """Bytes flipped, u32 sizes shifted, the file cut: read_rep returns a Capture or raises a PerfReportError.
    ncu_report, where the byte reader hands over, runs in a child process (rep.child): it cannot end pytest."""
    raw = bytearray(SMALL)
    sizes = [b.at for b in BLOCKS] + [s - 4 for b in BLOCKS for s, _ in entries(SMALL, b)]
    for _ in range(data.draw(st.integers(0, 3))):
        raw = bytearray(_u32(bytes(raw), data.draw(st.sampled_from(sizes)), data.draw(st.integers(-300, 300))))
    for _ in range(data.draw(st.integers(0, 6))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path_factory.mktemp("fuzz") / "r.ncu-rep"
    path.write_bytes(bytes(raw))
    try:
        got = rep.read_rep(path, rules=data.draw(st.booleans()))
    except PerfReportError as exc:
        assert str(path) in exc.message
    else:
        assert got.launches
