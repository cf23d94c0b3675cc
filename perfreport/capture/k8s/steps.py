"""capture k8s run: execute a K8sPlan's kubectl steps (argv lists, shell=False), record each, always clean up.

Outputs land in <bundle>/ncu-profiles/ as for a local run (NAME.ncu-rep, NAME-raw.csv, NAME-sol.csv,
NAME.ncu-output.txt, NAME.receipt.json), staged in a hidden folder and renamed into place, plus
ID-release.ncu-output.txt (sister; ID-release-PORT.ncu-output.txt per worker when it has several) and
ID-cleanup.receipt.json (the whole session). Cleanup runs in a `finally`
(sister: `kubectl delete deployment SISTER --wait=false`; debug: interrupt any ncu of ours still attached) before
any receipt is written, so every receipt says whether it worked (receipts writes them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfreport.bundle import PROFILES_DIR, capture_files
from perfreport.capture.k8s import manifests as km
from perfreport.capture.k8s.model import K8sPlan, K8sRunResult, K8sStep
from perfreport.capture.k8s.receipts import KernelRun, StepFailed, write_receipts
from perfreport.capture.release import attached_port
from perfreport.capture.run_record import Step, cleanup_entry, iso
from perfreport.capture.session import NcuSession
from perfreport.errors import InputError, PerfReportError
from perfreport.progress import Progress

_CREATES = ("create", "debug")  # the steps that make something cleanup must remove
_BAD_WAITING = ("ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError",
                "CreateContainerError", "InvalidImageName")
_FIXES = {
    "check-deployment": "Check the name and namespace (`kubectl get deployment -n {ns}`) and your credentials.",
    "check-pod": "Check the pod name and namespace (`kubectl get pods -n {ns}`).",
    "create": "AlreadyExists: another capture's sister runs; wait for it, or delete it if it is left over "
              "(`kubectl delete deployment {sister} -n {ns}`). Otherwise check `kubectl auth can-i create deployments "
              "-n {ns}` and the manifest the plan wrote (sister.yaml).",
    "wait-pod": "Read `kubectl describe pod -n {ns} -l {selector}`: image pull, a free nvidia.com/gpu, the ncu "
                "initContainer (--ncu-image must hold ncu under --ncu-home).",
    "debug": "Ephemeral containers need Kubernetes >= 1.25, kubectl >= 1.30 (--profile sysadmin) and RBAC on "
             "pods/ephemeralcontainers; a namespace enforcing Pod Security 'baseline' refuses a privileged one.",
    "wait-debug-container": "Read `kubectl describe pod -n {ns} {pod}` (the ephemeral container's state).",
    "release": "The server (or this worker) never reached its first CUDA call under `ncu --mode launch`, or "
               "listens on another port: read `kubectl logs -n {ns} -l {selector}` (one 'Waiting for profiler to "
               "attach' line per CUDA process) and {log}; set --workers to that count.",
    "wait-ready": "The server did not become Ready after the release: read `kubectl logs -n {ns} -l {selector}`; a "
                  "server with several CUDA processes needs one release per process (--workers N: ports 49152 up).",
    "attach": "Read {name}.ncu-output.txt: ncu lists the kernels it saw when the pattern matched none. Fix "
              "--kernel-name, or raise --attach-window if the kernel is rare under the current load.",
    "cp": "kubectl cp needs `tar` in the container; copy the report by hand with `kubectl exec ... -- cat`.",
    "export": "The .ncu-rep was copied: export it locally with `ncu --import {name}.ncu-rep --csv --page raw`.",
}


def run_plan(plan: K8sPlan, bundle: Path, kubectl: str = "kubectl", dry_run: bool = False,
             progress: Progress | None = None, *, poll_s: float = 2.0, pod_timeout_s: float = 900.0,
             release_attempts: int = 60, release_retry_s: float = 5.0, hold_s: float = 2.0) -> K8sRunResult:
    """Run the plan's steps (dry_run: print them only), clean up always, write receipts; raise on failure."""
    from perfreport.capture.plan.evidence import after_basic_findings

    say = progress or (lambda _msg: None)
    unproven = [f for p in plan.captures() for f in after_basic_findings(p.spec, bundle)]
    if plan.verdict == "refuse" or unproven:
        lines = "\n".join(f"  - {f.code}: {f.message}" for f in [*plan.findings, *unproven] if f.level == "refuse")
        raise PerfReportError(f"capture k8s run: the plan was refused; nothing was run:\n{lines}\nFix the capture "
                              f"spec or the target (see `perftunereport capture k8s plan`) and retry.")
    if dry_run:
        for i, step in enumerate(plan.steps, 1):
            say(f"{i:2d}. {step.name}: {step.preview()}")
        for step in plan.cleanup:
            say(f"    cleanup {step.name}: {step.preview()}")
        return K8sRunResult(plan, ran=False, ok=True, pod=plan.pod)
    timing = {"poll_s": poll_s, "pod_timeout_s": pod_timeout_s, "release_attempts": release_attempts,
              "release_retry_s": release_retry_s, "hold_s": hold_s}
    return _Runner(plan, bundle, kubectl, say, timing).run()


