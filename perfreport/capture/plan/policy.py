"""The capture safety policy: rules a capture of a live inference server must pass, each explained when it fires.

Why these rules (docs/capture.md, "Safety policy"): ncu serializes and replays every profiled launch (a `--set
full` launch is replayed ~40 times, each pass saving and restoring the memory it writes), so an unscoped capture
slows serving 10-100x (docs/capture.md has the measurements). On a single replica
that is every user's latency, and a liveness probe may kill the pod mid-replay.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from perfreport.capture.plan.spec import CaptureSpec

LEVELS = ("refuse", "warn", "info")
SINGLE_REPLICA_MAX_LAUNCHES = 3
MULTI_REPLICA_MAX_LAUNCHES = 5
GPU_MEMORY_WARN = 0.85
GPU_MEMORY_ARG = "--gpu-memory-utilization"  # vLLM's spelling, read from the server's command line
WARMUP_CODE = "launch-skip-warmup"
# the warm-up rule's example: a 32-layer model and a few dozen CUDA-graph batch sizes (vLLM and SGLang capture
# dozens by default; assumed, not measured here)
WARMUP_EXAMPLE_LAYERS, WARMUP_EXAMPLE_SIZES = 32, 60
# servers that fork GPU worker processes: their kernels run in children (vLLM's engine core / workers, SGLang's
# scheduler / tp workers, torchrun ranks)
_FORKING = re.compile(r"(^|[/\s])(vllm|sglang|torchrun|trtllm-serve|tritonserver)\b|-m\s+(vllm|sglang)\b")


@dataclass(frozen=True)
class Finding:
    """One policy rule that fired: stable code, level (refuse | warn | info) and why, with the fix."""

    code: str
    level: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"code": self.code, "level": self.level, "message": self.message}


def verdict_of(findings: list[Finding]) -> str:
    """refuse if any rule refuses, warn if any warns, else ok."""
    levels = {f.level for f in findings}
    return "refuse" if "refuse" in levels else "warn" if "warn" in levels else "ok"


def check_policy(spec: CaptureSpec) -> list[Finding]:
    """Every rule that fires for spec, in a stable order."""
    out: list[Finding] = []
    for rule in (_scope, _patterns, _replicas, _sets, _memory, _warmup, _replay, _env_wrapper, _profile_start,
                 _clocks, _processes, _launch_cost):
        out.extend(rule(spec))
    return out


def _scope(s: CaptureSpec) -> list[Finding]:
    if s.kernel_patterns or s.nvtx_include:
        return []
    if s.allow_unscoped:
        return [Finding("unscoped-allowed", "warn", "no --kernel-name or --nvtx-include: every kernel launch is "
                        "replayed (10-100x slower serving while attached). Allowed by allow_unscoped; use it on a "
                        "replica outside the Service only.")]
    return [Finding("unscoped", "refuse", "no --kernel-name and no --nvtx-include: ncu would replay every kernel "
                    "launch, slowing serving 10-100x. Name the kernel (--kernel-name regex:nvjet) or an NVTX range, "
                    "or pass --allow-unscoped on a replica no user reaches.")]


def _patterns(s: CaptureSpec) -> list[Finding]:
    out = []
    for i, pat in enumerate(s.kernel_patterns):
        if pat.startswith("regex:"):
            try:
                re.compile(pat[len("regex:"):])
            except re.error as exc:
                out.append(Finding("bad-kernel-regex", "refuse", f"kernel_patterns[{i}] {pat!r}: not a valid "
                                   f"regular expression ({exc}). Fix the pattern."))
        elif any(c in pat for c in "|*()[]^$+?\\"):
            out.append(Finding("pattern-not-regex", "warn", f"kernel_patterns[{i}] {pat!r} has regex characters "
                               f"but no 'regex:' prefix: ncu matches it as a plain name. Write 'regex:{pat}' if "
                               f"a regular expression was meant."))
    for i, rng in enumerate(s.nvtx_include):
        if "@" not in rng and not rng.endswith("/") and not rng.startswith("regex:"):
            out.append(Finding("nvtx-push-pop", "warn", f"nvtx_include[{i}] {rng!r}: push/pop ranges need a "
                               f"trailing '/' ({rng}/); without it ncu matches only start/end ranges and may "
                               f"profile nothing."))
    return out


def _replicas(s: CaptureSpec) -> list[Finding]:
    if s.replicas == 1:
        out = []
        if len(s.kernel_patterns) > 1:
            out.append(Finding("one-kernel-per-capture", "refuse", f"{len(s.kernel_patterns)} kernel patterns on a "
                               f"single replica: capture one kernel per attach, so each replay window stays short "
                               f"and serving recovers in between. Plan one --kernel-name at a time (`capture run` "
                               f"splits them itself: one capture per pattern, NAME-1, NAME-2, ...)."))
        if s.launch_count > SINGLE_REPLICA_MAX_LAUNCHES:
            out.append(Finding("launch-count", "refuse", f"launch_count {s.launch_count} on a single replica: at "
                               f"most {SINGLE_REPLICA_MAX_LAUNCHES} replayed launches per capture (each stalls "
                               f"every request in flight). Lower --launch-count, or capture on a replica outside "
                               f"the Service (replicas >= 2 allows {MULTI_REPLICA_MAX_LAUNCHES})."))
        return out
    if s.launch_count > MULTI_REPLICA_MAX_LAUNCHES:
        return [Finding("launch-count", "refuse", f"launch_count {s.launch_count}: at most "
                        f"{MULTI_REPLICA_MAX_LAUNCHES} launches per capture even with {s.replicas} replicas. "
                        f"Lower --launch-count.")]
    return []


HEAVY_SETS = ("full", "roofline")  # many replay passes each: on one replica only after a basic capture (--after-basic)


def _sets(s: CaptureSpec) -> list[Finding]:
    heavy = s.section_set in HEAVY_SETS
    if s.replicas == 1 and heavy and not s.after_basic:
        return [Finding("basic-before-full", "refuse", f"--set {s.section_set} on a single replica before a "
                        f"basic capture: capture --set basic of the same kernel first (a few replay passes "
                        f"instead of ~40) to check the pattern matches and serving survives, then pass "
                        f"--after-basic.")]
    if not s.section_set and not s.metrics:
        return [Finding("nothing-collected", "refuse", "no section set and no --metrics: nothing to collect. "
                        "Pass --set basic.")]
    if heavy and s.after_basic:
        return [Finding("after-basic-claimed", "info", "--after-basic: `capture run` and `capture k8s run` check the "
                        "bundle for that basic capture's receipt (section_set basic, the same --kernel-name, a "
                        "kernel profiled) and refuse the capture without one.")]
    return []


def arg_value(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last `--name V` or `--name=V` among args (the server's own parsing: last one wins)."""
    found = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(f"{name}="):
                found = arg.split("=", 1)[1]
    return found


