"""Release a process started under `ncu --mode launch`: attach once with a filter that matches no kernel, detach.

Such a process blocks at its first CUDA call until the first attach (H200 attach fact 1), so a server started
that way never becomes ready by itself. Releasing it is one attach session that profiles nothing: wait for
`==PROF== Connected to process`, hold briefly so the target passes its first CUDA call, then SIGINT our own ncu,
which detaches and leaves the target running (fact 2). Later captures attach again (fact 3).

`graph_profiling="graph"` releases with `--graph-profiling graph`: a process whose attaches were all graph-mode
keeps replaying CUDA graphs near full speed, while its first node-mode attach (ncu's default, needed to profile a
kernel inside a graph) makes every graph-replayed kernel slow for the rest of its life. The default stays node
mode, because a node-mode attach after a graph-mode release can wedge a graph-replaying process (it then refuses
every later attach). Graph mode is for a server that must serve fast between release and capture and whose
captures are graph-mode or of eager kernels. The measurements are in docs/capture.md ("What a process under ncu costs").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.capture.run_record import Step, cleanup_entry, iso
from perfreport.capture.session import NcuSession
from perfreport.errors import PerfReportError

NO_KERNEL = "regex:^perfreport_release_matches_no_kernel$"


@dataclass
class ReleaseResult:
    """The release attach: target pid, every attempt as a step, the signals sent, the log."""

    pid: int | None
    steps: list[Step] = field(default_factory=list)
    cleanup: list[dict[str, object]] = field(default_factory=list)
    log_path: Path | None = None
    connected_at: float | None = None
    released_at: float | None = None


BASE_PORT = 49152  # ncu's default --port: the first launched process listens there, the next on 49153, ...


def release_argv(ncu: str, hostname: str = "127.0.0.1", port: int | None = None,
                 graph_profiling: str = "node", exact_port: bool = False) -> list[str]:
    """The attach argv that connects to a launched process and profiles nothing.

    ncu tries the ports from `--port` up (64 of them) and attaches the first process that answers, which may be one
    released before. `exact_port` narrows that to `--max-connections 2` (port and port + 1; `release_launched`
    then accepts only a session on `port`). Not 1: ncu 2025.3.1 with `--max-connections 1` finds no process even
    on a port a launched process listens on (H200, tests/data/h200_capture/ports_probe.log).
    """
    argv = [ncu, "--mode", "attach", "--hostname", hostname]
    if port is not None:
        argv += ["--port", str(port)]
    if exact_port:
        argv += ["--max-connections", "2"]
    if graph_profiling != "node":
        argv += ["--graph-profiling", graph_profiling]
    return [*argv, "--kernel-name", NO_KERNEL, "--launch-count", "1"]


def release_launched(
    ncu: str,
    log_path: Path,
    hostname: str = "127.0.0.1",
    port: int | None = None,
    attempts: int = 30,
    retry_s: float = 2.0,
    connect_timeout_s: float = 60.0,
    hold_s: float = 2.0,
    progress: Callable[[str], None] | None = None,
    graph_profiling: str = "node",
    exact_port: bool = False,
) -> ReleaseResult:
    """Attach (retrying while no process is attachable yet), hold hold_s, SIGINT our ncu; raise if never connected."""
    say = progress or (lambda _msg: None)
    argv = release_argv(ncu, hostname, port, graph_profiling, exact_port)
    result = ReleaseResult(pid=None, log_path=log_path)
    for attempt in range(1, attempts + 1):
        session = NcuSession(argv, log_path)
        step = Step(f"release-attach-{attempt}", argv, None, iso(time.time()), None)
        result.steps.append(step)
        try:
            session.start()
        except OSError as exc:
            step.error, step.ended_at = f"{type(exc).__name__}: {exc}", iso(time.time())
            raise PerfReportError(f"capture release: cannot start {ncu!r}: {exc}. Pass --ncu PATH.") from exc
        connected = session.wait_until(lambda: session.first("connected") is not None,  # noqa: B023
                                       connect_timeout_s)
        if connected and exact_port and (answered := attached_port(session)) != port:
            say(f"release: port {answered} answered, not {port} (its process has not reached CUDA yet); retrying")
            connected = False
        if connected:
            event = session.first("connected")
            assert event is not None
            result.pid, result.connected_at = event.pid, event.t
            say(f"release: connected to process {event.pid}; detaching in {hold_s:g} s")
            session.wait_until(lambda: False, hold_s)
        step.rc = session.stop(grace_s=60.0)
        step.ended_at = iso(time.time())
        result.cleanup.extend(cleanup_entry(s.step, s.argv, s.ok) for s in session.signals)
        if connected:
            result.released_at = time.time()
            say(f"release: ncu exited rc={step.rc}; the target runs on")
            return result
        say(f"release: attempt {attempt}/{attempts}: nothing to attach to yet (rc={step.rc}); retrying")
        time.sleep(retry_s)
    tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:] if log_path.is_file() else ""
    raise PerfReportError(f"capture release: no process started under `ncu --mode launch` answered on {hostname} "
                          f"after {attempts} attempts. Check that it printed 'Waiting for profiler to attach' and "
                          f"that nothing else is attached. Last ncu output:\n{tail}")


def attached_port(session: NcuSession) -> int | None:
    """The port of `==PROF== Attaching to process 'EXE' (PID) on port N.`, if ncu printed it."""
    event = session.first("attaching")
    found = re.search(r" on port (\d+)", event.text) if event is not None else None
    return int(found.group(1)) if found else None


def release_workers(ncu: str, log_path: Path, workers: int, hostname: str = "127.0.0.1", port: int | None = None,
                    progress: Callable[[str], None] | None = None, **options: Any) -> list[ReleaseResult]:
    """Release `workers` launched processes, one per port from `port` (default 49152) up, each port exactly.

    A server with one CUDA process per GPU (vLLM with tensor parallelism: an API process without CUDA, then one
    worker per GPU) has one listening process per port from 49152 up. A plain repeated release attaches the
    lowest port again, an already released worker, and never reaches the next (H200 release and ports probes,
    docs/capture.md), so each port is released on its own (`exact_port`); a session that lands on the next port
    instead is detached and retried. `log_path` gets a `.portN` infix per port; `options` go to
    `release_launched` (attempts, retry_s, hold_s, graph_profiling, ...).
    """
    if workers < 1:
        raise PerfReportError(f"capture release: --workers {workers}: expected 1 or more (the target's CUDA "
                              f"processes: one per GPU worker).")
    base = BASE_PORT if port is None else port
    results = []
    for p in range(base, base + workers):
        log = log_path.with_name(f"{log_path.stem}.port{p}{log_path.suffix}")
        if progress is not None:
            progress(f"release: port {p} ({p - base + 1} of {workers})")
        results.append(release_launched(ncu, log, hostname=hostname, port=p, exact_port=True, progress=progress,
                                        **options))
    return results
