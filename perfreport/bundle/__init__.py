"""The evidence bundle: the folder a capture writes into and every later stage reads (ncu-profiles/, the capture
receipts, inference_perfbench_v1.json). Its file names live here, free of third-party imports: capture runs on GPU
hosts that may lack them.
"""

from __future__ import annotations

from pathlib import Path

PROFILES_DIR = "ncu-profiles"
# The files one capture NAME leaves in ncu-profiles/ (capture run, capture k8s run; bundle import reads them).
CAPTURE_FILES = {"report": ".ncu-rep", "raw": "-raw.csv", "sol": "-sol.csv", "log": ".ncu-output.txt",
                 "receipt": ".receipt.json"}


def capture_files(folder: Path, name: str) -> dict[str, Path]:
    """Paths of capture NAME's report, raw and SpeedOfLight CSVs, ncu output and receipt in folder."""
    return {kind: folder / f"{name}{suffix}" for kind, suffix in CAPTURE_FILES.items()}