def server_gpu_memory(s: CaptureSpec) -> tuple[float | None, str]:
    """The server's --gpu-memory-utilization and where it was read: its own command line first (what it really
    runs with, whatever the method or replica count), else the spec's value."""
    value = arg_value(s.command, (GPU_MEMORY_ARG,))
    if value is not None:
        try:
            return float(value), f"the server's own {GPU_MEMORY_ARG} {value}"
        except ValueError:
            pass  # not a number: the server would refuse it; the spec's value, if any, is all there is
    g = s.gpu_memory_utilization
    return g, f"gpu_memory_utilization {g:g}" if g is not None else ""


def _memory(s: CaptureSpec) -> list[Finding]:
    # the same check on one replica, several, a sister or a debug container: replay's memory need does not change
    g, where = server_gpu_memory(s)
    if g is not None and g >= GPU_MEMORY_WARN:
        return [Finding("gpu-memory-utilization", "warn", f"{where} >= {GPU_MEMORY_WARN}: kernel replay saves and "
                        f"restores the memory a kernel writes; with the KV cache holding the rest, a --set full "
                        f"replay can fail or kill the server (tests/data/h200_capture/gpu_full_replay.log). Capture "
                        f"on a replica started with a lower value (e.g. {GPU_MEMORY_ARG} 0.80).")]
    return []


