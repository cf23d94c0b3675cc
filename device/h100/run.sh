#!/usr/bin/env bash
# Device run on nvidia-h100-x1, from the repo root: (1) the launch floor and `perftunereport ceilings measure`
# (issue 19's H100 values), (2) the oracle kernels captured with ncu full and basic sets plus their CSV exports
# (issue 20's second measured chip), (3) ncu's metric catalogs (plain mode; device/ncu_catalogs/dump.sh writes
# the suffix mode too, which needs --metrics). Everything lands in one $OUT/h100.tar.gz (8 files come back at most).
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
W=/tmp/h100; rm -rf $W; mkdir -p $W/ceilings $W/oracle $W/catalogs
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  $NCU --version; } > $W/versions.txt 2>&1
# (3) first: cheap, needs no GPU work
$NCU --list-chips > $W/catalogs/chips.txt 2>&1
for chip in gh100 gb100 gb102 gb110 gb10b gb202; do
  $NCU --query-metrics --chip $chip --csv > $W/catalogs/metrics_$chip.csv 2> $W/catalogs/metrics_$chip.err
done
gzip -9 $W/catalogs/*.csv
# (1)
python3 device/launch_floor/launch_floor.py > $W/ceilings/launch_floor.json 2> $W/ceilings/launch_floor.err
nvidia-smi > $W/ceilings/nvidia-smi.txt 2>&1
timeout 300 python3 -m perfreport ceilings measure --out $W/ceilings --seconds 8 > $W/ceilings/stderr.txt 2>&1
echo "rc=$?" >> $W/ceilings/stderr.txt
# (2)
O=device/h200_oracle/oracle.py
COMMON="--clock-control none --profile-from-start off --target-processes all -f"
for set in full basic; do
  timeout 150 $NCU $COMMON --set $set -o $W/oracle/oracle_$set python3 $O --manifest $W/oracle/oracle_manifest.json > $W/oracle/oracle_$set.log 2>&1
  echo "rc=$?" >> $W/oracle/oracle_$set.log
  $NCU -i $W/oracle/oracle_$set.ncu-rep --csv --page raw > $W/oracle/oracle_$set-raw.csv
  $NCU -i $W/oracle/oracle_$set.ncu-rep --csv --page details > $W/oracle/oracle_$set-details.csv
done
$NCU -i $W/oracle/oracle_full.ncu-rep --csv --page raw --print-units base > $W/oracle/oracle_full-raw-base.csv
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/oracle/nvidia-smi.txt
for f in $W/oracle/*.ncu-rep; do gzip -9 $f; done
ls -la $W/*/ > $W/listing.txt
tar -C /tmp -czf $OUT/h100.tar.gz h100
cat $W/versions.txt $W/listing.txt; tail -4 $W/ceilings/stderr.txt; tail -2 $W/oracle/*.log
