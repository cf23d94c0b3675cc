"""The kubectl steps of a k8s capture: K8sStep (one argv list, never a shell string) and kubectl_steps, which lists
a K8sPlan's steps in run order, plus the pkill pattern that stops an attach (ere_escape, interrupt_pattern).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfreport.capture.k8s.model import POD, K8sPlan, K8sStep
from perfreport.capture.plan.build import build_plan
from perfreport.capture.release import BASE_PORT, release_argv
from perfreport.capture.run_record import exports_for

_ERE_SPECIAL = frozenset("\\.[]()*+?{}|^$")




# Stopping an attach: an attach does not end after --launch-count kernels, and `kubectl exec` forwards no signal to
# the remote process, so every remote ncu runs under `timeout -s INT -k GRACE WINDOW` (a backstop: it cannot outlive
# the window even if we die) and is stopped early by `pkill -INT -f PATTERN` once its `==PROF== Profiling` lines are
# in. PATTERN (`^[^ ]*ncu .* -o /ncu-out/NAME$`) matches the ncu binary only, not `timeout ...` nor the `/bin/sh
# .../ncu` wrapper, so ncu gets one SIGINT (H200, ncu 2025.3.1: the wrapper does not exec the binary; SIGINT to the
# binary wrote the report, exit 0; the backstop alone also wrote it, exit 124). docs/capture.md, "Kubernetes".
def ere_escape(text: str) -> str:
    """Escape text for a POSIX extended regex (pkill -f), character by character."""
    return "".join(f"\\{c}" if c in _ERE_SPECIAL else c for c in text)


def interrupt_pattern(tail: Sequence[str]) -> str:
    """pkill -f pattern for the ncu binary whose argv ends with tail (not `timeout ...`, not `/bin/sh .../ncu`)."""
    return f"^[^ ]*ncu .* {ere_escape(' '.join(tail))}$"


def kubectl_steps(plan: K8sPlan) -> tuple[list[K8sStep], list[K8sStep]]:
    """The plan's kubectl steps and its cleanup steps, in the order k8s_run runs them."""
    if plan.method == "sister":
        return _sister_steps(plan), _sister_cleanup(plan)
    return _debug_steps(plan), _debug_cleanup(plan)


# -- steps: every argv starts with `kubectl VERB` ------------------------------------------------------------------
def _exec(plan: K8sPlan, name: str, action: str, remote: Sequence[str], **kw: Any) -> K8sStep:
    argv = ("kubectl", "exec", "-n", plan.namespace, plan.pod or POD, "-c", plan.exec_container, "--", *remote)
    return K8sStep(name, argv, action, pod_slots=() if plan.pod else (4,), **kw)


def _backstop(window_s: int, grace_s: int) -> list[str]:
    return ["timeout", "-s", "INT", "-k", str(grace_s), str(window_s)]


def _release_steps(plan: K8sPlan, name: str) -> list[K8sStep]:
    """Per CUDA process: an attach that profiles nothing (release.py), then its interrupt.

    One worker: one release on any port (ncu attaches the first that answers). Several: one per port from the base
    port up, each exact (release_argv exact_port), named `release-PORT`, run one after the other.
    """
    o, spec = plan.opts, plan.plan.spec
    ports: list[int | None] = [spec.port] if plan.workers == 1 else \
        list(range(spec.port or BASE_PORT, (spec.port or BASE_PORT) + plan.workers))
    out = []
    for port in ports:
        exact = plan.workers > 1
        step = f"{name}-{port}" if exact else name
        release = release_argv(plan.ncu, spec.hostname, port, exact_port=exact)
        out += [_exec(plan, step, "attach", [*_backstop(o.release_window_s, o.grace_s), *release],
                      window_s=o.release_window_s, port=port if exact else None),
                _exec(plan, f"{step}-interrupt", "interrupt",
                      ["pkill", "-INT", "-f", interrupt_pattern(release[-4:])])]
    return out


