"""Why the empirical bf16 GEMM ceiling (671.7 TFLOP/s, do_bench median) is under the ~790 TFLOP/s often quoted.

Run on the H200 without a profiler: per shape, (a) triton do_bench median over 2 s of back-to-back torch.mm (the
ceilings.json method), (b) the first launches after 3 s idle, timed one by one with CUDA events, (c) a 10 s sustained
loop in 0.5 s slices; nvidia-smi samples SM clock, power and temperature every 100 ms beside it. Prints JSON lines.
"""

from __future__ import annotations

import json
import subprocess
import time

import torch
import triton.testing


def smi_start(path: str) -> subprocess.Popen[bytes]:
    query = "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    return subprocess.Popen(["nvidia-smi", query, "--format=csv,noheader", "-lms", "100"],
                            stdout=open(path, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115 - lives with the probe


def main() -> None:
    smi = smi_start("/tmp/smi.csv")
    try:
        for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192)):
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            flops = 2 * m * n * k
            torch.mm(a, b)
            torch.cuda.synchronize()
            time.sleep(3)
            first = []
            for _ in range(5):  # after idle: one launch at a time
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                torch.mm(a, b)
                e.record()
                torch.cuda.synchronize()
                first.append(flops / (s.elapsed_time(e) * 1e-3) / 1e12)
            t0 = time.time()
            med = triton.testing.do_bench(lambda a=a, b=b: torch.mm(a, b), warmup=200, rep=2000, return_mode="median")
            slices = []
            t_end = time.time() + 10
            while time.time() < t_end:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                iters = 0
                t_slice = time.time() + 0.5
                while time.time() < t_slice:
                    for _ in range(10):
                        torch.mm(a, b)
                    iters += 10
                    torch.cuda.synchronize()
                e.record()
                torch.cuda.synchronize()
                slices.append(flops * iters / (s.elapsed_time(e) * 1e-3) / 1e12)
            print(json.dumps({"shape": [m, n, k], "first_after_idle_tflops": [round(x, 1) for x in first],
                              "do_bench_median_tflops": round(flops / (med * 1e-3) / 1e12, 1),
                              "sustained_slices_tflops": [round(x, 1) for x in slices],
                              "t_start": t0, "t_end": time.time()}), flush=True)
            time.sleep(3)
    finally:
        smi.terminate()


if __name__ == "__main__":
    main()
