"""capture plan: a spec and its policy findings turned into the exact ncu argv lists (never a shell string).

Argv shapes, as ncu 2025.3.1 accepted them on the H200 (tests/data/h200_shared/README.md, tests/data/h200_capture):
  launch             ncu --mode launch --target-processes all -- CMD...      (no --clock-control: rejected there)
  attach             ncu --mode attach --hostname H [--port P] --clock-control none -k P -s N -c N --set S -o OUT
  launch-and-attach  ncu --clock-control none --target-processes all -k P ... -o OUT -- CMD...
  export             ncu --import OUT.ncu-rep --csv --page raw | --page details --section SpeedOfLight
Environment variables of the spec are set on ncu's own process (`Plan.env`), never via `env` after `--`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from perfreport.capture.plan.policy import Finding, check_policy, verdict_of
from perfreport.capture.plan.spec import CaptureSpec


@dataclass
class Plan:
    """A judged capture spec and the argv that carry it out."""

    spec: CaptureSpec
    findings: list[Finding] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ok | warn | refuse."""
        return verdict_of(self.findings)

    @property
    def env(self) -> dict[str, str]:
        """Variables for ncu's own process (the target inherits them)."""
        return self.spec.env_dict()

    def per_kernel(self) -> list[Plan]:
        """One plan per kernel pattern (output NAME-1, NAME-2, ...); itself when it has one pattern or none."""
        pats = self.spec.kernel_patterns
        if len(pats) <= 1:
            return [self]
        return [build_plan(self.spec.with_changes(kernel_patterns=(p,), output=f"{self.spec.output}-{i}"))
                for i, p in enumerate(pats, 1)]

    def profile_options(self) -> list[str]:
        """Kernel selection and collection options, shared by attach and launch-and-attach."""
        s = self.spec
        if len(s.kernel_patterns) > 1:
            raise ValueError("a plan with several kernel patterns has no single argv: use plan.per_kernel()")
        out: list[str] = []
        if s.kernel_name_base != "function":
            out += ["--kernel-name-base", s.kernel_name_base]
        for pat in s.kernel_patterns:
            out += ["--kernel-name", pat]
        if s.launch_skip:
            out += ["--launch-skip", str(s.launch_skip)]
        out += ["--launch-count", str(s.launch_count)]
        if s.nvtx_include:
            out.append("--nvtx")
            for rng in s.nvtx_include:
                out += ["--nvtx-include", rng]
        if s.section_set:
            out += ["--set", s.section_set]
        if s.metrics:
            out += ["--metrics", ",".join(s.metrics)]
        if s.replay_mode != "kernel":
            out += ["--replay-mode", s.replay_mode]
        if s.graph_profiling != "node":
            out += ["--graph-profiling", s.graph_profiling]
        return out

    def launch_argv(self, ncu: str = "ncu") -> list[str]:
        """Start the target under `ncu --mode launch`; it blocks at its first CUDA call until an attach."""
        argv = [ncu, "--mode", "launch", "--target-processes", self.spec.target_processes]
        if self.spec.port is not None:
            argv += ["--port", str(self.spec.port)]
        if not self.spec.profile_from_start:
            argv += ["--profile-from-start", "off"]
        return [*argv, "--", *self._command()]

    def attach_argv(self, ncu: str = "ncu") -> list[str]:
        """Attach to a process started by launch_argv and profile the scoped kernels into spec.output."""
        argv = [ncu, "--mode", "attach", "--hostname", self.spec.hostname]
        if self.spec.port is not None:
            argv += ["--port", str(self.spec.port)]
        return [*argv, "--clock-control", self.spec.clock_control, *self.profile_options(), "-o", self.spec.output]

    def launch_and_attach_argv(self, ncu: str = "ncu") -> list[str]:
        """Launch the command under ncu and profile it in one go (ncu's default mode)."""
        argv = [ncu, "--clock-control", self.spec.clock_control, "--target-processes", self.spec.target_processes]
        if not self.spec.profile_from_start:
            argv += ["--profile-from-start", "off"]
        return [*argv, *self.profile_options(), "-o", self.spec.output, "--", *self._command()]

    def import_argvs(self, report: str, ncu: str = "ncu") -> list[list[str]]:
        """Exports of a report: the raw page (every metric) and the SpeedOfLight details page."""
        return [[ncu, "--import", report, "--csv", "--page", "raw"],
                [ncu, "--import", report, "--csv", "--page", "details", "--section", "SpeedOfLight"]]

    def _command(self) -> list[str]:
        if not self.spec.command:
            raise ValueError("the capture spec has no command: launch modes need one (--  CMD ...)")
        return list(self.spec.command)

    def as_dict(self, ncu: str = "ncu") -> dict[str, Any]:
        """JSON form: verdict, findings and every argv the plan can produce (none for a refused plan)."""
        argvs: dict[str, Any] = {}
        for p in [] if self.verdict == "refuse" else self.per_kernel():
            one: dict[str, Any] = {"attach": p.attach_argv(ncu)}
            if self.spec.command:
                one["launch"] = p.launch_argv(ncu)
                one["launch_and_attach"] = p.launch_and_attach_argv(ncu)
            one["import"] = p.import_argvs(f"{p.spec.output}.ncu-rep", ncu)
            argvs[p.spec.output] = one
        return {"verdict": self.verdict, "findings": [f.as_dict() for f in self.findings], "env": self.env,
                "captures": argvs}


REFUSED_NOTE = "no command is shown for a refused plan: fix each refusal above, then plan again."


def build_plan(spec: CaptureSpec) -> Plan:
    """Judge spec against the safety policy and return its plan (argv are built on demand)."""
    return Plan(spec, check_policy(spec))


def shell_preview(argv: list[str], env: dict[str, str] | None = None) -> str:
    """A copy-pastable shell line for argv (quoted; env as NAME=value prefixes on ncu itself)."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    return f"{prefix} {shlex.join(argv)}".strip()


def plan_text(plan: Plan, ncu: str = "ncu", modes: tuple[str, ...] = ("launch", "attach", "launch_and_attach",
                                                                      "import")) -> str:
    """Human form of a plan: verdict, each finding with its reason, then the argv per capture; a refused plan shows
    only its refusals, so no command is there to copy."""
    lines = [f"verdict: {plan.verdict.upper()}"]
    if plan.verdict == "refuse":
        lines += [f"  [{f.level}] {f.code}: {f.message}" for f in plan.findings if f.level == "refuse"]
        return "\n".join([*lines, REFUSED_NOTE])
    for f in plan.findings:
        lines.append(f"  [{f.level}] {f.code}: {f.message}")
    for name, argvs in plan.as_dict(ncu)["captures"].items():
        lines.append(f"capture {name}:")
        for mode in modes:
            if mode == "import":
                lines += [f"  import:  {shlex.join(a)}" for a in argvs["import"]]
            elif mode in argvs:
                env = plan.env if mode != "attach" else {}
                lines.append(f"  {re.sub('_', '-', mode)}: {shell_preview(argvs[mode], env)}")
    return "\n".join(lines)
