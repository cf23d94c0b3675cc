"""Known-shape oracle kernels for the importer's real-capture tests (run on an H200 under ncu).

Each op runs warm-up launches, then one launch between cudaProfilerStart/Stop, so
`ncu --profile-from-start off` captures exactly the measured launch of every op.
Writes oracle_manifest.json: per op the expected FLOPs (algorithmic) and minimum DRAM bytes.
Without ncu (``--ceilings``) it measures the empirical ceilings with CUDA events instead.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + offs, (x * rstd * w).to(tl.bfloat16), mask=mask)


def triton_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    rmsnorm_kernel[(x.shape[0],)](x, w, y, x.shape[1], 1e-6, BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def build_ops():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    ops = []

    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    ops.append(dict(op="gemm_bf16_8192", fn=lambda: torch.mm(a, b), flops=2 * n**3,
                    min_bytes=3 * n * n * 2, kind="tensor_bf16"))

    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=dev)
    ops.append(dict(op="gemm_fp8_8192",
                    fn=lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                    flops=2 * n**3, min_bytes=2 * n * n + n * n * 2, kind="tensor_fp8"))

    m = 16
    xd = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g)
    ops.append(dict(op="gemm_bf16_decode_m16", fn=lambda: torch.mm(xd, b), flops=2 * m * n * n,
                    min_bytes=n * n * 2 + 2 * m * n * 2, kind="tensor_bf16"))

    e = 256 * 1024 * 1024
    x = torch.randn(e, device=dev, dtype=torch.float32, generator=g)
    y = torch.randn(e, device=dev, dtype=torch.float32, generator=g)
    ops.append(dict(op="add_fp32_256M", fn=lambda: torch.add(x, y), flops=e,
                    min_bytes=3 * e * 4, kind="fp32"))
    dst = torch.empty_like(x)
    ops.append(dict(op="copy_fp32_256M", fn=lambda: dst.copy_(x), flops=0,
                    min_bytes=2 * e * 4, kind="copy"))

    B, H, S, D = 8, 32, 1024, 128
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
    # causal: QK^T and PV each 2*S*S*D per head, half of them masked
    ops.append(dict(op="sdpa_causal_bf16", fn=lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    flops=2 * 2 * B * H * S * S * D // 2, min_bytes=4 * B * H * S * D * 2, kind="tensor_bf16"))

    rows, cols = 8192, 4096
    xr = torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=g)
    wr = torch.randn(cols, device=dev, dtype=torch.bfloat16, generator=g)
    ops.append(dict(op="triton_rmsnorm_8192x4096", fn=lambda: triton_rmsnorm(xr, wr), flops=None,
                    min_bytes=2 * rows * cols * 2 + cols * 2, kind="cuda_core"))
    return ops


def capture(ops, only):
    manifest = []
    for o in ops:
        if only and o["op"] not in only:
            continue
        for _ in range(3):
            o["fn"]()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        o["fn"]()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        manifest.append({k: o[k] for k in ("op", "flops", "min_bytes", "kind")})
    return manifest


def ceilings():
    """Median of CUDA-event timings: bf16 8192^3 GEMM TFLOP/s and 1 GiB device copy TB/s."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t_mm = triton.testing.do_bench(lambda: torch.mm(a, b), warmup=200, rep=2000, return_mode="median")
    src = torch.randn(256 * 1024 * 1024, device="cuda")
    dst = torch.empty_like(src)
    t_cp = triton.testing.do_bench(lambda: dst.copy_(src), warmup=200, rep=2000, return_mode="median")
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    t_f8 = triton.testing.do_bench(
        lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        warmup=200, rep=2000, return_mode="median")
    return {
        "bf16_gemm_tflops": round(2 * n**3 / (t_mm * 1e-3) / 1e12, 1),
        "fp8_gemm_tflops": round(2 * n**3 / (t_f8 * 1e-3) / 1e12, 1),
        "device_copy_tbps": round(2 * src.numel() * 4 / (t_cp * 1e-3) / 1e12, 3),
        "method": "triton.testing.do_bench median (warmup 200 ms, rep 2000 ms), random inputs, "
                  "bf16/fp8 8192^3 torch.mm/_scaled_mm, 1 GiB fp32 copy_ counting read+write bytes, "
                  "no profiler attached, clocks as found",
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", default="oracle_manifest.json")
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--ceilings", action="store_true")
    args = p.parse_args()
    if args.ceilings:
        print(json.dumps(ceilings(), indent=2))
        return 0
    manifest = capture(build_ops(), set(args.only))
    with open(args.manifest, "w") as fh:
        json.dump(manifest, fh, indent=2)
    print(f"oracle: {len(manifest)} ops captured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
