"""Closed-loop HTTP load for a token-generating server, and window statistics over its request records.

Each of C workers sends POST /generate, waits for the answer, and sends the next one, for D seconds (or until
stopped). Every request becomes one record (start, end, latency, tokens, error) in wall-clock seconds, so the
records can be cut into windows afterwards by events seen elsewhere (an ncu attach, its first profiled kernel,
its SIGINT). Standard library only: it runs on the GPU machine beside the server.

    python3 -m benchmarks.serving.loadgen --url http://127.0.0.1:8008 --concurrency 4 --duration 20 --out load.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

SCHEMA_VERSION = "loadgen/1"


@dataclass(frozen=True)
class Record:
    """One request: wall-clock start/end (time.time()), tokens generated, error text or None."""

    worker: int
    start: float
    end: float
    tokens: int
    error: str | None = None

    @property
    def latency_s(self) -> float:
        """Seconds from send to the last byte of the answer."""
        return self.end - self.start


@dataclass(frozen=True)
class WindowStats:
    """Serving speed inside [t0, t1): throughput from requests that ended inside, latency from those fully inside."""

    name: str
    t0: float
    t1: float
    completed: int
    errors: int
    tokens_per_s: float | None
    requests_per_s: float | None
    p50_s: float | None
    p99_s: float | None
    mean_s: float | None
    latency_n: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (seconds rounded to microseconds)."""
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of values, None when there are none."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def window_stats(records: Iterable[Record], t0: float, t1: float, name: str = "") -> WindowStats:
    """Summarize the records of one window.

    Throughput counts requests that ended in [t0, t1) (unbiased for a closed loop in steady state); latency
    uses only requests that both started and ended inside, so a request stalled by an event just outside the
    window does not leak into it.
    """
    span = t1 - t0
    ok = [r for r in records if r.error is None]
    ended = [r for r in ok if t0 <= r.end < t1]
    inside = [r.latency_s for r in ok if r.start >= t0 and r.end < t1]
    errors = sum(1 for r in records if r.error is not None and t0 <= r.end < t1)
    rate = span > 0 and bool(ended)
    return WindowStats(
        name=name, t0=t0, t1=t1, completed=len(ended), errors=errors,
        tokens_per_s=sum(r.tokens for r in ended) / span if rate else None,
        requests_per_s=len(ended) / span if rate else None,
        p50_s=percentile(inside, 50), p99_s=percentile(inside, 99),
        mean_s=sum(inside) / len(inside) if inside else None, latency_n=len(inside),
    )


def ratio(value: float | None, base: float | None) -> float | None:
    """value / base, None when either is missing or base is zero."""
    if value is None or base is None or base == 0:
        return None
    return value / base


def compare(window: WindowStats, base: WindowStats) -> dict[str, float | None]:
    """Ratios of one window against a baseline window: throughput (higher is better), p50/p99 (lower is better)."""
    return {
        "tokens_per_s": ratio(window.tokens_per_s, base.tokens_per_s),
        "p50": ratio(window.p50_s, base.p50_s),
        "p99": ratio(window.p99_s, base.p99_s),
    }


