"""The GPU side of `ceilings measure`: dense GEMM per dtype (burst and sustained), HBM copy, L2-resident copy.

torch is imported inside `measure_ceilings` only: the package imports without it (CI has no torch and no GPU).
Burst: the best of single launches, each timed alone with CUDA events, after the GPU idled (clocks as found, below
the power cap). Sustained: launches back to back for `seconds`, timed in slices of SLICE_S; the value is the median
slice, where the board sits at its power cap. nvidia-smi samples clocks, power and throttle reasons beside both.
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from perfreport.capture.ceilings import smi
from perfreport.config.ceilings import Ceilings
from perfreport.errors import PerfReportError
from perfreport.progress import Progress

RAW_SCHEMA_VERSION = 1
DTYPES = ("bf16", "fp16", "tf32", "fp8", "int8")
GEMM_N = 8192
HBM_COPY_MIB = 1024
L2_COPY_MIB = 12
L2_GRAPH_COPIES = 100
SLICE_S = 0.5
IDLE_S = 3.0
BURST_LAUNCHES = 5
SMI_INTERVAL_MS = 100
SMI_FILE = "nvidia-smi.csv"
# the lowest compute capability whose tensor cores run each dtype (fp8 e4m3 needs Ada/Hopper)
_MIN_CC = {"bf16": (8, 0), "fp16": (7, 0), "tf32": (8, 0), "fp8": (8, 9), "int8": (8, 0)}
_UNIT = {"bf16": "tflops", "fp16": "tflops", "tf32": "tflops", "fp8": "tflops", "int8": "tops"}


class GpuHostError(PerfReportError):
    """The host cannot run the microbenchmarks: no torch, no CUDA device, or an unknown GPU."""


@dataclass
class Bench:
    """One microbenchmark: a zero-argument launch, the work one launch does (FLOPs or bytes), how it is reported."""

    name: str
    unit: str  # tflops | tops | tbps
    what: str
    work: float
    launch: Callable[[], Any]
    burst: bool


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise GpuHostError(f"ceilings measure needs torch with CUDA on the GPU host; `import torch` failed here "
                           f"({exc}). Run it on the GPU host (pip install '.[gpu]' there).") from None
    if not torch.cuda.is_available():
        raise GpuHostError("ceilings measure needs a CUDA GPU; torch.cuda.is_available() is False on this host "
                           f"(torch {torch.__version__}). Run it on the GPU host, with its driver loaded and the "
                           "GPU visible (CUDA_VISIBLE_DEVICES).")
    return torch


def hardware_key(gpu_name: str, capability: tuple[int, int], ceilings: Ceilings) -> str:
    """The sol-ceilings.yaml token of this GPU ('NVIDIA H100 80GB HBM3' at 9.0 is 'h100_sm90'), from the file's own
    `device_names` and `cc` per token (Ceilings.hardware_for_device): one home for which name is which board."""
    cc = f"{capability[0]}.{capability[1]}"
    key = ceilings.hardware_for_device(gpu_name, cc)
    if key is None:
        raise GpuHostError(f"ceilings measure: GPU {gpu_name!r} (compute capability {cc}) matches no hardware token "
                           f"of sol-ceilings.yaml (their device_names and cc); known: "
                           f"{', '.join(ceilings.hardware_keys())}. Pass "
                           f"--hardware with one of those, or add the board with its datasheet values and device_names "
                           f"(docs/ceilings.md).")
    return key


def check_dtypes(dtypes: list[str]) -> list[str]:
    """Refuse a dtype the microbenchmarks do not know, before any GPU work."""
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        raise PerfReportError(f"--dtypes: expected a comma-separated subset of {','.join(DTYPES)}, got "
                              f"{','.join(dtypes) or '(empty)'}. Example: --dtypes bf16,fp8")
    return dtypes


def _gemm(torch: Any, dtype: str, n: int) -> Bench:
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    flops = 2.0 * n**3
    shape = f"{n}x{n} @ {n}x{n}"
    if dtype in ("bf16", "fp16"):
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a, b = (torch.randn(n, n, device=dev, dtype=tdt, generator=g) for _ in range(2))
        return Bench(f"{dtype}_gemm", "tflops", f"torch.mm on random {dtype} {shape}", flops,
                     lambda: torch.mm(a, b), True)
    if dtype == "tf32":
        a, b = (torch.randn(n, n, device=dev, dtype=torch.float32, generator=g) for _ in range(2))
        return Bench("tf32_gemm", "tflops", f"torch.mm on random fp32 {shape} with "
                     "torch.backends.cuda.matmul.allow_tf32 = True", flops, lambda: torch.mm(a, b), True)
    if dtype == "fp8":
        a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(2))
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        return Bench("fp8_gemm", "tflops", f"torch._scaled_mm on random float8_e4m3fn {shape} (B column-major, "
                     "per-tensor scales 1.0, bf16 out)", flops,
                     lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), True)
    a = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8, generator=g).t()
    return Bench("int8_gemm", "tops", f"torch._int_mm on random int8 {shape} (B column-major, int32 out)", flops,
                 lambda: torch._int_mm(a, b), True)


def _hbm_copy(torch: Any) -> Bench:
    src = torch.randn(HBM_COPY_MIB * 2**20 // 4, device="cuda")
    dst = torch.empty_like(src)
    return Bench("device_copy", "tbps", f"dst.copy_(src) of {HBM_COPY_MIB} MiB fp32, bytes = read + write",
                 2.0 * src.numel() * 4, lambda: dst.copy_(src), False)


def _l2_copy(torch: Any, l2_bytes: int) -> Bench:
    mib = max(1, min(L2_COPY_MIB, l2_bytes // 4 // 2**20))
    src = torch.randn(mib * 2**20 // 4, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(L2_GRAPH_COPIES):
            dst.copy_(src)
    return Bench("l2_copy", "tbps", f"a CUDA graph of {L2_GRAPH_COPIES} back-to-back dst.copy_(src) of {mib} MiB "
                 f"fp32 (source and destination together {2 * mib} MiB, inside the {l2_bytes / 2**20:.0f} MiB L2), "
                 "bytes = read + write", 2.0 * src.numel() * 4 * L2_GRAPH_COPIES, graph.replay, False)


def _rate(work: float, ms: float) -> float:
    return work / (ms * 1e-3) / 1e12


def _timed(torch: Any, fn: Callable[[], Any]) -> float:
    """One launch timed alone (ms)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return float(s.elapsed_time(e))


