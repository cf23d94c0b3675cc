#!/usr/bin/env bash
# Run on the H200 device machine from the repo root: one small workload (workload.py: bf16 GEMM, fp32 add, sum)
# captured with every report layout the byte reader must read or hand to ncu_report: other section sets
# (roofline, detailed), a --metrics list (dram__bytes.sum), application and range replay, a CUDA graph profiled
# as one result. Output: $OUT/layouts.tar.gz (.ncu-rep gzipped, logs, raw CSV of the --metrics capture).
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
W=/tmp/lay; rm -rf $W; mkdir -p $W
export PYTHONUNBUFFERED=1
P=device/h200_rep_layouts/workload.py
C="--clock-control none --profile-from-start off -f"
run() { name=$1; shift; timeout 240 $NCU ${C} "$@" -o $W/$name python3 $P ${EXTRA:-} > $W/$name.log 2>&1; echo "rc=$?" >> $W/$name.log; }
run roofline --set roofline
run detailed --set detailed
run metrics --metrics dram__bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread
run app_replay --set basic --replay-mode application
C="--clock-control none -f" run range_replay --set basic --replay-mode range  # (range replay: no --profile-from-start)
EXTRA=--graph run graph --set basic --graph-profiling graph
$NCU -i $W/metrics.ncu-rep --csv --page raw > $W/metrics-raw.csv 2> $W/metrics-raw.err
$NCU --version > $W/ncu-version.txt
for f in $W/*.ncu-rep; do gzip -9 $f; done
ls -la $W > $W/listing.txt
tar -C /tmp -czf $OUT/layouts.tar.gz lay
cat $W/listing.txt; tail -n 4 $W/*.log
