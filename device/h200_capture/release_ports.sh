#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: `capture release --workers 2` on a vLLM-shaped target
# (a non-CUDA parent, 2 CUDA workers, device/k8s/release_probe.py) under `ncu --mode launch
# --target-processes all`. Everything is bounded; writes $OUT/release_ports.log only.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
L=$OUT/release_ports.log; R=/tmp/relp; rm -rf $R; mkdir -p $R
log() { echo "--- $(date +%T) $*" >> $L; }
log "ncu: $($NCU --version | tail -1)"
$NCU --mode launch --target-processes all python3 device/k8s/release_probe.py 25 > $R/target.log 2>&1 &
T=$!
sleep 12; log "12 s after launch, target output:"; cat $R/target.log >> $L
timeout -s INT 100 python3 -m perfreport capture release --ncu $NCU --workers 2 --log $R/rel.txt --attempts 8 >> $L 2>&1
log "release --workers 2 rc=$?"; for f in $R/rel*.txt; do log "$f"; cat $f >> $L; done
sleep 6; log "6 s after the releases, target output (last 6 lines):"; tail -6 $R/target.log >> $L
for i in $(seq 40); do kill -0 $T 2>/dev/null || break; sleep 1; done
kill -0 $T 2>/dev/null && { log "target still running after 40 s: killing"; pkill -f release_probe.py; kill $T; }
wait; log "target ended; last lines:"; tail -4 $R/target.log >> $L
