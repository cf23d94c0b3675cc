"""Replays one CUDA graph (100 tiny kernels) for --seconds, printing replays/s once a second (run under ncu).

For graph_attach_probe.sh: which attaches see kernels inside graphs, and what each attach mode leaves behind.
PROBE_MATMUL=1 puts a bf16 512x512 matmul (cuBLAS) after the adds in the graph; PROBE_THREAD=1 replays the graph on
a second thread, as serve_llama's GPU worker does (graph_server_probe.sh).
"""

from __future__ import annotations

import os
import sys
import threading
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
matmul = os.environ.get("PROBE_MATMUL") == "1"
a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
if matmul:
    with torch.cuda.stream(s):
        a @ a  # cuBLAS warm-up outside the capture
    torch.cuda.synchronize()
with torch.cuda.graph(g):
    for _ in range(100):
        x.add_(1.0)
    if matmul:
        y = a @ a


def loop() -> None:
    t0 = last = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        g.replay()
        torch.cuda.synchronize()
        n += 1
        now = time.perf_counter()
        if now - last >= 1.0:
            print(f"t={now - t0:5.1f} s  {n / (now - last):8.0f} graph replays/s  "
                  f"({(now - last) / n * 1e4:.2f} us/kernel)", flush=True)
            last, n = now, 0


if os.environ.get("PROBE_THREAD") == "1":
    t = threading.Thread(target=loop, name="replay")
    t.start()
    t.join()
else:
    loop()
