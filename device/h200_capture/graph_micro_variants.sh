#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: which factor makes a node-mode attach on a graph-replaying
# process connect and never take effect (graph_server_probe.sh's micro case). Per variant (PROBE_THREAD, PROBE_MATMUL,
# release mode), a fresh graph_attach_probe.py under `ncu --mode launch`: release, then node attach 1
# (-k regex:nvjet|elementwise -c 1, 10 s), then node attach 2 (no filter, -c 1, 8 s: is it still attachable?).
# Writes $OUT/graph_micro_variants.log. Each variant takes about 48 s.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}; L=$OUT/graph_micro_variants.log
log() { echo "--- $(date +%T) $*" >> $L; }
attach() {
  local S=$1; shift
  setsid $NCU --mode attach --hostname 127.0.0.1 "$@" > /tmp/att.txt 2>&1 & local P=$!
  for _ in $(seq 1 $S); do sleep 1; kill -0 $P 2>/dev/null || break; done
  kill -INT -- -$P 2>/dev/null; wait $P; echo "rc=$?" >> /tmp/att.txt
  grep -E 'Profiling|No kernels|No graphs|No attachable|Connected|rc=' /tmp/att.txt | head -8 >> $L
}
variant() {  # variant THREAD MATMUL RELEASE_MODE
  log "variant thread=$1 matmul=$2 release=$3"
  PROBE_THREAD=$1 PROBE_MATMUL=$2 $NCU --mode launch --target-processes all python3 device/h200_capture/graph_attach_probe.py 36 > /tmp/probe.txt 2>&1 &
  local TP=$!
  sleep 10
  log "release ($3)"; attach 6 --graph-profiling $3 -k regex:^no_such$ -c 1
  sleep 3
  log "node attach 1: -k regex:nvjet|elementwise -c 1"; attach 10 --clock-control none -k 'regex:nvjet|elementwise' -c 1 --set basic -f -o /tmp/v1
  sleep 2
  log "node attach 2: no filter -c 1"; attach 8 --clock-control none -c 1 --set basic -f -o /tmp/v2
  wait $TP; echo "target rc=$?" >> $L
  log "target rates (every 3rd second)"; grep -E '^t=' /tmp/probe.txt | awk 'NR % 3 == 0' >> $L
}
# Arguments: variants as THREAD,MATMUL,MODE triples (default: the graph-release sweep, twice, then one node release).
if [ $# -gt 0 ]; then
  for v in "$@"; do IFS=, read -r t m r <<< "$v"; variant "$t" "$m" "$r"; done
else
  for run in 1 2; do variant 1 1 graph; variant 1 0 graph; variant 0 1 graph; done
  variant 1 1 node
fi
cat $L