def _burst(torch: Any, bench: Bench) -> dict[str, Any]:
    time.sleep(IDLE_S)
    t0 = time.time()
    rates = [_rate(bench.work, _timed(torch, bench.launch)) for _ in range(BURST_LAUNCHES)]
    return {"rates": [round(r, 4) for r in rates], "t0": round(t0, 3), "t1": round(time.time(), 3)}


def _sustained(torch: Any, bench: Bench, seconds: float, launch_ms: float) -> dict[str, Any]:
    """Back to back: the host stays at most one slice ahead, so the GPU never waits between slices."""
    per_slice = max(1, round(SLICE_S * 1e3 / launch_ms))
    events = []
    previous = None
    t0 = time.time()
    for _ in range(max(1, round(seconds / SLICE_S))):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per_slice):
            bench.launch()
        e.record()
        if previous is not None:
            previous.synchronize()
        previous = e
        events.append((s, e))
    torch.cuda.synchronize()
    t1 = time.time()
    rates = [_rate(bench.work * per_slice, float(s.elapsed_time(e))) for s, e in events]
    return {"launches_per_slice": per_slice, "rates": [round(r, 4) for r in rates], "t0": round(t0, 3),
            "t1": round(t1, 3)}


def _run(torch: Any, bench: Bench, seconds: float) -> dict[str, Any]:
    for _ in range(3):
        bench.launch()
    torch.cuda.synchronize()
    launch_ms = statistics.median(_timed(torch, bench.launch) for _ in range(3))
    record: dict[str, Any] = {"name": bench.name, "unit": bench.unit, "what": bench.what, "work_per_launch": bench.work,
                              "warm_launch_ms": round(launch_ms, 4)}
    record["burst"] = _burst(torch, bench) if bench.burst else None
    record["sustained"] = _sustained(torch, bench, seconds, launch_ms)
    return record


def _machine(torch: Any, props: Any, info: dict[str, str]) -> dict[str, Any]:
    def num(key: str) -> float | None:
        return smi._number(info.get(key, ""))

    return {
        "gpu": props.name, "driver": info.get("driver_version"), "torch": torch.__version__,
        "cuda": torch.version.cuda, "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count, "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
        "memory_gib": round(props.total_memory / 2**30, 1), "power_limit_w": num("power.limit"),
        "power_max_limit_w": num("power.max_limit"), "max_sm_clock_mhz": num("clocks.max.sm"),
        "utc_offset_s": time.localtime().tm_gmtoff,
    }


