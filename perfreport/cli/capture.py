"""Thin click layer for stage 1 (`perftunereport capture ...`, `perftunereport harness`); registered in cli.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from perfreport.cli.options import format_option
from perfreport.errors import terminal_text

# (option, field, click kwargs): the capture spec's fields as flags; a flag given on the command line wins over
# the same key of --spec FILE.
_SPEC_FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("--kernel-name", "kernel_patterns", {"multiple": True, "help": "Kernel to profile, exact or regex: "
                                          "(repeatable; one per capture on a single replica). "
                                          "Example: --kernel-name regex:nvjet"}),
    ("--kernel-name-base", "kernel_name_base", {"type": click.Choice(["function", "demangled", "mangled"]),
                                                "help": "What --kernel-name matches (ncu's default: function)."}),
    ("--set", "section_set", {"type": click.Choice(["basic", "roofline", "full"]),
                              "help": "Section set (default basic; full only after basic on one replica)."}),
    ("--metrics", "metrics", {"multiple": True, "help": "Extra metric names (repeatable). "
                                                        "Example: --metrics dram__bytes.sum"}),
    ("--launch-skip", "launch_skip", {"type": int, "help": "Matching launches to skip first. Example: 3"}),
    ("--launch-count", "launch_count", {"type": int, "help": "Matching launches to profile (default 1)."}),
    ("--replay-mode", "replay_mode", {"type": click.Choice(["kernel", "application", "range", "app-range"]),
                                      "help": "ncu replay mode (default kernel)."}),
    ("--graph-profiling", "graph_profiling", {"type": click.Choice(["node", "graph"]),
                                              "help": "ncu --graph-profiling: node (default; kernels inside CUDA "
                                                      "graphs are profiled one by one) or graph (whole graphs)."}),
    ("--acknowledge-application-replay", "acknowledge_application_replay",
     {"is_flag": True, "default": None, "help": "Allow application replay (the server must be deterministic)."}),
    ("--nvtx-include", "nvtx_include", {"multiple": True, "help": "NVTX range to scope to (repeatable; push/pop "
                                                                  "ranges end in '/'). Example: decode_step/"}),
    ("--target-processes", "target_processes", {"type": click.Choice(["all", "application-only"]),
                                                "help": "Default all (vLLM forks GPU workers)."}),
    ("--replicas", "replicas", {"type": int, "help": "Serving replicas behind the Service (policy limits)."}),
    ("--gpu-memory-utilization", "gpu_memory_utilization", {"type": float, "help": "The server's value; >= 0.85 "
                                                                                    "warns. Example: 0.9"}),
    ("--allow-unscoped", "allow_unscoped", {"is_flag": True, "default": None,
                                            "help": "Allow a capture with no kernel or NVTX scope."}),
    ("--after-basic", "after_basic", {"is_flag": True, "default": None,
                                      "help": "A basic capture of this kernel was done: allow --set full."}),
    ("--clock-control", "clock_control", {"type": click.Choice(["none", "base", "reset"]),
                                          "help": "Default none (serving clocks)."}),
    ("--profile-from-start", "profile_from_start", {"type": click.Choice(["on", "off"]),
                                                    "help": "off waits for cudaProfilerStart (warned)."}),
    ("--env", "env", {"multiple": True, "help": "NAME=VALUE set on ncu's own process (repeatable). "
                                                "Example: --env VLLM_USE_V1=1"}),
    ("--hostname", "hostname", {"help": "Attach host (default 127.0.0.1)."}),
    ("--port", "port", {"type": int, "help": "ncu's base port (default 49152)."}),
    ("--output", "output", {"help": "Report name (no extension). Example: --output decode_gemm"}),
    ("--campaign", "campaign", {"help": "Campaign id recorded in the receipt."}),
    ("--cell-id", "cell_id", {"help": "Cell id recorded in the receipt (and imported into with --import)."}),
]


def _say(message: str) -> None:
    """Progress lines go to stderr: stdout keeps the result (and --format csv/json documents)."""
    click.echo(terminal_text(message), err=True)


def spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add --spec FILE, every spec flag, and the target command after `--`."""
    fn = click.argument("command", nargs=-1, type=click.UNPROCESSED)(fn)
    for opt, dest, kwargs in reversed(_SPEC_FLAGS):
        fn = click.option(opt, f"flag_{dest}", **kwargs)(fn)
    help_ = "Capture spec YAML (fields as the flags, underscores). Example: --spec captures/decode_gemm.yaml"
    return click.option("--spec", "spec_file", type=click.Path(path_type=Path), default=None, help=help_)(fn)


