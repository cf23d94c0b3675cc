"""Many launches for a large report: 2,000 kernels of a few kinds (elementwise, GEMM, reduction), warm, then profiled.

Run under ncu on the H200 (many_kernels_device.sh): the .ncu-rep of --set basic (and its raw CSV, exported by
`ncu --import`) let bench_import compare .ncu-rep and CSV imports of the same kernels at the scale of its CSV runs.
"""

from __future__ import annotations

import sys

import torch


def main(n: int) -> None:
    x = torch.randn(1 << 20, device="cuda")
    a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):  # warm-up: the kernels exist before ncu starts counting
        (x * 2).sum()
        a @ a
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for i in range(n):
        if i % 3 == 0:
            x.mul_(1.0001)
        elif i % 3 == 1:
            a @ a
        else:
            x.sum()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2016)
