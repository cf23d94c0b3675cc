#!/usr/bin/env bash
# Device run for issue 19, from the repo root, on one GPU: (1) the launch floor (launch_floor.py), (2) PyTorch traces
# of the example layer with input shapes recorded (useful FLOPs), (3) `perftunereport ceilings measure`. Writes $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/ceilings $OUT/traces
{ nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; } > $OUT/versions.txt 2>&1
python3 device/launch_floor/launch_floor.py > $OUT/launch_floor.json 2> $OUT/launch_floor.err; echo "rc=$?" >> $OUT/launch_floor.err
python3 campaigns/h200-decoder-layer/trace.py --mode decode --batch 16 --kv-len 2048 --iters 5 --record-shapes \
  --out $OUT/traces/decode_shapes_torch_trace.json.gz > $OUT/traces/decode.log 2>&1; echo "rc=$?" >> $OUT/traces/decode.log
python3 campaigns/h200-decoder-layer/trace.py --mode prefill --batch 8 --seq 1024 --iters 5 --record-shapes \
  --out $OUT/traces/prefill_shapes_torch_trace.json.gz > $OUT/traces/prefill.log 2>&1; echo "rc=$?" >> $OUT/traces/prefill.log
nvidia-smi > $OUT/ceilings/nvidia-smi.txt 2>&1
timeout 400 python3 -m perfreport ceilings measure --out $OUT/ceilings --seconds 8 2>&1 | tee $OUT/ceilings/stderr.txt
cat $OUT/launch_floor.json; tail -2 $OUT/traces/*.log
