"""The k8s capture's data: K8sOptions (where and how), K8sStep (one kubectl argv), K8sPlan (a judged plan with its
steps in run order) and what a run leaves (K8sRunResult, K8sCapture). Every k8s module builds on these.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.capture.plan.build import REFUSED_NOTE, Plan
from perfreport.capture.plan.policy import Finding, verdict_of
from perfreport.capture.run_record import Step

POD = "<pod>"  # the sister's pod name, known once its ReplicaSet created it (the run fills it in)


@dataclass(frozen=True)
class K8sStep:
    """One kubectl command: what it is for (action), its argv, and for exports the local file its stdout fills."""

    name: str
    argv: tuple[str, ...]
    action: str
    capture: str | None = None
    stdout_file: str | None = None
    wait_for: int = 0
    window_s: int = 0
    pod_slots: tuple[int, ...] = ()
    port: int | None = None  # a release of exactly this port (the session must attach there)

    def resolved(self, kubectl: str, pod: str | None) -> list[str]:
        """The argv to run: our kubectl as argv[0], the pod name in its slots only (kernel patterns stay as given)."""
        argv = [kubectl, *self.argv[1:]]
        for i in self.pod_slots:
            if pod is not None:
                argv[i] = argv[i].replace(POD, pod)
        return argv

    def remote_ncu(self) -> list[str]:
        """The ncu argv inside the pod (after `--` and the timeout backstop); [] when the step runs no ncu."""
        argv = list(self.argv)
        remote = argv[argv.index("--") + 1:] if "--" in argv else []
        return remote[6:] if remote[:1] == ["timeout"] else remote

    def preview(self, pod: str | None = None) -> str:
        """Shell form for humans (quoted; stdout redirection shown; the pod filled in when known), never executed."""
        text = shlex.join(self.resolved(self.argv[0], pod))
        return f"{text} > {shlex.quote(self.stdout_file)}" if self.stdout_file else text


@dataclass(frozen=True)
class K8sOptions:
    """Where and how: the server container, the capture id, the ncu image, and the time bounds (seconds)."""

    container: str
    capture_id: str
    ncu_image: str
    namespace: str | None = None
    ncu_home: str = "/opt/nvidia/nsight-compute"
    debug_ncu: str = "ncu"
    entrypoint: tuple[str, ...] = ()
    keep_labels: tuple[str, ...] = ()
    drop_env: tuple[str, ...] = ()
    counters_cap: bool = True
    attach_window_s: int = 600
    release_window_s: int = 120
    grace_s: int = 120
    lifetime_s: int = 3600
    ready_timeout_s: int = 900
    workers: int | None = None  # the server's CUDA processes (sister releases); None: from its TP x PP arguments


@dataclass
class K8sPlan:
    """A judged k8s capture: the ncu plan, the policy and k8s findings, the manifests, every kubectl step in order."""

    method: str
    opts: K8sOptions
    namespace: str
    plan: Plan
    findings: list[Finding]
    out_dir: Path
    exec_container: str
    ncu: str
    remote_dir: str
    pod: str | None = None
    deployment: str | None = None
    revision: str | None = None
    sister: str | None = None
    selector: str | None = None
    workers: int = 1
    steps: list[K8sStep] = field(default_factory=list)
    cleanup: list[K8sStep] = field(default_factory=list)
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ok | warn | refuse over the ncu policy and the k8s checks."""
        return verdict_of(self.findings)

    @property
    def kind(self) -> str:
        """The receipt's capture_kind."""
        return "k8s-sister" if self.method == "sister" else "k8s-debug"

    @property
    def capture_id(self) -> str:
        """The capture id (labels, container and file names)."""
        return self.opts.capture_id

    @property
    def target_container(self) -> str:
        """The server's container: the sister's, or the production one the debug container targets."""
        return self.opts.container

    def captures(self) -> list[Plan]:
        """One ncu plan per kernel pattern, in order."""
        return self.plan.per_kernel()

    def argvs(self) -> list[list[str]]:
        """Every argv, in the order run executes them (cleanup last)."""
        return [list(s.argv) for s in [*self.steps, *self.cleanup]]

    def as_dict(self) -> dict[str, Any]:
        """JSON form (k8s-plan.json); a refused plan lists no steps (nothing there to run)."""
        runnable = self.verdict != "refuse"
        return {"schema_version": 1, "method": self.method, "namespace": self.namespace, "pod": self.pod,
                "container": self.exec_container, "target_container": self.target_container,
                "deployment": self.deployment, "revision": self.revision, "capture_id": self.capture_id,
                "sister": self.sister, "selector": self.selector, "workers": self.workers, "verdict": self.verdict,
                "findings": [f.as_dict() for f in self.findings],
                "manifests": sorted(self.manifests) if runnable else [],
                "steps": [_step_dict(s) for s in self.steps] if runnable else [],
                "cleanup": [_step_dict(s) for s in self.cleanup] if runnable else []}

    def text(self) -> str:
        """Human form: verdict, findings, manifests, then the numbered kubectl commands; a refused plan shows only
        its refusals, so no command is there to copy."""
        lines = [f"verdict: {self.verdict.upper()} ({self.method}, namespace {self.namespace})"]
        if self.verdict == "refuse":
            lines += [f"  [{f.level}] {f.code}: {f.message}" for f in self.findings if f.level == "refuse"]
            return "\n".join([*lines, REFUSED_NOTE])
        lines += [f"  [{f.level}] {f.code}: {f.message}" for f in self.findings]
        lines += [f"manifest: {self.out_dir / name}" for name in sorted(self.manifests)]
        lines += [f"{i:2d}. {s.name}: {s.preview()}" for i, s in enumerate(self.steps, 1)]
        lines += [f"    cleanup {s.name} (always, on failure too): {s.preview()}" for s in self.cleanup]
        if self.method == "sister":
            lines.append(f"{POD}: the sister's pod, read from `kubectl get pods -l {self.selector}` at run time")
        return "\n".join(lines)


def _step_dict(step: K8sStep) -> dict[str, Any]:
    out: dict[str, Any] = {"name": step.name, "action": step.action, "argv": list(step.argv)}
    return {**out, **{k: v for k, v in (("capture", step.capture), ("stdout_file", step.stdout_file),
                                                   ("port", step.port)) if v}}


@dataclass
class K8sCapture:
    """One kernel's capture: its receipt, report, outputs, and what ncu profiled."""

    name: str
    receipt_path: Path
    report_path: Path | None
    outputs: list[Path]
    kernel_names: list[str]
    exit_status: int | None
    ok: bool


@dataclass
class K8sRunResult:
    """What k8s_run did: per-kernel captures, the cleanup receipt, every step; ran is False for a dry run."""

    plan: K8sPlan
    ran: bool
    ok: bool
    pod: str | None = None
    captures: list[K8sCapture] = field(default_factory=list)
    cleanup_receipt_path: Path | None = None
    steps: list[Step] = field(default_factory=list)
    cleanup: list[dict[str, Any]] = field(default_factory=list)
