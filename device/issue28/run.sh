#!/usr/bin/env bash
# Device run on nvidia-h100-x1, from the repo root (issue 28): (1) ncu's metric catalogs of the pre-Hopper chips
# (device/ncu_catalogs/dump.sh, plain and suffix mode; no GPU work), (2) device/issue28/kinds.py under ncu --set full
# with its raw (also --print-units base) and details CSV exports, (3) NERSC's roofline recipe on the same script: all
# its metrics in one run, then one ncu run per metric over a few ops. Every ncu call is time-boxed and logs rc=.
# Everything lands in one $OUT/issue28.tar.gz.
set -u
NCU=${NCU:-/usr/local/cuda/bin/ncu}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
W=/tmp/issue28; rm -rf $W; mkdir -p $W/kinds $W/nersc
K=device/issue28/kinds.py
# the one tarball, rewritten after each stage: a run stopped at its limit still brings back the stages it finished
checkpoint() { ls -la $W $W/*/ > $W/listing.txt; tar -C /tmp --exclude='*.ncu-rep' -czf $OUT/issue28.tar.gz.part issue28 && mv $OUT/issue28.tar.gz.part $OUT/issue28.tar.gz; }
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  $NCU --version; } > $W/versions.txt 2>&1
nvidia-smi > $W/nvidia-smi.txt 2>&1

# (1) first: cheap, needs no GPU work; dump.sh stops at a chip ncu refuses, so whatever it wrote is tarred anyway
( OUT=$W CHIPS="tu102 tu104 tu106 tu116 tu117 ga100 ga102 ga103 ga104 ga106 ga107 ga10b ad102 ad103 ad104 ad106 ad107" \
  timeout 150 bash device/ncu_catalogs/dump.sh ) > $W/catalogs.log 2>&1
echo "rc=$?" >> $W/catalogs.log
[ -f $W/ncu_catalogs.tar.gz ] || tar -C /tmp -czf $W/ncu_catalogs.tar.gz ncu_catalogs
checkpoint

# (2) one launch per op, --set full, clocks as found
timeout 300 $NCU --clock-control none --profile-from-start off --target-processes all --set full -f \
  -o $W/kinds/kinds_full python3 $K --manifest $W/kinds/kinds_manifest.json > $W/kinds/kinds_full.log 2>&1
echo "rc=$?" >> $W/kinds/kinds_full.log
R=$W/kinds/kinds_full.ncu-rep
gzip -9nk $R  # the report first: it is what a stop at the limit must not lose
checkpoint
timeout 120 $NCU -i $R --csv --page raw > $W/kinds/kinds_full-raw.csv 2> $W/kinds/export.err; echo "raw rc=$?" >> $W/kinds/export.err
timeout 120 $NCU -i $R --csv --page raw --print-units base > $W/kinds/kinds_full-raw-base.csv 2>> $W/kinds/export.err
echo "raw-base rc=$?" >> $W/kinds/export.err
timeout 120 $NCU -i $R --csv --page details > $W/kinds/kinds_full-details.csv 2>> $W/kinds/export.err
echo "details rc=$?" >> $W/kinds/export.err
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/kinds/nvidia-smi.txt 2>&1
rm -f $R
checkpoint

# (3) NERSC recipe (its command line as published: default clock control); falls back to --clock-control none
# only if ncu refuses
FP="dadd dmul dfma fadd fmul ffma hadd hmul hfma"
ALL=sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second
for op in $FP; do ALL=$ALL,sm__sass_thread_inst_executed_op_${op}_pred_on.sum; done
ALL=$ALL,sm__inst_executed_pipe_tensor.sum,dram__bytes.sum,lts__t_bytes.sum,l1tex__t_bytes.sum
nersc() {  # nersc <name> <metrics> [kinds.py args...]
  local name=$1 metrics=$2; shift 2
  timeout 60 $NCU --profile-from-start off --target-processes all --csv --metrics $metrics \
    python3 $K --manifest $W/nersc/$name.manifest.json "$@" > $W/nersc/$name.csv 2> $W/nersc/$name.log
  local rc=$?; echo "rc=$rc" >> $W/nersc/$name.log
  if [ $rc -ne 0 ]; then
    timeout 60 $NCU --clock-control none --profile-from-start off --target-processes all --csv --metrics $metrics \
      python3 $K --manifest $W/nersc/$name.manifest.json "$@" > $W/nersc/$name.csv 2>> $W/nersc/$name.log
    echo "retry --clock-control none rc=$?" >> $W/nersc/$name.log
  fi
}
nersc nersc_all $ALL
checkpoint
FEW="triton_fma_fp32 triton_fma_fp64 triton_fma_fp16 gemm_fp64 mlp_bf16_gate triton_l2"
for m in sm__cycles_elapsed.avg sm__cycles_elapsed.avg.per_second sm__sass_thread_inst_executed_op_ffma_pred_on.sum \
         dram__bytes.sum; do
  nersc nersc_metric_$m $m --only $FEW
done
rm -f $W/nersc/nersc_metric_*.manifest.json  # the same ops as nersc_all's manifest, fewer

checkpoint
cat $W/versions.txt; tail -n 4 $W/catalogs.log $W/kinds/kinds_full.log $W/kinds/export.err
grep -h "rc=" $W/nersc/*.log | sort | uniq -c
