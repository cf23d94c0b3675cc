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
from workload import add_shape_args, build, layer  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    add_shape_args(p)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    x, w, q_len, kv = build(a)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.no_grad():
        for _ in range(3):
            layer(x, w, q_len, kv, a.batch)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(a.iters):
                layer(x, w, q_len, kv, a.batch)
            torch.cuda.synchronize()
    raw = a.out.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(a.out, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    print(f"trace {a.mode}: {a.iters} layers -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
