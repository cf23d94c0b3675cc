"""capture harness: replay ONE op with fixed, seeded, synthetic inputs, for kernels that cannot be captured in-engine.

Used when application replay was nondeterministic: W warm-up calls, then N timed calls, and the exact ncu argv that
profiles the first timed call. Inputs are drawn on the CPU from a seeded generator and copied to the device, so the
set-up launches no kernel and `--launch-skip` counts only the op's own launches (W calls x k matching kernels each).
With `--nvtx NAME` the timed loop (never the warm-ups) sits in a push/pop range and ncu filters on `NAME/` instead.
Runs as `python -m perfreport.capture.harness.runner` (the ncu target on the GPU host); torch is imported lazily.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from perfreport.capture.harness.spec import (
    ARRAYS,
    OPS,
    RMS_EPS,
    TORCH_DTYPE,
    HarnessSpec,
    op_cost,
    spec_argv,
)
from perfreport.errors import InputError, PerfReportError

Out = Callable[[str], None]


def _torch(what: str) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise InputError(f"{what} needs torch (pip install '.[gpu]' on the GPU host); it cannot be "
                         f"imported here ({exc}). Run it on the GPU host, or use a module:function op with numpy "
                         "arrays and --device cpu.") from exc
    return torch


def _randn(torch: Any, gen: Any, dims: tuple[int, ...], dtype: str, device: str) -> Any:
    """Seeded normal values drawn on the CPU, cast, then copied: no set-up kernel on the device."""
    return torch.randn(dims, generator=gen, dtype=torch.float32).to(getattr(torch, TORCH_DTYPE[dtype])).to(device)


def _rmsnorm(torch: Any, x: Any, w: Any, eps: float) -> Any:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def build_op(spec: HarnessSpec) -> tuple[Callable[[], Any], str]:
    """The zero-argument call to replay and a one-line description of it (inputs already on the device)."""
    if spec.op not in OPS:
        return _build_callable(spec)
    torch, s, dt, dev = _torch(f"harness op {spec.op!r}"), spec.ints, str(spec.dtype), spec.device
    gen = torch.Generator().manual_seed(spec.seed)
    F = torch.nn.functional
    if spec.op == "gemm":
        a, w = _randn(torch, gen, (s["m"], s["k"]), dt, dev), _randn(torch, gen, (s["n"], s["k"]), dt, dev)
        return partial(torch.matmul, a, w.t()), f"gemm {dt}: [{s['m']}x{s['k']}] @ [{s['n']}x{s['k']}]^T (nn.Linear)"
    if spec.op == "fp8-gemm":
        if s["k"] % 16 or s["n"] % 16:
            raise InputError(f"harness fp8-gemm: k and n: expected multiples of 16 (torch._scaled_mm), "
                             f"got k={s['k']}, n={s['n']}.")
        a, w = _randn(torch, gen, (s["m"], s["k"]), dt, dev), _randn(torch, gen, (s["n"], s["k"]), dt, dev)
        one = partial(torch.tensor, 1.0, dtype=torch.float32, device=dev)
        call = partial(torch._scaled_mm, a, w.t(), scale_a=one(), scale_b=one(), out_dtype=torch.bfloat16)
        return call, f"fp8-gemm e4m3 -> bf16: [{s['m']}x{s['k']}] @ [{s['n']}x{s['k']}]^T, per-tensor scales"
    if spec.op == "sdpa":
        q, k, v = (_randn(torch, gen, (s["b"], s["h"], s["s"], s["d"]), dt, dev) for _ in range(3))
        causal = bool(s.get("causal"))
        return (partial(F.scaled_dot_product_attention, q, k, v, is_causal=causal),
                f"sdpa {dt}: b={s['b']} h={s['h']} s={s['s']} d={s['d']} causal={int(causal)}")
    x, w = _randn(torch, gen, (s["t"], s["h"]), dt, dev), _randn(torch, gen, (s["h"],), dt, dev)
    if hasattr(F, "rms_norm"):
        return partial(F.rms_norm, x, (s["h"],), w, RMS_EPS), f"rmsnorm {dt}: [{s['t']}x{s['h']}] (F.rms_norm)"
    return partial(_rmsnorm, torch, x, w, RMS_EPS), f"rmsnorm {dt}: [{s['t']}x{s['h']}] (x*rsqrt(mean(x^2)+eps)*w)"


def _load_target(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"harness op {target!r}: cannot import module {module_name!r} ({exc}). Install it or "
                         "run from the folder that holds it (the current directory is on sys.path).") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"harness op {target!r}: module {module_name!r} has no attribute {attr!r}.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"harness op {target!r}: expected a callable, got {type(obj).__name__}.")
    return obj


def _backend(spec: HarnessSpec) -> str:
    if spec.arrays != "auto":
        return spec.arrays
    if spec.op.split(".")[0].split(":")[0] == "numpy":
        return "numpy"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "torch"


def _build_callable(spec: HarnessSpec) -> tuple[Callable[[], Any], str]:
    fn, dt = _load_target(spec.op), str(spec.dtype)
    shapes = ", ".join(f"{t.name}[{'x'.join(map(str, t.dims))}]" for t in spec.tensor_shapes)
    if _backend(spec) == "torch":
        torch = _torch(f"harness op {spec.op!r}")
        gen = torch.Generator().manual_seed(spec.seed)
        args = [_randn(torch, gen, t.dims, dt, spec.device) for t in spec.tensor_shapes]
        return partial(fn, *args), f"{spec.op}({shapes}) torch {dt} on {spec.device}"
    import numpy as np

    if spec.device != "cpu":
        raise InputError(f"harness op {spec.op!r}: numpy arrays live in host memory, got --device {spec.device!r}. "
                         "Pass --device cpu, or --arrays torch to pass torch tensors on the device.")
    if dt == "bf16":
        raise InputError(f"harness op {spec.op!r}: --dtype bf16: numpy has no bfloat16. Use fp32, fp16 or fp64, "
                         "or --arrays torch.")
    rng = np.random.default_rng(spec.seed)
    args = [rng.standard_normal(t.dims).astype(TORCH_DTYPE[dt]) for t in spec.tensor_shapes]
    return partial(fn, *args), f"{spec.op}({shapes}) numpy {dt} on cpu"


@dataclass
class HarnessResult:
    """Per-iteration times of the timed loop (ms) and the op's formula FLOP and bytes (None = unknown)."""

    op: str
    description: str
    warmup: int
    iterations: int
    timer: str
    times_ms: list[float] = field(repr=False)
    flop: int | None
    op_bytes: int | None

    @property
    def mean_ms(self) -> float:
        """Mean time of one call."""
        return statistics.fmean(self.times_ms)

    @property
    def median_ms(self) -> float:
        """Median time of one call (the rates below use it)."""
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        """Fastest call."""
        return min(self.times_ms)

    def summary(self) -> str:
        """One line: iterations, mean/median/min and, for built-in ops, TFLOP/s and GB/s at the median."""
        line = (f"{self.description}: {self.iterations} iterations after {self.warmup} warm-ups, mean "
                f"{self.mean_ms:.4f} ms, median {self.median_ms:.4f} ms, min {self.min_ms:.4f} ms ({self.timer})")
        if self.flop is not None and self.op_bytes is not None and self.median_ms > 0:
            sec = self.median_ms / 1e3
            line += (f"; {self.flop} FLOP, {self.op_bytes} B -> {self.flop / sec / 1e12:.2f} TFLOP/s, "
                     f"{self.op_bytes / sec / 1e9:.1f} GB/s")
        return line

    def as_dict(self) -> dict[str, Any]:
        """JSON form, with the statistics."""
        return {**asdict(self), "mean_ms": self.mean_ms, "median_ms": self.median_ms, "min_ms": self.min_ms}


