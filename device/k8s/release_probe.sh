#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1): how many release attaches a vLLM-shaped target (a non-CUDA parent + 2 CUDA
# worker processes) needs under `ncu --mode launch --target-processes all`. Uses `perftunereport capture release`
# (SIGINT to ncu's process group). Run from the repo root; writes $OUT/release_probe.log
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/rel; rm -rf $W; mkdir -p $W
L=$OUT/release_probe.log
log() { echo "--- $*" >> $L; }
log "ncu: $($NCU --version | tail -1); wrapper tail:"; tail -5 $NCU >> $L
$NCU --mode launch --target-processes all python3 device/k8s/release_probe.py 40 > $W/target.log 2>&1 &
sleep 15; log "15 s after launch, target output:"; cat $W/target.log >> $L
for i in 1 2 3; do
  timeout 60 python3 -m perfreport capture release --ncu $NCU --log $W/rel$i.txt --attempts 3 >> $L 2>&1
  log "release $i rc=$?; its ncu output:"; cat $W/rel$i.txt >> $L
  sleep 8; log "8 s after release $i, target output (last 6 lines):"; tail -6 $W/target.log >> $L
done
wait; log "target ended; last lines:"; tail -4 $W/target.log >> $L