class LoadGen:
    """Background closed-loop client: start(), then stop() or run for duration_s; records grow as requests end."""

    def __init__(self, url: str, concurrency: int = 4, prompt_len: int = 128, max_new_tokens: int = 32,
                 request_timeout_s: float = 120.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"loadgen: url {url!r}: expected http://HOST:PORT")
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.concurrency = concurrency
        self.body = json.dumps({"prompt_len": prompt_len, "max_new_tokens": max_new_tokens}).encode()
        self.request_timeout_s = request_timeout_s
        self.records: list[Record] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started_at: float | None = None

    def start(self, duration_s: float | None = None) -> LoadGen:
        """Start the workers; they stop after duration_s seconds, or at stop()."""
        self.started_at = time.time()
        deadline = None if duration_s is None else self.started_at + duration_s
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(i, deadline), name=f"loadgen-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def halt(self) -> None:
        """Ask the workers to stop after their request in flight, without waiting (safe from any thread)."""
        self._stop.set()

    def stop(self, join_timeout_s: float | None = None) -> list[Record]:
        """Ask workers to stop after their request in flight; return the records so far, sorted by start."""
        self._stop.set()
        self.join(join_timeout_s)
        return self.snapshot()

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the workers (each waits at most for its request in flight)."""
        limit = self.request_timeout_s + 5 if timeout_s is None else timeout_s
        end = time.monotonic() + limit
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))

    def snapshot(self) -> list[Record]:
        """A copy of the records so far, sorted by start time."""
        with self._lock:
            return sorted(self.records, key=lambda r: (r.start, r.worker))

    def _worker(self, worker: int, deadline: float | None) -> None:
        while not self._stop.is_set() and (deadline is None or time.time() < deadline):
            start = time.time()
            tokens, error = self._one()
            with self._lock:
                self.records.append(Record(worker, start, time.time(), tokens, error))
            if error is not None:
                self._stop.wait(0.2)  # a server down or restarting: do not spin

    def _one(self) -> tuple[int, str | None]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.request_timeout_s)
        try:
            conn.request("POST", "/generate", body=self.body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            if resp.status != 200:
                return 0, f"HTTP {resp.status}: {payload[:200].decode('utf-8', 'replace')}"
            return int(json.loads(payload)["tokens"]), None
        except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()


def records_json(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Records as JSON-ready dicts (worker, start, end, latency_s, tokens, error)."""
    return [{"worker": r.worker, "start": round(r.start, 6), "end": round(r.end, 6),
             "latency_s": round(r.latency_s, 6), "tokens": r.tokens, "error": r.error} for r in records]


def split_windows(records: Sequence[Record], t0: float, t1: float, width_s: float) -> list[WindowStats]:
    """Consecutive windows of width_s seconds from t0 to t1 (the last one may be shorter)."""
    out: list[WindowStats] = []
    start = t0
    while start < t1 - 1e-9:
        end = min(start + width_s, t1)
        out.append(window_stats(records, start, end, name=f"{start - t0:.0f}s"))
        start = end
    return out


def main(argv: list[str] | None = None) -> int:
    """Run a closed loop against a server for --duration seconds and print/write the per-window summary."""
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.serving.loadgen", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8008", help="server base URL (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=4, help="closed-loop workers (default %(default)s)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of load (default %(default)s)")
    p.add_argument("--prompt-len", type=int, default=128, help="prompt tokens per request (default %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens generated per request (default %(default)s)")
    p.add_argument("--window", type=float, default=5.0, help="summary window in seconds (default %(default)s)")
    p.add_argument("--out", help="write records and summary as JSON here")
    args = p.parse_args(argv)
    gen = LoadGen(args.url, args.concurrency, args.prompt_len, args.max_new_tokens)
    gen.start(args.duration)
    gen.join(args.duration + gen.request_timeout_s + 5)
    records = gen.snapshot()
    t0 = gen.started_at or time.time()
    total = window_stats(records, t0, t0 + args.duration, "total")
    windows = split_windows(records, t0, t0 + args.duration, args.window)
    for w in [*windows, total]:
        print(f"{w.name:>6}  {w.completed:5d} req  {_fmt(w.tokens_per_s, 8, 1)} tok/s  "
              f"p50 {_fmt(w.p50_s, 7, 3)} s  p99 {_fmt(w.p99_s, 7, 3)} s  errors {w.errors}")
    if args.out:
        doc = {"schema_version": SCHEMA_VERSION, "argv": sys.argv, "total": total.as_dict(),
               "windows": [w.as_dict() for w in windows], "records": records_json(records)}
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
    return 0 if total.completed and not total.errors else 1


def _fmt(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else "-".rjust(width)


if __name__ == "__main__":
    sys.exit(main())
