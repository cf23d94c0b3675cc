"""The op that launched each kernel, and its useful FLOPs, from a PyTorch-profiler trace recorded with shapes
(`record_shapes=True`: cpu_op events carry "Input Dims"; a kernel event names its op by args "External id").

ncu counts the FLOPs a kernel executed; a kernel that pads its work (decode attention computes 16-row tiles for one
query row) executes more than the operation needs. The op's input shapes give what it needs: 2*M*N*K for a GEMM,
4*B*H*Lq*Lk*D for attention (QK^T and PV), halved-and-a-bit by a causal mask. Each op's useful FLOPs go to the first
kernel it launched (a split-K GEMM's reduce kernel, launched after it, did no tensor work of the op).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perfreport.config.validate import cut

SHAPES_CHARS = 400  # an op's shapes text is cut to this (an aten::cat of hundreds of tensors stays one line)
NO_TENSORS = "no tensor inputs"  # the shapes text of an op whose inputs are all scalars or None

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


def shapes_text(dims: Sequence[Any]) -> str:
    """An op's tensor input shapes as one deterministic line, scalars and None left out: '[8, 4] x [4, 2]'."""
    shown = [json.dumps(d) for d in dims if d not in ([], None, "")]
    return cut(" x ".join(shown), SHAPES_CHARS) if shown else NO_TENSORS


@dataclass(frozen=True)
class LaunchingOp:
    """The op that launched one kernel event; useful_flops per launch, None where unknown and on every kernel of
    the op but its first."""

    op: str
    shapes: str
    useful_flops: float | None


def launching_ops(events: Sequence[Any]) -> dict[int, LaunchingOp]:
    """Index of each kernel event in `events` -> the op that launched it, for kernels whose "External id" names a
    cpu_op with "Input Dims". Empty for a trace recorded without shapes: the op is unknown, never guessed."""
    ops: dict[Any, tuple[str, list[Any], Sequence[Any]]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "cpu_op" and isinstance(e.get("args"), dict):
            args = e["args"]
            if "Input Dims" in args and "External id" in args:
                dims = args["Input Dims"] if isinstance(args["Input Dims"], list) else []
                concrete = args.get("Concrete Inputs")
                ops[args["External id"]] = (str(e.get("name")), dims, concrete if isinstance(concrete, list) else [])
    if not ops:
        return {}
    kernels: dict[int, Any] = {}
    first: dict[Any, tuple[float, int]] = {}  # External id -> (ts, index) of the op's first kernel
    for i, e in enumerate(events):
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") != "E" and isinstance(e.get("args"), dict):
            ext, ts = e["args"].get("External id"), e.get("ts")
            if ext not in ops:
                continue
            kernels[i] = ext
            if isinstance(ts, int | float) and (ext not in first or (ts, i) < first[ext]):
                first[ext] = (float(ts), i)
    out: dict[int, LaunchingOp] = {}
    for i, ext in kernels.items():
        name, dims, concrete = ops[ext]
        flops = op_flops(name, dims, concrete) if first.get(ext, (0.0, -1))[1] == i else None
        out[i] = LaunchingOp(name, shapes_text(dims), flops if flops is not None and math.isfinite(flops) else None)
    return out
