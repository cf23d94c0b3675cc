"""capture k8s plan: the exact kubectl argv (lists, never shell strings) that profile kernels of a pod, two ways.

  debug   an ephemeral container with ncu (`kubectl debug --target C --profile sysadmin`) joins a production pod
          whose server was started under `ncu --mode launch` and attaches over 127.0.0.1. Nothing restarts.
  sister  a copy of the production Deployment (manifests.derive_sister): one replica no Service selects, its
          server started under `ncu --mode launch` with ncu from an initContainer; released by one attach that
          profiles nothing, then captured. The policy judges it as replicas >= 2: no user request reaches it.
The kubectl steps, and how an attach is stopped (a `timeout` backstop, then pkill), are built in argv.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfreport.capture.k8s import manifests as km
from perfreport.capture.k8s.argv import kubectl_steps
from perfreport.capture.k8s.model import K8sOptions, K8sPlan
from perfreport.capture.plan.build import build_plan
from perfreport.capture.plan.policy import WARMUP_CODE, Finding, arg_value, server_gpu_memory
from perfreport.capture.plan.spec import CaptureSpec
from perfreport.capture.release import BASE_PORT
from perfreport.errors import InputError
from perfreport.files import write_json_atomic, write_text_atomic
from perfreport.ids import check_id

METHODS = ("debug", "sister")
DEBUG_PREFIX = "perfreport-ncu-"
DEBUG_REMOTE_DIR = "/tmp"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# vLLM and SGLang spellings; the product is the number of GPU worker processes
_PARALLEL_ARGS = (("tensor-parallel-size", ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")),
                  ("pipeline-parallel-size", ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp")))



def k8s_plan(method: str, spec: CaptureSpec, opts: K8sOptions, out_dir: Path, *,
             deployment: Mapping[str, Any] | None = None, services: Sequence[Mapping[str, Any]] = (),
             pod: Mapping[str, Any] | None = None) -> K8sPlan:
    """Judge the capture, derive its manifests, list every kubectl argv; write the manifests unless refused."""
    if method not in METHODS:
        raise InputError(f"capture k8s: method {method!r} is not one of {', '.join(METHODS)}.")
    km.check_capture_id(opts.capture_id)
    doc = deployment if method == "sister" else pod
    where = ((doc or {}).get("metadata") or {}).get("namespace")
    if opts.namespace and where and where != opts.namespace:
        raise InputError(f"capture k8s: the {'Deployment' if method == 'sister' else 'Pod'} is in namespace "
                         f"{where!r}, --namespace says {opts.namespace!r}. Pass --namespace {where} or the right "
                         f"object.")
    plan = _sister_plan(spec, opts, deployment, services, Path(out_dir)) if method == "sister" else \
        _debug_plan(spec, opts, pod, deployment, Path(out_dir))
    names = [check_id("capture output", p.spec.output) for p in plan.captures()]
    if len(set(names)) != len(names):
        raise InputError(f"capture k8s: output names {names} repeat; pick another --output.")
    plan.steps, plan.cleanup = kubectl_steps(plan)
    if plan.verdict != "refuse":  # a refused plan writes nothing (and k8s_run runs nothing)
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        for name, doc in sorted(plan.manifests.items()):
            write_text_atomic(plan.out_dir / name, km.dump_yaml(doc))
            plan.written.append(plan.out_dir / name)
        write_json_atomic(plan.out_dir / "k8s-plan.json", plan.as_dict())
        plan.written.append(plan.out_dir / "k8s-plan.json")
    return plan


def _findings(problems: Sequence[tuple[str, str, str]]) -> list[Finding]:
    return [Finding(code, level, message) for code, level, message in problems]


def _server_args(container: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


def _gpu_memory(spec: CaptureSpec, container: Mapping[str, Any]) -> float | None:
    """The server container's own --gpu-memory-utilization (what it runs with), else the spec's value: the memory
    rule reads it for either method (policy.server_gpu_memory)."""
    return server_gpu_memory(spec.with_changes(command=tuple(_server_args(container))))[0]


def _workers(opts: K8sOptions, container: Mapping[str, Any], base: int) -> tuple[int, list[Finding]]:
    """How many CUDA processes the sister's release must free: --workers, else tensor x pipeline parallel size."""
    if opts.workers is not None:
        n, why = opts.workers, f"--workers {opts.workers}"
    else:
        args, sizes = _server_args(container), []
        for label, names in _PARALLEL_ARGS:
            value = arg_value(args, names)
            if value is not None:
                if not value.isdigit() or int(value) < 1:
                    return 1, [Finding("k8s-sister-workers", "warn", f"the server's {label} argument is {value!r}, "
                                       f"not a positive integer: one CUDA process assumed. Pass --workers N.")]
                sizes.append(f"{label} {value}")
        n = 1
        for size in sizes:
            n *= int(size.rsplit(" ", 1)[1])
        why = " x ".join(sizes) + " in the server's arguments"
        if n == 1:
            return 1, []
    return n, [Finding("k8s-sister-workers", "info", f"{n} CUDA process(es) ({why}): under `ncu --mode launch` "
                       f"each blocks at its first CUDA call and listens on its own port, so the sister is released "
                       f"once per port, {base} to {base + n - 1}, each exactly (`--port P --max-connections 2`; a "
                       f"session that lands on another port is detached and retried). Captures attach the first "
                       f"({base}) unless the spec sets port. A server with another CUDA process (an engine "
                       f"core apart from its workers) needs --workers N.")]


