"""Replays one CUDA graph (100 tiny kernels) for --seconds, printing replays/s once a second (run under ncu).

For graph_attach_probe.sh: which attaches see kernels inside graphs, and what each attach mode leaves behind.
"""

from __future__ import annotations

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 40.0
x = torch.zeros(256, device="cuda")  # blocks here under `ncu --mode launch` until the first attach
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    x.add_(1.0)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    for _ in range(100):
        x.add_(1.0)
t0 = last = time.perf_counter()
n = 0
while time.perf_counter() - t0 < seconds:
    g.replay()
    torch.cuda.synchronize()
    n += 1
    now = time.perf_counter()
    if now - last >= 1.0:
        print(f"t={now - t0:5.1f} s  {n / (now - last):8.0f} graph replays/s  ({(now - last) / n * 1e4:.2f} us/kernel)",
              flush=True)
        last, n = now, 0
