"""Build h200_workload_as_nsys_export.sqlite: the real H200 kernel executions in nsys's SQLite export schema.

nsys cannot run on our machines, and no public nsys .sqlite export small enough to commit was found, so this
fixture is synthetic in structure only: the tables and columns are those of `nsys export --type sqlite`
(StringIds; CUPTI_ACTIVITY_KIND_KERNEL with start/end in ns and demangledName/shortName/mangledName ids into
StringIds; CUPTI_ACTIVITY_KIND_MEMSET), and every row is a real kernel (or memset) execution measured by
CUPTI in tests/data/torch/workload_torch_trace.json.gz (kineto `ts`/`dur` in us -> ns). mangledName is
the demangled-name id (kineto does not record mangled names). Re-create with:

    .venv/bin/python device/nsys/make_sqlite_fixture.py
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"  # the fixtures it reads and writes
TRACE = DATA / "torch" / "workload_torch_trace.json.gz"
OUT = DATA / "nsys" / "h200_workload_as_nsys_export.sqlite"

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL REFERENCES StringIds (id), shortName INTEGER NOT NULL REFERENCES StringIds (id),
    mangledName INTEGER REFERENCES StringIds (id), launchType INTEGER, cacheConfig INTEGER,
    registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
    localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
    bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
"""


def _short(name: str) -> str:
    from perfreport.kernels.names import function_name

    return function_name(name)


def main() -> None:
    """Write the fixture next to this script (deterministic rows, ordered by start time)."""
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    ids: dict[str, int] = {}

    def sid(text: str) -> int:
        return ids.setdefault(text, len(ids) + 1)

    kernels, memsets = [], []
    for e in sorted(events, key=lambda e: (e.get("ts", 0), e.get("name", ""))):
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memset"):
            continue
        start = round(e["ts"] * 1000)
        end = start + round(e["dur"] * 1000)
        a = e.get("args", {})
        common = (start, end, a.get("device", 0), a.get("context", 0), a.get("stream", 0), a.get("correlation"), 0)
        if e["cat"] == "gpu_memset":
            memsets.append((*common, 0, a.get("bytes", 0), None, None))
            continue
        grid, block = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
        name = sid(e["name"])
        kernels.append((*common, name, sid(_short(e["name"])), name, 0, 0, a.get("registers per thread", 0),
                        *grid, *block, a.get("shared memory", 0), 0, 0, 0, len(kernels), None))
    OUT.unlink(missing_ok=True)
    con = sqlite3.connect(OUT)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, v) for v, i in ids.items()])
    con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * 25)})", kernels)
    con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES ({', '.join('?' * 11)})", memsets)
    con.commit()
    con.execute("VACUUM")
    con.close()
    print(f"wrote {OUT}: {len(kernels)} kernel rows, {len(memsets)} memset rows, {len(ids)} strings")


if __name__ == "__main__":
    main()
