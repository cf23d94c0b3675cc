#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-04: `capture run --mode attach` with --launch-count 3
# on a process replaying a CUDA graph (graph_attach_probe.py under `ncu --mode launch`, node-mode `capture release`),
# scoped and unscoped: after the session fix for `Profiling "K" - 0 (1/3):` lines and the rc -2 of an interrupted
# ncu, both must end ok with 3 kernels. Writes $OUT/attach_count/ (log, receipts, ncu outputs, CSVs).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
O=$OUT/attach_count; mkdir -p $O; B=/tmp/acb; rm -rf $B; L=$O/attach_count.log
run() { echo "+ $*" >> $L; "$@" >> $L 2>&1; echo "rc=$?" >> $L; }
$NCU --mode launch --target-processes all python3 device/h200_capture/graph_attach_probe.py 40 > $O/target.txt 2>&1 &
TP=$!
sleep 8
run python3 -m perfreport capture release --ncu $NCU --log $O/release.ncu-output.txt
sleep 2
run python3 -m perfreport capture run --bundle $B --ncu $NCU --kernel-name regex:elementwise --launch-count 3 \
  --set basic --output scoped_c3 --timeout 60
sleep 1
run python3 -m perfreport capture run --bundle $B --ncu $NCU --allow-unscoped --replicas 2 --launch-count 3 \
  --set basic --output unscoped_c3 --timeout 60
wait $TP; echo "target rc=$?" >> $L
cp $B/ncu-profiles/*.receipt.json $B/ncu-profiles/*.ncu-output.txt $B/ncu-profiles/*.csv $O/ 2>/dev/null
cat $L