def _time_loop(fn: Callable[[], Any], spec: HarnessSpec, torch: Any) -> tuple[list[float], str]:
    if torch is not None and spec.device.startswith("cuda"):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(spec.iters)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [float(start.elapsed_time(end)) for start, end in pairs], "cuda-event"
    kind = spec.device.split(":")[0]
    sync = getattr(getattr(torch, kind, None), "synchronize", None) if torch is not None and kind != "cpu" else None
    times = []
    for _ in range(spec.iters):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, "perf_counter"


def _nvtx_loop(fn: Callable[[], Any], spec: HarnessSpec, torch: Any) -> tuple[list[float], str]:
    if not spec.nvtx:
        return _time_loop(fn, spec, torch)
    torch.cuda.nvtx.range_push(spec.nvtx)
    try:
        return _time_loop(fn, spec, torch)
    finally:
        torch.cuda.nvtx.range_pop()


def run_harness(spec: HarnessSpec, out: Out = print) -> HarnessResult:
    """Build the op, call it spec.warmup times, then time spec.iters calls (NVTX range around them if asked)."""
    fn, description = build_op(spec)
    torch = _torch(f"harness --nvtx {spec.nvtx!r}") if spec.nvtx else sys.modules.get("torch")
    try:
        for _ in range(spec.warmup):
            fn()
        if torch is not None and spec.device.startswith("cuda"):
            torch.cuda.synchronize()
        times, timer = _nvtx_loop(fn, spec, torch)
    except Exception as exc:
        raise InputError(f"harness op {spec.op!r} failed ({description}): {type(exc).__name__}: {exc}. "
                         "Check the shape, dtype and device it was given.") from exc
    flop, nbytes = op_cost(spec)
    result = HarnessResult(spec.op, description, spec.warmup, len(times), timer, times, flop, nbytes)
    out(result.summary())
    return result


