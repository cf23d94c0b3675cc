"""What `capture k8s run` leaves behind: K8sRunResult and K8sCapture, and write_receipts, which writes one
NAME.receipt.json per kernel reached (mode attach) and ID-cleanup.receipt.json for the whole session (mode cleanup).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from perfreport.bundle import capture_files
from perfreport.capture.k8s.model import K8sCapture, K8sPlan, K8sRunResult, K8sStep
from perfreport.capture.run_record import Step, iso
from perfreport.files import sha256_file
from perfreport.progress import Progress


class StepFailed(Exception):
    """A step that failed: which, its exit status, its output's tail and the fix to print."""

    def __init__(self, step: str, rc: int | None, tail: str, fix: str) -> None:
        super().__init__(step)
        self.step, self.rc, self.tail, self.fix = step, rc, tail, fix


@dataclass
class KernelRun:
    """One kernel's attach: its step, the steps run for it, its files and what ncu profiled."""

    step: K8sStep
    steps: list[Step] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    profiled: list[str] = field(default_factory=list)
    exit_status: int | None = None
    started: float = field(default_factory=time.time)
    ended: float | None = None
    error: str | None = None

class RunState(Protocol):
    """What the receipts read of a finished run (the runner in k8s.steps)."""

    plan: K8sPlan
    pod: str | None
    bundle: Path
    profiles: Path
    kernels: dict[str, KernelRun]
    steps: list[Step]
    common: list[Step]
    cleanup: list[dict[str, Any]]
    ncu_version: str | None
    started: float
    say: Progress


def write_receipts(run: RunState, published: list[Path], failure: StepFailed | None) -> K8sRunResult:
    """Write every receipt of a finished run (after cleanup, so each says whether it worked); return the result."""
    from perfreport.bundle.receipt import new_receipt, write_receipt

    plan, by_name, now = run.plan, {p.name: p for p in published}, time.time()
    result = K8sRunResult(plan, ran=True, ok=failure is None, pod=run.pod, steps=run.steps, cleanup=run.cleanup)
    for p in plan.captures():
        kernel = run.kernels.get(p.spec.output)
        if kernel is None:  # not reached: the session receipt records why
            continue
        outs = [by_name[f] for f in kernel.files if f in by_name]
        diagnosis = ([{"code": "k8s-step-failed", "message": kernel.error}] if kernel.error else
                     [{"code": "ok", "message": f"{len(kernel.profiled)} kernel(s) profiled"}])
        receipt = new_receipt(**_fields(run, p.spec), mode="attach", started_at=iso(kernel.started),
                              ended_at=iso(kernel.ended or now), kernels_profiled=len(kernel.profiled),
                              kernel_names=kernel.profiled, exit_status=kernel.exit_status,
                              outputs=[_output(run.bundle, o) for o in outs], diagnosis=diagnosis,
                              steps=[s.as_dict() for s in [*run.common, *kernel.steps]], cleanup=run.cleanup,
                              argv=kernel.step.remote_ncu())
        path = capture_files(run.profiles, p.spec.output)["receipt"]
        write_receipt(path, receipt)
        report = by_name.get(f"{p.spec.output}.ncu-rep")
        result.captures.append(K8sCapture(p.spec.output, path, report, outs, kernel.profiled,
                                          kernel.exit_status, kernel.error is None and report is not None))
    names = [n for k in run.kernels.values() for n in k.profiled]
    why = ([{"code": "k8s-step-failed", "message": f"{failure.step} (rc={failure.rc}): {failure.fix}"}]
           if failure else [{"code": "ok", "message": f"{len(names)} kernel(s) profiled, cleanup run"}])
    receipt = new_receipt(**_fields(run, plan.plan.spec), mode="cleanup", started_at=iso(run.started),
                          ended_at=iso(now), kernels_profiled=len(names), kernel_names=names, exit_status=None,
                          outputs=[_output(run.bundle, o) for o in published], diagnosis=why,
                          steps=[s.as_dict() for s in run.steps], cleanup=run.cleanup, argv=None)
    result.cleanup_receipt_path = run.profiles / f"{plan.capture_id}-cleanup.receipt.json"
    write_receipt(result.cleanup_receipt_path, receipt)
    run.say(f"receipts: {result.cleanup_receipt_path.name}"
            + "".join(f", {c.receipt_path.name}" for c in result.captures))
    return result


def _fields(run: RunState, spec: Any) -> dict[str, Any]:
    plan = run.plan
    return {"campaign": spec.campaign, "cell_id": spec.cell_id, "ncu_version": run.ncu_version,
            "driver_version": None, "cuda_version": None, "gpu_name": None,
            "kernel_patterns": list(spec.kernel_patterns), "kernel_name_base": spec.kernel_name_base,
            "section_set": spec.section_set, "metrics": list(spec.metrics), "launch_skip": spec.launch_skip,
            "launch_count": spec.launch_count, "replay_mode": spec.replay_mode,
            "target_processes": spec.target_processes, "deployment_revision": plan.revision,
            "plan_findings": [{"code": f.code, "level": f.level} for f in plan.findings], "kind": plan.kind,
            "target": {"namespace": plan.namespace, "pod": run.pod, "deployment": plan.deployment,
                       "container": plan.target_container}}


def _output(bundle: Path, path: Path) -> dict[str, Any]:
    return {"path": path.relative_to(bundle).as_posix(), "bytes": path.stat().st_size,
            "sha256": sha256_file(path)}
