#!/usr/bin/env bash
# Run on the H200 device machine from the repo root: 16 decode layers of the example campaign's workload
# (Llama-3-8B shapes, batch 16, KV 2048) inside one profiled range, --set basic: ~14 kernels each launched 16
# times, the realistic mix for the byte reader's bulk path. Output: $OUT/many_layers.tar.gz.
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/ml; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
timeout 500 $NCU --clock-control none --profile-from-start off --set basic -f -o $W/layers16_basic \
  python3 campaigns/h200-decoder-layer/workload.py --mode decode --batch 16 --kv-len 2048 --layers 16 \
  > $W/layers16_basic.log 2>&1; echo "rc=$?" >> $W/layers16_basic.log
$NCU -i $W/layers16_basic.ncu-rep --csv --page raw > $W/layers16_basic-raw.csv
gzip -9 $W/layers16_basic.ncu-rep $W/layers16_basic-raw.csv
tar -C /tmp -czf $OUT/many_layers.tar.gz ml
ls -la $W; tail -n 3 $W/layers16_basic.log
