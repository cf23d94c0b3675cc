"""Serving overhead of scoped and unscoped ncu captures on a live inference server (run on the H200).

One run, one GPU, two phases, ratios against baselines measured in the same run:
  A  the server (benchmarks.serving.serve_llama: random-init Llama, bf16) un-profiled: warm, closed-loop load.
  B  the same server started under `ncu --mode launch` (plan.launch_argv), released by one empty attach, loaded
     continuously while three attach captures run one after another through capture_run:
       B1 scoped --set basic, one kernel    B2 scoped --set full, one kernel    B3 unscoped --set basic, N kernels
     each stays attached --linger seconds after its last profiled kernel (the "attached, outside replays" window).
Windows per capture: before (the --before seconds up to the attach), capture (attach -> last profiled kernel:
connecting + replays), attached (last profiled + settle -> SIGINT: attached, outside replayed launches), after.
Prints tokens/s and p50/p99 latency per window and their ratios to A (un-profiled) and to B's own
launched-but-not-attached steady state; writes everything (records included) to --out.

With --sister, the captures run on a sister replica instead, as `capture k8s --method sister` arranges it, and
every window measures the production server, which is never under ncu:
  P  the production server, un-profiled, loaded throughout (--concurrency clients).
  S0 a sister (the same command on --port + 1) under `ncu --mode launch` on the same GPU, released, serving its
     own light load (--sister-concurrency clients, the traffic that makes its kernels run).
     S1 scoped basic, S2 scoped full, S3 unscoped basic: attach captures of the sister, as B1-B3.
On one GPU the sister also takes GPU time from production (time-slicing), so this is the worst case of a
sister on the production node; on its own GPU it shares only the host.

    python3 benchmarks/capture_overhead.py --ncu /usr/local/cuda/bin/ncu --out /tmp/capture_overhead.json
    python3 benchmarks/capture_overhead.py --sister --engine llama-graph --out /tmp/capture_overhead_sister.json
    python3 benchmarks/capture_overhead.py --cpu-smoke [--sister]   # CPU: echo engine + tests/data/fake_ncu (plumbing)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serving.loadgen import LoadGen, Record, WindowStats, compare, records_json, window_stats  # noqa: E402
from benchmarks.serving.serve_llama import GPU_ENGINES  # noqa: E402

FAKE_NCU = ROOT / "tests" / "data" / "fake_ncu"
TARGET = 0.05  # the default plan keeps steady-state serving within 5% outside the replayed launches


# -- pure parts (unit-tested on CPU) ----------------------------------------------------------------------------
def capture_windows(timeline: dict[str, float | None], before_s: float, after_s: float,
                    settle_s: float) -> dict[str, tuple[float, float]]:
    """Cut one capture's timeline into before / capture / attached / after windows (wall-clock seconds)."""
    start, ended = timeline.get("started"), timeline.get("ended")
    if start is None or ended is None:
        return {}
    last = timeline.get("last_profiled") or timeline.get("sigint") or ended
    stop = timeline.get("sigint") or ended
    out = {"before": (start - before_s, start), "capture": (start, last)}
    if stop - (last + settle_s) > settle_s:
        out["attached"] = (last + settle_s, stop)
    out["after"] = (ended + settle_s, ended + settle_s + after_s)
    return out


def ratio_rows(windows: dict[str, WindowStats], base_a: WindowStats | None,
               base_b: WindowStats | None) -> list[dict[str, Any]]:
    """One row per window: its stats and its ratios to phase A and to phase B's un-attached steady state."""
    rows = []
    for name, w in windows.items():
        rows.append({"window": name, **w.as_dict(),
                     "vs_unprofiled": compare(w, base_a) if base_a else None,
                     "vs_launched": compare(w, base_b) if base_b else None})
    return rows


def verdict(rows: list[dict[str, Any]], window: str) -> dict[str, Any]:
    """Is `window` within TARGET of un-profiled serving (tokens/s and p50 latency)?"""
    row = next((r for r in rows if r["window"] == window), None)
    if row is None or not row["vs_unprofiled"]:
        return {"window": window, "met": None, "why": "window missing (capture failed or too short)"}
    r = row["vs_unprofiled"]
    tput, p50 = r["tokens_per_s"], r["p50"]
    met = tput is not None and p50 is not None and tput >= 1 - TARGET and p50 <= 1 + TARGET
    return {"window": window, "tokens_per_s_ratio": tput, "p50_ratio": p50, "met": met}


