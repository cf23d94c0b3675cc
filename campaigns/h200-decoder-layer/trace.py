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
from workload import FFN, HEAD_DIM, HEADS, HIDDEN, layer  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["prefill", "decode"], required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--kv-len", type=int, default=2048)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    dev, dt, s = "cuda", torch.bfloat16, 0.02
    w = {
        "qkv": torch.randn(HIDDEN, 3 * HIDDEN, device=dev, dtype=dt) * s,
        "o": torch.randn(HIDDEN, HIDDEN, device=dev, dtype=dt) * s,
        "w1": torch.randn(HIDDEN, FFN, device=dev, dtype=dt) * s,
        "w3": torch.randn(HIDDEN, FFN, device=dev, dtype=dt) * s,
        "w2": torch.randn(FFN, HIDDEN, device=dev, dtype=dt) * s,
        "n1": torch.ones(HIDDEN, device=dev, dtype=dt),
        "n2": torch.ones(HIDDEN, device=dev, dtype=dt),
    }
    q_len = a.seq if a.mode == "prefill" else 1
    x = torch.randn(a.batch * q_len, HIDDEN, device=dev, dtype=dt)
    kv = None
    if a.mode == "decode":
        kv = tuple(torch.randn(a.batch, HEADS, a.kv_len, HEAD_DIM, device=dev, dtype=dt) for _ in range(2))
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
