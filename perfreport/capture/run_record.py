"""What a capture run records: its steps (argv, rc, times), tool versions, export names, and the receipt."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass
class Step:
    """One command we ran: name, exact argv, exit code (None: not started or killed), ISO UTC times, error."""

    step: str
    argv: list[str]
    rc: int | None
    started_at: str
    ended_at: str | None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Receipt form: {step, argv, rc, started_at, ended_at} (+ error when there was one)."""
        out: dict[str, Any] = {"step": self.step, "argv": list(self.argv), "rc": self.rc,
                               "started_at": self.started_at, "ended_at": self.ended_at}
        if self.error:
            out["error"] = self.error
        return out


def iso(t: float) -> str:
    """Wall-clock seconds -> ISO 8601 UTC with milliseconds and a Z."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cleanup_entry(step: str, argv: Sequence[str], ok: bool, rc: int | None = None) -> dict[str, Any]:
    """Receipt form of one cleanup action: {step, argv, rc, ok}: the command's own rc when it ran as one (pkill's
    1, nothing left to stop, is ok), else the equivalent shell command's (a signal we sent ourselves)."""
    return {"step": step, "argv": list(argv), "rc": (0 if ok else 1) if rc is None else rc, "ok": ok}


def run_probe(name: str, argv: list[str], steps: list[Step], timeout_s: float = 30.0) -> str | None:
    """Run a read-only probe, record it as a step, return its stdout (None when it could not run)."""
    step = Step(name, argv, None, iso(datetime.now(UTC).timestamp()), None)
    steps.append(step)
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        step.error, step.ended_at = f"{type(exc).__name__}: {exc}", iso(datetime.now(UTC).timestamp())
        return None
    step.rc, step.ended_at = proc.returncode, iso(datetime.now(UTC).timestamp())
    if proc.returncode != 0:
        step.error = proc.stderr.decode("utf-8", "replace")[-500:]
        return None
    return proc.stdout.decode("utf-8", "replace")


def probe_versions(ncu: str, nvidia_smi: str, steps: list[Step]) -> dict[str, str | None]:
    """ncu version (`ncu --version`), GPU name and driver (nvidia-smi query), CUDA version (nvidia-smi header)."""
    out: dict[str, str | None] = {"ncu_version": None, "gpu_name": None, "driver_version": None,
                                  "cuda_version": None}
    text = run_probe("ncu-version", [ncu, "--version"], steps)
    if text and (m := re.search(r"Version\s+(\S+)", text)):
        out["ncu_version"] = m.group(1)
    text = run_probe("gpu-query", [nvidia_smi, "--query-gpu=name,driver_version", "--format=csv,noheader"], steps)
    if text and text.strip():
        first = text.strip().splitlines()[0]
        name, _, driver = first.rpartition(",")
        out["gpu_name"], out["driver_version"] = (name.strip() or None), (driver.strip() or None)
    text = run_probe("cuda-version", [nvidia_smi], steps)
    if text and (m := re.search(r"CUDA Version\s*:\s*([0-9][0-9.]*)", text)):
        out["cuda_version"] = m.group(1)
    return out


def exports_for(argvs: Sequence[Sequence[str]]) -> list[tuple[list[str], str]]:
    """Pair each `ncu --import` argv with its file suffix: -raw.csv, -sol.csv (SpeedOfLight), -<section>.csv."""
    out: list[tuple[list[str], str]] = []
    for argv in argvs:
        argv = list(argv)
        page = _option(argv, "--page") or "details"
        section = _option(argv, "--section")
        if page == "raw":
            suffix = "-raw.csv"
        elif section is None:
            suffix = f"-{page}.csv"
        else:
            suffix = "-sol.csv" if section == "SpeedOfLight" else f"-{re.sub(r'[^A-Za-z0-9]+', '_', section)}.csv"
        if suffix in (s for _, s in out):
            suffix = suffix.replace(".csv", f"-{len(out)}.csv")
        out.append((argv, suffix))
    return out


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg == name:
            return argv[i + 1]
    return None


def receipt_fields(plan: Any, *, mode: str, versions: dict[str, str | None], deployment_revision: str | None,
                   started: float, ended: float, kernel_names: list[str], exit_status: int | None,
                   outputs: list[dict[str, Any]], diagnosis: list[dict[str, Any]], steps: list[Step],
                   cleanup: list[dict[str, Any]]) -> dict[str, Any]:
    """The capture receipt (capture_receipt/1) of one run, built through receipt.new_receipt."""
    from perfreport.bundle.receipt import new_receipt

    spec = plan.spec
    return new_receipt(
        campaign=spec.campaign, cell_id=spec.cell_id, mode=mode,
        ncu_version=versions["ncu_version"], driver_version=versions["driver_version"],
        cuda_version=versions["cuda_version"], gpu_name=versions["gpu_name"],
        kernel_patterns=list(spec.kernel_patterns), kernel_name_base=spec.kernel_name_base,
        section_set=spec.section_set, metrics=list(spec.metrics), launch_skip=spec.launch_skip,
        launch_count=spec.launch_count, replay_mode=spec.replay_mode, target_processes=spec.target_processes,
        deployment_revision=deployment_revision, started_at=iso(started), ended_at=iso(ended),
        kernels_profiled=len(kernel_names), kernel_names=list(kernel_names), exit_status=exit_status,
        outputs=outputs, diagnosis=diagnosis, steps=[s.as_dict() for s in steps], cleanup=cleanup,
        plan_findings=[{"code": f.code, "level": f.level} for f in plan.findings],
    )


def save_receipt(path: Path, receipt: Any) -> None:
    """Write the receipt atomically (receipt.write_receipt)."""
    from perfreport.bundle.receipt import write_receipt

    write_receipt(path, receipt)
