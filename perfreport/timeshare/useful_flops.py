"""Useful FLOPs from a PyTorch-profiler trace recorded with shapes (`record_shapes=True`).

ncu counts the FLOPs a kernel executed; a kernel that pads its work (decode attention computes 16-row tiles for one
query row) executes more than the operation needs. The op's input shapes give what it needs: 2*M*N*K for a GEMM,
4*B*H*Lq*Lk*D for attention (QK^T and PV), halved-and-a-bit by a causal mask. Each op's useful FLOPs go to the first
kernel it launched (a split-K GEMM's reduce kernel, launched after it, did no tensor work of the op).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

GEMM_OPS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::_scaled_mm": (0, 1)}
BATCHED_GEMM_OPS = {"aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}
# Attention ops: (query, key) input positions, and the position of `is_causal` among their concrete inputs.
ATTENTION_OPS = {
    "aten::_cudnn_attention_forward": (0, 1, 10),
    "aten::_scaled_dot_product_cudnn_attention": (0, 1, 5),
    "aten::_scaled_dot_product_flash_attention": (0, 1, 3),
    "aten::_scaled_dot_product_efficient_attention": (0, 1, 5),
    "aten::_flash_attention_forward": (0, 1, 7),
    "aten::_efficient_attention_forward": (0, 1, 8),
}


def _shape(dims: Sequence[Any], i: int, rank: int) -> list[int] | None:
    if i >= len(dims) or not isinstance(dims[i], list) or len(dims[i]) != rank:
        return None
    return [int(d) for d in dims[i]] if all(isinstance(d, int) and d > 0 for d in dims[i]) else None


def op_flops(name: str, dims: Sequence[Any], concrete: Sequence[Any]) -> float | None:
    """The useful FLOPs of one op from its input shapes; None for an op this does not know."""
    if name in GEMM_OPS:
        a, b = (_shape(dims, i, 2) for i in GEMM_OPS[name])
        if a and b and a[1] == b[0]:
            return 2.0 * a[0] * b[1] * a[1]
    if name in BATCHED_GEMM_OPS:
        a, b = (_shape(dims, i, 3) for i in BATCHED_GEMM_OPS[name])
        if a and b and a[0] == b[0] and a[2] == b[1]:
            return 2.0 * a[0] * a[1] * b[2] * a[2]
    if name in ATTENTION_OPS:
        qi, ki, causal_at = ATTENTION_OPS[name]
        q, k = _shape(dims, qi, 4), _shape(dims, ki, 4)
        if q and k and q[0] == k[0] and q[3] == k[3]:
            batch, heads, lq, d = q
            lk = k[2]
            pairs = float(lq) * lk
            if causal_at < len(concrete) and str(concrete[causal_at]).strip().lower() == "true":
                # query row i (bottom-right aligned) attends to lk - lq + i + 1 keys
                pairs = sum(float(lk - lq + i + 1) for i in range(lq)) if lq <= lk else pairs / 2
            return 4.0 * batch * heads * pairs * d
    return None


def useful_by_kernel(events: Sequence[Any]) -> dict[str, list[float]]:
    """Kernel name -> the distinct useful FLOPs per launch of the ops that launched it, sorted; kernels of ops
    without shapes (or of ops this does not know) are absent. Empty for a trace recorded without shapes."""
    ops: dict[Any, tuple[str, Sequence[Any], Sequence[Any]]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "cpu_op" and isinstance(e.get("args"), dict):
            args = e["args"]
            if "Input Dims" in args and "External id" in args:
                ops[args["External id"]] = (str(e.get("name")), args.get("Input Dims") or [],
                                            args.get("Concrete Inputs") or [])
    if not ops:
        return {}
    first: dict[Any, tuple[float, str]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "kernel" and isinstance(e.get("args"), dict):
            ext, ts = e["args"].get("External id"), e.get("ts")
            if ext in ops and isinstance(ts, int | float) and (ext not in first or ts < first[ext][0]):
                first[ext] = (float(ts), str(e.get("name")))
    out: dict[str, set[float]] = {}
    for ext, (_, kernel) in first.items():
        flops = op_flops(*ops[ext])
        if flops is not None and math.isfinite(flops):
            out.setdefault(kernel, set()).add(flops)
    return {k: sorted(v) for k, v in out.items()}
