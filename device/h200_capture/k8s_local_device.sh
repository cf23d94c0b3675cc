#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root: `capture k8s run --method sister` end to end with REAL ncu
# and a REAL two-worker CUDA server (device/k8s/tp_server.py: a non-CUDA HTTP parent, 2 CUDA workers, /health
# 200 only when both run), the kubectl being tests/data/k8s/node_kubectl (this node as the cluster: it starts the
# sister's container command locally). Run 1: workers inferred from --tensor-parallel-size 2 (two exact-port
# releases), then a full-set capture of the bf16 GEMM. Run 2: --workers 1 on the same server: one release, so
# readiness never passes (worker 1 stays blocked) and the run must fail at wait-ready and still clean up.
# Run 3 (--method debug) is described below. Everything is bounded; writes $OUT/k8s_local.log and
# $OUT/k8s_local.tar.gz.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=$OUT/k8s_local.log; R=/tmp/k8sl; rm -rf $R; mkdir -p $R/docs
log() { echo "--- $(date +%T) $*" >> $L; }
NCU_HOME=""
for d in /usr/local/cuda/nsight-compute-* /opt/nvidia/nsight-compute/* /usr/local/cuda/bin; do
  [ -z "$NCU_HOME" ] && [ -f "$d/ncu" ] && NCU_HOME=$d
done
log "uid $(id -u); NCU_HOME=$NCU_HOME; $(ls -la $NCU_HOME/ncu); $(command -v timeout pkill tar | tr '\n' ' ')"
cp tests/data/k8s/tp_deployment.json $R/docs/deployment.json; cp tests/data/k8s/tp_services.json $R/docs/services.json
export NODE_KUBECTL_NCU_HOME=$NCU_HOME NODE_KUBECTL_DEPLOYMENT=$R/docs/deployment.json
K="python3 -m perfreport capture k8s run --method sister --name tp-server -n inference --container vllm \
 --ncu-image local/ncu:2025.3.1 --ncu-home $NCU_HOME --from-json $R/docs --kubectl tests/data/k8s/node_kubectl"
run() {  # $1 name, rest: extra args
  local n=$1; shift
  export NODE_KUBECTL_STATE=$R/$n/state
  log "run $n: $K --capture-id $n --out $R/$n/plan --bundle $R/$n/bundle $*"
  timeout -s INT 300 $K --capture-id $n --out $R/$n/plan --bundle $R/$n/bundle "$@" >> $L 2>&1
  log "run $n rc=$?"
  log "$n server output (pod.log, last 8 lines):"; tail -8 $R/$n/state/pod.log >> $L 2>/dev/null
  pkill -9 -f tp_server.py && log "killed a leftover tp_server" || log "no tp_server left running"
  for i in $(seq 20); do (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null || break; sleep 1; done
  ls -la /ncu /ncu-out >> $L 2>&1
}
if [ -z "${ONLY_DEBUG:-}" ]; then  # ONLY_DEBUG=1: run 3 alone
run tp2 --kernel-name regex:nvjet --set full --launch-count 1
run tp2-one-release --workers 1 --ready-timeout 45 --kernel-name regex:nvjet --set basic
for f in $R/*/bundle/ncu-profiles/*release*.txt; do log "$f"; cat $f >> $L; done
find $R -name '*.ncu-rep' -exec gzip -9 {} \;
tar -czf $OUT/k8s_local.tar.gz -C $R . ; log "tar: $(tar -tzf $OUT/k8s_local.tar.gz | wc -l) files"
fi
# Run 3, --method debug: the "production" pod's server (tests/data/k8s/tp_pod.json's command: under ncu --mode
# launch) started here, released with `capture release --workers 2`, serving; then an ephemeral-container capture.
if true; then
  mkdir -p $R/dbgdocs; cp tests/data/k8s/tp_pod.json $R/dbgdocs/pod.json
  export NODE_KUBECTL_STATE=$R/dbg1/state NODE_KUBECTL_POD=$R/dbgdocs/pod.json; mkdir -p $NODE_KUBECTL_STATE
  python3 -c "import json,os; c=json.load(open('$R/dbgdocs/pod.json'))['spec']['containers'][0]; os.execvp(c['command'][0], c['command']+c['args'])" > $R/dbg1/state/pod.log 2>&1 &
  P=$!
  log "debug: production server pid $P; releasing its 2 workers"
  timeout -s INT 120 python3 -m perfreport capture release --ncu $NCU_HOME/ncu --workers 2 --log $R/dbg1/prod-release.txt --attempts 20 >> $L 2>&1
  log "release rc=$?"
  for i in $(seq 60); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null && break; sleep 1; done
  log "debug: /health after $i s"
  log "run dbg1"
  timeout -s INT 200 python3 -m perfreport capture k8s run --method debug --name tp-server-7c9d8b6f5-x2k4q -n inference \
    --container vllm --capture-id dbg1 --ncu-image local/ncu:2025.3.1 --debug-ncu $NCU_HOME/ncu --from-json $R/dbgdocs \
    --kubectl tests/data/k8s/node_kubectl --out $R/dbg1/plan --bundle $R/dbg1/bundle --kernel-name regex:nvjet \
    --set basic >> $L 2>&1
  log "run dbg1 rc=$?"
  python3 -c "import urllib.request as u; print('after the capture /stats:', u.urlopen('http://127.0.0.1:8000/stats', timeout=2).read().decode())" >> $L 2>&1
  kill -INT $P; sleep 3; pkill -9 -f tp_server.py; wait $P 2>/dev/null
  log "debug: production server output (last 6 lines):"; tail -6 $R/dbg1/state/pod.log >> $L
  find $R/dbg1 -name '*.ncu-rep' -exec gzip -9 {} \;
  tar -czf $OUT/k8s_local.tar.gz -C $R . ; log "tar: $(tar -tzf $OUT/k8s_local.tar.gz | wc -l) files"
fi
