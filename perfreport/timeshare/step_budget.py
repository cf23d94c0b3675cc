"""Step budget from a PyTorch profiler trace: per step, GPU-busy time vs the host gap (page 3, "03-step-budget").

A step is a window of host (CPU) time: each `user_annotation` whose name matches --step-regex (default
`ProfilerStep#N`, what `prof.step()` records), or, when the trace has none, the time up to each synchronizing CUDA
runtime call (cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize: the sync a decode step makes
when it reads its token back), the first step starting at the trace's first host event. GPU-busy is the union of
the GPU activity (kernels, memcpys, memsets) inside the window, clipped to it (work still running from an earlier
step counts where it runs, `gpu_carried_in_ms`, and is warned about); the host gap is the window's length
minus that busy time: when it dominates, the step is host-bound and kernel work is moot. Written as `step_budget`
into the evidence bundle's inference_perfbench_v1.json, with `step_budget_source` (file, sha256, how steps were
found).

A window in which the GPU did nothing is not a step (a sync right after the previous one, a trace's idle head): it is
left out and counted in the method. The budget's headline is time-weighted over steps (`host_share_pct`: total host
gap / total wall time), the one number the CLI and page 3 print. Fewer than MIN_STEPS steps give a warning: one
step's host gap is mostly warm-up and noise.
"""

from __future__ import annotations

import re
import reprlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from perfreport.errors import InputError
from perfreport.files import sha256_file
from perfreport.timeshare.model import INT64_LIMIT, read_input
from perfreport.timeshare.torch_trace import EXPECTED, load_events

DEFAULT_STEP_RE = r"^ProfilerStep#\d+$"
MIN_STEPS = 5
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LIMIT_US = INT64_LIMIT / 1000  # ts and dur are microseconds; the lake holds ns in 64 bits
_SYNC = re.compile(r"^cuda(Device|Stream|Event)Synchronize$")


@dataclass
class StepBudget:
    """The steps found and how (annotation name pattern or synchronize calls), and what to warn about."""

    steps: list[dict[str, Any]]
    method: str
    warnings: list[str] = field(default_factory=list)

    @property
    def host_share_pct(self) -> float | None:
        """The budget's headline: host gap as a share of wall time over all steps (time-weighted)."""
        return host_share_pct(self.steps)


def host_share_pct(steps: Sequence[Mapping[str, Any]]) -> float | None:
    """100 x total host gap / total wall time of the steps (a long step weighs more than a short one); None
    without steps. The CLI, page 3 and the bundle reader all call this one function."""
    wall = sum(float(s["wall_ms"]) for s in steps)
    return 100.0 * sum(float(s["host_gap_ms"]) for s in steps) / wall if wall > 0 else None


