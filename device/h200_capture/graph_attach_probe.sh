#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: a graph-replaying process under `ncu --mode launch`:
# graph-mode release, then a node-mode attach for a kernel inside the graph, then another release, then node again.
# FIRST_SLEEP (default 4) is how long the target gets before the first attach: on a cold machine python + torch take
# longer than 4 s, so the 12-03 run's first attach that connected was the node-mode one (graph_attach_probe_node_first.log);
# FIRST_SLEEP=12 makes the graph-mode release the first (graph_attach_probe_graph_first.log). Writes $OUT/graph_attach_probe.log
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}; L=$OUT/graph_attach_probe.log
log() { echo "--- $(date +%T) $*" >> $L; }
attach() {  # attach ARGS...: run an attach for 7 s, then SIGINT its process group
  setsid $NCU --mode attach --hostname 127.0.0.1 "$@" > /tmp/att.txt 2>&1 & local P=$!
  sleep 7; kill -INT -- -$P 2>/dev/null; wait $P; echo "rc=$?" >> /tmp/att.txt; grep -E '==PROF==|==ERROR==|==WARNING==|rc=' /tmp/att.txt >> $L
}
$NCU --mode launch --target-processes all python3 device/h200_capture/graph_attach_probe.py 44 > /tmp/probe.txt 2>&1 &
sleep ${FIRST_SLEEP:-4}
log "release attach, --graph-profiling graph"; attach --graph-profiling graph -k regex:^no_such$ -c 1
sleep 3
log "node-mode attach for a kernel inside the graph: -k regex:elementwise -c 1 --set basic"
attach --clock-control none -k regex:elementwise -c 1 --set basic -f -o /tmp/gp1
sleep 3
log "graph-mode release attach again"; attach --graph-profiling graph -k regex:^no_such$ -c 1
sleep 3
log "node-mode attach, default graph profiling, no filter match (no_such)"; attach -k regex:^no_such$ -c 1
wait; log "target output (rate per second)"; cat /tmp/probe.txt >> $L
cat $L
