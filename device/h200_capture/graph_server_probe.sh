#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: why the node-mode capture on the CUDA-graph server saw no
# kernel in overhead3/. Two server lives (serve_llama --engine llama-graph under `ncu --mode launch`), one released
# with --graph-profiling graph, one node-mode (the default); in each, under closed-loop load, four attaches of at
# most ATTACH_S seconds, SIGINTed to their process group: A node -k regex:nvjet -c 1, B node no filter -c 1,
# C graph-mode -c 1 (a whole graph), D node -k regex:nvjet -c 1 again. Then the micro probe (graph_attach_probe.py)
# with its graph replayed on a second thread (PROBE_THREAD=1) and a cuBLAS matmul in it (PROBE_MATMUL=1), graph-mode
# release then node attach -k regex:nvjet. Epoch stamps in the log line up with loadgen's request records.
# Writes $OUT/graph_server_probe/ (probe.log, load_*.json, server_*.log, release_*.txt).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}; ATTACH_S=${ATTACH_S:-20}
O=$OUT/graph_server_probe; mkdir -p $O; L=$O/probe.log
log() { echo "--- $(date +%s.%N | cut -c1-14) $(date +%T) $*" >> $L; }
attach() {  # attach MAX_SECONDS ARGS...: attach, wait until ncu ends or MAX_SECONDS pass, then SIGINT its group
  local S=$1; shift
  setsid $NCU --mode attach --hostname 127.0.0.1 "$@" > /tmp/att.txt 2>&1 & local P=$!
  for _ in $(seq 1 $S); do sleep 1; kill -0 $P 2>/dev/null || break; done
  kill -INT -- -$P 2>/dev/null; wait $P; echo "rc=$?" >> /tmp/att.txt
  grep -E '==PROF==|==ERROR==|==WARNING==|rc=' /tmp/att.txt | head -30 >> $L; log "attach ended"
}
ready() {  # wait up to 90 s for /health
  python3 - <<'PY'
import time, urllib.request
for i in range(90):
    try:
        if urllib.request.urlopen("http://127.0.0.1:8008/health", timeout=2).status == 200:
            print(f"ready after {i} s"); break
    except Exception:
        pass
    time.sleep(1)
else:
    print("not ready after 90 s")
PY
}
server_case() {  # server_case NAME RELEASE_MODE
  local N=$1 M=$2
  log "case $N: serve_llama --engine llama-graph under ncu --mode launch; release --graph-profiling $M"
  $NCU --mode launch --target-processes all python3 -m perfreport.capture.serve_llama --engine llama-graph \
    --host 127.0.0.1 --port 8008 --layers 16 --max-batch 8 --warm-prompt-len 128 > $O/server_$N.log 2>&1 &
  local SP=$!
  sleep 3
  timeout 120 python3 -m perfreport capture release --ncu $NCU --graph-profiling $M --log $O/release_$N.txt >> $L 2>&1
  log "release rc=$?"; ready >> $L
  python3 -m perfreport.capture.loadgen --duration $((4 * ATTACH_S + 40)) --window 2 --out $O/load_$N.json \
    > $O/load_$N.log 2>&1 & local LP=$!
  sleep 8
  log "$N A: node-mode -k regex:nvjet -c 1 --set basic"; attach $ATTACH_S --clock-control none -k regex:nvjet -c 1 --set basic -f -o /tmp/$N-a
  sleep 4
  log "$N B: node-mode, no filter, -c 1 --set basic"; attach $ATTACH_S --clock-control none -c 1 --set basic -f -o /tmp/$N-b
  sleep 4
  log "$N C: --graph-profiling graph -c 1 --set basic"; attach $ATTACH_S --clock-control none --graph-profiling graph -c 1 --set basic -f -o /tmp/$N-c
  sleep 4
  log "$N D: node-mode -k regex:nvjet -c 1 --set basic again"; attach $ATTACH_S --clock-control none -k regex:nvjet -c 1 --set basic -f -o /tmp/$N-d
  wait $LP; log "$N load: $(tail -1 $O/load_$N.log)"
  kill $SP 2>/dev/null; sleep 2; pkill -f serve_llama; wait $SP 2>/dev/null
  for f in /tmp/$N-*.ncu-rep; do [ -f "$f" ] && $NCU --import $f --csv --page raw --metrics gpu__time_duration.sum 2>&1 | head -5 >> $L; done
}
server_case graph graph
server_case node node
log "micro probe: graph with a matmul, replayed on a second thread; graph-mode release, then node -k regex:nvjet"
PROBE_THREAD=1 PROBE_MATMUL=1 $NCU --mode launch --target-processes all python3 device/h200_capture/graph_attach_probe.py 40 > /tmp/probe.txt 2>&1 &
sleep 12
log "micro release, --graph-profiling graph"; attach 7 --graph-profiling graph -k regex:^no_such$ -c 1
sleep 3
log "micro node -k regex:nvjet -c 1 --set basic"; attach 10 --clock-control none -k regex:nvjet -c 1 --set basic -f -o /tmp/mp1
sleep 3
log "micro node -k regex:elementwise -c 1 --set basic"; attach 10 --clock-control none -k regex:elementwise -c 1 --set basic -f -o /tmp/mp2
wait; log "micro target output"; cat /tmp/probe.txt >> $L
cp /tmp/co*.log $O/ 2>/dev/null
cat $L | tail -150