def _benches(torch: Any, dtypes: list[str], cc: tuple[int, int], l2_bytes: int,
             skipped: list[dict[str, str]]) -> list[tuple[str, Callable[[], Bench]]]:
    makers: list[tuple[str, Callable[[], Bench]]] = []
    for dtype in dtypes:
        if cc < _MIN_CC[dtype]:
            need = _MIN_CC[dtype]
            skipped.append({"name": f"{dtype}_gemm", "reason": f"compute capability {cc[0]}.{cc[1]} has no "
                            f"{dtype} tensor cores (needs {need[0]}.{need[1]})"})
            continue
        makers.append((f"{dtype}_gemm", partial(_gemm, torch, dtype, GEMM_N)))
    return [*makers, ("device_copy", partial(_hbm_copy, torch)), ("l2_copy", partial(_l2_copy, torch, l2_bytes))]


def measure_ceilings(out_dir: Path, *, hardware: str | None, seconds: float, dtypes: list[str],
                     ceilings: Ceilings, progress: Progress) -> dict[str, Any]:
    """Run every microbenchmark on CUDA device 0 and return the raw record (nvidia-smi CSV written to out_dir)."""
    check_dtypes(dtypes)
    if not seconds > 0:
        raise PerfReportError(f"--seconds: expected a sustained length > 0 s, got {seconds}. Example: --seconds 8")
    if hardware is not None and not ceilings.has_hardware(hardware):
        raise PerfReportError(f"--hardware {hardware!r}: not a hardware key of sol-ceilings.yaml; known: "
                              f"{', '.join(ceilings.hardware_keys())}. Example: --hardware h100_sm90")
    torch = _import_torch()
    props = torch.cuda.get_device_properties(0)
    cc = (props.major, props.minor)
    hw = hardware or hardware_key(props.name, cc, ceilings)
    uuid = getattr(props, "uuid", None)
    gpu_id = f"GPU-{uuid}" if uuid is not None else "0"
    info = smi.gpu_info(gpu_id)
    if not info:  # a torch without props.uuid, or an id nvidia-smi does not take: the first GPU
        gpu_id, info = "0", smi.gpu_info("0")
    machine = _machine(torch, props, info)
    progress(f"ceilings: {props.name} ({hw}), driver {machine['driver']}, torch {torch.__version__}, "
             f"power limit {machine['power_limit_w']} W; {seconds:g} s sustained per benchmark")
    skipped: list[dict[str, str]] = []
    records = []
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # read only by the fp32 torch.mm of the tf32 benchmark
    sampler = smi.Sampler(out_dir / SMI_FILE, gpu_id, SMI_INTERVAL_MS)
    try:
        with sampler:
            time.sleep(0.5)  # the first samples show the idle state
            for name, make in _benches(torch, dtypes, cc, int(getattr(props, "L2_cache_size", 0)), skipped):
                try:  # a dtype this torch or cuBLAS build cannot run is recorded as skipped, with why
                    bench = make()
                    progress(f"ceilings: {name}: {bench.what}")
                    records.append(_run(torch, bench, seconds))
                    progress(f"ceilings: {name}: {line(records[-1])}")
                    del bench
                except RuntimeError as exc:
                    skipped.append({"name": name, "reason": (str(exc).strip().splitlines() or ["RuntimeError"])[0]})
                    progress(f"ceilings: skipped {name}: {skipped[-1]['reason']}")
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            time.sleep(0.3)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    samples = sampler.samples(machine["utc_offset_s"])
    for record in records:
        attach_smi(record, samples)
    return {
        "schema_version": RAW_SCHEMA_VERSION, "tool": "perftunereport ceilings measure",
        "measured": datetime.date.today().isoformat(), "hardware": hw, "machine": machine,
        "settings": {"seconds": seconds, "slice_s": SLICE_S, "idle_s": IDLE_S, "burst_launches": BURST_LAUNCHES,
                     "smi_interval_ms": SMI_INTERVAL_MS, "smi_file": SMI_FILE if samples else None},
        "benchmarks": records, "skipped": skipped,
    }


def line(record: dict[str, Any]) -> str:
    """One progress line: burst best and sustained median of a benchmark record."""
    unit = {"tflops": "TFLOP/s", "tops": "TOP/s", "tbps": "TB/s"}[record["unit"]]
    sustained = statistics.median(record["sustained"]["rates"])
    burst = f"burst best {max(record['burst']['rates']):.1f}, " if record.get("burst") else ""
    return f"{burst}sustained median {sustained:.3f} {unit}"


def attach_smi(record: dict[str, Any], samples: list[smi.Sample]) -> None:
    """Add the nvidia-smi summary of the burst window (with a margin: a burst is shorter than a sample) and the
    sustained window to one benchmark record."""
    burst, sustained = record.get("burst"), record["sustained"]
    record["smi_burst"] = smi.summarize(samples, burst["t0"], burst["t1"], margin_s=0.25) if burst else None
    record["smi_sustained"] = smi.summarize(samples, sustained["t0"], sustained["t1"])
