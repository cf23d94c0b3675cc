"""PyTorch-profiler (CUPTI) timeline of the example campaign's layer: absolute kernel durations, no ncu.

Runs the same layer as workload.py (same shapes, same arguments), 3 warm-up layers, then `--iters` layers under
torch.profiler(activities=[CPU, CUDA]); writes a gzipped Chrome trace for `perftunereport import_torch_trace`.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from workload import add_shape_args, build, layer_fn  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    add_shape_args(p)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--record-shapes", action="store_true",
                   help="record each op's input shapes (record_shapes=True): useful FLOPs from the shapes")
    p.add_argument("--profiler-steps", action="store_true",
                   help="one profiler step per layer (schedule + prof.step(): ProfilerStep#N annotations)")
    a = p.parse_args()
    x, w, q_len, kv = build(a)
    layer = layer_fn(a)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.no_grad():
        for _ in range(3):
            layer(x, w, q_len, kv, a.batch)
        torch.cuda.synchronize()
        raw = a.out.with_suffix("")
        if a.profiler_steps:
            # one warm-up step, then --iters recorded steps; the trace is written when the last active step ends
            sched = torch.profiler.schedule(wait=0, warmup=1, active=a.iters, repeat=1)
            with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=a.record_shapes,
                                        on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
                for _ in range(a.iters + 1):
                    layer(x, w, q_len, kv, a.batch)
                    torch.cuda.synchronize()  # a step ends when its results reach the host (as a decode step's token)
                    prof.step()
        else:
            with torch.profiler.profile(activities=acts, record_shapes=a.record_shapes) as prof:
                for _ in range(a.iters):
                    layer(x, w, q_len, kv, a.batch)
                torch.cuda.synchronize()
            prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(a.out, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    steps = " (one ProfilerStep per layer)" if a.profiler_steps else ""
    print(f"trace {a.mode}: {a.iters} layers{steps} -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