def _spec(kwargs: dict[str, Any]) -> Any:
    """Build the CaptureSpec from --spec and the flags (flags win); pops the flag kwargs."""
    from perfreport.capture.plan.spec import load_spec, spec_from_mapping

    given: dict[str, Any] = {}
    for _, dest, _ in _SPEC_FLAGS:
        value = kwargs.pop(f"flag_{dest}")
        if value is None or value == ():
            continue
        if dest == "profile_from_start":
            value = value == "on"
        elif dest == "env":
            value = _env_pairs(value)
        elif isinstance(value, tuple):
            value = list(value)
        given[dest] = value
    command = list(kwargs.pop("command"))
    if command:
        given["command"] = command
    spec_file = kwargs.pop("spec_file")
    return load_spec(spec_file, given) if spec_file else spec_from_mapping(given, "command-line flags")


def _env_pairs(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE. Example: --env VLLM_USE_V1=1",
                                     param_hint="--env")
        out[name] = value
    return out


@click.group(name="capture")
def capture_group() -> None:
    """Plan, check, run and diagnose scoped ncu captures (docs/capture.md)."""


@capture_group.command(name="plan", context_settings={"ignore_unknown_options": True})
@spec_options
@click.option("--ncu", default="ncu", show_default=True, help="ncu path shown in the argv.")
@format_option(csv="one row per finding and per ncu command (kind, name, detail, text)",
               json="the verdict, the findings and every argv")
def capture_plan_cmd(ncu: str, fmt: str, **kwargs: Any) -> None:
    """Print the exact ncu argv of a scoped capture and its safety verdict; exit 3 when the policy refuses.

    \b
    Example:
      perftunereport capture plan --kernel-name regex:nvjet --set basic -- python3 -m vllm.entrypoints.openai.api_server
    """
    from perfreport.capture.plan.build import build_plan
    from perfreport.cli.capture_printing import print_plan

    plan = build_plan(_spec(kwargs))
    print_plan(plan, ncu, fmt)
    if plan.verdict == "refuse":
        raise SystemExit(3)


@capture_group.command(name="run", context_settings={"ignore_unknown_options": True})
@spec_options
@click.option("--bundle", "bundle_dir", required=True, type=click.Path(path_type=Path),
              help="Evidence bundle folder; outputs go to its ncu-profiles/. Example: experiments/artifacts/"
                   "inference-perf-bench/h200-decode")
@click.option("--mode", type=click.Choice(["attach", "launch-and-attach"]), default="attach", show_default=True,
              help="attach: to a process started under `ncu --mode launch`; launch-and-attach: run the command.")
@click.option("--ncu", default="ncu", show_default=True, envvar="PERFREPORT_NCU", show_envvar=True,
              help="ncu executable. Example: --ncu /usr/local/cuda/bin/ncu")
@click.option("--nvidia-smi", "nvidia_smi", default="nvidia-smi", show_default=True, help="nvidia-smi executable.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds to wait for the requested kernels (attach) or the whole run.")
@click.option("--import", "import_campaign", type=click.Path(path_type=Path), default=None,
              help="After a good capture, import_ncu it into this campaign (needs --cell-id).")
@click.option("--deployment-revision", default=None, help="Recorded in the receipt. Example: vllm-0.11.0@abc123")
def capture_run_cmd(bundle_dir: Path, mode: str, ncu: str, nvidia_smi: str, timeout_s: float,
                    import_campaign: Path | None, deployment_revision: str | None, **kwargs: Any) -> None:
    """Run a scoped capture into the bundle's ncu-profiles/ with a receipt; diagnose an empty or failed one.

    \b
    Example (attach to a server started with `ncu --mode launch`):
      perftunereport capture run --bundle B --kernel-name regex:nvjet --set basic --output decode_gemm
    Example (launch and attach):
      perftunereport capture run --bundle B --mode launch-and-attach --kernel-name regex:flash -- python3 bench.py
    """
    from perfreport.bundle.layout import prepare_bundle
    from perfreport.capture.plan.build import build_plan
    from perfreport.capture.run import capture_run

    plan = build_plan(_spec(kwargs))
    if prepare_bundle(bundle_dir, "capture run"):  # before any capture: a file or a foreign folder is refused
        click.echo(f"created bundle {bundle_dir}")
    for one in plan.per_kernel():  # one attach per kernel pattern; each is judged by the policy again
        res = capture_run(one, bundle_dir, mode, ncu=ncu, nvidia_smi=nvidia_smi, timeout_s=timeout_s,
                          import_campaign=import_campaign, deployment_revision=deployment_revision,
                          progress=_say)
        click.echo(f"captured {res.kernels_profiled} kernel(s) into {res.profiles_dir}: "
                   f"{', '.join(p.name for p in res.outputs)}; receipt {res.receipt_path}")


