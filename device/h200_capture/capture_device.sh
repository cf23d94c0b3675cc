#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: `capture run` for real (launch-and-attach on the oracle
# kernels: GEMM, attention, a Triton kernel; an empty capture), preflight, the harness, the multi-process release
# probe. Writes $OUT/capture_device.tar.gz (bundle ncu-profiles/ with reports gzipped, receipts, logs).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/capdev; rm -rf $W; mkdir -p $W
B=$W/bundle
L=$W/capture_device.log
O=device/h200_oracle/oracle.py
run() { echo "+ $*" >> $L; "$@" >> $L 2>&1; echo "rc=$?" >> $L; }
cap() { run python3 -m perfreport capture run --bundle $B --mode launch-and-attach --ncu $NCU --campaign h200-oracle \
          --cell-id oracle "$@"; }
# 1. preflight on the real machine (and ncu --help for the option check)
OUT=$W bash device/h200_capture/preflight_device.sh >> $L 2>&1
run python3 -m perfreport capture preflight --ncu $NCU
# 2. capture run, launch-and-attach: basic then full (after basic) of the GEMM, SDPA and Triton RMSNorm
cap --kernel-name regex:nvjet --set basic --output gemm_bf16_basic -- python3 $O --only gemm_bf16_8192 --manifest /tmp/m1.json
cap --kernel-name regex:nvjet --set full --after-basic --output gemm_bf16_full -- python3 $O --only gemm_bf16_8192 --manifest /tmp/m2.json
cap --kernel-name 'regex:flash|fmha|sdpa|attention' --set full --after-basic --output sdpa_full -- python3 $O --only sdpa_causal_bf16 --manifest /tmp/m3.json
cap --kernel-name regex:rmsnorm_kernel --set full --after-basic --output triton_rmsnorm_full -- python3 $O --only triton_rmsnorm_8192x4096 --manifest /tmp/m4.json
# 3. the empty capture: a pattern that matches nothing (ncu exits 0; capture run must diagnose it and exit non-zero)
cap --kernel-name regex:no_such_kernel --output empty_pattern -- python3 device/h200_capture/tiny.py
# 4. raw ncu, the env-wrapper trap (the policy refuses it in capture run, so run ncu directly for the real output)
run $NCU --target-processes application-only --kernel-name regex:elementwise -o $W/envwrap -- env FOO=1 python3 device/h200_capture/tiny.py
run python3 -m perfreport capture diagnose $W/capture_device.log
# 5. the harness
OUT=$W bash device/h200_capture/harness_device.sh >> $L 2>&1
# 6. how many release attaches a two-worker server needs (vLLM-shaped: API parent + CUDA workers)
OUT=$W timeout 150 bash device/k8s/release_probe.sh >> $L 2>&1
for f in $(find $W -name '*.ncu-rep'); do gzip -9 $f; done
ls -laR $W > $W/listing.txt
tar -C /tmp -czf $OUT/capture_device.tar.gz capdev
tail -60 $L