def _revision(deployment: Mapping[str, Any] | None) -> str | None:
    value = (((deployment or {}).get("metadata") or {}).get("annotations") or {}).get(km.REVISION_ANNOTATION)
    return None if value is None else str(value)


def _sister_plan(spec: CaptureSpec, opts: K8sOptions, deployment: Mapping[str, Any] | None,
                 services: Sequence[Mapping[str, Any]], out_dir: Path) -> K8sPlan:
    if deployment is None:
        raise InputError("capture k8s --method sister: no Deployment given. Pass --name DEPLOYMENT (read with "
                         "`kubectl get deployment NAME -o json`) or --from-json DIR holding deployment.json.")
    deployment = km.parse_doc(deployment, "Deployment", "deployment")
    meta = deployment.get("metadata") or {}
    name = str(meta.get("name", ""))
    pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    container = km.find_container(pod_spec, opts.container, f"deployment {name!r}")
    command = km.server_command(container, opts.entrypoint, f"deployment {name!r}")
    extra = [Finding("k8s-sister-replica", "info", "the sister is one extra replica that no Service selects: the "
                     "policy judges it as replicas >= 2. It needs a GPU of its own (the production pod's resources "
                     "are copied) and is deleted at the end, on failure too.")]
    if spec.command and list(spec.command) != command:
        extra.append(Finding("k8s-command-ignored", "warn", f"the command after `--` ({shlex.join(spec.command)}) "
                             f"is ignored: the sister runs the Deployment's own ({shlex.join(command)})."))
    judged = build_plan(spec.with_changes(command=tuple(command), replicas=max(2, spec.replicas),
                                          gpu_memory_utilization=_gpu_memory(spec, container)))
    if any(f.code == WARMUP_CODE for f in judged.findings):  # the sister is captured only once it serves
        judged.findings[:] = [f for f in judged.findings if f.code != WARMUP_CODE]
        extra.append(Finding("k8s-sister-after-ready", "info", "the sister's captures attach after its readiness "
                             "probe passes (`kubectl wait --for=condition=Ready` after the release): its start-up "
                             "launches (warm-up, CUDA-graph capture) are behind them, so --launch-skip 0 counts "
                             "serving launches."))
    sopts = km.SisterOptions(container=opts.container, capture_id=opts.capture_id, ncu_image=opts.ncu_image,
                             ncu_home=opts.ncu_home, drop_env=opts.drop_env, keep_labels=opts.keep_labels,
                             entrypoint=opts.entrypoint, counters_cap=opts.counters_cap)
    sister = km.derive_sister(deployment, sopts, judged.launch_argv(km.SISTER_NCU))
    _set_env(sister, opts.container, judged.env)
    problems = km.sister_problems(deployment, sister, services, sopts)
    workers, worker_findings = _workers(opts, container, spec.port or BASE_PORT)
    return K8sPlan("sister", opts, opts.namespace or str(meta.get("namespace") or "default"), judged,
                   [*judged.findings, *_findings(problems), *extra, *worker_findings], out_dir, opts.container,
                   km.SISTER_NCU, km.OUT_MOUNT, deployment=name, revision=_revision(deployment),
                   sister=str(sister["metadata"]["name"]),
                   selector=km.label_selector(km.sister_selector(opts.capture_id)),
                   manifests={"sister.yaml": sister}, workers=workers)


