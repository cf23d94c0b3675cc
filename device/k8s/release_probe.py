"""Two CUDA worker processes under one non-CUDA parent: the shape of a vLLM server (API server + EngineCore).

Run under `ncu --mode launch --target-processes all` to see how many attaches release every worker.
"""

import multiprocessing as mp
import sys
import time


def worker(rank: int) -> None:
    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    n = 0
    while time.time() - t0 < float(sys.argv[1]):
        (a @ a).sum()
        n += 1
        if n % 2000 == 0:
            torch.cuda.synchronize()
            print(f"worker{rank} t={time.time() - t0:.1f} iters={n}", flush=True)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r,)) for r in range(2)]
    for p in procs:
        p.start()
    print("parent: started 2 workers", flush=True)
    for p in procs:
        p.join()
