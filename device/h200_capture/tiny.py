"""Tiny CUDA workload for ncu failure-mode logs: a few elementwise kernels, optionally a varying count."""
import argparse
import os
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--nondeterministic", action="store_true", help="launch a different number of kernels each run")
p.add_argument("--fill", type=float, default=0.0, help="fraction of free GPU memory to hold first")
a = p.parse_args()
hold = None
if a.fill:
    free, _ = torch.cuda.mem_get_info()
    hold = torch.empty(int(free * a.fill), dtype=torch.uint8, device="cuda")
x = torch.ones(64 * 1024 * 1024, device="cuda")
n = 3 + (int(time.time_ns() // 1000) ^ os.getpid()) % 5 if a.nondeterministic else 3
for _ in range(n):
    x = x * 1.0001 + 1.0
torch.cuda.synchronize()
print(f"tiny: {n} launches, sum={x.sum().item():.1f}, held={0 if hold is None else hold.numel()} bytes")
