"""The lines `capture diagnose` recognises in ncu's console output (each one ncu or CUPTI under it really prints;
log.py's docstring names the logs they were written against), and the messages of the rules whose first matching
line is the whole story. Standard library only: this runs on the GPU machine.
"""

from __future__ import annotations

import re

APP_CODE = re.compile(r"^==ERROR== The application returned an error code \((-?\d+)\)")
# ==ERROR== lines that only echo another failure (the target's exit code, a header before the real line).
SECONDARY = re.compile(r"^==ERROR== (?:The application returned an error code|An error was reported by the driver"
                        r"|An error occurred while trying to profile)")
RULES = {
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
    "dcgm": re.compile(r"Profiling failed because a driver resource was unavailable"),
    "app-code": APP_CODE,
    "shutdown": re.compile(r"^==PROF== Trying to shutdown target application"),
    "empty": re.compile(r"^==WARNING== No kernels were profiled\."),
    "noattach": re.compile(r"^==ERROR== No attachable process found"),
    "connected": re.compile(r"^==PROF== Connected to process \d+"),
}

# code, rule, message ({line}: the first matching line; {option}/{injection_path}: the rule's named groups).
SIMPLE = (
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
