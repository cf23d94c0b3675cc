#!/usr/bin/env bash
# Device run, from the repo root, on one GPU: the example layer's trials (issue 30's per-layer serving numbers,
# issue 31's before/after). ncu --set full of one decode layer compiled (the eager one is the example's capture),
# then up to 9 trials (one process each) of decode eager, decode with torch.compile (the lever) and prefill eager:
# bench.py times 100 layers with CUDA events, then records a 5-layer torch-profiler trace with shapes. Trials stop
# at a deadline so the archive always comes back. Writes $OUT/grind.tar.gz.
set -u
export PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
C=campaigns/h200-decoder-layer
W=/tmp/grind; rm -rf $W; mkdir -p $W/prefill $W/decode $W/decode-compiled
DEADLINE=$((SECONDS + ${BUDGET_S:-470}))
finish() { for f in $W/*/*.ncu-rep; do [ -f "$f" ] && gzip -9 "$f"; done; ls -la $W/* > $W/listing.txt
           tar -C /tmp -czf $OUT/grind.tar.gz grind; cat $W/versions.txt; tail -n 2 $W/*/bench.log $W/*/*.log; }
trap finish EXIT
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; $NCU --version | tail -1;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } > $W/versions.txt 2>&1
PRE="--mode prefill --batch 8 --seq 1024"; DEC="--mode decode --batch 16 --kv-len 2048"
COMMON="--clock-control none --profile-from-start off --target-processes all -f"
timeout 120 $NCU $COMMON --set full -o $W/decode-compiled/layer_full python3 $C/workload.py $DEC --compile > $W/decode-compiled/layer_full.log 2>&1
for t in 1 2 3 4 5 6 7 8 9; do
  [ $SECONDS -lt $DEADLINE ] || break
  python3 $C/bench.py $DEC --trial $t --bundle-id decode-b16-kv2048-eager --out $W/decode/bench_t$t.json --trace $W/decode/torch_trace_t$t.json.gz >> $W/decode/bench.log 2>&1
  python3 $C/bench.py $DEC --compile --trial $t --bundle-id decode-b16-kv2048-compiled --out $W/decode-compiled/bench_t$t.json --trace $W/decode-compiled/torch_trace_t$t.json.gz >> $W/decode-compiled/bench.log 2>&1
  python3 $C/bench.py $PRE --trial $t --bundle-id prefill-b8-s1024-eager --out $W/prefill/bench_t$t.json --trace $W/prefill/torch_trace_t$t.json.gz >> $W/prefill/bench.log 2>&1
done
