#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-04: capture_overhead.py --sister. The production
# server (CUDA-graph engine, never under ncu) serves 4 closed-loop clients throughout; a sister replica (same
# command, port + 1) runs under `ncu --mode launch` on the same GPU, is released (node mode, the default), serves
# 1 client while each capture waits for its kernels (SISTER_LOAD=always: throughout), and is captured scoped basic,
# scoped full and unscoped basic; first, the same replica without ncu (--sister-control). Windows measure production.
# ENGINE=llama for the eager engine. Writes $OUT/overhead_sister$SUFFIX/.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
ENGINE=${ENGINE:-llama-graph}
O=$OUT/overhead_sister${SUFFIX:-}; mkdir -p $O
W=/tmp/cos${SUFFIX:-}
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv > $O/nvidia-smi.csv 2>&1
timeout ${LIMIT:-540} python3 benchmarks/capture_overhead.py --sister --ncu $NCU --engine $ENGINE \
  --sister-control --sister-load ${SISTER_LOAD:-capture} \
  --out $O/capture_overhead.json --work $W --duration 15 --before 6 --linger 10 --after 6 \
  > $O/capture_overhead.log 2>&1
echo "rc=$?" >> $O/capture_overhead.log
cp $W/*.log $W/*.txt $O/ 2>/dev/null
rm -f $W/bundle/ncu-profiles/overhead_b3_unscoped.ncu-rep  # large: its CSV exports are kept
find $W/bundle -name '*.ncu-rep' -exec gzip -9 {} \;
tar -C $W -czf $O/bundle.tar.gz bundle
gzip -9 $O/capture_overhead.json
tail -32 $O/capture_overhead.log
