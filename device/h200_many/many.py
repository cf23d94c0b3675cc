"""A stream of small elementwise kernels (torch mul/add on 1M floats): a report with many kernels, for progress
and per-kernel read cost. Run under ncu with --launch-count N (device/h200_many/capture.sh)."""

import torch

x = torch.randn(1 << 20, device="cuda")
for _ in range(64):
    x = x * 1.0001 + 0.5
torch.cuda.synchronize()
print("sum", float(x.sum()))
