"""Decoder-layer-like bf16 workload (Llama-3-8B shapes) used to capture the example campaign on an H200.

prefill: T = batch*seq tokens through qkv GEMM, causal SDPA, out-proj, SwiGLU FFN, two RMSNorms, residuals.
decode:  `batch` single-token sequences attending to a KV cache of `kv_len` tokens.
Warm-up layers run first; exactly one layer (or --layers N) runs between cudaProfilerStart/Stop so that
`ncu --profile-from-start off` captures one layer's kernels and nothing else.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

HIDDEN, HEADS, HEAD_DIM, FFN = 4096, 32, 128, 14336


def layer(x, w, q_len, kv, batch):
    h = F.rms_norm(x, (HIDDEN,), w["n1"])
    qkv = h @ w["qkv"]
    q, k, v = qkv.split(HIDDEN, dim=-1)
    q = q.view(batch, q_len, HEADS, HEAD_DIM).transpose(1, 2)
    if kv is None:
        k = k.view(batch, q_len, HEADS, HEAD_DIM).transpose(1, 2)
        v = v.view(batch, q_len, HEADS, HEAD_DIM).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        o = F.scaled_dot_product_attention(q, kv[0], kv[1])
    o = o.transpose(1, 2).reshape(batch * q_len, HIDDEN)
    x = x + o @ w["o"]
    h = F.rms_norm(x, (HIDDEN,), w["n2"])
    g = F.silu(h @ w["w1"]) * (h @ w["w3"])
    return x + g @ w["w2"]


def add_shape_args(p: argparse.ArgumentParser) -> None:
    """The cell-shape arguments shared by workload.py (ncu) and trace.py (torch profiler)."""
    p.add_argument("--mode", choices=["prefill", "decode"], required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--kv-len", type=int, default=2048)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the layer (inductor fuses RMSNorm, SiLU x mul and the residual adds)")


def layer_fn(a: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The layer as the cell runs it: eager, or torch.compile'd (--compile; compiled on the first warm-up call)."""
    return torch.compile(layer) if a.compile else layer


def build(a: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Seeded weights, input and (decode) KV cache of one cell: (x, w, q_len, kv)."""
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    s = 0.02
    w = {
        "qkv": torch.randn(HIDDEN, 3 * HIDDEN, device=dev, dtype=dt) * s,
        "o": torch.randn(HIDDEN, HIDDEN, device=dev, dtype=dt) * s,
        "w1": torch.randn(HIDDEN, FFN, device=dev, dtype=dt) * s,
        "w3": torch.randn(HIDDEN, FFN, device=dev, dtype=dt) * s,
        "w2": torch.randn(FFN, HIDDEN, device=dev, dtype=dt) * s,
        "n1": torch.ones(HIDDEN, device=dev, dtype=dt),
        "n2": torch.ones(HIDDEN, device=dev, dtype=dt),
    }
    q_len = a.seq if a.mode == "prefill" else 1
    x = torch.randn(a.batch * q_len, HIDDEN, device=dev, dtype=dt)
    kv = None
    if a.mode == "decode":
        kv = tuple(torch.randn(a.batch, HEADS, a.kv_len, HEAD_DIM, device=dev, dtype=dt) for _ in range(2))
    return x, w, q_len, kv


def main() -> int:
    p = argparse.ArgumentParser()
    add_shape_args(p)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--layers", type=int, default=1, help="layers run inside the profiled range (the campaign: 1)")
    a = p.parse_args()
    x, w, q_len, kv = build(a)
    run = layer_fn(a)
    with torch.no_grad():
        for _ in range(a.warmup):
            run(x, w, q_len, kv, a.batch)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for _ in range(a.layers):
            run(x, w, q_len, kv, a.batch)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    print(f"workload {a.mode}: batch={a.batch} q_len={q_len} kv_len={a.kv_len if kv else a.seq} done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
