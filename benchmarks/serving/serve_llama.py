"""A small live inference server: a randomly initialised Llama-architecture model generating tokens over HTTP.

The target for `capture run` on a GPU machine (docs/capture.md): no weights are downloaded (random init with
torch.manual_seed(0)); bf16 on CUDA; one GPU worker thread batches whatever requests are waiting (up to
--max-batch, same prompt length) and decodes greedily with a KV cache, syncing every step as a streaming server
does. HTTP: POST /generate {"prompt_len": 128, "max_new_tokens": 32} -> {"tokens", "latency_s", "queue_s",
"batch_size"}; GET /health -> 200 only once warmed (503 before: a server started under `ncu --mode launch`
stays unready until something attaches); GET /stats -> counters. Prints `ready http://HOST:PORT` when warmed.

    python3 -m benchmarks.serving.serve_llama --port 8008            # GPU: Llama, 16 layers, hidden 2048
    python3 -m benchmarks.serving.serve_llama --engine echo --port 0 # CPU: sleeps per token (tests, smoke)

Only the standard library at module level; torch and transformers are imported by the Llama engine.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

MAX_PROMPT_LEN = 2048
GPU_ENGINES = ("llama", "llama-graph")  # transformers (eager launches); serve_graph (CUDA-graph steps)
MAX_NEW_TOKENS = 512


class Engine(Protocol):
    """Generates `steps` tokens for `batch` prompts of `prompt_len` tokens, calling on_step(k) after token k."""

    def generate(self, batch: int, prompt_len: int, steps: int, on_step: Callable[[int], None]) -> None: ...


class EchoEngine:
    """CPU stand-in: sleeps step_s per token (prefill counts as one step); for tests and --cpu-smoke."""

    def __init__(self, step_s: float = 0.002) -> None:
        self.step_s = step_s

    def generate(self, batch: int, prompt_len: int, steps: int, on_step: Callable[[int], None]) -> None:
        """Sleep once per generated token."""
        for k in range(1, steps + 1):
            time.sleep(self.step_s)
            on_step(k)


class LlamaEngine:
    """transformers LlamaForCausalLM, random weights, bf16, greedy decode with a KV cache."""

    def __init__(self, layers: int = 16, hidden: int = 2048, intermediate: int = 5632, heads: int = 16,
                 kv_heads: int = 8, vocab: int = 32000, device: str = "cuda") -> None:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        self.torch = torch
        self.device = torch.device(device)
        torch.zeros(1, device=self.device)  # first CUDA call: under `ncu --mode launch` this blocks until an attach
        torch.manual_seed(0)
        cfg = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                          num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                          max_position_embeddings=MAX_PROMPT_LEN + MAX_NEW_TOKENS)
        self.vocab = vocab
        self.model = LlamaForCausalLM(cfg).to(device=self.device, dtype=torch.bfloat16).eval()
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(0)

    def generate(self, batch: int, prompt_len: int, steps: int, on_step: Callable[[int], None]) -> None:
        """Prefill, then one forward per token; .tolist() each step is the sync a streaming server makes."""
        torch = self.torch
        with torch.inference_mode():
            ids = torch.randint(0, self.vocab, (batch, prompt_len), device=self.device, generator=self.gen)
            out = self.model(input_ids=ids, use_cache=True)
            for k in range(1, steps + 1):
                nxt = out.logits[:, -1:, :].argmax(dim=-1)
                nxt.view(-1).tolist()
                on_step(k)
                if k < steps:
                    out = self.model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)


@dataclass
class Job:
    """One /generate request waiting for, or in, a batch."""

    prompt_len: int
    max_new_tokens: int
    enqueued: float = field(default_factory=time.perf_counter)
    started: float | None = None
    batch_size: int = 0
    tokens: int = 0
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Batcher:
    """One worker thread owns the GPU: it takes the waiting jobs (same prompt length, up to max_batch) as a batch."""

    def __init__(self, engine: Engine, max_batch: int = 8, gather_s: float = 0.002) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.gather_s = gather_s
        self._pending: deque[Job] = deque()
        self._cv = threading.Condition()
        self.stats = {"batches": 0, "requests": 0, "tokens": 0, "errors": 0}

    def submit(self, job: Job) -> None:
        """Queue a job; its done event is set when its tokens are generated (or it failed)."""
        with self._cv:
            self._pending.append(job)
            self._cv.notify()

    def run(self, stop: threading.Event) -> None:
        """Serve batches until stop is set."""
        while not stop.is_set():
            batch = self._take(stop)
            if batch:
                self.run_batch(batch)

    def _take(self, stop: threading.Event) -> list[Job]:
        with self._cv:
            while not self._pending:
                if stop.is_set() or not self._cv.wait(0.2):
                    return []
        time.sleep(self.gather_s)  # let requests sent together land in one batch
        with self._cv:
            head = self._pending.popleft()
            batch = [head]
            for job in list(self._pending):
                if len(batch) >= self.max_batch:
                    break
                if job.prompt_len == head.prompt_len:
                    self._pending.remove(job)
                    batch.append(job)
        return batch

    def run_batch(self, batch: list[Job]) -> None:
        """Generate for one batch; finish each job as soon as its own token count is reached."""
        now = time.perf_counter()
        for job in batch:
            job.started, job.batch_size = now, len(batch)
        steps = max(job.max_new_tokens for job in batch)

        def on_step(k: int) -> None:
            for job in batch:
                if job.max_new_tokens == k:
                    job.tokens = k
                    job.done.set()

        try:
            self.engine.generate(len(batch), batch[0].prompt_len, steps, on_step)
            self.stats["tokens"] += sum(job.max_new_tokens for job in batch)
        except Exception as exc:  # report to the clients, keep serving
            self.stats["errors"] += 1
            for job in batch:
                if not job.done.is_set():
                    job.error = f"{type(exc).__name__}: {exc}"
                    job.done.set()
        self.stats["batches"] += 1
        self.stats["requests"] += len(batch)


class ServingState:
    """What the HTTP handlers share: the batcher and the readiness flag."""

    def __init__(self, batcher: Batcher, request_timeout_s: float = 300.0) -> None:
        self.batcher = batcher
        self.ready = threading.Event()
        self.request_timeout_s = request_timeout_s


class Handler(BaseHTTPRequestHandler):
    """POST /generate, GET /health, GET /stats."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Stay quiet: one log line per request would dominate the server's output."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        """Health and counters."""
        state = self.server.state
        if self.path == "/health":
            ok = state.ready.is_set()
            self._reply(200 if ok else 503, {"status": "ready" if ok else "warming"})
        elif self.path == "/stats":
            self._reply(200, dict(state.batcher.stats))
        else:
            self._reply(404, {"error": f"no such path {self.path!r}; use /generate, /health or /stats"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        """Generate tokens for one request, waiting for its batch."""
        state = self.server.state
        if self.path != "/generate":
            self._reply(404, {"error": f"no such path {self.path!r}; POST /generate"})
            return
        if not state.ready.is_set():
            self._reply(503, {"error": "warming up"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            job = Job(_bounded(body, "prompt_len", 128, MAX_PROMPT_LEN),
                      _bounded(body, "max_new_tokens", 32, MAX_NEW_TOKENS))
        except (ValueError, TypeError, AttributeError) as exc:
            self._reply(400, {"error": str(exc)})
            return
        state.batcher.submit(job)
        if not job.done.wait(state.request_timeout_s):
            self._reply(504, {"error": f"not served within {state.request_timeout_s} s"})
        elif job.error:
            self._reply(500, {"error": job.error})
        else:
            self._reply(200, {"tokens": job.tokens, "latency_s": round(time.perf_counter() - job.enqueued, 6),
                              "queue_s": round((job.started or job.enqueued) - job.enqueued, 6),
                              "batch_size": job.batch_size})

    def _reply(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _bounded(body: dict[str, Any], key: str, default: int, high: int) -> int:
    value = body.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise ValueError(f"{key}: expected an integer in 1..{high}, got {value!r}")
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServingState


class Serving:
    """A running server: HTTP thread + GPU worker thread; close() stops both."""

    def __init__(self, state: ServingState, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = state
        self.httpd = _Server((host, port), Handler)
        self.httpd.state = state
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.stop = threading.Event()
        self._threads = [threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True),
                         threading.Thread(target=state.batcher.run, args=(self.stop,), name="gpu", daemon=True)]
        self._threads[0].start()

    def start_worker(self) -> None:
        """Start the GPU worker and mark the server ready (after warm-up)."""
        self._threads[1].start()
        self.state.ready.set()

    def close(self) -> None:
        """Stop serving and join the threads."""
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for t in self._threads:
            if t.is_alive():
                t.join(5)


def warm_up(engine: Engine, max_batch: int, prompt_len: int, steps: int = 4) -> float:
    """Run the batch sizes the server will see once, so first requests pay no one-off costs; return seconds."""
    t = time.perf_counter()
    for batch in sorted({1, 2, max(1, max_batch // 2), max_batch}):
        engine.generate(batch, prompt_len, steps, lambda k: None)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    """Start the HTTP server (unready), build and warm the engine, then serve until SIGTERM/SIGINT."""
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.serving.serve_llama", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default %(default)s)")
    p.add_argument("--port", type=int, default=8008, help="HTTP port, 0 picks one (default %(default)s)")
    p.add_argument("--engine", choices=(*GPU_ENGINES, "echo"), default="llama",
                   help="llama (GPU, transformers, eager launches), llama-graph (GPU, CUDA-graph steps: "
                        "benchmarks.serving.serve_graph) or echo (CPU sleep)")
    p.add_argument("--layers", type=int, default=16, help="decoder layers (default %(default)s)")
    p.add_argument("--hidden", type=int, default=2048, help="hidden size (default %(default)s)")
    p.add_argument("--intermediate", type=int, default=5632, help="MLP size (default %(default)s)")
    p.add_argument("--max-batch", type=int, default=8, help="largest batch (default %(default)s)")
    p.add_argument("--warm-prompt-len", type=int, default=128, help="prompt length used to warm up")
    p.add_argument("--echo-step-s", type=float, default=0.002, help="echo engine: seconds per token")
    args = p.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: stop.set())
    engine: Engine = (EchoEngine(args.echo_step_s) if args.engine == "echo" else
                      _DeferredLlama(args))
    serving = Serving(ServingState(Batcher(engine, args.max_batch)), args.host, args.port)
    print(f"listening {serving.url} (warming up)", flush=True)
    try:
        if isinstance(engine, _DeferredLlama):
            engine.build()
        seconds = warm_up(engine, args.max_batch, args.warm_prompt_len)
        serving.start_worker()
        print(f"ready {serving.url} (warm-up {seconds:.1f} s)", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        serving.close()
    print("stopped", flush=True)
    return 0


class _DeferredLlama:
    """Builds the GPU engine after the HTTP server is up, so /health answers 503 while the model loads."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.engine: Engine | None = None

    def build(self) -> None:
        a = self.args
        if a.engine == "llama-graph":
            from benchmarks.serving.serve_graph import GraphLlamaEngine
            self.engine = GraphLlamaEngine(layers=a.layers, hidden=a.hidden, intermediate=a.intermediate,
                                           max_batch=a.max_batch, graph_prompt_len=a.warm_prompt_len)
        else:
            self.engine = LlamaEngine(layers=a.layers, hidden=a.hidden, intermediate=a.intermediate)

    def generate(self, batch: int, prompt_len: int, steps: int, on_step: Callable[[int], None]) -> None:
        if self.engine is None:
            raise RuntimeError("engine not built yet")
        self.engine.generate(batch, prompt_len, steps, on_step)


if __name__ == "__main__":
    sys.exit(main())
