"""capture run (local): launch-and-attach on a command, or attach to a process started under `ncu --mode launch`.

Writes into <bundle>/ncu-profiles/: NAME.ncu-rep, NAME-raw.csv and NAME-sol.csv (`ncu --import`), the ncu output
NAME.ncu-output.txt and the capture receipt NAME.receipt.json. Everything is produced in a hidden staging folder
inside ncu-profiles/ and renamed into place, so a reader (import_ncu) never sees half a report. The receipt is
written on failure too: an empty or failed capture is evidence, diagnosed from ncu's own output.

Attach mode (ncu 2025.3.1 facts, tests/data/h200_shared/README.md): an attach session stays connected after
--launch-count kernels, so we wait for that many `==PROF== Profiling` lines, then SIGINT our own ncu (never the
target), which writes the report and ends by that SIGINT (rc -2; 130 through a shell) while the target keeps serving.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.bundle import PROFILES_DIR, capture_files
from perfreport.capture.run_record import (
    Step,
    cleanup_entry,
    exports_for,
    iso,
    probe_versions,
    receipt_fields,
    save_receipt,
)
from perfreport.capture.session import NcuSession, ProfEvent
from perfreport.errors import InputError, PerfReportError
from perfreport.files import sha256_file
from perfreport.ids import check_id
from perfreport.progress import Progress

MODES = ("launch-and-attach", "attach")
# ncu's exit status of a good capture: 0 (it ended by itself), or ended by our SIGINT after the kernels: Popen's
# -2 (the H200's ncu 2025.3.1 dies by the signal after writing the report) or 130 (the same seen through a shell).
ENDED_OK = (0, 130, -2)


class CaptureRunError(PerfReportError):
    """A capture that failed or profiled nothing; the receipt (with the diagnosis) was still written."""

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class RunResult:
    """What one capture run did; `timeline` holds wall-clock times of its events (for overhead windows)."""

    mode: str
    name: str
    profiles_dir: Path
    receipt_path: Path
    receipt: dict[str, Any]
    report_path: Path | None
    outputs: list[Path]
    kernels_profiled: int
    kernel_names: list[str]
    exit_status: int | None
    ok: bool
    diagnosis: list[dict[str, Any]]
    events: list[ProfEvent] = field(default_factory=list)
    timeline: dict[str, float | None] = field(default_factory=dict)
    import_result: Any = None


def _ensure_bundle(bundle_dir: Path, say: Callable[[str], None]) -> None:
    """Create bundle_dir as `bundle init` would when it is not yet a bundle (so import_ncu finds its
    inference_perfbench_v1.json); refuse a file or a folder with other content before anything runs."""
    from perfreport.bundle.layout import prepare_bundle

    if prepare_bundle(bundle_dir, "capture run"):
        say(f"created bundle {bundle_dir}")


def capture_run(
    plan: Any,
    bundle_dir: Path,
    mode: str = "attach",
    *,
    ncu: str = "ncu",
    nvidia_smi: str = "nvidia-smi",
    progress: Progress | None = None,
    import_campaign: Path | None = None,
    timeout_s: float = 600.0,
    linger_s: float = 0.0,
    stop_grace_s: float = 120.0,
    deployment_revision: str | None = None,
) -> RunResult:
    """Run one capture of a plan into bundle_dir/ncu-profiles/, write its receipt; raise CaptureRunError on failure.

    timeout_s bounds the wait for the plan's launch-count kernels (attach) or for the whole run
    (launch-and-attach); linger_s keeps an attach connected after the last kernel (to measure serving while
    attached outside replayed launches); stop_grace_s is how long ncu gets to write its report after SIGINT.
    The plan's environment goes on the ncu that launches the target (launch-and-attach); an attaching ncu's
    environment never reaches the target, so attach runs ncu with ours.
    """
    say = progress or (lambda _msg: None)
    if mode not in MODES:
        raise InputError(f"capture run: mode {mode!r} is not one of {', '.join(MODES)}.")
    _check_plan(plan, Path(bundle_dir))
    spec = plan.spec
    name = _output_name(spec.output)
    _ensure_bundle(Path(bundle_dir), say)
    profiles = Path(bundle_dir) / PROFILES_DIR
    finals = capture_files(profiles, name)
    taken = [p.name for p in finals.values() if p.exists()]
    if taken:
        raise InputError(f"capture run: {profiles} already holds {', '.join(taken)}; refusing to overwrite "
                         f"evidence. Pick another output name (--output {name}-2) or move the old files away.")
    profiles.mkdir(parents=True, exist_ok=True)
    staging = profiles / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    steps: list[Step] = []
    cleanup: list[dict[str, Any]] = []
    started = time.time()
    try:
        versions = probe_versions(ncu, nvidia_smi, steps)
        say(f"versions: ncu {versions['ncu_version'] or '?'}, {versions['gpu_name'] or 'GPU ?'}, driver "
            f"{versions['driver_version'] or '?'}, CUDA {versions['cuda_version'] or '?'}")
        argv = _redirect_output(plan.attach_argv(ncu) if mode == "attach" else plan.launch_and_attach_argv(ncu),
                                str(staging / name))
        session = NcuSession(argv, staging / finals["log"].name, on_event=_reporter(say, spec.launch_count),
                             env=(plan.env or None) if mode == "launch-and-attach" else None)
        rc = _run_session(session, mode, spec.launch_count, timeout_s, linger_s, stop_grace_s, steps, say)
        cleanup.extend(cleanup_entry(s.step, s.argv, s.ok) for s in session.signals)
        report = _staged_report(session, staging, name)
        profiled = [e.name or "" for e in session.events if e.kind == "profiling"]
        ok = report is not None and bool(profiled) and rc in ENDED_OK
        if report is not None:
            say(f"report: {report.name} ({report.stat().st_size:,} bytes)")
            _export(plan, report, staging, name, ncu, steps, say)
        diagnosis = _diagnose(staging / finals["log"].name, ok, rc, profiled, report,
                              spec.kernel_patterns[0] if spec.kernel_patterns else None)
        outputs = _publish(staging, profiles)
        result = RunResult(mode, name, profiles, finals["receipt"], {}, profiles / report.name if report else None,
                           outputs, len(profiled), profiled, rc, ok, diagnosis, list(session.events),
                           _timeline(session))
        import_error: PerfReportError | None = None
        if ok and import_campaign is not None:
            try:
                result.import_result = _import_after(import_campaign, spec, outputs, steps, say)
            except PerfReportError as exc:  # the capture is good evidence: keep its receipt, then report
                import_error = exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        cleanup.append(cleanup_entry("remove-staging", ["rm", "-r", str(staging)], not staging.exists()))
    result.receipt = receipt_fields(
        plan, mode=mode, versions=versions, deployment_revision=deployment_revision, started=started,
        ended=time.time(), kernel_names=profiled, exit_status=rc,
        outputs=[_output_record(p, Path(bundle_dir)) for p in outputs], diagnosis=diagnosis, steps=steps,
        cleanup=cleanup)
    save_receipt(result.receipt_path, result.receipt)
    say(f"receipt: {result.receipt_path}")
    if not ok:
        raise CaptureRunError(_failure_message(result), result)
    if import_error is not None:
        raise import_error
    return result


def _check_plan(plan: Any, bundle_dir: Path) -> None:
    """Refuse before anything runs: the plan's own verdict, and --after-basic against the bundle's receipts."""
    from perfreport.capture.plan.evidence import after_basic_findings

    unproven = after_basic_findings(plan.spec, bundle_dir)
    if plan.verdict == "refuse" or unproven:
        lines = "\n".join(f"  - {getattr(f, 'level', '?')} {getattr(f, 'code', '?')}: {getattr(f, 'message', f)}"
                          for f in [*plan.findings, *unproven])
        raise PerfReportError(f"capture run: the plan was refused by the capture policy:\n{lines}\n"
                              f"Fix the capture spec (see `perftunereport capture plan`) and retry.")


def _output_name(output: str) -> str:
    base = Path(str(output)).name
    base = base[: -len(".ncu-rep")] if base.endswith(".ncu-rep") else base
    return check_id("capture output", base)


def _redirect_output(argv: Sequence[str], output: str) -> list[str]:
    """Point ncu's `-o` (before any `--`, which starts the target's own argv) at the staging folder."""
    argv = list(argv)
    end = argv.index("--") if "--" in argv else len(argv)
    hits = [i for i in range(end) if argv[i] in ("-o", "--export")]
    if len(hits) != 1 or hits[0] + 1 >= end:
        raise PerfReportError(f"capture run: the plan's ncu argv has {len(hits)} output options (-o); expected "
                              f"exactly one before '--'. argv: {shlex.join(argv)}")
    argv[hits[0] + 1] = output
    return argv


def _reporter(say: Progress, launch_count: int | None) -> Callable[[ProfEvent], None]:
    total = str(launch_count) if launch_count else "?"
    seen = [0]

    def on_event(event: ProfEvent) -> None:
        if event.kind == "profiling":
            seen[0] += 1
            say(f"profiled {seen[0]}/{total}: {event.name}")
        elif event.kind in ("connected", "disconnected", "no-kernels", "error", "waiting", "shutdown"):
            say(f"ncu: {event.text}")

    return on_event


def _run_session(session: NcuSession, mode: str, launch_count: int | None, timeout_s: float, linger_s: float,
                 grace_s: float, steps: list[Step], say: Progress) -> int | None:
    step = Step("capture", list(session.argv), None, iso(time.time()), None)
    steps.append(step)
    say(f"start: {shlex.join(session.argv)}")
    try:
        session.start()
    except OSError as exc:
        step.rc, step.ended_at, step.error = None, iso(time.time()), f"{type(exc).__name__}: {exc}"
        raise PerfReportError(f"capture run: cannot start {session.argv[0]!r}: {exc}. Pass --ncu PATH "
                              f"(e.g. /usr/local/cuda/bin/ncu) or put ncu on PATH.") from exc
    try:
        if mode == "attach":
            if session.wait_profiled(launch_count or 1 << 30, timeout_s) and linger_s > 0:
                say(f"{launch_count} kernel(s) profiled; staying attached {linger_s:g} s")
                session.wait_until(lambda: False, linger_s)
            if session.running():
                say(f"stopping ncu: SIGINT to pid {session.proc.pid if session.proc else '?'} "
                    f"(the target keeps running)")
            rc = session.stop(grace_s)
        else:
            rc = session.wait(timeout_s)
            if rc is None:
                say(f"launch-and-attach still running after {timeout_s:g} s: stopping ncu (SIGINT)")
                rc = session.stop(grace_s)
    except KeyboardInterrupt:
        say("interrupted: stopping ncu (SIGINT) so it writes what it has")
        rc = session.stop(grace_s)
    step.rc, step.ended_at = rc, iso(session.ended_at or time.time())
    say(f"ncu exited rc={rc}")
    return rc


def _staged_report(session: NcuSession, staging: Path, name: str) -> Path | None:
    candidates = [staging / f"{name}.ncu-rep"]
    announced = session.last("report")
    if announced is not None and announced.path:
        path = Path(announced.path)
        if path.parent.resolve() == staging.resolve():
            candidates.insert(0, path)
    for path in candidates:
        if path.is_file() and path.stat().st_size > 0:
            return path
    return None


def _export(plan: Any, report: Path, staging: Path, name: str, ncu: str, steps: list[Step], say: Progress) -> None:
    for argv, suffix in exports_for(plan.import_argvs(str(report), ncu)):
        dst = staging / f"{name}{suffix}"
        step = Step(f"export{suffix.removesuffix('.csv')}", list(argv), None, iso(time.time()), None)
        steps.append(step)
        try:
            with dst.open("wb") as out:
                proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                                      timeout=600, check=False)
            step.rc = proc.returncode
            if proc.returncode != 0:
                step.error = proc.stderr.decode("utf-8", "replace")[-2000:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            step.error = f"{type(exc).__name__}: {exc}"
        step.ended_at = iso(time.time())
        if step.rc != 0 or dst.stat().st_size == 0:
            dst.unlink(missing_ok=True)
            say(f"export {dst.name} failed ({step.error or f'rc={step.rc}'})")
        else:
            say(f"export: {dst.name} ({dst.stat().st_size:,} bytes)")
    staged = capture_files(staging, name)
    if not (staged["raw"].exists() and staged["sol"].exists()):
        _export_through_ncu_report(report, staged["raw"], staged["sol"], steps, say)


def _export_through_ncu_report(report: Path, raw: Path, sol: Path, steps: list[Step], say: Progress) -> None:
    """Fallback when `ncu --import` could not run: the same two pages written from the report by ncu_report."""
    from perfreport.capture.export import export_report

    step = Step("export-ncu_report", ["ncu_report", "export", str(report)], None, iso(time.time()), None)
    steps.append(step)
    try:
        export_report(report, raw, sol)
        step.rc = 0
        say(f"export: {raw.name}, {sol.name} written through ncu_report")
    except PerfReportError as exc:
        step.rc, step.error = 1, exc.message
        say(f"export through ncu_report failed too ({exc.message}); the .ncu-rep alone is kept")
    step.ended_at = iso(time.time())


def _diagnose(log: Path, ok: bool, rc: int | None, profiled: list[str], report: Path | None,
              pattern: str | None) -> list[dict[str, Any]]:
    from perfreport.capture.diagnose.log import diagnose_text

    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    found = [{"code": d.code, "message": d.message} for d in diagnose_text(text, pattern)]
    if not ok and all(d["code"] == "ok" for d in found):
        what = ("no report was written" if report is None else
                "no kernel was profiled" if not profiled else f"ncu exited with rc={rc}")
        found = [d for d in found if d["code"] != "ok"]
        found.append({"code": "capture-failed", "message": f"{what} (ncu rc={rc}); see the ncu output file."})
    return found


def _publish(staging: Path, profiles: Path) -> list[Path]:
    """Rename every staged file into ncu-profiles/ (same filesystem: atomic); the log last-but-not-least."""
    out = []
    for path in sorted(staging.iterdir(), key=lambda p: p.name):
        if path.is_file():
            dst = profiles / path.name
            os.replace(path, dst)
            out.append(dst)
    return out


def _output_record(path: Path, root: Path) -> dict[str, Any]:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = str(path)
    return {"path": rel, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def _timeline(session: NcuSession) -> dict[str, float | None]:
    sigint = next((s.t for s in session.signals if s.step == "sigint-ncu"), None)
    first, last, connected = session.first("profiling"), session.last("profiling"), session.first("connected")
    return {"started": session.started_at, "connected": connected.t if connected else None,
            "first_profiled": first.t if first else None, "last_profiled": last.t if last else None,
            "sigint": sigint, "ended": session.ended_at}


def _import_after(campaign: Path, spec: Any, outputs: list[Path], steps: list[Step], say: Progress) -> Any:
    """import_ncu one file of this capture (the raw CSV, else the report): the bundle holds it in 2-3 formats."""
    from perfreport.ncu.importer import import_ncu

    raw = [p for p in outputs if p.name.endswith("-raw.csv")]
    rep = [p for p in outputs if p.name.endswith(".ncu-rep")]
    source = (raw or rep)[0]
    if not spec.cell_id:
        raise PerfReportError("capture run --import: the capture spec has no cell id; pass --cell-id.")
    argv = ["perftunereport", "import_ncu", "--campaign", str(campaign), "--cell-id", spec.cell_id,
            "--bundle", str(source)]
    step = Step("import_ncu", argv, None, iso(time.time()), None)
    steps.append(step)
    try:
        result = import_ncu(Path(campaign), spec.cell_id, source)
        step.rc = 0
    except PerfReportError as exc:
        step.rc, step.error = exc.exit_code, exc.message
        raise
    finally:
        step.ended_at = iso(time.time())
    say(f"imported {source.name} into {result.path}")
    return result


def _failure_message(result: RunResult) -> str:
    lines = [f"capture run ({result.mode}) {result.name!r}: {result.kernels_profiled} kernel(s) profiled, "
             f"ncu rc={result.exit_status}, report {'written' if result.report_path else 'missing'}."]
    lines += [f"  - {d['code']}: {d['message']}" for d in result.diagnosis if d["code"] != "ok"]
    lines.append(f"Receipt (with every step and the diagnosis): {result.receipt_path}; ncu output: "
                 f"{result.profiles_dir / (result.name + '.ncu-output.txt')}.")
    return "\n".join(lines)