@dataclass(frozen=True)
class NcuOptions:
    """How the printed ncu command runs: binary, section set, report path, python, matching kernels per call."""

    ncu: str = "ncu"
    section_set: str = "full"
    output: str | None = None
    python: str = "python3"
    kernels_per_call: int = 1

    def __post_init__(self) -> None:
        if self.kernels_per_call < 1:
            raise InputError(f"harness --kernels-per-call: expected an integer >= 1, got {self.kernels_per_call}.")


def ncu_command(spec: HarnessSpec, argv_of_harness: Sequence[str], kernel_regex: str | None = None,
                options: NcuOptions | None = None) -> list[str]:
    """The ncu argv that profiles the first timed call: skip warmup x kernels_per_call matching launches."""
    opt = options or NcuOptions()
    regex = kernel_regex or (OPS[spec.op].kernel_regex if spec.op in OPS else None)
    argv = [opt.ncu, "--clock-control", "none", "--target-processes", "all"]
    if regex:
        argv += ["--kernel-name", regex if regex.startswith(("regex:", "demangled:", "mangled:")) else f"regex:{regex}"]
    skip = 0 if spec.nvtx else spec.warmup * opt.kernels_per_call
    argv += ["--launch-skip", str(skip), "--launch-count", "1"]
    if spec.nvtx:
        argv += ["--nvtx", "--nvtx-include", f"{spec.nvtx}/"]
    output = opt.output or "harness_" + re.sub(r"[^A-Za-z0-9._-]", "_", spec.op)
    return [*argv, "--set", opt.section_set, "-o", output, "--", opt.python, "-m", "perfreport.capture.harness.runner",
            *argv_of_harness]


