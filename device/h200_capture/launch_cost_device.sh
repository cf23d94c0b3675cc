#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: launch_cost.py plain, under `ncu --mode launch` after a
# release attach, and under a launch-and-attach session whose filter matches nothing. Writes $OUT/launch_cost.log
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
L=$OUT/launch_cost.log; S=device/h200_capture/launch_cost.py
log() { echo "--- $*" >> $L; }
for i in 1 2; do log "plain $i"; python3 $S plain >> $L 2>&1; done
log "under ncu --mode launch --target-processes all, released by one empty attach"
$NCU --mode launch --target-processes all python3 $S launched-released > /tmp/lc_launch.log 2>&1 &
sleep 8; timeout 60 python3 -m perfreport capture release --ncu $NCU --log /tmp/lc_rel.txt --attempts 3 >> $L 2>&1
wait; cat /tmp/lc_launch.log >> $L
log "launch-and-attach session, filter matches nothing: ncu --clock-control none -k regex:no_such_kernel"
$NCU --clock-control none -k regex:no_such_kernel python3 $S session-no-match >> $L 2>&1
log "launch-and-attach session, the first matching launch profiled (--set basic -c 1), the rest run after the count"
$NCU --clock-control none -k regex:elementwise --launch-count 1 --set basic python3 $S session-after-count >> $L 2>&1
cat $L
