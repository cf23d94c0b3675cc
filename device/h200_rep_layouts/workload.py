"""Three known kernels for the report-layout captures (capture.sh): a bf16 GEMM, an fp32 add, a sum reduction.

Run between cudaProfilerStart/Stop (so --profile-from-start off and --replay-mode range see one range); with
--graph, the same three ops are captured into a CUDA graph and the graph is launched once inside the range.
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", action="store_true", help="launch the ops as one CUDA graph")
    args = ap.parse_args()
    dev = torch.device("cuda")
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    x = torch.randn(1 << 24, device=dev)
    y = torch.randn(1 << 24, device=dev)
    c = torch.empty(4096, 4096, device=dev, dtype=torch.bfloat16)
    z = torch.empty(1 << 24, device=dev)
    s = torch.empty((), device=dev)

    def ops() -> None:
        torch.matmul(a, b, out=c)
        torch.add(x, y, out=z)
        torch.sum(z, dim=0, out=s)

    for _ in range(3):  # warm up (cuBLAS heuristics, lazy module loads) outside the profiled range
        ops()
    graph = None
    if args.graph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    if graph is not None:
        graph.replay()
    else:
        ops()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("checksum", float(s), float(c[0, 0]))


if __name__ == "__main__":
    main()