def capture_harness(spec: HarnessSpec, options: NcuOptions | None = None, kernel_regex: str | None = None,
                    out: Out = print, print_only: bool = False) -> HarnessResult | None:
    """Print the ncu command (copyable, before anything runs), then run the harness; print_only stops after it."""
    argv = ncu_command(spec, spec_argv(spec), kernel_regex, options)
    if print_only:
        out(shlex.join(argv))
        return None
    k = (options or NcuOptions()).kernels_per_call
    out("ncu command (profiles the first timed call):")
    out(shlex.join(argv))
    if spec.nvtx:
        out(f"note: --nvtx-include {spec.nvtx}/ keeps the {spec.warmup} warm-ups out, so --launch-skip is 0.")
    elif "--kernel-name" not in argv:
        out(f"note: no --kernel-name, so --launch-skip {spec.warmup * k} counts EVERY kernel launch of the process; "
            "pass --kernel-regex and --kernels-per-call K to skip exactly the warm-ups.")
    else:
        out(f"note: --launch-skip counts launches matching --kernel-name: {spec.warmup} warm-ups x {k} matching "
            f"kernel(s) per call = {spec.warmup * k}; if one call launches more, pass --kernels-per-call K "
            "(or --nvtx NAME).")
    return run_harness(spec, out)


def _parser() -> argparse.ArgumentParser:
    example = "python -m perfreport.capture.harness.runner gemm --shape m=16,n=4096,k=4096 --dtype bf16 --iters 100"
    p = argparse.ArgumentParser(prog="python -m perfreport.capture.harness.runner",
                                description=(__doc__ or "").splitlines()[0], epilog=f"example: {example}")
    add = p.add_argument
    add("op", help=f"{', '.join(OPS)} or module:function (e.g. numpy:matmul)")
    add("--shape", required=True, help="gemm: m=16,n=4096,k=4096; sdpa: b=8,h=32,s=1024,d=128,causal=1; "
                                       "rmsnorm: t=8192,h=4096; module:function: a=16x4096,b=4096x4096")
    add("--dtype", help="bf16|fp16 (gemm, sdpa), e4m3 (fp8-gemm), fp32|fp16|bf16 (rmsnorm), "
                        "fp32|fp64|fp16|bf16 (module:function); default: the first listed")
    add("--warmup", type=int, default=10, help="untimed calls before the timed loop (default 10)")
    add("--iters", type=int, default=100, help="timed calls (default 100)")
    add("--device", default="cuda", help="torch device, or cpu (default cuda)")
    add("--seed", type=int, default=0, help="seed of the synthetic inputs (default 0)")
    add("--nvtx", metavar="NAME", help="wrap the timed loop in NVTX range NAME (ncu --nvtx --nvtx-include NAME/)")
    add("--arrays", choices=ARRAYS, default="auto", help="module:function arguments: numpy or torch (default auto)")
    add("--kernel-regex", help="ncu --kernel-name pattern (default: the op's known kernels)")
    add("--kernels-per-call", type=int, default=1, help="matching kernels one call launches (launch-skip = W*K)")
    add("--ncu", default="ncu", help="ncu binary in the printed command (default ncu)")
    add("--ncu-set", default="full", help="ncu --set in the printed command (default full)")
    add("--ncu-output", help="ncu -o in the printed command (default harness_<op>)")
    add("--python", default="python3", help="python of the ncu target (default python3)")
    add("--print-ncu", action="store_true", help="print only the ncu command and exit (e.g. for eval)")
    add("--json", action="store_true", help="also print the result as one JSON line")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: parse, print the ncu command, run the harness; errors -> message on stderr, rc 2."""
    a = _parser().parse_args(argv)
    try:
        spec = HarnessSpec(a.op, a.shape, a.dtype, a.warmup, a.iters, a.device, a.seed, a.nvtx, a.arrays)
        opts = NcuOptions(a.ncu, a.ncu_set, a.ncu_output, a.python, a.kernels_per_call)
        result = capture_harness(spec, opts, a.kernel_regex, print_only=a.print_ncu)
    except PerfReportError as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    if a.json and result is not None:
        print(json.dumps(result.as_dict(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