@click.command(name="harness", context_settings={"ignore_unknown_options": True, "help_option_names": []},
               add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def harness_cmd(args: tuple[str, ...]) -> None:
    """Single-op kernel-replay harness: one op, fixed seeded inputs, W warm-ups, then a loop; prints its ncu command.

    \b
    Same flags as `python3 -m perfreport.capture.harness.runner` (the form ncu runs as its target; --help lists them).
    Example:
      perftunereport harness gemm --shape m=16,n=4096,k=4096 --dtype bf16 --warmup 10 --iters 100
    """
    from perfreport.capture.harness.runner import main

    raise SystemExit(main(list(args)))


@capture_group.command(name="preflight", context_settings={"ignore_unknown_options": True})
@spec_options
@click.option("--ncu", default="ncu", show_default=True, envvar="PERFREPORT_NCU", show_envvar=True,
              help="ncu executable. Example: --ncu /usr/local/cuda/bin/ncu")
@click.option("--nvidia-smi", "nvidia_smi", default="nvidia-smi", show_default=True, help="nvidia-smi executable.")
@click.option("--pid", "target_pid", type=int, default=None,
              help="Target process: its environment is checked for CUDA_INJECTION64_PATH. Example: --pid 4242")
@click.option("--min-free-gib", type=float, default=2.0, show_default=True,
              help="Warn when a GPU has less free memory (kernel replay saves and restores memory).")
@format_option(csv="one row per check (status, name, message)", json="ok and the checks with their details")
def capture_preflight_cmd(ncu: str, nvidia_smi: str, target_pid: int | None, min_free_gib: float, fmt: str,
                          **kwargs: Any) -> None:
    """Check ncu, driver, GPU, counter permission, the injection slot, free memory and the plan's ncu options.

    Exits 1 when a check fails. Give the same scoping flags as `capture plan` to check the options it would use.

    \b
    Example:
      perftunereport capture preflight --ncu /usr/local/cuda/bin/ncu --kernel-name regex:nvjet --pid 4242
    """
    from perfreport.capture.plan.build import build_plan
    from perfreport.capture.preflight import preflight
    from perfreport.cli.capture_printing import print_preflight

    first = build_plan(_spec(kwargs)).per_kernel()[0]
    argvs = [first.attach_argv(ncu)]
    if first.spec.command:
        argvs.append(first.launch_argv(ncu))
    result = preflight(ncu, nvidia_smi, plan_argv=[a for argv in argvs for a in argv], target_pid=target_pid,
                       min_free_gib=min_free_gib)
    print_preflight(result, fmt)
    if not result.ok:
        raise SystemExit(1)


@capture_group.command(name="diagnose")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--kernel-name", "kernel_pattern", default=None,
              help="The --kernel-name the capture used (read from the log when it echoes ncu's command line).")
@format_option(csv="one row per diagnosis (code, message, evidence lines)",
               json="a list of diagnoses with their evidence and details")
def capture_diagnose_cmd(path: Path, kernel_pattern: str | None, fmt: str) -> None:
    """Name why a capture failed or came back empty (stable code + fix), from ncu's output or a report.

    Exits 1 when anything but `ok` is found.

    \b
    Example:
      perftunereport capture diagnose campaigns/h200-decoder-layer/captures/decode/layer_full.log
      perftunereport capture diagnose campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep.gz
    """
    from perfreport.capture.diagnose.path import diagnose_path
    from perfreport.cli.capture_printing import print_diagnoses

    found = diagnose_path(path, kernel_pattern)
    print_diagnoses(found, fmt)
    if any(d.code != "ok" for d in found):
        raise SystemExit(1)


@capture_group.command(name="release")
@click.option("--ncu", default="ncu", show_default=True, envvar="PERFREPORT_NCU", show_envvar=True,
              help="ncu executable. Example: --ncu /usr/local/cuda/bin/ncu")
@click.option("--hostname", default="127.0.0.1", show_default=True, help="Host of the launched process.")
@click.option("--port", type=int, default=None, help="ncu base port the process listens on (default 49152).")
@click.option("--log", "log_path", type=click.Path(path_type=Path), default=Path("release.ncu-output.txt"),
              show_default=True, help="Where the release attach's ncu output goes.")