def _warmup(s: CaptureSpec) -> list[Finding]:
    if s.launch_skip:
        return []
    example = WARMUP_EXAMPLE_LAYERS * (WARMUP_EXAMPLE_SIZES + 1)
    skip = (f"Skip them with --launch-skip N, N at least the matching launches of the start-up: a kernel run once "
            f"per layer is launched about layers x (CUDA-graph batch sizes captured + 1) times before the first "
            f"request, e.g. --launch-skip {example} for {WARMUP_EXAMPLE_LAYERS} layers and "
            f"{WARMUP_EXAMPLE_SIZES} sizes; or scope to a serving step's NVTX range (--nvtx-include RANGE/; with "
            f"--replay-mode range, ncu's --range-filter picks which instances)")
    if s.command and _FORKING.search(" ".join(s.command)):
        return [Finding("launch-skip-warmup", "warn",
                        f"--launch-count {s.launch_count} without --launch-skip on a server ncu sees from its start: "
                        f"its first matching launches are the start-up's (memory profiling "
                        f"pass, warm-up, CUDA-graph capture), so the first {s.launch_count} captured would be "
                        f"warm-up or capture launches, not steady-state serving. {skip}; or attach once it serves "
                        f"(`capture release`, wait for readiness, then `capture run --mode attach`).")]
    if not s.command:
        return [Finding("launch-skip-warmup", "info",
                        f"--launch-count {s.launch_count} without --launch-skip: an attach counts matching launches "
                        f"from when it connects, so attach once the server serves; a "
                        f"server still starting (loading, warming up, capturing CUDA graphs) gives warm-up "
                        f"launches first. {skip}.")]
    return []


def _replay(s: CaptureSpec) -> list[Finding]:
    if s.replay_mode not in ("application", "app-range"):
        return []
    if s.acknowledge_application_replay:
        return [Finding("application-replay", "warn", f"--replay-mode {s.replay_mode} (acknowledged): the whole "
                        f"application re-runs per pass and must launch the same kernels each time; a serving "
                        f"process does not. Expect 'Unexpected number of profiled kernels'; the single-op harness "
                        f"(perftunereport harness) is the deterministic alternative.")]
    return [Finding("application-replay", "refuse", f"--replay-mode {s.replay_mode} re-runs the application per "
                    f"pass and needs it to be deterministic; a live server is not. Use kernel replay, the single-op "
                    f"harness, or pass --acknowledge-application-replay.")]


def _env_wrapper(s: CaptureSpec) -> list[Finding]:
    out = []
    if s.command and os.path.basename(s.command[0]) == "env":
        out.append(Finding("env-wrapper", "refuse", f"the command starts with {s.command[0]!r}: an `env` wrapper "
                           f"after `--` makes `env` the profiled application (with --target-processes "
                           f"application-only nothing is profiled, exit 0). Put the variables in the spec's env: "
                           f"(set on ncu's own process, inherited by the target)."))
    if s.env:
        names = ", ".join(n for n, _ in s.env)
        out.append(Finding("env-on-ncu", "info", f"environment {names} is set on ncu's own process (inherited by "
                           f"the target), not through an `env` wrapper."))
    return out


def _profile_start(s: CaptureSpec) -> list[Finding]:
    if s.profile_from_start:
        return []
    return [Finding("profile-from-start-off", "warn", "--profile-from-start off: ncu collects nothing until the "
                    "target calls cudaProfilerStart(); a server that never calls it yields an empty capture with "
                    "exit code 0. Keep it only if the target brackets its hot loop with cudaProfilerStart/Stop.")]