def _capture_steps(plan: K8sPlan) -> list[K8sStep]:
    """Per kernel: attach (backstopped), interrupt, copy the report, export its raw and SpeedOfLight pages."""
    o, out = plan.opts, []
    for p in plan.captures():
        name, remote = p.spec.output, f"{plan.remote_dir}/{p.spec.output}"
        argv = build_plan(p.spec.with_changes(output=remote)).attach_argv(plan.ncu)
        if argv[-2:] != ["-o", remote]:  # the interrupt pattern anchors on it
            raise ValueError(f"attach argv must end with -o {remote}: {argv}")
        out += [_exec(plan, "attach", "attach", [*_backstop(o.attach_window_s, o.grace_s), *argv], capture=name,
                      wait_for=p.spec.launch_count, window_s=o.attach_window_s),
                _exec(plan, "interrupt", "interrupt", ["pkill", "-INT", "-f", interrupt_pattern(argv[-2:])],
                      capture=name),
                K8sStep("cp", ("kubectl", "cp", f"{plan.namespace}/{plan.pod or POD}:{remote}.ncu-rep",
                               f"{name}.ncu-rep", "-c", plan.exec_container), "cp", capture=name,
                        pod_slots=() if plan.pod else (2,))]
        out += [_exec(plan, f"export{suffix.removesuffix('.csv')}", "export", export, capture=name,
                      stdout_file=f"{name}{suffix}")
                for export, suffix in exports_for(p.import_argvs(f"{remote}.ncu-rep", plan.ncu))]
    return out


def _sister_steps(plan: K8sPlan) -> list[K8sStep]:
    ns, o = plan.namespace, plan.opts
    return [
        K8sStep("check-deployment", ("kubectl", "get", "deployment", plan.deployment or "", "-n", ns, "-o", "json"),
                "check-deployment"),
        K8sStep("create", ("kubectl", "create", "-n", ns, "-f", (plan.out_dir.resolve() / "sister.yaml").as_posix()),
                "run"),
        K8sStep("wait-pod", ("kubectl", "get", "pods", "-n", ns, "-l", plan.selector or "", "-o", "json"),
                "poll-pod"),
        _exec(plan, "ncu-version", "version", [plan.ncu, "--version"]),
        *_release_steps(plan, "release"),
        K8sStep("wait-ready", ("kubectl", "wait", "-n", ns, "--for=condition=Ready", f"pod/{POD}",
                               f"--timeout={o.ready_timeout_s}s"), "run", pod_slots=(5,)),
        *_capture_steps(plan),
    ]


def _sister_cleanup(plan: K8sPlan) -> list[K8sStep]:
    return [K8sStep("delete-sister", ("kubectl", "delete", "deployment", plan.sister or "", "-n", plan.namespace,
                                      "--wait=false"), "cleanup")]


def _debug_steps(plan: K8sPlan) -> list[K8sStep]:
    ns, pod, o = plan.namespace, plan.pod or "", plan.opts
    get = ("kubectl", "get", "pod", pod, "-n", ns, "-o", "json")
    return [
        K8sStep("check-pod", get, "check-pod"),
        K8sStep("debug", ("kubectl", "debug", "-n", ns, pod, "--image", o.ncu_image, "--target", o.container,
                          "--profile", "sysadmin", "-c", plan.exec_container, "--", "sleep", str(o.lifetime_s)),
                "run"),
        K8sStep("wait-debug-container", get, "poll-ephemeral"),
        _exec(plan, "ncu-version", "version", [plan.ncu, "--version"]),
        *_capture_steps(plan),
    ]


def _debug_cleanup(plan: K8sPlan) -> list[K8sStep]:
    """Interrupt any ncu of ours still attached to the production pod (pkill rc 1: none was)."""
    names = "|".join(ere_escape(p.spec.output) for p in plan.captures())
    pattern = f"^[^ ]*ncu .* -o {ere_escape(plan.remote_dir)}/({names})$"
    return [_exec(plan, "interrupt-leftover-ncu", "cleanup", ["pkill", "-INT", "-f", pattern])]
