"""One trial of the example layer's end-to-end numbers: CUDA-event time of each of --layers layers, no profiler.

A trial is one process: build the cell (seeded), warm up (and compile, with --compile), time --layers layers one by
one with CUDA events, then (with --trace) record 5 more layers under torch.profiler with input shapes. Writes an
evidence bundle's inference_perfbench_v1.json with one `results` entry: the per-layer latency (the layer's share of
a decode step's TPOT, or of a prefill's TTFT) and tokens per second through one layer. Not a serving benchmark: no
engine, no scheduler, one layer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from workload import add_shape_args, build, layer_fn  # noqa: E402


def _timed(run, x, w, q_len, kv, batch, layers: int) -> list[float]:  # type: ignore[no-untyped-def]
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(layers)]
    for start, end in events:
        start.record()
        run(x, w, q_len, kv, batch)
        end.record()
        end.synchronize()  # a step ends when its result reaches the host (as a decode step's token does)
    return [start.elapsed_time(end) for start, end in events]


def main() -> int:
    p = argparse.ArgumentParser()
    add_shape_args(p)
    p.add_argument("--trial", type=int, required=True)
    p.add_argument("--layers", type=int, default=100)
    p.add_argument("--bundle-id", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--trace", type=Path, default=None, help="also write a 5-layer torch-profiler trace (shapes)")
    a = p.parse_args()
    x, w, q_len, kv = build(a)
    run = layer_fn(a)
    with torch.no_grad():
        for _ in range(3):
            run(x, w, q_len, kv, a.batch)
        torch.cuda.synchronize()
        ms = _timed(run, x, w, q_len, kv, a.batch, a.layers)
        if a.trace is not None:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                for _ in range(5):
                    run(x, w, q_len, kv, a.batch)
                torch.cuda.synchronize()
            raw = a.trace.with_suffix("")
            prof.export_chrome_trace(str(raw))
            with raw.open("rb") as src, gzip.open(a.trace, "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            raw.unlink()
    tokens = a.batch * q_len
    median = statistics.median(ms)
    share = "layer_tpot_ms" if a.mode == "decode" else "layer_ttft_ms"
    result = {
        "name": f"{a.mode} layer{' (torch.compile)' if a.compile else ''}, trial {a.trial}",
        "trial": a.trial,
        "method": f"CUDA events around each of {a.layers} layers (synchronized per layer) after 3 warm-up layers",
        "layers_timed": a.layers,
        share: round(median, 4),
        "throughput_tok_s": round(tokens / median * 1e3, 1),
        "layer_ms": {"median": round(median, 4), "mean": round(statistics.fmean(ms), 4),
                     "min": round(min(ms), 4), "max": round(max(ms), 4)},
        "layer_ms_samples": [round(v, 4) for v in ms],
    }
    doc = {"schema_version": 1, "bundle_id": a.bundle_id,
           "context": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "shape": {"mode": a.mode, "batch": a.batch, "seq": a.seq, "kv_len": a.kv_len},
                       "compile": a.compile},
           "results": [result], "kernel_internals": None}
    a.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"bench {a.mode} trial {a.trial}: median {median:.4f} ms per layer over {a.layers} layers -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