def _clocks(s: CaptureSpec) -> list[Finding]:
    if s.clock_control == "none":
        return [Finding("clock-control-none", "info", "--clock-control none: ncu's default (base) locks the SM "
                        "clock to base (1.15 GHz vs ~1.9 GHz boost on B200; durations +61% on long kernels), so "
                        "profiled durations would not match the serving they explain. Not passed to `--mode "
                        "launch`, which rejects it; it goes on the attach.")]
    return [Finding("clock-control", "warn", f"--clock-control {s.clock_control}: clocks are changed while "
                    f"profiling, so durations and %-of-peak differ from serving. Use none unless comparing runs "
                    f"across machines at fixed clocks.")]


def _processes(s: CaptureSpec) -> list[Finding]:
    cmd = " ".join(s.command)
    if s.target_processes == "application-only" and _FORKING.search(cmd):
        return [Finding("target-processes", "refuse", f"--target-processes application-only with {cmd!r}: this "
                        f"server runs its GPU work in forked worker processes, which would not be profiled (empty "
                        f"capture). Use --target-processes all.")]
    if s.target_processes == "application-only":
        return [Finding("target-processes", "warn", "--target-processes application-only: kernels of child "
                        "processes are not profiled; vLLM and SGLang fork GPU workers. Use all unless the target "
                        "is one process.")]
    return []


# Measured on the H200 with ncu 2025.3.1 (tests/data/h200_capture/launch_cost/, overhead2/, overhead3/)
LAUNCH_COST = ("a process under ncu pays on every kernel launch outside the replays, for its whole life, attached "
               "or not: ~70-100 us per eager launch (8 us un-profiled), and ~55-60 us per CUDA-graph-replayed kernel "
               "from its first node-mode attach on (1.2-1.8 us while every attach was graph-mode; a later "
               "graph-mode attach does not bring it back; only a restart does). Measured: a transformers server "
               "(eager) served 0.18x its un-profiled tokens/s once launched under ncu; a CUDA-graph server 0.82-0.96x "
               "before its first node-mode capture when released graph-mode, 0.07x released node-mode (the default)")


SISTER_MEASURED = ("Measured with a sister: production, never under ncu, served within 2% of its rate beside an idle "
                   "sister outside the windows of its scoped captures, and 0.91-0.92x during them while it was "
                   "driven on the same GPU (on a GPU of its own it shares only the host; not measured)")


def _launch_cost(s: CaptureSpec) -> list[Finding]:
    graphs = ("--graph-profiling graph: whole graphs are profiled as one workload, kernels inside them are not "
              "profiled one by one. " if s.graph_profiling == "graph" else "")
    if s.replicas >= 2:
        level, advice = "info", ("With several replicas, capture on one taken out of the Service (or a sister "
                                 "deployment) and restart it afterwards.")
    elif s.command and not _FORKING.search(" ".join(s.command)):  # a script run under ncu, not a server
        level, advice = "info", ("For a script that only slows the script; never run a server that takes traffic "
                                 "this way.")
    else:
        level, advice = "warn", ("On a single replica that is every user's serving until the process restarts: "
                                 "capture on a sister deployment outside the Service (`capture k8s plan --method "
                                 "sister`), or restart the server without ncu afterwards. "
                                 f"{SISTER_MEASURED}")
    return [Finding("ncu-launch-cost", level, f"{graphs}{LAUNCH_COST}. {advice}")]


