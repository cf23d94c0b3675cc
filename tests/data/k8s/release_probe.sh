#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1): facts behind the k8s sister design's "release attach".
# Run from the repo root on the H200 machine; writes $OUT/release_probe.log
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/rel; rm -rf $W; mkdir -p $W; export PYTHONUNBUFFERED=1
L=$OUT/release_probe.log
log() { echo "--- $*" >> $L; }
log "ncu: $($NCU --version | tail -1)"
log "ncu wrapper: $(file -L $NCU)"; head -c 600 $NCU | strings | head -20 >> $L
log "nsight-compute dir:"; ls -d /usr/local/cuda/nsight-compute* /opt/nvidia/nsight-compute* >> $L 2>&1
log "pkill: $(command -v pkill) tar: $(command -v tar) python3: $(command -v python3)"
log "attach options:"; $NCU --help | grep -E -A1 -- '--(port|max-connections|hostname|log-file|mode)\b' >> $L 2>&1
$NCU --mode launch --target-processes all python3 tests/data/k8s/release_probe.py 240 > $W/target.log 2>&1 &
TPID=$!
sleep 25; log "25 s after launch, target output:"; cat $W/target.log >> $L
# release attach: a kernel filter that matches nothing, output to a log file
$NCU --mode attach --hostname 127.0.0.1 --kernel-name regex:^perfreport_release_no_such_kernel$ --launch-count 1 --log-file $W/rel1.log -o $W/rel1 > $W/rel1.stdout 2>&1 &
R1=$!
for i in $(seq 1 60); do grep -q Connected $W/rel1.log 2>/dev/null && break; sleep 0.5; done
sleep 10; log "release attach 1 log (10 s after Connected) + stdout:"; cat $W/rel1.log $W/rel1.stdout >> $L 2>&1
log "target output now:"; tail -8 $W/target.log >> $L
kill -INT $R1; wait $R1; log "release attach 1 rc=$?"; cat $W/rel1.log >> $L; ls $W >> $L
sleep 10; log "10 s after release 1 SIGINT, target output:"; tail -8 $W/target.log >> $L
$NCU --mode attach --hostname 127.0.0.1 --kernel-name regex:^perfreport_release_no_such_kernel$ --launch-count 1 --log-file $W/rel2.log -o $W/rel2 > $W/rel2.stdout 2>&1 &
R2=$!
for i in $(seq 1 40); do grep -q Connected $W/rel2.log 2>/dev/null && break; sleep 0.5; done
sleep 8; log "release attach 2 log + stdout:"; cat $W/rel2.log $W/rel2.stdout >> $L 2>&1
kill -INT $R2; wait $R2; log "release attach 2 rc=$?"; cat $W/rel2.log >> $L
sleep 8; log "after release 2, target output:"; tail -8 $W/target.log >> $L
# capture attach: one GEMM kernel, poll the log file for the Profiling line, then SIGINT
$NCU --mode attach --hostname 127.0.0.1 --kernel-name regex:nvjet --launch-count 1 --set basic --log-file $W/cap.log -o $W/cap > $W/cap.stdout 2>&1 &
C=$!
for i in $(seq 1 120); do grep -q 'passes' $W/cap.log 2>/dev/null && break; sleep 0.5; done
log "capture log after poll loop ($i polls):"; cat $W/cap.log >> $L
kill -INT $C; wait $C; log "capture rc=$?"; cat $W/cap.log >> $L; log "capture stdout:"; cat $W/cap.stdout >> $L
ls -la $W >> $L
# capture attach with --port 49153 (the second worker?)
$NCU --mode attach --hostname 127.0.0.1 --port 49153 --kernel-name regex:nvjet --launch-count 1 --set basic --log-file $W/cap2.log -o $W/cap2 > $W/cap2.stdout 2>&1 &
C2=$!
for i in $(seq 1 60); do grep -q -E 'passes|ERROR' $W/cap2.log 2>/dev/null && break; sleep 0.5; done
log "capture --port 49153 log:"; cat $W/cap2.log $W/cap2.stdout >> $L
kill -INT $C2; wait $C2; log "capture --port 49153 rc=$?"; cat $W/cap2.log >> $L
$NCU --import $W/cap.ncu-rep --csv --page raw > $W/cap-raw.csv 2>&1; log "import rc=$? lines=$(wc -l < $W/cap-raw.csv)"
log "target output tail:"; tail -6 $W/target.log >> $L
kill -INT $TPID 2>/dev/null; sleep 3; kill $TPID 2>/dev/null; pkill -f release_probe.py
log end
