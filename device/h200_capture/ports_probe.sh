#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1): which process listens on which ncu port under `ncu --mode launch
# --target-processes all` (a non-CUDA parent + 2 CUDA workers), and what `--port P --max-connections 1` attaches.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
L=$OUT/ports_probe.log; R=/tmp/pp; rm -rf $R; mkdir -p $R
log() { echo "--- $(date +%T) $*" >> $L; }
listeners() { python3 - <<'PY' >> $L
import os, re
inodes = {}
for name in ("tcp", "tcp6"):
    for line in open(f"/proc/net/{name}").read().splitlines()[1:]:
        f = line.split()
        port = int(f[1].rsplit(":", 1)[1], 16)
        if f[3] == "0A" and 49152 <= port <= 49215:
            inodes[f[9]] = (name, port)
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            m = re.match(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
            if m and m.group(1) in inodes:
                cmd = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:90]
                print("listen", inodes[m.group(1)], "pid", pid, cmd)
    except OSError:
        pass
PY
}
$NCU --mode launch --target-processes all python3 device/k8s/release_probe.py 20 > $R/target.log 2>&1 &
T=$!
sleep 20; log "20 s after launch, target output:"; cat $R/target.log >> $L; log "listeners:"; listeners
try() {  # $1 label, rest: extra attach options
  local label=$1; shift
  timeout -s INT 25 $NCU --mode attach --hostname 127.0.0.1 "$@" --kernel-name regex:^nomatch$ --launch-count 1 > $R/$label.txt 2>&1 &
  local a=$!; sleep 8; kill -INT $a 2>/dev/null; wait $a; log "attach $label ($*) rc=$?"; cat $R/$label.txt >> $L
  sleep 3; log "listeners after $label:"; listeners
}
try exact49153 --port 49153 --max-connections 1
try exact49152 --port 49152 --max-connections 1
try two49152 --port 49152 --max-connections 2
try default
sleep 5; log "target output (last 8 lines):"; tail -8 $R/target.log >> $L
for i in $(seq 30); do kill -0 $T 2>/dev/null || break; sleep 1; done
kill -0 $T 2>/dev/null && { log "target still running: killing"; pkill -f release_probe.py; kill $T; }
wait; log "target ended"
