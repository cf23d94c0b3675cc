"""Per-launch host cost of a process under ncu, eager and CUDA-graph launches (run on the H200).

Times N back-to-back launches of a 1 KiB in-place add (one tiny kernel each; the GPU is idle most of the time, so
the wall time per launch is the host's launch path), then the same kernels replayed from one CUDA graph. Run
plain, under `ncu --mode launch` after a release attach, and under a launch-and-attach session whose kernel
filter matches nothing: the differences are ncu's cost per launch outside any replay. Prints one JSON line.
Usage: launch_cost.py LABEL [WAIT_S]  (WAIT_S: sleep after the first CUDA call, e.g. until a release detaches)
"""

from __future__ import annotations

import json
import sys
import time

import torch


def per_launch_us(fn, n: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(n)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> int:
    label = sys.argv[1] if len(sys.argv) > 1 else "plain"
    wait_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    n_eager, graph_len, n_graph = 4000, 100, 40
    x = torch.zeros(256, device="cuda")  # under `ncu --mode launch` the process blocks here until the first attach
    time.sleep(wait_s)  # e.g. until the release attach has detached

    def eager(n: int) -> None:
        for _ in range(n):
            x.add_(1.0)

    eager(200)  # warm-up (allocator, module load)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        eager(3)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        eager(graph_len)

    def graphs(n: int) -> None:
        for _ in range(n):
            g.replay()

    graphs(3)
    res = {"label": label, "eager_us_per_launch": round(per_launch_us(eager, n_eager), 2),
           "graph_us_per_kernel": round(per_launch_us(graphs, n_graph) / graph_len, 3),
           "eager_launches": n_eager, "graph_kernels": graph_len * n_graph}
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
