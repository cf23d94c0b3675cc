"""One ncu process that we started: its merged output streamed to a log, its ==PROF== events, and its stop.

Facts from ncu 2025.3.1 on the H200 (tests/data/h200_shared/README.md) that shape this:
- an attach session does not end after --launch-count kernels; it ends when the target exits or when the
  attaching ncu gets SIGINT, which writes the report, leaves the target running and ends by that signal
  (Popen returncode -2; a shell shows 130: overhead4/capture_overhead.json.gz);
- ncu prints one `==PROF== Profiling "NAME"...` line per profiled kernel, completed (`... - N passes`) when that
  kernel's replay is over, so counting completed lines counts profiled kernels.
Signals go to our own ncu only: SIGINT to its pid, then SIGTERM to its pid, then SIGKILL to the process group we
created for it (start_new_session), which never holds an attach target.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

_TAG = re.compile(r"^==(PROF|WARNING|ERROR)== ?(.*)$")
# `Profiling "K": ...` with a --kernel-name filter; `Profiling "K" - 3 (4/50): ...` without one (the profile index,
# then the nth of --launch-count; tests/data/h200_capture/overhead4/, attach_count/, graph_server_probe/).
_PROFILING = re.compile(r'^Profiling "(?P<name>[^"]*)"(?: - (?P<index>\d+)(?: \((?P<nth>\d+)/(?P<of>\d+)\))?)?: ')
_CONNECTED = re.compile(r"^Connected to process (?P<pid>\d+)(?: \((?P<exe>.*)\))?")
_DISCONNECTED = re.compile(r"^Disconnected from process (?P<pid>\d+)")
_REPORT = re.compile(r"^Report: (?P<path>.+?)\s*$")


@dataclass(frozen=True)
class ProfEvent:
    """One ncu status line: kind (connected, profiling, report, ...), text, wall-clock time seen, details."""

    kind: str
    text: str
    t: float
    name: str | None = None
    pid: int | None = None
    path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict without empty fields."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


def parse_line(line: str, t: float = 0.0) -> ProfEvent | None:
    """Classify one line of ncu output; None for the target's own output and blank lines."""
    m = _TAG.match(line.rstrip("\r\n"))
    if not m:
        return None
    tag, body = m.group(1), m.group(2)
    if tag == "ERROR":
        return ProfEvent("error", body, t)
    if tag == "WARNING":
        kind = "no-kernels" if body.startswith("No kernels were profiled") else "warning"
        return ProfEvent(kind, body, t)
    if p := _PROFILING.match(body):
        done = "100%" in body  # a line cut short (ncu died mid-replay) lacks it
        return ProfEvent("profiling" if done else "profiling-started", body, t, name=p.group("name"))
    if c := _CONNECTED.match(body):
        return ProfEvent("connected", body, t, pid=int(c.group("pid")), name=c.group("exe"))
    if d := _DISCONNECTED.match(body):
        return ProfEvent("disconnected", body, t, pid=int(d.group("pid")))
    if r := _REPORT.match(body):
        return ProfEvent("report", body, t, path=r.group("path"))
    for prefix, kind in (("Waiting for profiler to attach", "waiting"), ("Trying to shutdown", "shutdown"),
                         ("Finding attachable processes", "finding"), ("Attaching to process", "attaching")):
        if body.startswith(prefix):
            return ProfEvent(kind, body, t)
    return ProfEvent("prof", body, t)


@dataclass
class Signal:
    """A signal we sent to our ncu: which, to what pid or group, when, and whether delivery worked."""

    step: str
    argv: list[str]
    t: float
    ok: bool
    error: str | None = None


