#!/usr/bin/env bash
# Device run (H200, ncu 2025.3.1), from the repo root, 2026-12-03: capture_overhead.py against the CUDA-graph engine
# (serve_graph.GraphLlamaEngine), released in graph mode (the run itself also tried a graph-mode "restore" attach after each capture, since removed). Writes $OUT/overhead3/.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
O=$OUT/overhead3; mkdir -p $O
# smoke: the engine builds, graphs and eager agree token for token, and the graph path is faster
python3 - > $O/engine_smoke.log 2>&1 <<'PY' || { cat $O/engine_smoke.log; exit 1; }
import time, torch
from perfreport.capture.serve_graph import GraphLlamaEngine
e = GraphLlamaEngine(layers=16, max_batch=4, graph_prompt_len=128)
def run(prompt_len, label):
    toks = []
    torch.cuda.synchronize(); t = time.perf_counter()
    e.generate(4, prompt_len, 32, lambda k: toks.append(e.ids[:4, 0].tolist()))
    dt = time.perf_counter() - t
    print(f"{label}: 4 x {prompt_len}+32 tokens in {dt*1e3:.1f} ms; first tokens {toks[0]}, last {toks[-1]}")
    return toks
g = run(128, "graphs"); g = run(128, "graphs")
e.prompt_len = -1  # force the eager path on the same prompt buffer
eager = []
torch.cuda.synchronize(); t = time.perf_counter()
with torch.inference_mode():
    e._prefill(4, e.prompt[:4]); eager.append(e.ids[:4, 0].tolist())
    for _ in range(31):
        e._decode(4); eager.append(e.ids[:4, 0].tolist())
print(f"eager: 4 x 128+32 tokens in {(time.perf_counter()-t)*1e3:.1f} ms")
print("graph tokens == eager tokens:", g == eager)
PY
cat $O/engine_smoke.log
timeout 420 python3 benchmarks/capture_overhead.py --ncu $NCU --engine llama-graph --release-graph-profiling graph --out $O/capture_overhead.json \
  --work /tmp/co3 --duration 15 --before 6 --linger 10 --after 6 > $O/capture_overhead.log 2>&1
echo "rc=$?" >> $O/capture_overhead.log
cp /tmp/co3/*.log /tmp/co3/*.txt $O/ 2>/dev/null
rm -f /tmp/co3/bundle/ncu-profiles/overhead_b3_unscoped.ncu-rep  # 68 MB: its CSV exports are kept
find /tmp/co3/bundle -name '*.ncu-rep' -exec gzip -9 {} \;
tar -C /tmp/co3 -czf $O/bundle.tar.gz bundle
tail -25 $O/capture_overhead.log
