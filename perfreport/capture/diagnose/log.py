"""Name why an ncu capture failed or came back empty, from ncu's console output or its report, with the fix.

Every rule below matches a line ncu (or CUPTI under it) really prints; the logs they were written against are
tests/data/h200_capture, h200_shared, h200_oracle (ncu 2025.3.1 on an H200) and tests/data/capture_logs (public
wording, sources in its README). Reports (.ncu-rep) are read by report.diagnose_report. Standard library only at module
level: this runs on the GPU machine.
"""

from __future__ import annotations

import difflib
import itertools
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Stable output order: configuration mistakes first, then environment, then workload, then outcomes.
CODES = (
    "attach-option-removed", "launch-mode-option", "injection-slot-taken", "counter-permission",
    "cupti-version-skew", "env-wrapper", "no-attachable-process", "nondeterministic-replay", "oom",
    "no-kernels-profiled",
    "report-unreadable", "unknown-error", "capture-incomplete", "no-ncu-output", "ok",
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
    "no-kernels-profiled": ("`No kernels were profiled.` (+ `Available Kernels:`), or a report with none",
                            "ncu finished without profiling a kernel",
                            "the suggested `--kernel-name regex:...` from the available names; check --launch-skip, "
                            "--launch-count and --kernel-name-base"),
    "report-unreadable": ("(a report)", "the report is truncated or damaged",
                          "copy it again after `==PROF== Report:`, or capture again"),
    "unknown-error": ("any other `==ERROR==` line", "ncu reported an error no rule recognises",
                      "read ncu's full output; narrow down with `--set basic` and one --kernel-name"),
    "capture-incomplete": ("`==PROF==` lines, no profiled kernel, no report, no error",
                           "the target exited or hung, or ncu was stopped early",
                           "check the target's output and --launch-skip; let ncu reach `==PROF== Report:`"),
    "no-ncu-output": ("no `==PROF==`, `==WARNING==` or `==ERROR==` line", "the text is not ncu's console output",
                      "pass the file holding ncu's stdout and stderr"),
    "ok": ("`==PROF== Profiling ...` passes and `==PROF== Report:`, or a report with kernels",
           "ncu profiled at least one kernel", "nothing to fix"),
}
MAX_EVIDENCE = 5
MAX_LISTED = 10

_NCU_LINE = re.compile(r"^==(PROF|WARNING|ERROR)==")
_RC = re.compile(r"^rc=(-?\d+)\s*$")
_FINISHED = re.compile(r'^==PROF== Profiling "(?P<name>[^"]*)".*(?:- \d+ pass(?:es)?|Application replay pass 1)\s*$')
_REPORT = re.compile(r"^==PROF== Report: (?P<path>.+?)\s*$")
_CSV_HEADER = re.compile(r'^"ID","Process ID",')
_CSV_ROW = re.compile(r'^"(\d+)","')
_AVAILABLE = re.compile(r"^\s*\d+\.\s+(?P<name>\S.*?)\s*$")
_KERNEL_OPT = re.compile(r"""(?:^|\s)(?:--kernel-name|-k)(?:=|\s+)(['"]?)(?P<pat>[^\s'"]+)\1""")
_APP_CODE = re.compile(r"^==ERROR== The application returned an error code \((-?\d+)\)")
# ==ERROR== lines that only echo another failure (the target's exit code, a header before the real line).
_SECONDARY = re.compile(r"^==ERROR== (?:The application returned an error code|An error was reported by the driver"
                        r"|An error occurred while trying to profile)")