def format_table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width table of windows and ratios."""
    def f(v: float | None, spec: str) -> str:
        return format(v, spec) if v is not None else "-"

    head = (f"{'window':<34}{'req':>5}{'tok/s':>9}{'p50 s':>8}{'p99 s':>8}"
            f"{'tok/s÷A':>9}{'p50÷A':>7}{'p99÷A':>7}{'tok/s÷B0':>10}{'p50÷B0':>8}{'p99÷B0':>8}")
    lines = [head]
    for r in rows:
        a, b = r["vs_unprofiled"] or {}, r["vs_launched"] or {}
        lines.append(f"{r['window']:<34}{r['completed']:>5}{f(r['tokens_per_s'], '.1f'):>9}{f(r['p50_s'], '.3f'):>8}"
                     f"{f(r['p99_s'], '.3f'):>8}{f(a.get('tokens_per_s'), '.3f'):>9}{f(a.get('p50'), '.3f'):>7}"
                     f"{f(a.get('p99'), '.3f'):>7}{f(b.get('tokens_per_s'), '.3f'):>10}{f(b.get('p50'), '.3f'):>8}"
                     f"{f(b.get('p99'), '.3f'):>8}")
    return "\n".join(lines)


# -- processes ---------------------------------------------------------------------------------------------------
def log(msg: str) -> None:
    """Progress line with a wall-clock stamp."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _prefixed(label: str) -> Callable[[str], None]:
    return lambda msg: log(f"{label}: {msg}")


def server_cmd(args: argparse.Namespace, port: int | None = None) -> list[str]:
    """The serve_llama command line (the same in both phases; a sister's differs only in its port)."""
    port = args.port if port is None else port
    cmd = [sys.executable, "-m", "benchmarks.serving.serve_llama", "--host", "127.0.0.1", "--port", str(port),
           "--max-batch", str(args.max_batch), "--layers", str(args.layers), "--warm-prompt-len", str(args.prompt_len)]
    return [*cmd, "--engine", "echo" if args.cpu_smoke else args.engine]


def start(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start argv in its own session (so we can end it and its children as one group), output to log_path."""
    log(f"start: {shlex.join(argv)}  (log {log_path})")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    with log_path.open("ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=env, start_new_session=True)


def end(proc: subprocess.Popen[bytes] | None, name: str) -> None:
    """SIGTERM our process group, wait, then SIGKILL it."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            log(f"{name} ended rc={proc.returncode}")
            return
        except subprocess.TimeoutExpired:
            continue


def wait_text(path: Path, needle: str, timeout_s: float, proc: subprocess.Popen[bytes]) -> bool:
    """Wait until needle appears in the log (or the process exits, or timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if needle in path.read_text(encoding="utf-8", errors="replace"):
            return True
        time.sleep(0.5)
    return needle in path.read_text(encoding="utf-8", errors="replace")


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen[bytes]) -> float:
    """Poll GET /health until 200; return seconds waited; raise if the server died or never became ready."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited rc={proc.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
                if resp.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"server not ready after {timeout_s:.0f} s")