@click.option("--attempts", type=int, default=30, show_default=True, help="Attach attempts, 2 s apart.")
@click.option("--graph-profiling", "graph_profiling", type=click.Choice(["node", "graph"]), default="node",
              show_default=True, help="graph keeps CUDA-graph replays fast until the first node-mode capture, but that "
                                      "capture then wedged the process in 6 of 10 H200 runs (node: 0 of 6) "
                                      "(docs/capture.md, 'What a process under ncu costs').")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="The target's CUDA processes (one per GPU worker: vLLM with TP=2 has 2). Each is released on "
                   "its own port, --port (49152) up (--max-connections 2, only a session on that port counts). "
                   "Default: one release, any port.")
def capture_release_cmd(ncu: str, hostname: str, port: int | None, log_path: Path, attempts: int,
                        graph_profiling: str, workers: int | None) -> None:
    """Release a process started under `ncu --mode launch` (it blocks at its first CUDA call until an attach).

    Attaches once with a kernel filter that matches nothing, then interrupts its own ncu: the target runs on,
    and later `capture run` attaches work (docs/capture.md, "Attach").

    \b
    Example:
      ncu --mode launch --target-processes all -- python3 -m vllm.entrypoints.openai.api_server ... &
      perftunereport capture release --ncu /usr/local/cuda/bin/ncu
    """
    from perfreport.capture.release import release_launched, release_workers

    if workers is not None:
        for r in release_workers(ncu, log_path, workers, hostname=hostname, port=port, progress=_say,
                                 attempts=attempts, graph_profiling=graph_profiling):
            click.echo(f"released process {r.pid} after {len(r.steps)} attach attempt(s); ncu output {r.log_path}")
        return
    res = release_launched(ncu, log_path, hostname=hostname, port=port, attempts=attempts,
                           graph_profiling=graph_profiling, progress=_say)
    click.echo(f"released process {res.pid} after {len(res.steps)} attach attempt(s); ncu output {log_path}")


def _k8s_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by `capture k8s plan` and `capture k8s run` (plus the spec flags)."""
    opts = [
        click.option("--method", type=click.Choice(["sister", "debug"]), default="sister", show_default=True,
                     help="sister: a one-replica copy outside the Service, production never under ncu (measured on "
                          "the H200: production within 2% outside the captures, docs/capture.md); debug: an "
                          "ephemeral container in a pod whose server already runs under `ncu --mode launch`."),
        click.option("--name", "target_name", required=True,
                     help="Deployment (sister) or pod (debug) name. Example: --name vllm-llama-8b"),
        click.option("--namespace", "-n", "namespace", default="default", show_default=True, help="Namespace."),
        click.option("--container", required=True, help="The server container. Example: --container vllm"),
        click.option("--capture-id", required=True, help="Id in labels and file names. Example: --capture-id cap1"),
        click.option("--ncu-image", required=True,
                     help="Image holding ncu. Example: --ncu-image nvcr.io/nvidia/cuda:13.0.1-devel-ubuntu24.04"),
        click.option("--ncu-home", default="/opt/nvidia/nsight-compute", show_default=True,
                     help="Folder holding the ncu binary in --ncu-image, copied by the sister's initContainer. "
                          "Example: --ncu-home /opt/nvidia/nsight-compute/2025.3.1"),
        click.option("--keep-label", "keep_labels", multiple=True,
                     help="Production label the sister keeps (never one a Service selects)."),
        click.option("--drop-env", "drop_env", multiple=True,
                     help="Extra variable removed from the sister (CUDA_INJECTION64_PATH always is)."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="Sister: the server's CUDA processes, released one per port from 49152 (vLLM TP=2: 2). "
                          "Default: tensor x pipeline parallel size from the server's arguments, else 1."),
        click.option("--attach-window", "attach_window_s", type=int, default=600, show_default=True,
                     help="Seconds a remote attach may run before its `timeout -s INT` backstop ends it."),
        click.option("--ready-timeout", "ready_timeout_s", type=click.IntRange(min=1), default=900,
                     show_default=True, help="Sister: seconds `kubectl wait --for=condition=Ready` waits after the "
                                             "release(s) (model load included)."),
        click.option("--debug-ncu", default="ncu", show_default=True,
                     help="Debug: the ncu executable inside --ncu-image. Example: --debug-ncu "
                          "/opt/nvidia/nsight-compute/2025.3.1/ncu"),
        click.option("--debug-lifetime", "lifetime_s", type=int, default=3600, show_default=True,
                     help="Seconds the debug container idles (`sleep`) before it ends by itself."),
        click.option("--no-counters-cap", "no_counters_cap", is_flag=True,
                     help="Do not add CAP_SYS_ADMIN to the sister (nodes with NVreg_RestrictProfilingToAdminUsers=0)."),
        click.option("--from-json", "docs_dir", type=click.Path(path_type=Path), default=None,
                     help="Folder with deployment.json + services.json (sister) or pod.json (debug) from "
                          "`kubectl get -o json`, instead of asking the cluster."),
        click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("k8s-capture"),
                     show_default=True, help="Where the manifests and k8s-plan.json are written."),
        click.option("--kubectl", default="kubectl", show_default=True, help="kubectl executable."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return spec_options(fn)


def _k8s_plan(kw: dict[str, Any]) -> Any:
    """Build the k8s plan from the verb's options (popped from kw) and the spec flags left in kw."""
    from perfreport.capture.k8s.manifests import fetch_docs, load_docs
    from perfreport.capture.k8s.model import K8sOptions
    from perfreport.capture.k8s.plan import k8s_plan

    method, docs_dir, out_dir = kw.pop("method"), kw.pop("docs_dir"), kw.pop("out_dir")
    name, namespace, kubectl = kw.pop("target_name"), kw.pop("namespace"), kw.pop("kubectl")
    docs = fetch_docs(method, name, namespace, kubectl) if docs_dir is None else load_docs(method, docs_dir)
    opts = K8sOptions(container=kw.pop("container"), capture_id=kw.pop("capture_id"), ncu_image=kw.pop("ncu_image"),
                      namespace=namespace, ncu_home=kw.pop("ncu_home"), keep_labels=kw.pop("keep_labels"),
                      drop_env=kw.pop("drop_env"), counters_cap=not kw.pop("no_counters_cap"),
                      attach_window_s=kw.pop("attach_window_s"), lifetime_s=kw.pop("lifetime_s"),
                      workers=kw.pop("workers"), ready_timeout_s=kw.pop("ready_timeout_s"),
                      debug_ncu=kw.pop("debug_ncu"))
    return k8s_plan(method, _spec(kw), opts, out_dir, **docs)