_RULES = {
    "attach": re.compile(r"^==ERROR== unrecogni[sz]ed option '--attach'"),
    "launch": re.compile(r"^==ERROR== Invalid option (?P<option>\S+) specified for --mode launch"),
    "inject": re.compile(r"Another tool/injection might be loaded since CUDA_INJECTION64_PATH is set to "
                         r"(?P<injection_path>\S+?)\.?(?:\s|$)"),
    "perm": re.compile(r"ERR_NVGPUCTRPERM|RmProfilingAdminOnly:\s*1\b"
                       r"|failed with error CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
                       r"|does not have permission to access NVIDIA GPU Performance Counters"),
    "skew": re.compile(r"(?i:Cuda driver is not compatible with Nsight Compute)"
                       r"|Failed to load Nsight Compute CUDA modules|CUPTI_ERROR_INVALID_DEVICE"),
    "versions": re.compile(r"CUDA versions\. CUPTI: (?P<cupti>\d+); Runtime: (?P<runtime>\d+); "
                           r"Driver: (?P<driver>\d+)"),
    "child": re.compile(r"Profiling kernels launched by child processes requires the --target-processes all option"),
    "nondet": re.compile(r"Unexpected number of profiled kernels"),
    "failed": re.compile(r'^==ERROR== Failed to profile "(?P<name>[^"]*)"'),
    "oom": re.compile(r"(?i:out of memory)|OutOfMemoryError"),
    "shutdown": re.compile(r"^==PROF== Trying to shutdown target application"),
    "empty": re.compile(r"^==WARNING== No kernels were profiled\."),
    "noattach": re.compile(r"^==ERROR== No attachable process found"),
    "connected": re.compile(r"^==PROF== Connected to process \d+"),
}
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
        hits = [(i, m) for i, line in enumerate(self.lines) if (m := _RULES[key].search(line))]
        if claim:
            self.claimed.update(i for i, _ in hits)
        return hits

    def make(self, code: str, message: str, rows: Iterable[int], **details: Any) -> Diagnosis:
        """Build a Diagnosis quoting the lines at `rows`, with the exit status when the log records one."""
        if self.rc is not None:
            details["exit_status"] = self.rc
        app = [int(m.group(1)) for line in self.lines if (m := _APP_CODE.match(line))]
        if app:
            details["application_exit_code"] = app[-1]
        evidence = tuple(dict.fromkeys(self.lines[i] for i in sorted(rows)))[:MAX_EVIDENCE]
        return Diagnosis(code, message, evidence, details)


def _rows(hits: list[tuple[int, re.Match[str]]]) -> list[int]:
    """The line numbers of grep hits."""
    return [i for i, _ in hits]


# code, rule, message ({line}: the first matching line; {option}/{injection_path}: the rule's named groups).
_SIMPLE = (
    ("attach-option-removed", "attach",
     "ncu no longer has `--attach <PID>`: `{line}`. Attach over TCP instead: start the target under "
     "`ncu --mode launch ...`, then run `ncu --mode attach --hostname 127.0.0.1 ...` with the profiling options "
     "(--kernel-name, --launch-count, --set, -o)."),
    ("launch-mode-option", "launch",
     "`ncu --mode launch` rejected {option}: `{line}`. --mode launch only starts the target and waits for an "
     "attach; profiling options belong to the attaching command. Remove {option} from the `ncu --mode launch` "
     "command and pass it to `ncu --mode attach --hostname 127.0.0.1 {option} ...`."),
    ("injection-slot-taken", "inject",
     "another injection library already holds the target's CUDA injection slot: `{line}`. The CUDA driver honours "
     "one injection library per process, so ncu cannot load its own while CUDA_INJECTION64_PATH={injection_path} "
     "(e.g. a continuous profiler's agent) is set. Unset CUDA_INJECTION64_PATH for the capture "
     "(`env -u CUDA_INJECTION64_PATH ncu ...`, or a replica started without the agent)."),
    ("counter-permission", "perm",
     "ncu may not read the GPU performance counters: `{line}`. The driver restricts them to admin users "
     "(RmProfilingAdminOnly: 1). Run ncu as root (`sudo ncu ...`); in a container add `--cap-add SYS_ADMIN` "
     "(Kubernetes: securityContext.capabilities.add: [SYS_ADMIN]); or have an admin set "
     "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/ and reload the driver "
     "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)."),
    ("env-wrapper", "child",
     "ncu profiled only the process it launched, and the kernels ran in a child process: `{line}`. With "
     "`--target-processes application-only`, a wrapper after `--` such as `env VAR=1 python3 ...` (or a shell "
     "script) is the profiled process. Set the variable on ncu's own process (`VAR=1 ncu ... -- python3 ...`) or "
     "pass `--target-processes all`."),
    ("no-attachable-process", "noattach",
     "the attach found no process to profile: `{line}`. Either no process on that host was started under "
     "`ncu --mode launch` (ports 49152-49215), or another ncu is still attached to it (one attach at a time: an "
     "attaching ncu that was killed instead of interrupted can stay connected, and the target then refuses new "
     "attaches). Start the target with `ncu --mode launch --target-processes all -- CMD`, check --hostname/--port, "
     "and stop a previous attach with SIGINT to its process group (`perftunereport capture run` does). A process that "
     "was attachable before and still runs can also be one that replays CUDA graphs and whose node-mode attach after a "
     "graph-mode one saw no kernel: it refuses attaches from then on; restart it under `ncu --mode launch` and release "
     "it node-mode."),
    ("nondeterministic-replay", "nondet",
     "application replay saw a different set of kernels in a later pass: `{line}`. `--replay-mode application` "
     "re-runs the whole process once per metric pass and needs the same profiled launches every run; this workload "
     "varies them (batching, autotuning, caches sized from free memory). Use kernel replay (`--replay-mode kernel`, "
     "the default) or capture the op alone with the single-op harness (`perftunereport harness ...`), whose "
     "launches are fixed."),
)


