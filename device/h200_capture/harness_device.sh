#!/usr/bin/env bash
# Device run: the single-op replay harness (perfreport/capture/harness.py) on the H200.
# Run from the repo root with PYTHONPATH=. on the GPU host (torch installed); output: $OUT/harness_device.log and
# $OUT/harness_<op>.ncu-rep. Un-profiled timings of gemm, fp8-gemm, sdpa, rmsnorm; then each op's printed ncu
# command (--set full) for gemm and sdpa, run as printed; then rmsnorm under --nvtx (launch-skip 0 inside the range).
set -u
: "${OUT:?set OUT to the output folder}"
NCU=${NCU:-/usr/local/cuda/bin/ncu}
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
HARNESS=(python3 -m perfreport.capture.harness)
GEMM=(gemm --shape m=16,n=4096,k=4096 --dtype bf16)
FP8=(fp8-gemm --shape m=8192,n=8192,k=8192)
SDPA=(sdpa --shape b=8,h=32,s=1024,d=128,causal=1 --dtype bf16)
NORM=(rmsnorm --shape t=8192,h=4096 --dtype bf16)

step() {  # echo the argv, run it with a time limit, print its exit status
    echo "=== $*"
    timeout 300 "$@"
    echo "rc=$?"
}

profile() {  # run the ncu command the harness prints for "$@", exactly as printed
    local name=$1; shift
    local cmd
    cmd=$("${HARNESS[@]}" "$@" --ncu "$NCU" --ncu-set full --ncu-output "$OUT/harness_$name" --print-ncu)
    echo "=== $cmd"
    eval "timeout 400 $cmd"
    echo "rc=$?"
}

main() {
    "$NCU" --version
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv
    python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
    step "${HARNESS[@]}" "${GEMM[@]}" --warmup 10 --iters 100 --json
    step "${HARNESS[@]}" "${FP8[@]}" --warmup 5 --iters 20 --json
    step "${HARNESS[@]}" "${SDPA[@]}" --warmup 10 --iters 50 --json
    step "${HARNESS[@]}" "${NORM[@]}" --warmup 10 --iters 100 --json
    profile gemm "${GEMM[@]}" --warmup 10 --iters 5
    profile sdpa "${SDPA[@]}" --warmup 10 --iters 5
    profile rmsnorm_nvtx "${NORM[@]}" --warmup 10 --iters 5 --nvtx harness_timed
    ls -l "$OUT"
}

main 2>&1 | tee "$OUT/harness_device.log"
