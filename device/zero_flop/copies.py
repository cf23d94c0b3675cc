"""Kernels that do no floating-point work: a strided copy (.contiguous()), a concatenation (CatArrayBatchedCopy) and
an int32 add. ncu counts their FP instructions as 0 and their DRAM bytes as they are: AI is a measured 0."""
import torch

torch.cuda.init()
a = torch.randn(64 << 20, device="cuda")
x = torch.randint(0, 100, (32 << 20,), device="cuda", dtype=torch.int32)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
b = a[::2].contiguous()
c = torch.cat([a[: 16 << 20], a[16 << 20 : 32 << 20]])
y = x + x
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("copies:", b.numel(), c.numel(), int(y[0]))