class _Runner:
    def __init__(self, plan: K8sPlan, bundle: Path, kubectl: str, say: Progress, timing: dict[str, float]) -> None:
        # a relative path (tests/.../kubectl) would break the steps that run in the staging folder (cp)
        kubectl = str(Path(kubectl).resolve()) if os.sep in kubectl else kubectl
        self.plan, self.bundle, self.kubectl, self.say, self.t = plan, bundle, kubectl, say, timing
        self.pod = plan.pod
        self.steps: list[Step] = []
        self.common: list[Step] = []
        self.cleanup: list[dict[str, Any]] = []
        self.kernels: dict[str, KernelRun] = {}
        self.ncu_version: str | None = None
        self.created = False
        self.profiles = bundle / PROFILES_DIR
        self.staging = self.profiles / f".k8s-{plan.capture_id}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        self.started = time.time()

    def run(self) -> K8sRunResult:
        self._check_free()
        self.staging.mkdir(parents=True)
        failure: StepFailed | None = None
        try:
            self._steps()
        except StepFailed as exc:
            failure = exc
            self.say(f"FAILED {exc.step} (rc={exc.rc}); cleaning up")
        except KeyboardInterrupt:  # Ctrl-C: still clean up, publish and write the receipts
            failure = StepFailed("interrupted", None, "interrupted (Ctrl-C)", "Re-run when ready; nothing is left.")
        finally:
            self._cleanup()
            published = self._publish()
        result = write_receipts(self, published, failure)
        if failure is not None:
            done = "done" if all(c["ok"] for c in result.cleanup) else "INCOMPLETE: check the cluster by hand"
            raise PerfReportError(
                f"capture k8s run ({self.plan.method}): step {failure.step!r} failed (rc={failure.rc}).\n"
                f"{failure.tail.strip()}\nFix: {failure.fix}\nCleanup {done}. Receipts: "
                + ", ".join(str(p) for p in [result.cleanup_receipt_path, *(c.receipt_path for c in result.captures)]))
        return result

    def _steps(self) -> None:
        steps, i = self.plan.steps, 0
        while i < len(steps):
            step = steps[i]
            if step.capture is not None and step.capture not in self.kernels:
                self.kernels[step.capture] = KernelRun(step)
            try:
                if step.action == "attach":  # an attach and its interrupt go together
                    (self._release if step.capture is None else self._capture)(step, steps[i + 1])
                    i += 2
                    continue
                getattr(self, f"_do_{step.action.replace('-', '_')}")(step)
            except StepFailed as exc:
                if step.capture is not None:
                    self.kernels[step.capture].error = f"{exc.step} (rc={exc.rc}): {exc.tail.strip()[-300:]}"
                raise
            i += 1

    def _check_free(self) -> None:
        names = [f"{self.plan.capture_id}-cleanup.receipt.json",
                 *(self._release_log(s.port) for s in self.plan.steps if s.action == "attach" and s.capture is None)]
        for p in self.plan.captures():
            names += [f.name for f in capture_files(self.profiles, p.spec.output).values()]
        taken = [n for n in names if (self.profiles / n).exists()]
        if taken:
            raise InputError(f"capture k8s run: {self.profiles} already holds {', '.join(taken)}; refusing to "
                             f"overwrite evidence. Pick another --output or --capture-id, or move the files away.")

    def _fix(self, name: str, capture: str | None = None, port: int | None = None) -> str:
        key = "export" if name.startswith("export") else re.sub(r"-\d+$", "", name)  # release-49153: release
        fix = _FIXES.get(key, "Check the cluster and retry.")
        return fix.format(selector=self.plan.selector, ns=self.plan.namespace, pod=self.pod or "POD",
                          id=self.plan.capture_id, sister=self.plan.sister, name=capture or "NAME",
                          log=self._release_log(port))

    # -- one command ---------------------------------------------------------------------------------------------
    def _record(self, step: K8sStep) -> Step:
        rec = Step(step.name, step.resolved(self.kubectl, self.pod), None, iso(time.time()), None)
        kernel = self.kernels.get(step.capture or "")
        (kernel.steps if kernel else self.common).append(rec)
        self.steps.append(rec)
        return rec

    def _call(self, step: K8sStep, rec: Step | None = None, stdout: Path | None = None, cwd: Path | None = None,
              timeout_s: float = 600.0) -> tuple[int, str, str]:
        rec = rec or self._record(step)
        try:
            with stdout.open("wb") if stdout else contextlib.nullcontext() as sink:
                proc = subprocess.run(rec.argv, stdin=subprocess.DEVNULL, stdout=sink or subprocess.PIPE,
                                      stderr=subprocess.PIPE, cwd=cwd, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            rec.error, rec.ended_at = f"{type(exc).__name__}: {exc}", iso(time.time())
            fix = (f"Install kubectl or pass --kubectl PATH ({rec.argv[0]!r} not found)."
                   if isinstance(exc, FileNotFoundError) else self._fix(step.name, step.capture))
            raise StepFailed(step.name, None, str(exc), fix) from exc
        err = proc.stderr.decode("utf-8", "replace")
        rec.rc, rec.ended_at, rec.error = proc.returncode, iso(time.time()), None
        if proc.returncode != 0:
            rec.error = err[-2000:] or f"rc={proc.returncode}"
        return proc.returncode, (proc.stdout or b"").decode("utf-8", "replace"), err

    def _must(self, step: K8sStep, **kw: Any) -> str:
        self.say(f"{step.name}: {step.preview(self.pod)}")
        rc, out, err = self._call(step, **kw)
        if rc != 0:
            raise StepFailed(step.name, rc, err[-1500:], self._fix(step.name, step.capture))
        return out

    # -- handlers ------------------------------------------------------------------------------------------------
    def _do_run(self, step: K8sStep) -> None:
        if step.name not in _CREATES:
            self._must(step)
            return
        self.created = True  # until kubectl says otherwise (a timeout leaves it unknown: clean up)
        try:
            self._must(step)
        except StepFailed as exc:
            self.created = exc.rc is None  # rc 1 (AlreadyExists, Forbidden): nothing of ours to remove
            raise

    def _do_check_deployment(self, step: K8sStep) -> None:
        doc = km.parse_json(self._must(step), "Deployment", f"deployment {self.plan.deployment!r}")
        now = ((doc.get("metadata") or {}).get("annotations") or {}).get(km.REVISION_ANNOTATION)
        if self.plan.revision is not None and str(now) != self.plan.revision:
            raise StepFailed(step.name, 0, f"revision {self.plan.revision} when planned, {now} now", "The Deployment "
                          "changed since the plan: re-run `capture k8s plan` so the sister copies the current spec.")

    def _do_check_pod(self, step: K8sStep) -> None:
        doc = km.parse_json(self._must(step), "Pod", f"pod {self.pod!r}")
        refused = [m for _, level, m in km.sidecar_problems(doc, self.plan.target_container) if level == "refuse"]
        if refused:
            raise StepFailed(step.name, 0, "\n".join(refused), "Use --method sister, or restart the server under "
                          "`ncu --mode launch` first.")

    def _do_version(self, step: K8sStep) -> None:
        rc, out, _ = self._call(step)
        m = re.search(r"Version\s+(\S+)", out) if rc == 0 else None
        self.ncu_version = m.group(1) if m else None
        self.say(f"ncu in the pod: {self.ncu_version or '? (--version failed; not fatal)'}")

    def _poll(self, step: K8sStep, ready: Callable[[Any], str | None]) -> None:
        """Run step every poll_s until ready(doc) names the pod (it raises on a hopeless state); one Step for all."""
        rec = self._record(step)
        self.say(f"{step.name}: {step.preview(self.pod)} (every {self.t['poll_s']:g} s)")
        deadline, polls = time.monotonic() + self.t["pod_timeout_s"], 0
        while True:
            polls += 1
            rc, out, err = self._call(step, rec)
            if rc != 0:
                raise StepFailed(step.name, rc, err[-1500:], self._fix(step.name))
            try:
                found = ready(json.loads(out))
            except json.JSONDecodeError as exc:
                raise StepFailed(step.name, rc, f"kubectl printed no JSON: {exc}", self._fix(step.name)) from exc
            if found:
                self.pod = found
                self.say(f"{step.name}: {found} after {polls} poll(s)")
                return
            if time.monotonic() > deadline:
                rec.error = f"not ready after {polls} polls ({self.t['pod_timeout_s']:g} s)"
                raise StepFailed(step.name, rc, rec.error, self._fix(step.name))
            time.sleep(self.t["poll_s"])

    def _do_poll_pod(self, step: K8sStep) -> None:
        self._poll(step, self._sister_pod)

    def _sister_pod(self, doc: Any) -> str | None:
        for pod in sorted(doc.get("items") or [], key=lambda p: str((p.get("metadata") or {}).get("name"))):
            status = pod.get("status") or {}
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
                reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
                if reason in _BAD_WAITING:
                    raise StepFailed("wait-pod", 0, f"container {cs.get('name')!r}: {reason}", self._fix("wait-pod"))
            mine = [c for c in status.get("containerStatuses") or [] if c.get("name") == self.plan.exec_container]
            if mine and (mine[0].get("state") or {}).get("running") is not None:
                if km.INJECTION_ENV in km.pod_env_names(pod, self.plan.exec_container):
                    raise StepFailed("wait-pod", 0, f"the created pod's container sets {km.INJECTION_ENV}", "An "
                                  "admission webhook injected the continuous profiler into the sister: exclude pods "
                                  f"labelled {km.LABEL_ROLE}={km.ROLE_SISTER} from it, then retry.")
                return str(pod["metadata"]["name"])
        return None

    def _do_poll_ephemeral(self, step: K8sStep) -> None:
        def ready(doc: Any) -> str | None:
            for cs in (doc.get("status") or {}).get("ephemeralContainerStatuses") or []:
                if cs.get("name") != self.plan.exec_container:
                    continue
                state = cs.get("state") or {}
                if state.get("running") is not None:
                    return self.pod
                waiting = (state.get("waiting") or {}).get("reason")
                if state.get("terminated") or waiting in _BAD_WAITING:
                    raise StepFailed(step.name, 0, f"{self.plan.exec_container}: {state}", self._fix(step.name))
            return None

        self._poll(step, ready)

    def _do_cp(self, step: K8sStep) -> None:
        name = f"{step.capture}.ncu-rep"
        self.kernels[step.capture or ""].files.append(name)
        self._must(step, cwd=self.staging)
        if not (self.staging / name).is_file() or (self.staging / name).stat().st_size == 0:
            raise StepFailed(step.name, 0, f"kubectl cp wrote no {name}", self._fix("cp", step.capture))

    def _do_export(self, step: K8sStep) -> None:
        dst = self.staging / (step.stdout_file or "")
        self.kernels[step.capture or ""].files.append(dst.name)
        self._must(step, stdout=dst)
        if dst.stat().st_size == 0:
            raise StepFailed(step.name, 0, f"{dst.name} is empty", self._fix(step.name, step.capture))

    # -- attach sessions: remote ncu under `timeout`, stopped by pkill ------------------------------------------
    def _start(self, step: K8sStep, log: Path) -> tuple[NcuSession, Step]:
        rec = self._record(step)
        self.say(f"{step.name}: {step.preview(self.pod)}")
        session = NcuSession(rec.argv, log)
        try:
            session.start()
        except OSError as exc:
            rec.error, rec.ended_at = f"{type(exc).__name__}: {exc}", iso(time.time())
            raise StepFailed(step.name, None, str(exc), "Install kubectl or pass --kubectl PATH.") from exc
        return session, rec

    def _stop(self, session: NcuSession, rec: Step, interrupt: K8sStep, window_s: float) -> int | None:
        """pkill the remote ncu (rc 1: it had ended), wait for our kubectl exec; if it hangs, stop it locally."""
        self.say(f"{interrupt.name}: {interrupt.preview(self.pod)}")
        rc, _, err = self._call(interrupt)
        wait_s = self.plan.opts.grace_s + 30.0
        if rc not in (0, 1):
            self.say(f"{interrupt.name}: pkill failed (rc={rc}: {err.strip()[-200:]}); the timeout backstop stops "
                     f"ncu within {window_s:g} s")
            wait_s += window_s
        code = session.wait(wait_s)
        if code is None:
            code = session.stop(grace_s=10.0)
            self.cleanup.extend(cleanup_entry(f"local-{s.step}", s.argv, s.ok) for s in session.signals)
        rec.rc, rec.ended_at = code, iso(time.time())
        return code

    def _release_log(self, port: int | None) -> str:
        return f"{self.plan.capture_id}-release{'' if port is None else f'-{port}'}.ncu-output.txt"

    def _release(self, step: K8sStep, interrupt: K8sStep) -> None:
        """Attach until a session connects (on step.port when set), hold, interrupt: the server passes CUDA init."""
        log = self.staging / self._release_log(step.port)
        attempts, where = int(self.t["release_attempts"]), "" if step.port is None else f" on port {step.port}"
        for attempt in range(1, attempts + 1):
            session, rec = self._start(step, log)
            connected = session.wait_until(lambda: session.first("connected") is not None,  # noqa: B023
                                           max(1.0, step.window_s - 10.0))
            answered = attached_port(session) if connected and step.port is not None else step.port
            if answered != step.port:
                self.say(f"{step.name}: port {answered} answered, not {step.port} (its process has not reached "
                         f"CUDA yet, or was released before); detaching and retrying")
                connected = False
            elif connected:
                session.wait_until(lambda: False, self.t["hold_s"])
            rc = self._stop(session, rec, interrupt, step.window_s)
            if connected:
                self.say(f"{step.name}: connected{where} and detached (rc={rc}); the server runs on")
                return
            self.say(f"{step.name}: attempt {attempt}/{attempts}: nothing attachable{where} yet (rc={rc})")
            self._check_still_running(step)
            time.sleep(self.t["release_retry_s"])
        tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.is_file() else ""
        raise StepFailed(step.name, None, tail, self._fix("release", port=step.port))

    def _check_still_running(self, release: K8sStep) -> None:
        """Between release attempts: fail now if the server container stopped, not after every retry of a dead one."""
        poll = next((s for s in self.plan.steps if s.action == "poll-pod"), None)
        if poll is None:
            return
        rc, out, _ = self._call(poll)
        try:
            running = rc == 0 and self._sister_pod(json.loads(out)) is not None
        except json.JSONDecodeError:
            running = True  # cannot tell: keep retrying
        if not running and rc == 0:
            raise StepFailed(release.name, None, "the server container is no longer running (it exited or restarts)",
                          f"Read `kubectl logs -n {self.plan.namespace} -l {self.plan.selector} --previous`: the "
                          f"server failed before its first CUDA call (arguments, port in use, missing GPU).")

    def _capture(self, step: K8sStep, interrupt: K8sStep) -> None:
        kernel = self.kernels[step.capture or ""]
        log = self.staging / f"{step.capture}.ncu-output.txt"
        kernel.files.append(log.name)
        session, rec = self._start(step, log)
        session.wait_profiled(max(1, step.wait_for), max(1.0, step.window_s - 10.0))
        kernel.exit_status = rc = self._stop(session, rec, interrupt, step.window_s)
        kernel.ended = time.time()
        kernel.profiled = [e.name or "" for e in session.events if e.kind == "profiling"]
        self.say(f"{step.capture}: {len(kernel.profiled)} kernel(s) profiled, kubectl exec rc={rc}")
        if not kernel.profiled or session.last("report") is None:
            rec.error = "no kernel was profiled" if not kernel.profiled else "ncu wrote no report"
            tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.is_file() else ""
            raise StepFailed("attach", rc, f"{rec.error}. ncu output:\n{tail}",
                          self._fix("attach", step.capture))

    # -- the end -------------------------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        if not self.created:  # the sister / debug container was never created by this run: touch nothing
            self.say("cleanup: nothing was created, nothing to remove")
            return
        for step in self.plan.cleanup:
            self.say(f"cleanup {step.name}: {step.preview(self.pod)}")
            try:
                rc, _, err = self._call(step, timeout_s=120.0)
            except StepFailed as exc:
                rc, err = -1, exc.tail
            ok = rc == 0 or (rc == 1 and ("pkill" in step.argv or "NotFound" in err))
            self.cleanup.append(cleanup_entry(step.name, step.resolved(self.kubectl, self.pod), ok, rc))
            self.say(f"cleanup {step.name}: {'done' if ok else f'FAILED (rc={rc}): {err.strip()[-300:]}'}")

    def _publish(self) -> list[Path]:
        out = []
        for path in sorted(self.staging.iterdir(), key=lambda p: p.name) if self.staging.is_dir() else []:
            if path.is_file() and path.stat().st_size > 0:
                os.replace(path, self.profiles / path.name)
                out.append(self.profiles / path.name)
        shutil.rmtree(self.staging, ignore_errors=True)
        return out