def port_busy(url: str) -> bool:
    """True when something already answers on the server's port."""
    try:
        urllib.request.urlopen(f"{url}/health", timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def loaded(args: argparse.Namespace, url: str) -> LoadGen:
    """Start the closed-loop client."""
    return LoadGen(url, args.concurrency, args.prompt_len, args.max_new_tokens,
                   request_timeout_s=args.request_timeout).start()


def steady(gen: LoadGen, seconds: float, settle_s: float, name: str) -> WindowStats:
    """Let the load settle, then measure `seconds` of it."""
    time.sleep(settle_s)
    t0 = time.time()
    time.sleep(seconds)
    w = window_stats(gen.snapshot(), t0, time.time(), name)
    log(f"{name}: {w.completed} req, {w.tokens_per_s or 0:.1f} tok/s, p50 {w.p50_s or 0:.3f} s, "
        f"p99 {w.p99_s or 0:.3f} s, errors {w.errors}")
    return w


# -- phases ------------------------------------------------------------------------------------------------------
def phase_a(args: argparse.Namespace, work: Path, url: str) -> tuple[WindowStats, list[Record]]:
    """Un-profiled server: warm, then --duration seconds of load."""
    proc = gen = None
    try:
        proc = start(server_cmd(args), work / "server_a.log")
        log(f"phase A: server ready after {wait_healthy(url, args.ready_timeout, proc):.1f} s")
        gen = loaded(args, url)
        base = steady(gen, args.duration, args.settle, "A un-profiled")
        return base, gen.stop()
    finally:
        if gen is not None:
            gen.stop(join_timeout_s=args.request_timeout + 5)
        end(proc, "server A")


def capture_specs(args: argparse.Namespace, command: list[str], prefix: str = "B") -> list[tuple[str, Any]]:
    """The three captures of phase B as (label, plan).

    B2 runs after B1 (basic before full). B3 is the capture the policy exists to prevent (unscoped, more launches
    than a single replica allows): it is planned, its refusals are printed, and they are overridden here only, so
    the benchmark can measure what the policy protects serving from.
    """
    from perfreport.capture.plan.build import Plan, build_plan
    from perfreport.capture.plan.spec import CaptureSpec

    common = {"command": tuple(command), "target_processes": "all", "clock_control": "none",
              "hostname": "127.0.0.1", "replay_mode": "kernel"}
    b1 = CaptureSpec(kernel_patterns=(args.kernel,), section_set="basic", launch_count=1,
                     launch_skip=args.launch_skip, output="overhead_b1_basic", **common)
    b2 = CaptureSpec(kernel_patterns=(args.kernel,), section_set="full", launch_count=1, after_basic=True,
                     launch_skip=args.launch_skip, output="overhead_b2_full", **common)
    b3 = build_plan(CaptureSpec(kernel_patterns=(), section_set="basic", allow_unscoped=True,
                                launch_count=args.unscoped_count, output="overhead_b3_unscoped", **common))
    for f in b3.findings:
        if f.level == "refuse":
            log(f"B3 overrides the policy on purpose (to measure it): {f.code}: {f.message}")
    b3 = Plan(b3.spec, [f for f in b3.findings if f.level != "refuse"])
    return list(zip(capture_labels(prefix), [build_plan(b1), build_plan(b2), b3], strict=True))


def capture_labels(prefix: str) -> list[str]:
    """The three captures' labels: B1-B3 on the launched server, S1-S3 on the sister."""
    return [f"{prefix}{i} {kind}" for i, kind in enumerate(("scoped basic", "scoped full", "unscoped basic"), 1)]


def release(args: argparse.Namespace, work: Path, url: str, server_log: Path, proc: subprocess.Popen[bytes],
            out: dict[str, Any], phase: str) -> None:
    """Release the server waiting under `ncu --mode launch` (one empty attach) and wait until it answers."""
    from perfreport.capture.release import release_launched

    seen = wait_text(server_log, "Waiting for profiler to attach", args.ready_timeout, proc)
    log(f"{phase}: {'saw' if seen else 'did not see'} the 'Waiting for profiler to attach' line")
    t = time.time()
    rel = release_launched(args.ncu, work / "release.ncu-output.txt", progress=log,
                           graph_profiling=args.release_graph_profiling)
    out["release"] = {"pid": rel.pid, "seconds": time.time() - t, "steps": [s.as_dict() for s in rel.steps],
                      "cleanup": rel.cleanup}
    out["ready_after_release_s"] = wait_healthy(url, args.ready_timeout, proc)
    log(f"{phase}: server ready {out['ready_after_release_s']:.1f} s after the release")


def driven_progress(label: str, driver: LoadGen | None) -> Callable[[str], None]:
    """The capture's progress printer; it also halts `driver` once the last requested kernel was profiled."""
    say = _prefixed(label)

    def progress(msg: str) -> None:
        say(msg)
        if driver is not None and msg.startswith("profiled "):
            seen, _, total = msg.split(" ", 2)[1].rstrip(":").partition("/")
            if seen == total:
                driver.halt()
                say("the kernels are profiled: the sister's load stops")

    return progress


def run_captures(args: argparse.Namespace, plans: list[tuple[str, Any]], bundle: Path, gen: LoadGen,
                 out: dict[str, Any], drive: Callable[[], LoadGen] | None = None) -> None:
    """Each plan as an attach capture; the windows around it measured on `gen`'s records (into out).

    `drive` (the sister flow) starts the load that makes the target's kernels run, at the attach; it is halted when
    the last kernel was profiled, so the attached and after windows see an idle target.
    """
    from perfreport.capture.run import CaptureRunError, capture_run
    from perfreport.errors import PerfReportError

    for label, plan in plans:
        time.sleep(args.before)
        entry: dict[str, Any] = {"label": label, "argv": plan.attach_argv(args.ncu)}
        driver = drive() if drive is not None else None
        try:
            res = capture_run(plan, bundle, "attach", ncu=args.ncu, nvidia_smi=args.nvidia_smi,
                              progress=driven_progress(label, driver), timeout_s=args.capture_timeout,
                              linger_s=args.linger)
        except CaptureRunError as exc:
            res = exc.result
            entry["error"] = exc.message
        except PerfReportError as exc:
            entry["error"] = exc.message
            res = None
        finally:
            if driver is not None:
                entry["driver_requests"] = len(driver.stop(join_timeout_s=args.request_timeout + 5))
        if res is not None:
            entry.update(ok=res.ok, kernels_profiled=res.kernels_profiled, kernel_names=res.kernel_names,
                         exit_status=res.exit_status, receipt=str(res.receipt_path), timeline=res.timeline,
                         versions={k: res.receipt.get(k) for k in ("ncu_version", "gpu_name",
                                                                   "driver_version", "cuda_version")})
        time.sleep(args.after + 2 * args.settle)
        if res is not None:
            cuts = capture_windows(res.timeline, args.before, args.after, args.settle)
            records = gen.snapshot()
            entry["windows"] = {k: window_stats(records, a, b, f"{label}: {k}") for k, (a, b) in cuts.items()}
        out["captures"].append(entry)


def phase_sister(args: argparse.Namespace, work: Path, url: str, bundle: Path, out: dict[str, Any]) -> WindowStats:
    """Production un-profiled and loaded throughout; a released sister under ncu, captured three times.

    Returns production's alone-window (P); out gets the other steady windows and the captures, whose windows are
    all cut from production's records. With --sister-load capture (the default) the sister serves only while a
    capture waits for its kernels, as the sister flow drives it; with `always` it serves throughout.
    """
    sister_port = args.port + 1
    sister_url = f"http://127.0.0.1:{sister_port}"
    plans = capture_specs(args, server_cmd(args, sister_port), prefix="S")
    launch = plans[0][1].launch_argv(args.ncu)
    prod = sister = gen = sister_gen = None
    out.update(launch_argv=launch, captures=[], sister_port=sister_port, steady=[])

    def sister_load() -> LoadGen:
        return LoadGen(sister_url, args.sister_concurrency, args.prompt_len, args.max_new_tokens,
                       request_timeout_s=args.request_timeout).start()

    clients = f"{args.sister_concurrency} client{'s' if args.sister_concurrency != 1 else ''}"
    try:
        prod = start(server_cmd(args), work / "server_production.log")
        log(f"production: ready after {wait_healthy(url, args.ready_timeout, prod):.1f} s")
        gen = loaded(args, url)
        alone = steady(gen, args.duration, args.settle, "P production alone")
        if args.sister_control:  # the same second replica without ncu: what sharing the GPU costs by itself
            plain = start(server_cmd(args, sister_port), work / "server_plain_replica.log")
            try:
                wait_healthy(sister_url, args.ready_timeout, plain)
                plain_gen = sister_load()
                out["steady"].append(steady(gen, args.duration, args.settle,
                                            f"C beside a plain replica serving {clients}"))
                plain_gen.stop(join_timeout_s=args.request_timeout + 5)
            finally:
                end(plain, "plain replica")
        server_log = work / "server_sister.log"
        sister = start(launch, server_log)
        release(args, work, sister_url, server_log, sister, out, "sister")
        out["launched_steady"] = steady(gen, args.duration, args.settle, "S0 beside the released sister, idle")
        out["steady"].append(out["launched_steady"])
        sister_gen = sister_load()
        out["steady"].append(steady(gen, args.duration, args.settle,
                                    f"S0 beside the released sister serving {clients}"))
        if args.sister_load == "capture":
            out["sister_records"] = sister_gen.stop(join_timeout_s=args.request_timeout + 5)
            sister_gen = None
            run_captures(args, plans, bundle, gen, out, drive=sister_load)
        else:
            run_captures(args, plans, bundle, gen, out)
        return alone
    finally:
        if sister_gen is not None:
            out["sister_records"] = sister_gen.stop(join_timeout_s=args.request_timeout + 5)
        if gen is not None:
            out["records"] = gen.stop(join_timeout_s=args.request_timeout + 5)
        end(sister, "sister (under ncu --mode launch)")
        end(prod, "production server")


def phase_b(args: argparse.Namespace, work: Path, url: str, bundle: Path, out: dict[str, Any]) -> None:
    """Launched server, released, loaded; three attach captures with windows around each (results into out)."""
    command = server_cmd(args)
    plans = capture_specs(args, command)
    launch = plans[0][1].launch_argv(args.ncu)
    proc = gen = None
    out.update(launch_argv=launch, captures=[])
    try:
        server_log = work / "server_b.log"
        proc = start(launch, server_log)
        release(args, work, url, server_log, proc, out, "phase B")
        gen = loaded(args, url)
        base_b = steady(gen, args.duration, args.settle, "B0 launched, not attached")
        out["launched_steady"] = base_b
        run_captures(args, plans, bundle, gen, out)
    finally:
        if gen is not None:
            out["records"] = gen.stop(join_timeout_s=args.request_timeout + 5)
        end(proc, "server B (under ncu --mode launch)")


def main(argv: list[str] | None = None) -> int:
    """Run phases A and B and print the ratio table; exit 1 when a phase failed."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ncu", default="/usr/local/cuda/bin/ncu", help="ncu executable (default %(default)s)")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi executable")
    p.add_argument("--port", type=int, default=8008, help="server port (default %(default)s)")
    p.add_argument("--engine", choices=GPU_ENGINES, default="llama",
                   help="server engine: llama (transformers, eager launches) or llama-graph (CUDA-graph steps)")
    p.add_argument("--release-graph-profiling", choices=("node", "graph"), default="node",
                   help="--graph-profiling of the release attach (overhead3/ ran with graph; default node)")
    p.add_argument("--layers", type=int, default=16, help="Llama decoder layers (default %(default)s)")
    p.add_argument("--max-batch", type=int, default=8, help="server batch limit (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=4, help="closed-loop clients (default %(default)s)")
    p.add_argument("--prompt-len", type=int, default=128, help="prompt tokens (default %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens per request (default %(default)s)")
    p.add_argument("--duration", type=float, default=20.0, help="steady-state seconds per baseline (default 20)")
    p.add_argument("--before", type=float, default=8.0, help="seconds of load before each attach (default 8)")
    p.add_argument("--linger", type=float, default=12.0, help="seconds attached after the last kernel (default 12)")
    p.add_argument("--after", type=float, default=8.0, help="seconds measured after each detach (default 8)")
    p.add_argument("--settle", type=float, default=2.0, help="seconds skipped after each event (default 2)")
    p.add_argument("--kernel", default="regex:nvjet", help="scoped kernel filter (default %(default)s)")
    p.add_argument("--launch-skip", type=int, default=20, help="scoped captures: matching launches to skip")
    p.add_argument("--unscoped-count", type=int, default=50, help="B3: kernels profiled (default %(default)s)")
    p.add_argument("--capture-timeout", type=float, default=120.0, help="seconds to wait for the kernels")
    p.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to wait for the server")
    p.add_argument("--request-timeout", type=float, default=120.0, help="seconds per request")
    p.add_argument("--skip-phase-a", action="store_true", help="no un-profiled phase (ratios vs B0 only)")
    p.add_argument("--sister", action="store_true",
                   help="capture a sister replica (--port + 1) and measure the un-profiled production server")
    p.add_argument("--sister-concurrency", type=int, default=1, help="--sister: the sister's clients (default 1)")
    p.add_argument("--sister-load", choices=("capture", "always"), default="capture",
                   help="--sister: drive the sister only while a capture waits for its kernels (default), or always")
    p.add_argument("--sister-control", action="store_true",
                   help="--sister: first measure production beside the same replica without ncu (GPU sharing)")
    p.add_argument("--work", help="folder for logs and the capture bundle (default: a new temp folder)")
    p.add_argument("--out", help="write the JSON result here")
    p.add_argument("--cpu-smoke", action="store_true", help="echo engine + fake ncu, short windows (no GPU)")
    args = p.parse_args(argv)
    if args.cpu_smoke:
        args.ncu, args.nvidia_smi = str(FAKE_NCU / "ncu"), str(FAKE_NCU / "nvidia-smi")
    work = Path(args.work or tempfile.mkdtemp(prefix="capture_overhead."))
    work.mkdir(parents=True, exist_ok=True)
    bundle = work / "bundle"
    url = f"http://127.0.0.1:{args.port}"
    for busy in [url] + ([f"http://127.0.0.1:{args.port + 1}"] if args.sister else []):
        if port_busy(busy):
            print(f"error: something already answers on {busy}; stop it or pass --port (--sister uses --port and "
                  f"--port + 1)", file=sys.stderr)
            return 2
    t_start = time.time()
    result: dict[str, Any] = {"schema_version": "capture_overhead/1", "command": shlex.join([sys.executable,
                              *sys.argv]), "config": vars(args), "work": str(work)}
    base_a = None
    b: dict[str, Any] = {}
    try:
        if args.sister:
            base_a = phase_sister(args, work, url, bundle, b)
        else:
            if not args.skip_phase_a:
                base_a, records_a = phase_a(args, work, url)
                result["records_a"] = records_json(records_a)
            phase_b(args, work, url, bundle, b)
    except Exception as exc:  # a benchmark reports what it has
        result["error"] = f"{type(exc).__name__}: {exc}"
        log(f"failed: {result['error']}")
    base_b = b.get("launched_steady")
    windows: dict[str, WindowStats] = {}
    if base_a:
        windows[base_a.name] = base_a
    if b.get("steady"):  # --sister: its steady windows in the order they ran, the idle-sister one among them
        windows.update({w.name: w for w in b["steady"]})
    elif base_b:
        windows[base_b.name] = base_b
    for entry in b.get("captures", []):
        windows.update({w.name: w for w in entry.get("windows", {}).values()})
    rows = ratio_rows(windows, base_a, base_b)
    print(format_table(rows))
    result["rows"] = rows
    labels = capture_labels("S" if args.sister else "B")
    result["target"] = verdict(rows, f"{labels[0]}: attached")  # the default plan: scoped, basic first
    if args.sister:
        result["target_during_captures"] = [verdict(rows, f"{label}: capture") for label in labels]
        result["sister_records"] = records_json(b.get("sister_records", []))
    result["phase_b"] = {k: v for k, v in b.items()
                         if k not in ("launched_steady", "records", "sister_records", "steady")}
    for entry in result["phase_b"].get("captures", []):
        entry["windows"] = {k: w.as_dict() for k, w in entry.get("windows", {}).items()}
    result["records_b"] = records_json(b.get("records", []))
    result["wall_s"] = time.time() - t_start
    print(f"target (default plan, attached outside replays, within {TARGET:.0%} of un-profiled): "
          f"{json.dumps(result['target'])}")
    for v in result.get("target_during_captures", []):
        print(f"  production during the sister's capture: {json.dumps(v)}")
    print(f"wall {result['wall_s']:.0f} s; logs and bundle in {work}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True, default=str) + "\n")
    failed = "error" in result or any("error" in e for e in result["phase_b"].get("captures", []))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