def _set_env(sister: dict[str, Any], container: str, env: Mapping[str, str]) -> None:
    """The spec's env goes on ncu's own process: in the sister that is the container's env."""
    if env:
        target = km.find_container(sister["spec"]["template"]["spec"], container, "sister")
        kept = [e for e in target.get("env") or [] if e.get("name") not in env]
        target["env"] = [*kept, *({"name": k, "value": v} for k, v in sorted(env.items()))]


def _debug_plan(spec: CaptureSpec, opts: K8sOptions, pod: Mapping[str, Any] | None,
                deployment: Mapping[str, Any] | None, out_dir: Path) -> K8sPlan:
    if pod is None:
        raise InputError("capture k8s --method debug: no Pod given. Pass --name POD (read with `kubectl get pod "
                         "NAME -o json`) or --from-json DIR holding pod.json.")
    pod = km.parse_doc(pod, "Pod", "pod")
    meta = pod.get("metadata") or {}
    name = str(meta.get("name", ""))
    container = km.find_container(pod.get("spec") or {}, opts.container, f"pod {name!r}")
    ephemeral = f"{DEBUG_PREFIX}{opts.capture_id}"
    if len(ephemeral) > 63 or not _DNS_LABEL.fullmatch(ephemeral):
        raise InputError(f"capture id {opts.capture_id!r}: the debug container would be named {ephemeral!r}, "
                         f"expected a DNS label (lowercase letters, digits, '-', at most 63 characters). Pick an "
                         f"id such as 'decode-gemm-1'.")
    judged = build_plan(spec.with_changes(gpu_memory_utilization=_gpu_memory(spec, container)))
    extra = [Finding("k8s-debug-privileged", "info", "`kubectl debug --profile sysadmin` makes the ncu container "
                     "privileged (GPU performance counters need CAP_SYS_ADMIN under the default driver setting; "
                     "--profile general only adds SYS_PTRACE); a namespace enforcing Pod Security 'baseline' "
                     "refuses it."),
             Finding("k8s-ephemeral-stays", "info", f"ephemeral containers cannot be removed: {ephemeral} stays "
                     f"in the pod's spec until the pod is replaced; its idle process (`sleep {opts.lifetime_s}`) "
                     f"ends by itself. Each capture id adds one.")]
    needed = len(judged.per_kernel()) * (opts.attach_window_s + opts.grace_s) + 300
    if opts.lifetime_s < needed:
        extra.append(Finding("k8s-debug-lifetime", "warn", f"the debug container idles for {opts.lifetime_s} s "
                             f"but the captures may take {needed} s (attach window + grace per kernel); raise "
                             f"--debug-lifetime or lower --attach-window."))
    if opts.workers is not None:
        extra.append(Finding("k8s-workers-ignored", "warn", f"--workers {opts.workers} is ignored with --method "
                             "debug: the production server was released when it started serving."))
    if spec.env:
        extra.append(Finding("k8s-env-ignored", "warn", "env is ignored with --method debug: the server was launched "
                             "already, and the attaching ncu's environment does not reach it."))
    problems = km.sidecar_problems(pod, opts.container)
    plan = K8sPlan("debug", opts, opts.namespace or str(meta.get("namespace") or "default"), judged,
                   [*judged.findings, *_findings(problems), *extra], out_dir, ephemeral, opts.debug_ncu,
                   DEBUG_REMOTE_DIR, pod=name, deployment=_owner_deployment(pod, deployment),
                   revision=_revision(deployment))
    # what `kubectl debug --profile sysadmin` adds, for review (kubectl builds it from the flags)
    plan.manifests["ephemeral-container.yaml"] = {
        "name": ephemeral, "image": opts.ncu_image, "command": ["sleep", str(opts.lifetime_s)],
        "targetContainerName": opts.container, "terminationMessagePolicy": "File",
        "securityContext": {"privileged": True}}
    return plan


def _owner_deployment(pod: Mapping[str, Any], deployment: Mapping[str, Any] | None) -> str | None:
    """The Deployment behind a pod: given, else its ReplicaSet owner's name less the pod-template-hash suffix."""
    if deployment is not None:
        return str((deployment.get("metadata") or {}).get("name") or "") or None
    meta = pod.get("metadata") or {}
    hash_ = (meta.get("labels") or {}).get("pod-template-hash")
    for ref in meta.get("ownerReferences") or []:
        rs = str(ref.get("name", ""))
        if ref.get("kind") == "ReplicaSet" and hash_ and rs.endswith(f"-{hash_}"):
            return rs[: -len(hash_) - 1]
    return None
