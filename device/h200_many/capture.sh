#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: many-kernel reports and the per-port release probe.
# Writes into $OUT: many_{basic,full}.ncu-rep.gz and their raw/details CSVs (ncu --import, timed), session4.log.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
L=$OUT/session4.log
log() { echo "--- $*" >> $L; }
log "ncu: $($NCU --version | tail -1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
W=/tmp/many; rm -rf $W; mkdir -p $W
for set in basic full; do
  n=40; [ $set = full ] && n=24
  s=$(date +%s.%N)
  $NCU --set $set -k regex:elementwise --launch-count $n -o $W/many_$set python3 device/h200_many/many.py > $W/many_$set.log 2>&1
  log "capture $set ($n launches) rc=$? $(echo "$(date +%s.%N) - $s" | bc) s"; tail -3 $W/many_$set.log >> $L
  s=$(date +%s.%N); $NCU --import $W/many_$set.ncu-rep --csv --page raw > $W/many_$set-raw.csv 2>> $L
  log "ncu --import --page raw rc=$? $(echo "$(date +%s.%N) - $s" | bc) s"
  s=$(date +%s.%N); $NCU --import $W/many_$set.ncu-rep --csv --page details > $W/many_$set-details.csv 2>> $L
  log "ncu --import --page details rc=$? $(echo "$(date +%s.%N) - $s" | bc) s"
done
s=$(date +%s.%N); $NCU --import tests/data/h200_oracle/oracle_full.ncu-rep.gz --csv --page raw > /dev/null 2>> $L
log "oracle_full.ncu-rep.gz --import raw rc=$? $(echo "$(date +%s.%N) - $s" | bc) s"
zcat tests/data/h200_oracle/oracle_full.ncu-rep.gz > $W/oracle_full.ncu-rep
s=$(date +%s.%N); $NCU --import $W/oracle_full.ncu-rep --csv --page raw > /dev/null 2>> $L
log "oracle_full.ncu-rep (plain) --import raw rc=$? $(echo "$(date +%s.%N) - $s" | bc) s"
gzip -k $W/many_*.ncu-rep; cp $W/many_*.ncu-rep.gz $W/*.csv $W/many_*.log $OUT/ 2>/dev/null
# per-port release of a vLLM-shaped target: a non-CUDA parent, 2 CUDA workers
R=/tmp/rel; rm -rf $R; mkdir -p $R
$NCU --mode launch --target-processes all python3 device/k8s/release_probe.py 30 > $R/target.log 2>&1 &
sleep 12; log "12 s after launch, target output:"; cat $R/target.log >> $L
timeout 120 python3 -m perfreport capture release --ncu $NCU --workers 2 --log $R/rel.txt --attempts 10 >> $L 2>&1
log "release --workers 2 rc=$?"; for f in $R/rel.port*.txt; do log "$f"; cat $f >> $L; done
sleep 6; log "6 s after the releases, target output (last 6 lines):"; tail -6 $R/target.log >> $L
wait; log "target ended; last lines:"; tail -4 $R/target.log >> $L