def _simple(log: _Log) -> list[Diagnosis]:
    """The rules whose first matching line is the whole story."""
    found = []
    for code, key, template in _SIMPLE:
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


def _oom(log: _Log) -> Diagnosis | None:
    failed, oom = log.grep("failed"), log.grep("oom")
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
    found += [d for d in (_skew(log), _oom(log)) if d is not None]
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


def _unknown(log: _Log, explained: bool) -> list[Diagnosis]:
    rest = [i for i, line in enumerate(log.lines)
            if line.startswith("==ERROR==") and i not in log.claimed and not (explained and _SECONDARY.match(line))]
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
    names = _available(log, hits[-1][0])
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
    suggested, why = _suggest(names, pattern)
    more = f", ... (+{len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
    listed = ", ".join(names[:MAX_LISTED]) + more
    used = f" with --kernel-name {pattern}" if pattern else ""
    # the suggestion is pasted into a shell: quoted, as its regex holds `|`, `\` and `$`
    return [log.make("no-kernels-profiled", (
        f"ncu finished without profiling a kernel{used}: `{line}`. The process launched {len(names)} kernel "
        f"name(s): {listed}. Capture again with `--kernel-name {shlex.quote(suggested)}` ({why}); also check "
        f"--launch-skip / "
        f"--launch-count, and --kernel-name-base (these are ncu's function names)."),
        _rows(hits), available_kernels=names, suggested_pattern=suggested, pattern_used=pattern)]


def _available(log: _Log, start: int) -> list[str]:
    """The numbered names under `Available Kernels:` after the no-kernels warning at line `start`."""
    lines = log.lines[start + 1:]
    if not lines or lines[0].strip() != "Available Kernels:":
        return []
    return [m.group("name") for m in itertools.takewhile(bool, map(_AVAILABLE.match, lines[1:])) if m]


def _suggest(names: list[str], pattern: str | None) -> tuple[str, str]:
    """A `regex:` pattern for the available name closest to the pattern used, else for the first names."""
    if pattern:
        core = re.sub(r"^(?:regex|demangled|mangled):", "", pattern)
        best = difflib.get_close_matches(core, names, n=1, cutoff=0.0)[0]
        return f"regex:{re.escape(best)}", f"the available name closest to {pattern!r}"
    return "regex:" + "|".join(re.escape(n) for n in names[:3]), "the first available names"


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


def _csv_kernels(log: _Log) -> list[str]:
    """Kernel IDs of an ncu CSV printed to the console (`--csv --page raw` prints no Profiling lines)."""
    start = next((i for i, line in enumerate(log.lines) if _CSV_HEADER.match(line)), len(log.lines))
    ids = (m.group(1) for line in log.lines[start + 1:] if (m := _CSV_ROW.match(line)))
    return [f"ID {i}" for i in dict.fromkeys(ids)]
