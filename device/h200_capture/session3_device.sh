#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-03: (1) the serving-overhead benchmark again now that
# `capture release`/NcuSession.interrupt signal ncu's process group (the 12-02 run's SIGINT never reached ncu behind
# the /usr/local/cuda/bin/ncu shell wrapper); (2) the multi-process release probe; (3) PyTorch traces of the example
# layer with ProfilerStep annotations (prof.step() per layer) for import_step_budget. Writes under $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
mkdir -p $OUT/overhead2 $OUT/traces
{ nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv; $NCU --version | tail -1;
  python3 -c 'import torch; print("torch", torch.__version__)'; } > $OUT/versions.txt 2>&1
# (3) first: short, and independent of the others
for m in decode prefill; do
  python3 campaigns/h200-decoder-layer/trace.py --mode $m --iters 6 --profiler-steps \
    --out $OUT/traces/${m}_steps_torch_trace.json.gz > $OUT/traces/${m}.log 2>&1; echo "rc=$?" >> $OUT/traces/${m}.log
done
# (1) overhead: shortened windows so the whole run fits next to the probe
timeout 330 python3 benchmarks/capture_overhead.py --ncu $NCU --out $OUT/overhead2/capture_overhead.json \
  --work /tmp/co --duration 15 --before 6 --linger 10 --after 6 > $OUT/overhead2/capture_overhead.log 2>&1
echo "rc=$?" >> $OUT/overhead2/capture_overhead.log
for f in /tmp/co/*.log /tmp/co/*.txt; do [ -f "$f" ] && cp "$f" $OUT/overhead2/; done
ls -laR /tmp/co > $OUT/overhead2/listing.txt 2>&1
find /tmp/co/bundle -name '*.ncu-rep' -exec gzip -9 {} \; 2>/dev/null; cp -r /tmp/co/bundle $OUT/overhead2/ 2>/dev/null
pkill -f serve_llama 2>/dev/null; sleep 2
# (2) release probe
OUT=$OUT timeout 100 bash device/k8s/release_probe.sh; echo "probe rc=$?" >> $OUT/release_probe.log
tail -40 $OUT/overhead2/capture_overhead.log; tail -30 $OUT/release_probe.log
