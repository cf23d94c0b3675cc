"""Merge one cell's trial results (bench.py's bench_t<N>.json, one per process) into the cell's bundle JSON.

    python3 device/grind_loop/bundle.py campaigns/h100-decode-compile/captures/eager

Writes <folder>/inference_perfbench_v1.json: the first trial's context and bundle id, every trial's `results` entry
in trial order (page 2 shows each; a comparison page compares them across cells).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    folder = Path(sys.argv[1])
    trials = sorted((folder / "trials").glob("bench_t*.json"), key=lambda p: int(p.stem.removeprefix("bench_t")))
    docs = [json.loads(p.read_text()) for p in trials]
    merged = {**docs[0], "results": [d["results"][0] for d in docs]}
    (folder / "inference_perfbench_v1.json").write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    print(f"{folder}: {len(docs)} trial(s) merged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
