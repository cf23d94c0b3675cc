#!/usr/bin/env bash
# Run on the H200 device machine from the repo root: captures the oracle kernels and the example campaign.
# Output: $OUT/captures.tar.gz (all .ncu-rep gzipped, CSV exports, logs, manifests).
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/cap; rm -rf $W; mkdir -p $W/oracle $W/prefill $W/decode
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/nvidia-smi.txt
$NCU --version > $W/ncu-version.txt
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" > $W/versions.txt
O=device/h200_oracle/oracle.py
COMMON="--clock-control none --profile-from-start off --target-processes all -f"
for set in full basic; do
  $NCU $COMMON --set $set -o $W/oracle/oracle_$set python3 $O --manifest $W/oracle/oracle_manifest.json > $W/oracle/oracle_$set.log 2>&1
done
# CSV printed while profiling (==PROF== lines + app output around it), raw page, one op
$NCU $COMMON --set basic --csv --page raw python3 $O --only add_fp32_256M --manifest /tmp/m.json > $W/oracle/oracle_add_basic-printed-raw.log 2>&1
$NCU --clock-control none --kernel-name no_such_kernel -f -o $W/oracle/empty python3 $O --only add_fp32_256M --manifest /tmp/m2.json > $W/oracle/empty.log 2>&1; echo "rc=$?" >> $W/oracle/empty.log
for set in full basic; do
  for r in oracle_$set; do
    $NCU -i $W/oracle/$r.ncu-rep --csv --page raw > $W/oracle/$r-raw.csv
    $NCU -i $W/oracle/$r.ncu-rep --csv --page raw --print-units base > $W/oracle/$r-raw-base.csv
    $NCU -i $W/oracle/$r.ncu-rep --csv --page details > $W/oracle/$r-details.csv
  done
done
C=campaigns/h200-decoder-layer/workload.py
for cell in prefill decode; do
  if [ $cell = prefill ]; then ARGS="--mode prefill --batch 8 --seq 1024"; else ARGS="--mode decode --batch 16 --kv-len 2048"; fi
  for set in full basic; do
    $NCU $COMMON --set $set -o $W/$cell/layer_$set python3 $C $ARGS > $W/$cell/layer_$set.log 2>&1
  done
  $NCU -i $W/$cell/layer_basic.ncu-rep --csv --page raw > $W/$cell/layer_basic-raw.csv
done
python3 $O --ceilings > $W/ceilings.json 2> $W/ceilings.err
# torch profiler durations of the campaign layers (un-profiled by ncu) for later joins
for f in $W/*/*.ncu-rep; do gzip -9 -k $f; rm $f; done
ls -la $W/*/ > $W/listing.txt
tar -C /tmp -czf $OUT/captures.tar.gz cap
cat $W/ceilings.json $W/listing.txt; tail -3 $W/oracle/*.log