def _intervals(path: Path, events: list[Any], pred: Any) -> list[tuple[float, float, str]]:
    """(start, end, name) of the complete events `pred` selects; one whose ts or dur is no usable number is an
    error, not left out: a step or busy time computed without it would be silently wrong."""
    out = []
    for i, e in enumerate(events):
        if isinstance(e, dict) and e.get("ph") == "X" and pred(e):
            ts, dur = e.get("ts"), e.get("dur")
            if not (_number(ts) and _number(dur) and 0 <= dur < _LIMIT_US and abs(ts) < _LIMIT_US):
                shown = reprlib.repr({"ts": ts, "dur": dur})
                raise InputError(
                    f"'{path}': traceEvents[{i}] ({str(e.get('name', ''))[:60]}): expected 'ts' and 'dur' numbers "
                    f"(microseconds, dur >= 0, both below 2^63 ns), got {shown}; the trace is damaged.")
            out.append((float(ts), float(ts) + float(dur), str(e.get("name", ""))))
    return sorted(out)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _windows(path: Path, events: list[Any], step_re: re.Pattern[str]) -> tuple[list[tuple[float, float, str]], str]:
    marked = _intervals(path, events,
                        lambda e: e.get("cat") == "user_annotation" and step_re.search(str(e.get("name"))))
    if marked:
        return marked, f"user_annotation matching {step_re.pattern!r}"
    syncs = _intervals(path, events, lambda e: e.get("cat") == "cuda_runtime" and _SYNC.match(str(e.get("name"))))
    host = _intervals(path, events, lambda e: e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver"))
    if not syncs or not host:
        return [], ""
    ends = [end for _, end, _ in syncs]
    starts = [host[0][0], *ends[:-1]]  # the first step starts with the trace's first host event
    wins = [(a, b, f"sync-{i}") for i, (a, b) in enumerate(zip(starts, ends, strict=True), 1) if b > a]
    return wins, "up to each synchronizing CUDA runtime call (cuda*Synchronize), from the first host event"


def _busy_us(gpu: list[tuple[float, float, str]], start: float, end: float) -> tuple[float, float]:
    """(busy, carried): the union length of the GPU intervals clipped to [start, end), and the part of it from work
    started before the window (a kernel still running when its step ended). A window is never busier than it is
    long, and work that spills past its step counts in the steps it runs in, not in the one that launched it."""
    total = carried = 0.0
    cur_a: float | None = None
    cur_b = 0.0
    for a0, b0, _ in gpu:  # sorted by start
        a, b = max(a0, start), min(b0, end)
        if b <= a:
            continue
        if a0 < start:
            carried = max(carried, b - start)  # carried-in work runs from the window's start
        if cur_a is None or a > cur_b:
            if cur_a is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None:
        total += cur_b - cur_a
    return total, carried


def step_budget(path: Path, step_regex: str = DEFAULT_STEP_RE) -> StepBudget:
    """Read a Chrome trace and return its steps: step, wall_ms, gpu_busy_ms, host_gap_ms, gpu_events."""
    try:
        step_re = re.compile(step_regex)
    except re.error as exc:
        raise InputError(f"--step-regex {step_regex!r}: not a regular expression ({exc}).") from exc
    events = load_events(path, read_input(Path(path), EXPECTED))
    windows, method = _windows(path, events, step_re)
    gpu = _intervals(path, events, lambda e: e.get("cat") in GPU_CATS)
    if not windows:
        raise InputError(
            f"'{path}': no steps found: no user_annotation matches {step_regex!r} and no synchronizing "
            f"CUDA call. Call `prof.step()` once per decode step (or wrap each step in "
            f"`torch.profiler.record_function('step')` and pass --step-regex '^step$'), then export the trace again.")
    steps: list[dict[str, Any]] = []
    for start, end, name in windows:
        events_in = sum(1 for a, _, _ in gpu if start <= a < end)
        busy, carried = _busy_us(gpu, start, end)
        if busy == 0:  # the GPU did nothing inside the window: not a step
            continue
        wall = end - start
        steps.append({"step": name, "wall_ms": wall / 1e3, "gpu_busy_ms": busy / 1e3,
                      "host_gap_ms": max(wall - busy, 0.0) / 1e3, "gpu_events": events_in,
                      "gpu_carried_in_ms": carried / 1e3})
    if not steps:
        raise InputError(f"'{path}': {len(windows)} step window(s) found ({method}), none with GPU work; the trace "
                         f"holds no GPU activity inside its steps. Profile with activities=[CPU, CUDA].")
    dropped = len(windows) - len(steps)
    if dropped:
        method += f"; {dropped} window(s) without GPU work left out"
    warnings = []
    last = windows[-1][1]
    past = _busy_us(gpu, last, max([last, *(b for _, b, _ in gpu)]))[0]
    spilled = [st["step"] for st in steps if st["gpu_carried_in_ms"] > 0]
    if spilled or past > 0:
        where = f"{len(spilled)} step(s) ({', '.join(spilled[:5])}{', ...' if len(spilled) > 5 else ''}) run " \
                f"GPU work launched in an earlier step" if spilled else ""
        tail = f"{past / 1e3:.3f} ms of GPU work runs past the last step window and is in no step" if past else ""
        warnings.append(f"GPU work outruns its steps: {'; '.join(x for x in (where, tail) if x)}. Each step's "
                        f"GPU busy is clipped to its own window (busy <= wall); the GPU is behind the host, so "
                        f"the host gaps are not host-bound time.")
    if len(steps) < MIN_STEPS:
        warnings.append(f"only {len(steps)} step(s) with GPU work (fewer than {MIN_STEPS}): the host share is "
                        f"dominated by warm-up and noise; profile at least {MIN_STEPS} steps (prof.step() each).")
    return StepBudget(steps, method, warnings)


def import_step_budget(bundle_dir: Path, path: Path, step_regex: str = DEFAULT_STEP_RE) -> tuple[Path, StepBudget]:
    """Write the trace's step budget into the bundle's inference_perfbench_v1.json (other fields untouched)."""
    from perfreport.bundle.layout import write_bundle_fields

    budget = step_budget(path, step_regex)
    source = {"file": Path(path).name, "sha256": sha256_file(Path(path)), "format": "torch-trace",
              "method": budget.method}
    target = write_bundle_fields(Path(bundle_dir), {"step_budget": budget.steps, "step_budget_source": source})
    return target, budget


def step_latency(file: str, budget: StepBudget) -> dict[str, Any]:
    """A `results` entry of the steps' wall times (GPU busy + host gap): the end-to-end latency of one step as the
    profiled process ran it (page 2), with every step's value; profiler overhead included, as the trace says."""
    walls = [float(s["wall_ms"]) for s in budget.steps]
    return {"name": f"{file}: {len(walls)} profiled steps", "method": f"wall time of each step ({budget.method}), "
            "GPU busy + host gap, under torch.profiler", "steps": len(walls),
            "step_latency_ms": {"median": round(statistics.median(walls), 4), "mean": round(statistics.fmean(walls), 4),
                                "min": round(min(walls), 4), "max": round(max(walls), 4)},
            "step_latency_ms_samples": [round(w, 4) for w in walls]}


@dataclass
class CellSteps:
    """A cell's `steps:` traces read into cells/<id>/inference_perfbench_v1.json (what import_campaign returns)."""

    campaign: str
    cell_id: str
    target: Path
    budgets: list[tuple[Path, StepBudget]]

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Every step of every trace, in config order (labels prefixed by their file where there are several)."""
        many = len(self.budgets) > 1
        return [{**s, "step": f"{path.name}:{s['step']}"} if many else s
                for path, budget in self.budgets for s in budget.steps]


def import_cell_steps(campaign_dir: Path, cell_id: str, paths: Sequence[Path],
                      step_regex: str = DEFAULT_STEP_RE) -> CellSteps:
    """Read a cell's step traces (config `steps:`) into the cell's own bundle JSON, cells/<id>/ (page 3 reads it
    there); the file is rewritten whole on every import, so a trace removed from the config leaves no steps behind."""
    from perfreport.bundle.layout import BUNDLE_JSON, write_bundle_json
    from perfreport.config.campaign import load_campaign

    campaign = load_campaign(campaign_dir)
    cell = campaign.cell(cell_id)
    out = CellSteps(campaign.id, cell.id, cell.cell_dir(campaign) / BUNDLE_JSON,
                    [(Path(p), step_budget(Path(p), step_regex)) for p in paths])
    sources = [{"file": p.name, "sha256": sha256_file(p), "format": "torch-trace", "method": b.method}
               for p, b in out.budgets]
    results = [step_latency(p.name, b) for p, b in out.budgets if b.steps]
    out.target.parent.mkdir(parents=True, exist_ok=True)
    write_bundle_json(out.target, {"schema_version": 1, "bundle_id": f"{cell.id}-steps", "context": {},
                                   "results": results, "kernel_internals": None, "step_budget": out.steps,
                                   "step_budget_source": sources[0] if len(sources) == 1 else sources})
    return out
