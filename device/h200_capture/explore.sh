#!/usr/bin/env bash
# Device run 1 (2026-12-02): real ncu 2025.3.1 failure logs for `capture diagnose`, and live-server feasibility.
# Run from the repo root on the H200 machine; output: $OUT/explore.tar.gz
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/explore; rm -rf $W; mkdir -p $W; export PYTHONUNBUFFERED=1
D=tests/data/h200_capture
$NCU --version > $W/ncu-version.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv > $W/nvidia-smi.txt 2>&1
python3 -c "import torch,triton,transformers;print(torch.__version__, torch.version.cuda, triton.__version__, transformers.__version__)" > $W/versions.txt 2>&1
# a) an option that --mode launch rejects
timeout 60 $NCU --mode launch --clock-control none python3 $D/tiny.py > $W/launch_clock_control.log 2>&1; echo "rc=$?" >> $W/launch_clock_control.log
# b) the removed --attach option of old ncu
timeout 30 $NCU --attach 12345 > $W/attach_option.log 2>&1; echo "rc=$?" >> $W/attach_option.log
# c) a CUDA_INJECTION64_PATH already set on the target (continuous profiler slot)
cp /bin/true $W/fake_injection.so
CUDA_INJECTION64_PATH=$W/fake_injection.so timeout 120 $NCU --clock-control none --set basic -c 1 -f -o $W/inj python3 $D/tiny.py > $W/injection_env.log 2>&1; echo "rc=$?" >> $W/injection_env.log
# d) application replay of a process whose kernel count changes between passes
timeout 180 $NCU --clock-control none --replay-mode application --set basic -k regex:elementwise -c 2 -f -o $W/nondet python3 $D/tiny.py --nondeterministic > $W/app_replay_nondet.log 2>&1; echo "rc=$?" >> $W/app_replay_nondet.log
# e) env wrapper after -- with application-only (child process)
timeout 120 $NCU --clock-control none --set basic -c 1 -f -o $W/envwrap env FOO=1 python3 $D/tiny.py > $W/env_wrapper.log 2>&1; echo "rc=$?" >> $W/env_wrapper.log
# f) empty capture: a pattern that matches nothing
timeout 120 $NCU --clock-control none --set basic -k regex:no_such_kernel -c 1 -f -o $W/empty python3 $D/tiny.py > $W/empty_pattern.log 2>&1; echo "rc=$?" >> $W/empty_pattern.log
# g) replay with the GPU nearly full (save-and-restore pressure), full set
timeout 200 $NCU --clock-control none --set full -k regex:elementwise -c 1 -f -o $W/fullmem python3 $D/tiny.py --fill 0.97 > $W/gpu_full_replay.log 2>&1; echo "rc=$?" >> $W/gpu_full_replay.log
# h) live-server feasibility: random Llama decode speed + kernel names
timeout 200 python3 $D/llama_probe.py > $W/llama_probe.log 2>&1; echo "rc=$?" >> $W/llama_probe.log
# i) trace.py after the build()/add_shape_args refactor
timeout 120 python3 campaigns/h200-decoder-layer/trace.py --mode decode --batch 16 --kv-len 2048 --iters 2 --out $W/trace_check.json.gz > $W/trace_check.log 2>&1; echo "rc=$?" >> $W/trace_check.log
rm -f $W/*.ncu-rep $W/fake_injection.so
for f in $W/*.log; do echo "=== $f"; tail -25 $f; done
tar -C /tmp -czf $OUT/explore.tar.gz explore
