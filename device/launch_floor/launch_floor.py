"""The launch floor: the GPU duration of the smallest kernel a trace can hold (a 1-element in-place add), as the
PyTorch profiler (kineto/CUPTI) times it, the basis of kernel_times. Prints JSON: median, min, p90 over N launches."""

import json
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

N = 500
x = torch.zeros(1, device="cuda")
for _ in range(50):  # warm-up: module load, allocator
    x.add_(1)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(N):
        x.add_(1)
    torch.cuda.synchronize()
durs = sorted(e.device_time for e in prof.events() if e.device_type.name == "CUDA" and "elementwise" in e.name)
json.dump({"kernel": "at::native vectorized_elementwise_kernel (x.add_(1), 1 element, fp32)", "launches": len(durs),
           "median_us": statistics.median(durs), "min_us": durs[0], "p90_us": durs[int(0.9 * len(durs))],
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}, sys.stdout, indent=2)
print()
