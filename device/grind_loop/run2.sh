#!/usr/bin/env bash
# Second device run (grind loop): ncu --set full of one eager decode layer (the "before" of run.sh's compiled one,
# on the same kind of GPU), then 5 trials each of bench.py for eager decode and prefill. Writes $OUT/grind2.tar.gz.
set -u
export PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
C=campaigns/h200-decoder-layer
W=/tmp/grind2; rm -rf $W; mkdir -p $W/prefill $W/decode
DEADLINE=$((SECONDS + ${BUDGET_S:-200}))
finish() { for f in $W/*/*.ncu-rep; do [ -f "$f" ] && gzip -9 "$f"; done; ls -la $W/* > $W/listing.txt
           tar -C /tmp -czf $OUT/grind2.tar.gz grind2; cat $W/versions.txt; tail -n 2 $W/*/bench.log $W/*/*.log; }
trap finish EXIT
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv; $NCU --version | tail -1;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } > $W/versions.txt 2>&1
PRE="--mode prefill --batch 8 --seq 1024"; DEC="--mode decode --batch 16 --kv-len 2048"
COMMON="--clock-control none --profile-from-start off --target-processes all -f"
timeout 100 $NCU $COMMON --set full -o $W/decode/layer_full python3 $C/workload.py $DEC > $W/decode/layer_full.log 2>&1
for t in 1 2 3 4 5; do
  [ $SECONDS -lt $DEADLINE ] || break
  python3 $C/bench.py $DEC --trial $t --bundle-id decode-b16-kv2048-eager --out $W/decode/bench_t$t.json >> $W/decode/bench.log 2>&1
  python3 $C/bench.py $PRE --trial $t --bundle-id prefill-b8-s1024-eager --out $W/prefill/bench_t$t.json >> $W/prefill/bench.log 2>&1
done
