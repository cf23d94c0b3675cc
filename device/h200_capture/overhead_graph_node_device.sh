#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-04: capture_overhead.py against the CUDA-graph engine
# (serve_graph.GraphLlamaEngine) with the default node-mode release (overhead3/ released graph-mode and wedged, see
# graph_server_probe/). Writes $OUT/overhead4/.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
O=$OUT/overhead4; mkdir -p $O
timeout 500 python3 benchmarks/capture_overhead.py --ncu $NCU --engine llama-graph --out $O/capture_overhead.json \
  --work /tmp/co4 --duration 15 --before 6 --linger 10 --after 6 > $O/capture_overhead.log 2>&1
echo "rc=$?" >> $O/capture_overhead.log
cp /tmp/co4/*.log /tmp/co4/*.txt $O/ 2>/dev/null
rm -f /tmp/co4/bundle/ncu-profiles/overhead_b3_unscoped.ncu-rep  # large: its CSV exports are kept
find /tmp/co4/bundle -name '*.ncu-rep' -exec gzip -9 {} \;
tar -C /tmp/co4 -czf $O/bundle.tar.gz bundle
gzip -9 $O/capture_overhead.json
tail -30 $O/capture_overhead.log
