"""A vLLM-shaped server for node-local sister runs: a parent without CUDA serving HTTP, N CUDA worker processes.

Like vLLM with tensor parallelism (an API process, one worker per GPU), only the workers touch CUDA, so under
`ncu --mode launch --target-processes all` each worker blocks at its first CUDA call on its own port until it is
released. GET /health answers 200 only once every worker has run its bf16 GEMM loop (a readinessProbe target);
GET /stats gives the iterations per worker. Runs for --seconds, or until SIGTERM.

  python3 device/k8s/tp_server.py --port 8000 --tensor-parallel-size 2 --seconds 300
"""

from __future__ import annotations

import argparse
import http.server
import json
import multiprocessing as mp
import signal
import sys
import threading
import time


def worker(rank: int, counts: mp.Array, seconds: float) -> None:  # type: ignore[valid-type]
    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
        counts[rank] += 20


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--tensor-parallel-size", dest="workers", type=int, default=2, help="worker processes")
    p.add_argument("--seconds", type=float, default=300.0)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    counts = ctx.Array("q", args.workers)
    procs = [ctx.Process(target=worker, args=(r, counts, args.seconds), daemon=True) for r in range(args.workers)]
    for proc in procs:
        proc.start()
    print(f"tp_server: {args.workers} workers started; http on {args.port}", flush=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            done = list(counts)
            if self.path == "/health":
                code, body = (200, b"ok") if all(done) else (503, f"waiting: {done}".encode())
            elif self.path == "/stats":
                code, body = 200, json.dumps({"iterations": done, "t": time.time()}).encode()
            else:
                code, body = 404, b"not found"
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    threading.Thread(target=lambda: (time.sleep(args.seconds + 30), server.shutdown()), daemon=True).start()
    server.serve_forever()
    for proc in procs:
        proc.terminate()
    print(f"tp_server: stopped; iterations {list(counts)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
