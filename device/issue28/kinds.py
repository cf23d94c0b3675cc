"""Kernel kinds the other captures lack (issue 28), for the importer's real-capture tests (run on an H100 under ncu).

SwiGLU MLP pieces in bf16, fp8 and fp32-without-TF32 (a CUDA-core SIMT GEMM), an fp64 GEMM (DMMA), int8 GEMM (IMMA),
Triton CUDA-core FMA loops in fp32 / fp64 / fp16, an L1-bound and an L2-bound Triton kernel and a 1-element add.
Each op runs warm-up launches, then one launch between cudaProfilerStart/Stop, so `ncu --profile-from-start off`
captures exactly the measured launch of every op (each op is one kernel launch). Writes the manifest: per op the
kind, the expected algorithmic FLOPs (null where there is no agreed count) and the minimum DRAM bytes.
Ops are built only when selected (`--only`), so a run of a few ops starts in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl

# SwiGLU shapes (Llama-2-7B's MLP); fp32 SIMT GEMMs run at a tenth of bf16's rate, so their M is halved
M, H, N_I = 2048, 4096, 11008
M32 = 1024
FMA_N, FMA_ITERS = 1 << 20, 2048  # CUDA-core loops: elements, dependent FMAs per element
FMA_BLOCK = 1024


@triton.jit
def silu_mul_kernel(g_ptr, u_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = silu(g) * u in fp32, stored in y's dtype (bf16, fp32 or fp8: the fused act + quant of an fp8 MLP)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def fma_loop_kernel(x_ptr, ab_ptr, y_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS dependent x = x*a + b per element in x's dtype (FFMA / DFMA / HFMA2): compute-bound, tiny DRAM."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    a = tl.load(ab_ptr)
    b = tl.load(ab_ptr + 1)
    for _ in range(ITERS):
        x = x * a + b
    tl.store(y_ptr + offs, x, mask=mask)


@triton.jit
def l1_reuse_kernel(x_ptr, y_ptr, REPS: tl.constexpr, TILE: tl.constexpr, BLOCK: tl.constexpr):
    """Every program reads the same TILE-element buffer REPS times, BLOCK elements a step: L1 hits, no DRAM."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in range(REPS):
        # the step varies with r, so the load is not hoisted; a multiple of BLOCK, so the loads stay 16-byte vectors
        acc += tl.load(x_ptr + (r % (TILE // BLOCK)) * BLOCK + offs)
    tl.store(y_ptr + tl.program_id(0) * BLOCK + offs, acc)


@triton.jit
def l2_sweep_kernel(x_ptr, y_ptr, n_chunks, REPS: tl.constexpr, BLOCK: tl.constexpr):
    """Programs sweep an L2-resident buffer REPS times, loads marked .cg (L2 only, not L1): L2-bound, DRAM once."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in range(REPS):
        chunk = (pid + r * tl.num_programs(0)) % n_chunks
        acc += tl.load(x_ptr + chunk * BLOCK + offs, cache_modifier=".cg")
    tl.store(y_ptr + pid * BLOCK + offs, acc)


def silu_mul(g: torch.Tensor, u: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    y = torch.empty(g.shape, device=g.device, dtype=out_dtype)
    n = g.numel()
    silu_mul_kernel[(triton.cdiv(n, 1024),)](g, u, y, n, BLOCK=1024)
    return y


def _rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)


def _mlp_dense(prefix: str, dtype: torch.dtype, m: int, kind: str) -> list[dict]:
    s = torch.finfo(dtype).bits // 8
    x, wd = _rand(m, H, dtype=dtype), _rand(N_I, H, dtype=dtype)
    wg, wu = _rand(H, N_I, dtype=dtype), _rand(H, N_I, dtype=dtype)
    g, u, h = _rand(m, N_I, dtype=dtype), _rand(m, N_I, dtype=dtype), _rand(m, N_I, dtype=dtype)
    gemm_up = dict(flops=2 * m * H * N_I, min_bytes=(m * H + H * N_I + m * N_I) * s, kind=kind)
    return [
        dict(op=f"{prefix}_gate", fn=lambda: torch.mm(x, wg), **gemm_up),
        dict(op=f"{prefix}_up", fn=lambda: torch.mm(x, wu), **gemm_up),
        # silu(g)*u: exp, add, divide and two multiplies per element, no agreed FLOP count
        dict(op=f"{prefix}_silu_mul", fn=lambda: silu_mul(g, u, dtype), flops=None, min_bytes=3 * m * N_I * s,
             kind="elementwise"),
        dict(op=f"{prefix}_down", fn=lambda: torch.mm(h, wd), flops=2 * m * N_I * H,
             min_bytes=(m * N_I + N_I * H + m * H) * s, kind=kind),
    ]


def _mlp_fp8() -> list[dict]:
    f8 = torch.float8_e4m3fn
    one = torch.tensor(1.0, device="cuda")
    x8 = _rand(M, H).to(f8)
    wg8, wu8 = _rand(N_I, H).to(f8).t(), _rand(N_I, H).to(f8).t()  # column-major (H, N_I), as _scaled_mm wants B
    wd8 = _rand(H, N_I).to(f8).t()
    g, u = _rand(M, N_I), _rand(M, N_I)
    h8 = _rand(M, N_I).to(f8)

    def mm(a, b):
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    return [
        dict(op="mlp_fp8_gate", fn=lambda: mm(x8, wg8), flops=2 * M * H * N_I, min_bytes=M * H + H * N_I + M * N_I * 2,
             kind="tensor_fp8"),
        dict(op="mlp_fp8_up", fn=lambda: mm(x8, wu8), flops=2 * M * H * N_I, min_bytes=M * H + H * N_I + M * N_I * 2,
             kind="tensor_fp8"),
        # the act on the GEMMs' bf16 outputs, quantized to fp8 for the down GEMM in the same kernel
        dict(op="mlp_fp8_silu_mul_quant", fn=lambda: silu_mul(g, u, f8), flops=None,
             min_bytes=2 * M * N_I * 2 + M * N_I,
             kind="elementwise"),
        dict(op="mlp_fp8_down", fn=lambda: mm(h8, wd8), flops=2 * M * N_I * H, min_bytes=M * N_I + N_I * H + M * H * 2,
             kind="tensor_fp8"),
    ]


def _fma(dtype: torch.dtype, name: str, kind: str) -> list[dict]:
    x = torch.rand(FMA_N, device="cuda", dtype=torch.float32).to(dtype)
    ab = torch.tensor([0.999, 0.001], device="cuda", dtype=dtype)  # x converges to 1: no overflow in fp16
    y = torch.empty_like(x)
    s = x.element_size()

    def fn():
        fma_loop_kernel[(FMA_N // FMA_BLOCK,)](x, ab, y, FMA_N, ITERS=FMA_ITERS, BLOCK=FMA_BLOCK)

    return [dict(op=name, fn=fn, flops=2 * FMA_N * FMA_ITERS, min_bytes=2 * FMA_N * s, kind=kind)]


def _gemm_fp64() -> list[dict]:
    n = 2048
    a, b = _rand(n, n, dtype=torch.float64), _rand(n, n, dtype=torch.float64)
    return [dict(op="gemm_fp64_2048", fn=lambda: torch.mm(a, b), flops=2 * n**3, min_bytes=3 * n * n * 8,
                 kind="tensor_fp64")]


def _gemm_int8() -> list[dict]:
    n = 4096
    a = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8).t()  # column-major
    return [dict(op="gemm_int8_4096", fn=lambda: torch._int_mm(a, b), flops=2 * n**3,
                 min_bytes=2 * n * n + n * n * 4, kind="tensor_int8")]


def _l1() -> list[dict]:
    tile, block, reps, progs = 2048, 1024, 512, 132 * 8  # an 8 KiB fp32 tile, read 512 times by each program
    x = torch.rand(tile, device="cuda")
    y = torch.empty(progs * block, device="cuda")

    def fn():
        l1_reuse_kernel[(progs,)](x, y, REPS=reps, TILE=tile, BLOCK=block)

    # FLOPs: one FADD per element loaded; DRAM: the tile once, the sums written
    return [dict(op="triton_l1_reuse", fn=fn, flops=progs * reps * block, min_bytes=tile * 4 + progs * block * 4,
                 kind="l1_bound", l1_bytes=progs * reps * block * 4)]


def _l2() -> list[dict]:
    block, reps, progs = 2048, 256, 132 * 8
    n = 16 << 20 >> 2  # a 16 MiB fp32 buffer, well inside the 50 MB L2
    x = torch.rand(n, device="cuda")
    y = torch.empty(progs * block, device="cuda")

    def fn():
        l2_sweep_kernel[(progs,)](x, y, n // block, REPS=reps, BLOCK=block)

    return [dict(op="triton_l2_sweep", fn=fn, flops=progs * reps * block, min_bytes=n * 4 + progs * block * 4,
                 kind="l2_bound", l2_bytes=progs * reps * block * 4)]


def _tiny() -> list[dict]:
    t = torch.zeros(1, device="cuda")
    return [dict(op="tiny_add_1", fn=lambda: t.add_(1.0), flops=1, min_bytes=8, kind="latency")]


BUILDERS = {  # group -> ops; every op's name starts with its group's
    "mlp_bf16": lambda: _mlp_dense("mlp_bf16", torch.bfloat16, M, "tensor_bf16"),
    "mlp_fp8": _mlp_fp8,
    "mlp_fp32": lambda: _mlp_dense("mlp_fp32", torch.float32, M32, "fp32_simt"),
    "gemm_fp64": _gemm_fp64,
    "triton_fma_fp32": lambda: _fma(torch.float32, "triton_fma_fp32", "fp32"),
    "triton_fma_fp64": lambda: _fma(torch.float64, "triton_fma_fp64", "fp64"),
    "triton_fma_fp16": lambda: _fma(torch.float16, "triton_fma_fp16", "fp16"),
    "gemm_int8": _gemm_int8,
    "triton_l1": _l1,
    "triton_l2": _l2,
    "tiny": _tiny,
}


def capture(only: set[str]) -> list[dict]:
    """Warm up, then profile one launch of every selected op (a group name selects all its ops)."""
    manifest = []
    for group, build in BUILDERS.items():
        if only and not any(o == group or o.startswith(group + "_") for o in only):
            continue
        try:
            ops = build()
        except Exception as exc:  # one op that fails must not cost the others' captures
            print(f"kinds: {group}: set-up failed: {exc!r}", file=sys.stderr)
            manifest.append({"group": group, "op": group, "error": repr(exc)})
            continue
        for o in ops:
            if only and group not in only and o["op"] not in only:
                continue
            entry = {"group": group, **{k: v for k, v in o.items() if k != "fn"}}
            try:
                for _ in range(3):
                    o["fn"]()
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
                o["fn"]()
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
            except Exception as exc:
                torch.cuda.cudart().cudaProfilerStop()
                print(f"kinds: {o['op']}: failed: {exc!r}", file=sys.stderr)
                entry["error"] = repr(exc)
            manifest.append(entry)
        del ops
        torch.cuda.empty_cache()
    return manifest


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", default="kinds_manifest.json")
    p.add_argument("--only", nargs="*", default=[], help=f"groups ({', '.join(BUILDERS)}) or op names")
    args = p.parse_args()
    # fp32 GEMMs on CUDA cores (SIMT FFMA), not TF32 tensor cores
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    manifest = capture(set(args.only))
    missed = [o for o in args.only if not any(o in (m["group"], m["op"]) for m in manifest)]
    if missed:
        p.error(f"--only {missed}: no such group or op (groups: {', '.join(BUILDERS)})")
    with open(args.manifest, "w") as fh:
        json.dump(manifest, fh, indent=2)
    print(f"kinds: {len(manifest)} ops captured on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}, allow_tf32={torch.backends.cuda.matmul.allow_tf32}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