_SCOPED = CaptureSpec(kernel_patterns=("regex:nvjet",))
_VLLM = ("python3", "-m", "vllm.entrypoints.openai.api_server")
# (code, level, when it fires, a spec that fires it): every rule once per level it can give, in check_policy's
# order; docs/capture.md renders this table with the message each example really gets.
RULES: tuple[tuple[str, str, str, CaptureSpec], ...] = (
    ("unscoped", "refuse", "no --kernel-name and no --nvtx-include", CaptureSpec()),
    ("unscoped-allowed", "warn", "the same with --allow-unscoped", CaptureSpec(allow_unscoped=True)),
    ("bad-kernel-regex", "refuse", "a `regex:` pattern that does not compile",
     CaptureSpec(kernel_patterns=("regex:nvjet(",))),
    ("pattern-not-regex", "warn", "regex characters in a pattern without `regex:`",
     CaptureSpec(kernel_patterns=("nvjet.*",))),
    ("nvtx-push-pop", "warn", "an NVTX range without a trailing `/`, `@` or `regex:`",
     _SCOPED.with_changes(nvtx_include=("decode_step",))),
    ("one-kernel-per-capture", "refuse", "several kernel patterns on one replica",
     CaptureSpec(kernel_patterns=("regex:nvjet", "regex:flash"))),
    ("launch-count", "refuse", f"more than {SINGLE_REPLICA_MAX_LAUNCHES} launches on one replica, more than "
     f"{MULTI_REPLICA_MAX_LAUNCHES} with several", _SCOPED.with_changes(launch_count=SINGLE_REPLICA_MAX_LAUNCHES + 1)),
    ("basic-before-full", "refuse", "--set full or roofline on one replica without --after-basic",
     _SCOPED.with_changes(section_set="full")),
    ("nothing-collected", "refuse", "no section set and no --metrics", _SCOPED.with_changes(section_set=None)),
    ("after-basic-claimed", "info", "--after-basic with --set full or roofline (checked against the bundle's "
     "receipts at run time)", _SCOPED.with_changes(section_set="full", after_basic=True)),
    ("gpu-memory-utilization", "warn", f"the server's {GPU_MEMORY_ARG} (its command line, else the spec's) >= "
     f"{GPU_MEMORY_WARN}, at any replica count and with either k8s method",
     _SCOPED.with_changes(replicas=2, command=(*_VLLM, GPU_MEMORY_ARG, "0.92"))),
    (WARMUP_CODE, "warn", "a server command and no --launch-skip", _SCOPED.with_changes(command=_VLLM)),
    (WARMUP_CODE, "info", "an attach (no command) and no --launch-skip", _SCOPED),
    ("application-replay", "refuse", "--replay-mode application or app-range",
     _SCOPED.with_changes(replay_mode="application")),
    ("application-replay", "warn", "the same with --acknowledge-application-replay",
     _SCOPED.with_changes(replay_mode="application", acknowledge_application_replay=True)),
    ("env-wrapper", "refuse", "the command after `--` starts with `env`",
     _SCOPED.with_changes(command=("env", "VLLM_USE_V1=1", *_VLLM))),
    ("env-on-ncu", "info", "--env given", _SCOPED.with_changes(env=(("VLLM_USE_V1", "1"),))),
    ("profile-from-start-off", "warn", "--profile-from-start off", _SCOPED.with_changes(profile_from_start=False)),
    ("clock-control-none", "info", "--clock-control none (the default)", _SCOPED),
    ("clock-control", "warn", "--clock-control base or reset", _SCOPED.with_changes(clock_control="base")),
    ("target-processes", "refuse", "--target-processes application-only with a server that forks GPU workers",
     _SCOPED.with_changes(target_processes="application-only", command=_VLLM)),
    ("target-processes", "warn", "--target-processes application-only with any other command",
     _SCOPED.with_changes(target_processes="application-only", command=("python3", "bench.py"))),
    ("ncu-launch-cost", "warn", "always: warn on a single serving replica (an attach, or a server command)", _SCOPED),
    ("ncu-launch-cost", "info", "always: info for a script, or with --replicas 2 or more",
     _SCOPED.with_changes(replicas=2)),
)