@dataclass
class NcuSession:
    """Start argv (never through a shell), tee its merged stdout/stderr to log_path, parse ==PROF== lines."""

    argv: Sequence[str]
    log_path: Path
    on_event: Callable[[ProfEvent], None] | None = None
    env: dict[str, str] | None = None  # set on top of this process's environment (ncu's own variables)
    events: list[ProfEvent] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    started_at: float | None = None
    ended_at: float | None = None
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self._cv = threading.Condition()
        self._reader: threading.Thread | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> NcuSession:
        """Launch the process; raises OSError (e.g. FileNotFoundError) if it cannot be started."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.started_at = time.time()
        try:
            self.proc = subprocess.Popen(list(self.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=None if self.env is None else {**os.environ, **self.env})
        except OSError:
            self._log.close()
            raise
        self._reader = threading.Thread(target=self._read, name="ncu-log", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self._log is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self._log.write(raw)
            self._log.flush()
            event = parse_line(raw.decode("utf-8", "replace"), time.time())
            if event is None:
                continue
            with self._cv:
                self.events.append(event)
                self._cv.notify_all()
            if self.on_event is not None:
                self.on_event(event)
        self.proc.stdout.close()
        with self._cv:
            self._cv.notify_all()

    # -- state -------------------------------------------------------------------------------------------------
    def count(self, kind: str) -> int:
        """Number of events of one kind seen so far."""
        with self._cv:
            return sum(1 for e in self.events if e.kind == kind)

    def first(self, kind: str) -> ProfEvent | None:
        """The first event of a kind, or None."""
        with self._cv:
            return next((e for e in self.events if e.kind == kind), None)

    def last(self, kind: str) -> ProfEvent | None:
        """The last event of a kind, or None."""
        with self._cv:
            return next((e for e in reversed(self.events) if e.kind == kind), None)

    def running(self) -> bool:
        """True while the process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Block until predicate() is true (True), or the process ended or timeout_s passed (False)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if not self.running():
                    break
                self._cv.wait(min(left, 0.2))
            else:
                return True
        if self._reader is not None:  # exited: let the reader drain the pipe before the last look
            self._reader.join(10)
        with self._cv:
            return predicate()

    def wait_profiled(self, count: int, timeout_s: float) -> bool:
        """Wait for `count` completed `Profiling` lines."""
        return self.wait_until(lambda: sum(1 for e in self.events if e.kind == "profiling") >= count, timeout_s)

    # -- stopping ----------------------------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Send SIGINT to our ncu's process group (it writes the report, detaches and ends by the signal: rc -2).

        The group, not the pid: /usr/local/cuda/bin/ncu is a shell script that runs the real ncu as its child
        without exec: a SIGINT to the script alone never reaches ncu, and a SIGTERM after it orphans the real ncu,
        still attached, leaving the target slow and refusing later attaches (docs/capture.md). start_new_session
        made our ncu the leader of a group holding only the wrapper and ncu (in attach mode the target is not in it).
        """
        self._signal("sigint-ncu", signal.SIGINT, group=True)

    def stop(self, grace_s: float = 120.0, interrupt: bool = True) -> int | None:
        """SIGINT (unless already sent), wait grace_s; then SIGTERM, 10 s; then SIGKILL our group. Return rc."""
        if self.proc is None:
            return None
        if interrupt and self.running() and not any(s.step == "sigint-ncu" for s in self.signals):
            self.interrupt()
        for step, sig, group, wait_s in (("wait", None, False, grace_s),
                                         ("sigterm-ncu-group", signal.SIGTERM, True, 10.0),
                                         ("sigkill-ncu-group", signal.SIGKILL, True, 10.0)):
            if sig is not None and self.running():
                self._signal(step, sig, group)
            try:
                self.proc.wait(wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        return self.finish()

    def wait(self, timeout_s: float) -> int | None:
        """Wait for the process to exit by itself; None if it is still running after timeout_s."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return self.finish()

    def finish(self) -> int | None:
        """Join the log reader and close the log (idempotent); return the exit code."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            return None
        if self._reader is not None:
            self._reader.join(10)
        if self._log is not None and not self._log.closed:
            self._log.close()
        if self.ended_at is None:
            self.ended_at = time.time()
        return rc

    def _signal(self, step: str, sig: signal.Signals, group: bool) -> None:
        assert self.proc is not None
        pid = self.proc.pid
        argv = ["kill", f"-{sig.name.removeprefix('SIG')}", f"-{pid}" if group else str(pid)]
        try:
            if group:
                os.killpg(pid, sig)  # start_new_session made pid the group id: only our ncu and its children
            else:
                self.proc.send_signal(sig)
            self.signals.append(Signal(step, argv, time.time(), True))
        except (ProcessLookupError, PermissionError) as exc:
            self.signals.append(Signal(step, argv, time.time(), False, str(exc)))
