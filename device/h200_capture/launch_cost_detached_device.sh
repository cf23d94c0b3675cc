#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: the per-launch cost of a process under `ncu --mode launch`
# once the release attach has detached, and with --graph-profiling graph on the attach side. Writes $OUT/launch_cost_detached.log
export PYTHONPATH=$PWD; NCU=/usr/local/cuda/bin/ncu; S=device/h200_capture/launch_cost.py; L=$OUT/launch_cost_detached.log
echo "--- ncu --mode launch, release attach (capture release), measured 10 s after the first CUDA call (detached)" >> $L
$NCU --mode launch --target-processes all python3 $S launched-detached 10 > /tmp/l1.log 2>&1 & sleep 6
timeout 40 python3 -m perfreport capture release --ncu $NCU --log /tmp/r1.txt --attempts 3 >> $L 2>&1; wait; cat /tmp/l1.log >> $L
echo "--- ncu --mode launch, release attach with --graph-profiling graph (SIGINT after 3 s), measured detached" >> $L
$NCU --mode launch --target-processes all python3 $S launched-detached-after-graph-attach 10 > /tmp/l2.log 2>&1 & sleep 6
setsid $NCU --mode attach --hostname 127.0.0.1 --graph-profiling graph --kernel-name regex:^no_such_kernel$ -c 1 > /tmp/r2.txt 2>&1 & P=$!
sleep 3; kill -INT -- -$P; wait; cat /tmp/l2.log /tmp/r2.txt >> $L
echo "--- ncu --mode launch, attached with --graph-profiling graph for the measurement" >> $L
$NCU --mode launch --target-processes all python3 $S launched-attached-graph-profiling-graph 3 > /tmp/l3.log 2>&1 & sleep 6
setsid $NCU --mode attach --hostname 127.0.0.1 --graph-profiling graph --kernel-name regex:^no_such_kernel$ -c 1 > /tmp/r3.txt 2>&1 & P=$!
sleep 12; kill -INT -- -$P 2>/dev/null; wait; cat /tmp/l3.log /tmp/r3.txt >> $L
cat $L
