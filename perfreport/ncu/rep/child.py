"""Read a report through NVIDIA's ncu_report in a child process, so that a crash inside it is an error, not the end.

ncu_report's protobuf code aborts the process on some damaged reports (a CHECK failure: SIGABRT, no Python
exception), and a report cut short under its mapping is SIGBUS. Run in a child, either ends the child only: the
parent says which signal and the last line ncu_report printed. The child sends back plain values (pickled, on its
own copy of stdout; ncu_report's own output goes to stderr): each kernel's names, the wanted metric values and
units, rule results and section identifiers, and a line per kernel read for the caller's progress.

Standard library only at module level: `capture diagnose` (on the GPU machine) reads kernel names through it.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from perfreport.errors import InputError
from perfreport.ncu.model import speedup_text
from perfreport.ncu.rep.rules import SPEEDUP_TYPES

# What a child sends, one pickled tuple each: ("total", N), ("read", k), then ("done", kernels) or ("refused", why).
# A kernel: names (mangled, function, demangled), values, units, rules (section, rule, type, text, speedup type and
# value), sections.
Kernel = tuple[str, str, str, dict[str, Any], dict[str, str], list[tuple[str, str, str, str, str, str]], list[str]]
_TAIL_LINES = 3  # of the child's stderr, quoted when it dies: a CHECK failure prints its reason there


def read_kernels(path: Path, plain: Path, wanted: frozenset[str], rules: bool,
                 on_read: Callable[[int, int], None] | None = None, handed: str | None = None) -> list[Kernel]:
    """Every profiled kernel of the report `plain` (`path` as the user named it) as ncu_report reads it, read in a
    child process: (mangled, function, demangled name, values of `wanted`, their units, rule results unless `rules`
    is False, section identifiers). `on_read(k, total)` after each kernel. Raises InputError when ncu_report
    cannot load it, a kernel has no name, or the child dies (the signal, ncu_report's last words, and `handed`:
    why the byte reader left the report to ncu_report)."""
    job = {"plain": str(plain), "wanted": sorted(wanted), "rules": rules, "names_only": False}
    return _run(path, job, on_read, handed)


def kernel_names(path: Path, plain: Path) -> list[str]:
    """The function name of every profiled kernel of `plain` ("" where a kernel holds none), read by ncu_report
    in a child process; raises InputError as read_kernels does, except for a kernel without a name."""
    return [k[1] for k in _run(path, {"plain": str(plain), "wanted": [], "rules": False, "names_only": True}, None)]


def _run(path: Path, job: dict[str, Any], on_read: Callable[[int, int], None] | None,
         handed: str | None = None) -> list[Kernel]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # where `perfreport` is importable from, installed or not
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "perfreport.ncu.rep.child"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=env)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            with proc.stdin:
                pickle.dump(job, proc.stdin)
            outcome = _listen(proc.stdout, on_read)
            code = proc.wait()
        finally:
            if proc.poll() is None:  # interrupted while it reads: it goes too
                proc.kill()
                proc.wait()
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
    if outcome is not None and outcome[0] == "done" and code == 0:
        kernels: list[Kernel] = outcome[1]
        return kernels
    if outcome is not None and outcome[0] == "refused":
        raise InputError(f"report '{path}': {outcome[1]}")
    left = f"; the byte reader left it to ncu_report: {handed}" if handed else ""
    raise InputError(f"report '{path}': ncu_report crashed reading it ({_how(code)}{_last_words(said)}){left}. The "
                     f"file is damaged (ncu_report's protobuf code stops the process on such bytes). Copy the report "
                     f"again from where ncu wrote it (after ncu printed '==PROF== Report:'), or capture again.")


def _listen(out: IO[bytes], on_read: Callable[[int, int], None] | None) -> tuple[Any, ...] | None:
    """Relay the child's progress; its last message, or None when it died before sending one."""
    total = 0
    while True:
        try:
            msg = pickle.load(out)
        except (EOFError, pickle.UnpicklingError, ValueError, TypeError):
            return None
        if msg[0] == "total":
            total = msg[1]
        elif msg[0] == "read":
            if on_read is not None:
                on_read(msg[1], total)
        else:
            return tuple(msg)


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


