"""Printing of the capture verbs (plan, preflight, diagnose, k8s plan) in the --format asked for: their own text,
CSV rows or one JSON document. Exit codes stay with the verbs."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import click

from perfreport.cli.output import emit

if TYPE_CHECKING:
    from perfreport.capture.diagnose.log import Diagnosis
    from perfreport.capture.k8s.model import K8sPlan
    from perfreport.capture.plan.build import Plan
    from perfreport.capture.preflight import PreflightResult

PLAN_COLUMNS = ("kind", "name", "detail", "text")  # finding: code, level, message; command: mode, capture, shell line


def plan_rows(plan: Plan, ncu: str) -> list[tuple[str, str, str, str]]:
    """Each finding (code, level, message), then each ncu command (mode, capture, the shell line of plan_text)."""
    from perfreport.capture.plan.build import shell_preview

    if plan.verdict == "refuse":  # only the refusals: no command a user could copy
        return [("finding", f.code, f.level, f.message) for f in plan.findings if f.level == "refuse"]
    rows = [("finding", f.code, f.level, f.message) for f in plan.findings]
    for name, argvs in plan.as_dict(ncu)["captures"].items():
        for mode in ("launch", "attach", "launch_and_attach"):
            if mode in argvs:
                rows.append(("command", mode.replace("_", "-"), name,
                             shell_preview(argvs[mode], plan.env if mode != "attach" else {})))
        rows += [("command", "import", name, shlex.join(a)) for a in argvs["import"]]
    return rows


def print_plan(plan: Plan, ncu: str, fmt: str) -> None:
    """Print a capture plan: its text, CSV rows (plan_rows) or its JSON form."""
    from perfreport.capture.plan.build import plan_text

    emit(fmt, lambda: click.echo(plan_text(plan, ncu)), lambda: (PLAN_COLUMNS, plan_rows(plan, ncu)),
         lambda: plan.as_dict(ncu), indent=2)


def print_preflight(result: PreflightResult, fmt: str) -> None:
    """Print the preflight checks: one line each, CSV rows (status, name, message) or JSON."""
    from perfreport.capture.preflight import preflight_summary

    emit(fmt, lambda: click.echo(preflight_summary(result)),
         lambda: (("status", "name", "message"), [(c.status, c.name, c.message) for c in result.checks]),
         result.as_dict, indent=2)


def print_diagnoses(found: list[Diagnosis], fmt: str) -> None:
    """Print the diagnoses: code and message with the proving lines, CSV rows (evidence lines joined) or JSON."""
    def table() -> None:
        for d in found:
            click.echo(f"{d.code}: {d.message}")
            for line in d.evidence:
                click.echo(f"    | {line}")

    def doc() -> list[dict[str, Any]]:
        return [{"code": d.code, "message": d.message, "evidence": list(d.evidence), "details": d.details}
                for d in found]

    emit(fmt, table, lambda: (("code", "message", "evidence"),
                              [(d.code, d.message, "\n".join(d.evidence)) for d in found]), doc, indent=2)


def k8s_rows(plan: K8sPlan) -> list[tuple[str, str, str, str]]:
    """Each finding (code, level, message), manifest (name, path), kubectl step and cleanup (name, action, the
    shell line of the plan's text), in run order; a refused plan gives only its refusals."""
    if plan.verdict == "refuse":
        return [("finding", f.code, f.level, f.message) for f in plan.findings if f.level == "refuse"]
    rows = [("finding", f.code, f.level, f.message) for f in plan.findings]
    rows += [("manifest", name, "", str(plan.out_dir / name)) for name in sorted(plan.manifests)]
    rows += [("step", s.name, s.action, s.preview()) for s in plan.steps]
    return rows + [("cleanup", s.name, s.action, s.preview()) for s in plan.cleanup]


def print_k8s_plan(plan: K8sPlan, fmt: str) -> None:
    """Print a k8s capture plan: its text, CSV rows (k8s_rows) or its JSON form (as k8s-plan.json)."""
    emit(fmt, lambda: click.echo(plan.text()), lambda: (PLAN_COLUMNS, k8s_rows(plan)), plan.as_dict, indent=2)
