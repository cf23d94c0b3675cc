"""Name why an ncu capture failed or came back empty, from ncu's console output or its report, with the fix.

Every rule (rules.py) matches a line ncu (or CUPTI under it) really prints; the logs they were written against are
tests/data/h200_capture, h200_shared, h200_oracle (ncu 2025.3.1 on an H200) and tests/data/capture_logs (public
wording, sources in its README). Reports (.ncu-rep) are read by report.diagnose_report. Standard library only at module
level: this runs on the GPU machine.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from perfreport.capture.diagnose.kernels import available_names, listed_message
from perfreport.capture.diagnose.rules import APP_CODE, RULES, SECONDARY, SIMPLE

# Stable output order: configuration mistakes first, then environment, then workload, then outcomes.
CODES = (
    "attach-option-removed", "launch-mode-option", "injection-slot-taken", "counter-permission",
    "dcgm-profiling-conflict", "cupti-version-skew", "env-wrapper", "no-attachable-process",
    "nondeterministic-replay", "oom", "target-exit-code", "no-kernels-profiled",
    "report-unreadable", "unknown-error", "report-not-written", "capture-incomplete", "no-ncu-output", "ok",
)
# code -> (what ncu printed, what it means, the fix): the short form of each message, one per CODES entry
# (docs/capture.md renders it).
CODE_HELP: dict[str, tuple[str, str, str]] = {
    "attach-option-removed": ("`unrecognised option '--attach'`", "ncu no longer has `--attach <PID>`",
                              "start the target under `ncu --mode launch`, then `ncu --mode attach --hostname ...`"),
    "launch-mode-option": ("`Invalid option --clock-control specified for --mode launch`",
                           "`ncu --mode launch` rejected a profiling option",
                           "move that option to the `ncu --mode attach` command"),
    "injection-slot-taken": ("`Another tool/injection might be loaded since CUDA_INJECTION64_PATH is set`",
                             "another injection library holds the target's one CUDA injection slot",
                             "unset CUDA_INJECTION64_PATH for the capture"),
    "counter-permission": ("`ERR_NVGPUCTRPERM`, `RmProfilingAdminOnly: 1`",
                           "the driver restricts the GPU performance counters to admin users",
                           "run ncu as root or with CAP_SYS_ADMIN, or set NVreg_RestrictProfilingToAdminUsers=0"),
    "dcgm-profiling-conflict": ("`Profiling failed because a driver resource was unavailable. Ensure that no other "
                                "tool (like DCGM) is concurrently collecting profiling data.`",
                                "DCGM (dcgm-exporter, the GPU Operator) holds the node's profiling counters",
                                "`dcgmi profile --pause` before the capture and `--resume` after, or keep "
                                "dcgm-exporter's profiling (DCGM_FI_PROF_*) metrics off that node meanwhile"),
    "cupti-version-skew": ("`CUPTI_ERROR_INVALID_DEVICE`, a CUPTI/Runtime/Driver version mismatch, `Cuda driver is "
                           "not compatible with Nsight Compute`",
                           "ncu/CUPTI and the driver come from different CUDA major versions",
                           "use an ncu whose CUDA major matches the driver's, or upgrade the driver"),
    "env-wrapper": ("`Profiling kernels launched by child processes requires the --target-processes all option`",
                    "the kernels ran in a child of the profiled process (an `env` or shell wrapper after `--`)",
                    "set variables on ncu's own process, or pass `--target-processes all`"),
    "no-attachable-process": ("`No attachable process found`",
                              "no process started under `ncu --mode launch` there, or one still held by another "
                              "attach", "start the target under `ncu --mode launch`; check --hostname and --port; "
                                        "stop a previous attach with SIGINT"),
    "nondeterministic-replay": ("`Unexpected number of profiled kernels`",
                                "application replay saw a different set of kernels in a later pass",
                                "use kernel replay, or the single-op harness"),
    "oom": ("`Failed to profile ...` + target shut down, `out of memory`",
            "the capture ran out of GPU memory (replay saves and restores what a kernel writes)",
            "capture `--set basic` first, lower --gpu-memory-utilization, or use a replica with headroom"),
    "target-exit-code": ("`The application returned an error code (N).`, no other cause",
                         "the profiled application itself failed with exit status N; ncu's options are not the cause",
                         "read the application's own output (stderr); 128+N means killed by signal N"),
    "no-kernels-profiled": ("`No kernels were profiled.` (+ `Available Kernels:`), or a report with none",
                            "ncu finished without profiling a kernel",
                            "a `--kernel-name regex:...` of the few listed names closest to the pattern used (or "
                            "none is close); check --launch-skip, --launch-count and --kernel-name-base"),
    "report-unreadable": ("(a report)", "the report is truncated or damaged",
                          "copy it again after `==PROF== Report:`, or capture again"),
    "unknown-error": ("any other `==ERROR==` line", "ncu reported an error no rule recognises",
                      "read ncu's full output; narrow down with `--set basic` and one --kernel-name"),
    "report-not-written": ("`==PROF== Profiling ... - N passes`, no `==PROF== Report:`, no printed results",
                           "ncu profiled kernels but never wrote the report",
                           "stop ncu with SIGINT, not SIGKILL; keep the target alive until `==PROF== Report:`; "
                           "check that the -o folder is writable and has space"),
    "capture-incomplete": ("`==PROF==` lines, no profiled kernel, no report, no error",
                           "the target exited or hung, or ncu was stopped early",
                           "check the target's output and --launch-skip; let ncu reach `==PROF== Report:`"),
    "no-ncu-output": ("no `==PROF==`, `==WARNING==` or `==ERROR==` line", "the text is not ncu's console output",
                      "pass the file holding ncu's stdout and stderr"),
    "ok": ("`==PROF== Profiling ...` passes and `==PROF== Report:`, or a report with kernels",
           "ncu profiled at least one kernel", "nothing to fix"),
}
MAX_EVIDENCE = 5

_NCU_LINE = re.compile(r"^==(PROF|WARNING|ERROR)==")
_RC = re.compile(r"^rc=(-?\d+)\s*$")
_FINISHED = re.compile(r'^==PROF== Profiling "(?P<name>[^"]*)".*(?:- \d+ pass(?:es)?|Application replay pass 1)\s*$')
_REPORT = re.compile(r"^==PROF== Report: (?P<path>.+?)\s*$")
_CSV_HEADER = re.compile(r'^"ID","Process ID",')
_CSV_ROW = re.compile(r'^"(\d+)","')
# ncu's per-kernel results printed to the console (no -o): `  KERNEL (g)x(b), Context 1, Stream 7, Device 0, CC 9.0`
_PRINTED = re.compile(r", Context \d+, Stream \d+, Device \d+, CC \d+\.\d+\s*$|^\s+Section: ")
_KERNEL_OPT = re.compile(r"""(?:^|\s)(?:--kernel-name|-k)(?:=|\s+)(['"]?)(?P<pat>[^\s'"]+)\1""")
# H200, ncu 2025.3.1 (tests/data/h200_capture/graph_server_probe/, overhead3/, launch_cost/).
GRAPH_WEDGE = ("On the H200 with ncu 2025.3.1, in 6 of 10 CUDA-graph processes released graph-mode the first "
               "node-mode attach connected, saw no kernel while the target went on replaying at full speed, and "
               "every later attach then failed with `No attachable process found` (the targets later exited "
               "with code 11); after a node-mode release, 0 of 6 failed.")


@dataclass(frozen=True)
class Diagnosis:
    """One cause of a failed or empty capture: a stable code, what happened plus the fix, and the proving lines."""

    code: str
    message: str
    evidence: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Log:
    """ncu's console output split into lines, with the ==ERROR== lines a rule has explained."""

    lines: list[str]
    rc: int | None = None
    claimed: set[int] = field(default_factory=set)

    @classmethod
    def parse(cls, text: str) -> _Log:
        """Split text into lines and read the trailing `rc=N` the capture scripts append."""
        lines = [line.rstrip() for line in text.splitlines()]
        codes = [int(m.group(1)) for line in lines if (m := _RC.match(line))]
        return cls(lines, codes[-1] if codes else None)

    def grep(self, key: str, claim: bool = True) -> list[tuple[int, re.Match[str]]]:
        """Every line matching rule `key`; claimed so unknown-error does not report it again."""
        hits = [(i, m) for i, line in enumerate(self.lines) if (m := RULES[key].search(line))]
        if claim:
            self.claimed.update(i for i, _ in hits)
        return hits

    def make(self, code: str, message: str, rows: Iterable[int], **details: Any) -> Diagnosis:
        """Build a Diagnosis quoting the lines at `rows`, with the exit status when the log records one."""
        if self.rc is not None:
            details["exit_status"] = self.rc
        app = [int(m.group(1)) for line in self.lines if (m := APP_CODE.match(line))]
        if app:
            details["application_exit_code"] = app[-1]
        evidence = tuple(dict.fromkeys(self.lines[i] for i in sorted(rows)))[:MAX_EVIDENCE]
        return Diagnosis(code, message, evidence, details)


def _rows(hits: list[tuple[int, re.Match[str]]]) -> list[int]:
    """The line numbers of grep hits."""
    return [i for i, _ in hits]


def _simple(log: _Log) -> list[Diagnosis]:
    """The rules whose first matching line is the whole story."""
    found = []
    for code, key, template in SIMPLE:
        if hits := log.grep(key):
            groups = hits[0][1].groupdict()
            found.append(log.make(code, template.format(line=log.lines[hits[0][0]], **groups), _rows(hits), **groups))
    return found


def _skew(log: _Log) -> Diagnosis | None:
    hits = log.grep("skew")
    versions = [(i, m) for i, m in log.grep("versions") if int(m["runtime"]) // 1000 != int(m["driver"]) // 1000]
    if not hits and not versions:
        return None
    details: dict[str, Any] = {}
    if versions:
        m = versions[0][1]
        details = {k: int(m.group(k)) for k in ("cupti", "runtime", "driver")}
    first = log.lines[(versions or hits)[0][0]]
    return log.make("cupti-version-skew", (
        f"ncu/CUPTI and the GPU driver come from different CUDA major versions: `{first}`. A CUDA 12.x toolkit's "
        f"ncu or CUPTI cannot profile on a 13.x driver (CUPTI_ERROR_INVALID_DEVICE, 0 kernels), and a newer ncu "
        f"refuses an older driver. Use an ncu whose CUDA major matches the driver's (`nvidia-smi` shows the "
        f"driver's CUDA version; ncu 2025.3 or newer ships with CUDA 13), e.g. a CUDA-13 image, or upgrade the "
        f"driver."), _rows(versions + hits), **details)


def _dcgm(log: _Log) -> Diagnosis | None:
    """DCGM's profiling (DCP) metrics hold the counters ncu needs; the `Failed to profile` lines that follow are
    its consequence, not a lack of memory (public wording: tests/data/capture_logs/README.md)."""
    hits = log.grep("dcgm")
    if not hits:
        return None
    failed = log.grep("failed")
    details: dict[str, Any] = {"kernel": failed[0][1].group("name")} if failed else {}
    return log.make("dcgm-profiling-conflict", (
        f"ncu could not get the GPU's profiling counters: `{log.lines[hits[0][0]]}`. Another client holds them: on "
        f"a Kubernetes GPU node that is DCGM (nv-hostengine, run by dcgm-exporter or the GPU Operator) collecting "
        f"its profiling metrics (DCGM_FI_PROF_*), and the counters serve one client at a time. The capture must "
        f"not run while DCGM collects profiling counters on that node: pause them for the capture with "
        f"`dcgmi profile --pause` (against the node's host engine, `--host ADDRESS` if it runs elsewhere) before "
        f"it and `dcgmi profile --resume` after; or drop the DCGM_FI_PROF_* fields from dcgm-exporter's metrics "
        f"CSV (the GPU Operator's dcgmExporter.config ConfigMap / DCGM_EXPORTER_COLLECTORS); or keep "
        f"dcgm-exporter off the node meanwhile (`kubectl label node NODE --overwrite "
        f"nvidia.com/gpu.deploy.dcgm-exporter=false nvidia.com/gpu.deploy.dcgm=false`, `=true` after; deleting its "
        f"pod is not enough, the DaemonSet recreates it). Then capture again."), _rows(hits + failed), **details)


def _oom(log: _Log, dcgm: bool) -> Diagnosis | None:
    # under a DCGM conflict a `Failed to profile` line is that conflict's, not a sign of full memory
    failed, oom = ([] if dcgm else log.grep("failed")), log.grep("oom")
    if not failed and not oom:
        return None
    shutdown = log.grep("shutdown", claim=False)
    details: dict[str, Any] = {"target_shutdown": bool(shutdown)}
    if failed:
        details["kernel"] = failed[0][1].group("name")
    what = "and ncu shut the target down" if shutdown else "during the capture"
    return log.make("oom", (
        f"the capture ran out of GPU memory {what}: `{log.lines[(failed or oom)[0][0]]}`. Kernel replay saves and "
        f"restores the memory a kernel writes between passes (more passes with --set full), which fails when the "
        f"process holds nearly all GPU memory. Capture `--set basic` first, lower --gpu-memory-utilization on the "
        f"profiled replica (e.g. 0.80) or use a replica with headroom; `--replay-mode application` avoids the "
        f"save-and-restore but re-runs the whole target per pass, so use it only with acknowledgement."),
        _rows(failed + oom + shutdown), **details)


_EXPLAINS_EMPTY = {"env-wrapper", "counter-permission", "cupti-version-skew", "injection-slot-taken"}


def diagnose_text(text: str, kernel_pattern: str | None = None) -> list[Diagnosis]:
    """Name every cause of a failed or empty capture in ncu's console output; [ok] for a good capture."""
    log = _Log.parse(text)
    found = [d for d in _simple(log) if d.code != "env-wrapper" or _child_warning_means_wrapper(log)]
    dcgm = _dcgm(log)
    found += [d for d in (dcgm, _skew(log), _oom(log, dcgm is not None)) if d is not None]
    if not found and not _unclaimed_errors(log):  # beside any ncu error the target's exit code only echoes it
        found += _target_exit(log)
    found += _unknown(log, bool(found))
    found += _empty(log, {d.code for d in found}, kernel_pattern or _pattern_from_log(log))
    return sorted(found or [_outcome(log)], key=lambda d: CODES.index(d.code))


def _child_warning_means_wrapper(log: _Log) -> bool:
    """ncu 2025.3.1 prints the child-process warning after every empty attach session and after any empty
    application-only run (tests/data/h200_capture/overhead2/release_probe.log, launch_cost/launch_cost_graph.log):
    it points at a wrapper only when the profiled process launched no kernel at all (no `Available Kernels:`
    list follows) and ncu launched that process itself (no `Finding attachable processes` line)."""
    return not any(line.strip() == "Available Kernels:" or "Finding attachable processes" in line
                   for line in log.lines)


# exit status -> what it says about the target, beside "the application's own exit status" (128+N: signal N)
_EXIT_NOTES = {
    1: "1 is the usual status of an uncaught exception (Python prints its traceback on stderr)",
    9: "9 here is the status the application returned; a process killed by SIGKILL (the kernel's OOM killer, a "
       "container memory limit, `kill -9`) shows as 137 (128+9) through a shell or as `OOMKilled` in `kubectl "
       "describe pod`, so check those (and `dmesg | grep -i oom`) before reading 9 as a kill",
}


def _target_exit(log: _Log) -> list[Diagnosis]:
    """`The application returned an error code (N)` with no ncu failure beside it: the target's own failure."""
    hits = log.grep("app-code")
    if not hits:
        return []
    code = int(hits[-1][1].group(1))
    note = _EXIT_NOTES.get(code)
    if note is None and 128 < code < 128 + 65:
        sig = code - 128
        name = next((s.name for s in signal.Signals if s.value == sig), f"signal {sig}")
        note = f"{code} is 128+{sig}: the process was killed by {name} (137, SIGKILL, is what an OOM kill leaves)"
    shown = f" {note}." if note else ""
    if any(i < hits[-1][0] for i, _ in log.grep("shutdown", claim=False)):
        shown += (" ncu printed `Trying to shutdown target application` before it, so ncu may have ended the target "
                  "itself: read the ncu lines above that one.")
    return [log.make("target-exit-code", (
        f"the profiled application itself failed, with exit code {code}: `{log.lines[hits[-1][0]]}`. ncu passes on "
        f"the target's own exit status; ncu's options are not the cause (an option ncu rejects stops ncu with its "
        f"own `==ERROR==` line before the target starts).{shown} Read the application's own output (its stderr, "
        f"above this line) for why it failed, fix that or run it once without ncu, then capture again."),
        _rows(hits))]


def _unclaimed_errors(log: _Log, explained: bool = True) -> list[int]:
    """==ERROR== lines no rule explained (those only echoing another failure left out once one is explained)."""
    return [i for i, line in enumerate(log.lines)
            if line.startswith("==ERROR==") and i not in log.claimed and not (explained and SECONDARY.match(line))]


def _unknown(log: _Log, explained: bool) -> list[Diagnosis]:
    rest = _unclaimed_errors(log, explained)
    if not rest:
        return []
    more = f" (and {len(rest) - 1} more ==ERROR== line(s))" if len(rest) > 1 else ""
    return [log.make("unknown-error", (
        f"ncu reported an error this tool does not recognise: `{log.lines[rest[0]]}`{more}. Read ncu's full "
        f"output; for an option error check `ncu --help` of this ncu version, otherwise capture again with "
        f"`--set basic` and one `--kernel-name` to narrow it down."), rest)]


def _empty(log: _Log, found: set[str], pattern: str | None) -> list[Diagnosis]:
    hits = log.grep("empty", claim=False)
    if not hits:
        return []
    names = available_names(log.lines, hits[-1][0])
    if not names and found & _EXPLAINS_EMPTY:
        return []
    line = log.lines[hits[-1][0]]
    connected = [(i, m) for i, m in log.grep("connected", claim=False) if i < hits[-1][0]]
    if not names and connected:
        used = f"--kernel-name {pattern}" if pattern else "the kernel filter"
        return [log.make("no-kernels-profiled", (
            f"ncu attached (`{log.lines[connected[-1][0]]}`) and ended without profiling a kernel: `{line}`, and "
            f"listed no available kernel. Either the process was idle during the session (keep requests flowing "
            f"until the capture ends, or attach for longer); or it launched only kernels inside CUDA graphs, which "
            f"ncu 2025.3.1 does not list, and {used} matched none of them (check the pattern against a capture of "
            f"the same engine, e.g. `-c 1` without a filter); or it replays CUDA graphs and an earlier attach on it "
            f"was graph-mode (`--graph-profiling graph`, e.g. `capture release --graph-profiling graph`). "
            f"{GRAPH_WEDGE} For that last case restart the target under `ncu --mode launch` and release it "
            f"node-mode (the default of `capture release`)."),
            _rows(connected[-1:] + hits[-1:]), available_kernels=[], pattern_used=pattern, attached=True)]
    if not names:
        return [log.make("no-kernels-profiled", (
            f"ncu finished without profiling a kernel: `{line}`, and listed no available kernel: the process "
            f"launched none that ncu saw. Check that the workload reaches the GPU before it exits, that "
            f"`--profile-from-start off` is paired with cudaProfilerStart(), and that the kernels do not run in a "
            f"child process (`--target-processes all`)."), _rows(hits), available_kernels=[], pattern_used=pattern)]
    message, details = listed_message(line, names, pattern)
    return [log.make("no-kernels-profiled", message, _rows(hits), **details)]


def _pattern_from_log(log: _Log) -> str | None:
    """The --kernel-name/-k pattern of an ncu command line echoed into the log, if any."""
    for line in log.lines:
        if "ncu" in line.lower() and not _NCU_LINE.match(line) and (m := _KERNEL_OPT.search(line)):
            return m.group("pat")
    return None


def _outcome(log: _Log) -> Diagnosis:
    """No cause found: ok when a kernel finished profiling, else say how far ncu got."""
    finished = [(i, m) for i, line in enumerate(log.lines) if (m := _FINISHED.match(line))]
    reports = [(i, m) for i, line in enumerate(log.lines) if (m := _REPORT.match(line))]
    names = [m.group("name") for _, m in finished] or _csv_kernels(log)
    if finished and not reports and not any(_PRINTED.search(line) for line in log.lines):
        return _not_written(log, finished)
    if names and (reports or not log.rc):
        report = reports[-1][1].group("path") if reports else None
        wrote = f" and wrote `{log.lines[reports[-1][0]]}`" if reports else ""
        return log.make("ok", f"ncu profiled {len(names)} kernel(s){wrote}; nothing to fix.",
                        _rows(finished[:MAX_EVIDENCE - 1] + reports[-1:]), kernels_profiled=len(names), kernels=names,
                        report=report)
    first = next((i for i, line in enumerate(log.lines) if _NCU_LINE.match(line)), None)
    if first is not None:
        return log.make("capture-incomplete", (
            f"ncu started (`{log.lines[first]}`) but no kernel finished profiling and no report was written, and "
            f"ncu printed no error: the target exited or hung, or ncu was stopped early. Check the target's own "
            f"output, that --launch-skip does not skip past the run, that an attach found its target (started "
            f"under `ncu --mode launch`), and let the capture run until ncu prints `==PROF== Report:`."),
            [first], kernels_profiled=len(names))
    return log.make("no-ncu-output", (
        "the text holds no ncu line (`==PROF==`, `==WARNING==` or `==ERROR==`): it is not ncu's console output, "
        "or ncu never started. Pass the file that holds ncu's stdout and stderr (`ncu ... > capture.log 2>&1`)."), [])


def _not_written(log: _Log, finished: list[tuple[int, re.Match[str]]]) -> Diagnosis:
    """Kernels finished profiling, yet ncu never said `==PROF== Report:` and printed no results instead."""
    rc = log.rc
    killed = " (ncu itself died of SIGKILL)" if rc in (137, -9) else ""
    status = f" and exited with status {rc}{killed}" if rc is not None else ""
    last = log.lines[finished[-1][0]]
    return log.make("report-not-written", (
        f"ncu profiled {len(finished)} kernel(s) (last: `{last}`) but never printed `==PROF== Report: <path>`"
        f"{status}: the report was never written. ncu writes it when the target ends or when it is interrupted; "
        f"it was killed before that (SIGKILL, an OOM kill, a `timeout -s KILL` or a pod's deadline), or the "
        f"target was killed before ncu could write it, or the -o/--export path is not writable (a missing or "
        f"read-only folder, no space left). Stop ncu with SIGINT and wait for `==PROF== Report:` (`capture run` "
        f"does), keep the target alive until then, check that the -o folder exists, is writable and has space, "
        f"then capture again."), _rows(finished[-1:]), kernels_profiled=len(finished),
        kernels=[m.group("name") for _, m in finished], report=None)


def _csv_kernels(log: _Log) -> list[str]:
    """Kernel IDs of an ncu CSV printed to the console (`--csv --page raw` prints no Profiling lines)."""
    start = next((i for i, line in enumerate(log.lines) if _CSV_HEADER.match(line)), len(log.lines))
    ids = (m.group(1) for line in log.lines[start + 1:] if (m := _CSV_ROW.match(line)))
    return [f"ID {i}" for i in dict.fromkeys(ids)]