@capture_group.group(name="k8s")
def k8s_group() -> None:
    """Capture from a Kubernetes pod: kubectl debug sidecar or a sister deployment (docs/capture.md)."""


@k8s_group.command(name="plan", context_settings={"ignore_unknown_options": True})
@_k8s_options
@format_option(csv="one row per finding, manifest, kubectl step and cleanup (kind, name, detail, text)",
               json="the plan as written to k8s-plan.json")
def k8s_plan_cmd(fmt: str, **kwargs: Any) -> None:
    """Write the manifests and print every kubectl argv of a k8s capture, with the policy verdict (exit 3: refused).

    \b
    Example:
      perftunereport capture k8s plan --method sister --name vllm-llama-8b -n inference --container vllm \\
          --capture-id cap1 --ncu-image nvcr.io/nvidia/cuda:13.0.1-devel-ubuntu24.04 --kernel-name regex:nvjet
    """
    from perfreport.cli.capture_printing import print_k8s_plan

    plan = _k8s_plan(kwargs)
    print_k8s_plan(plan, fmt)
    if plan.verdict == "refuse":
        raise SystemExit(3)


@k8s_group.command(name="run", context_settings={"ignore_unknown_options": True})
@_k8s_options
@click.option("--bundle", "bundle_dir", required=True, type=click.Path(path_type=Path),
              help="Evidence bundle; outputs and receipts go to its ncu-profiles/.")
@click.option("--dry-run", is_flag=True, help="Print the kubectl commands; run nothing.")
def k8s_run_cmd(bundle_dir: Path, dry_run: bool, **kwargs: Any) -> None:
    """Plan, then run the k8s capture: create/attach/capture/export/copy, always clean up, write receipts.

    \b
    Example:
      perftunereport capture k8s run --method sister --name vllm-llama-8b -n inference --container vllm \\
          --capture-id cap1 --ncu-image IMAGE --kernel-name regex:nvjet --bundle B --dry-run
    """
    from perfreport.capture.k8s.steps import run_plan

    kubectl = kwargs["kubectl"]
    plan = _k8s_plan(kwargs)
    if dry_run:  # the plan's own text: verdict, findings, manifests and every command, once
        run_plan(plan, bundle_dir, kubectl=kubectl, dry_run=True)
        click.echo(plan.text())
        return
    result = run_plan(plan, bundle_dir, kubectl=kubectl, progress=_say)
    for c in result.captures:
        click.echo(f"{c.name}: {len(c.kernel_names)} kernel(s), ncu rc={c.exit_status}, receipt {c.receipt_path}")
    click.echo(f"cleanup receipt {result.cleanup_receipt_path}")