_NOISE = ("WARNING: All log messages before absl::InitializeLog()", "*** Check failure stack trace")
_LOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ ")  # absl's severity, date, time and thread id


def _last_words(stderr: str) -> str:
    lines = [_LOG_PREFIX.sub("", line.strip()) for line in stderr.splitlines()
             if line.strip() and not line.strip().startswith(_NOISE)]
    return f"; it said: {' / '.join(lines[-_TAIL_LINES:])}" if lines else ""


def _serve(job: dict[str, Any], send: Callable[[tuple[Any, ...]], None]) -> None:
    """The child's side: read the report with ncu_report and send what read_kernels returns."""
    try:
        import ncu_report
    except ImportError:
        send(("refused", "reading it needs NVIDIA's `ncu_report` module, which is not installed; run "
                         "`pip install ncu-report`."))
        return
    try:
        ctx = ncu_report.load_report(job["plain"])
    except Exception as exc:  # ncu_report raises plain RuntimeError/FileNotFoundError
        send(("refused", f"ncu_report could not load it: {exc}. The file is not a whole report: copy it again "
                         f"after ncu printed '==PROF== Report:', or capture again."))
        return
    ranges = [ctx.range_by_idx(r) for r in range(ctx.num_ranges())]
    send(("total", sum(rng.num_actions() for rng in ranges)))
    kernels: list[Kernel] = []
    for rng in ranges:
        for i in range(rng.num_actions()):
            act = rng.action_by_idx(i)
            if job["names_only"]:
                kernels.append(("", act.name(ncu_report.IAction.NameBase_FUNCTION) or "", "", {}, {}, [], []))
            elif not act.name(ncu_report.IAction.NameBase_DEMANGLED):
                send(("refused", f"kernel #{len(kernels)} has no name: the file is truncated or damaged "
                                 f"({os.stat(job['plain']).st_size} bytes). Copy the report again after ncu "
                                 f"prints '==PROF== Report:'."))
                return
            else:
                kernels.append(_kernel(ncu_report, act, job["wanted"], job["rules"]))
            send(("read", len(kernels)))
    send(("done", kernels))


def _speedup(estimate: Any) -> tuple[str, str]:
    """ncu_report's speedup_estimation ({'type': 1 local | 2 global, 'speedup': %}) as (type, text)."""
    if not isinstance(estimate, dict) or "speedup" not in estimate:
        return "", ""
    kind = estimate.get("type")
    name = SPEEDUP_TYPES.get(kind, str(kind)) if isinstance(kind, int) else str(kind)
    return name, speedup_text(float(estimate["speedup"]))


def _kernel(ncu_report: Any, act: Any, wanted: list[str], rules: bool) -> Kernel:
    """One action: its names, the typed values of the wanted metrics and their units, rules, sections."""
    values: dict[str, Any] = {}
    units: dict[str, str] = {}
    for name in wanted:
        m = act.metric_by_name(name)
        if m is None or not m.has_value() or m.value() is None:
            continue
        values[name] = m.value()
        units[name] = m.unit()
    found = [
        (str(r.get("section_identifier", "")), str(r.get("rule_identifier", "")),
         str((r.get("rule_message") or {}).get("type", "")), str((r.get("rule_message") or {}).get("message", "")),
         *_speedup(r.get("speedup_estimation")))
        for r in (act.rule_results_as_dicts() if rules else [])
    ]
    return (act.name(ncu_report.IAction.NameBase_MANGLED) or "", act.name(ncu_report.IAction.NameBase_FUNCTION) or "",
            act.name(ncu_report.IAction.NameBase_DEMANGLED) or "", values, units, found,
            [s.identifier() for s in act.sections()])


def main() -> None:
    """Child entry point: a pickled job on stdin; messages on a copy of stdout, fd 1 itself pointed at stderr so
    that nothing ncu_report prints can break them."""
    job = pickle.load(sys.stdin.buffer)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)

    def send(msg: tuple[Any, ...]) -> None:
        pickle.dump(msg, out)
        out.flush()

    _serve(job, send)
    out.close()


if __name__ == "__main__":
    main()
