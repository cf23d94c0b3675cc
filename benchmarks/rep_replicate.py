"""Build a large .ncu-rep from a real one by replicating its kernels (as bench_import builds its CSVs from rows).

The report is kept as ncu wrote it, then each further kernel is a copy of one of its result entries (cycled), in
a block of its own whose header says what ncu's own per-kernel blocks say (no sources, one result, the payload
size, the process) and carries no string table, so every NameId keeps pointing at the original table.
ncu_report reads the copy (tests/test_rep_wire.py checks it: every replicated kernel equals its original).

    .venv/bin/python benchmarks/rep_replicate.py SRC.ncu-rep[.gz] DST.ncu-rep KERNELS
"""

from __future__ import annotations

import gzip
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfreport.ncu.rep.proto import iter_fields  # noqa: E402


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _blocks(data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The file's head (magic + file header) and its blocks as (header bytes, payload bytes)."""
    size = struct.unpack_from("<I", data, 4)[0]
    head, p, blocks = data[: 8 + size], 8 + size, []
    while p < len(data):
        n = struct.unpack_from("<I", data, p)[0]
        header = data[p + 4 : p + 4 + n]
        payload_size = next((v for f, w, v in iter_fields(data, p + 4, p + 4 + n) if f == 5 and w == 0), 0)
        blocks.append((header, data[p + 4 + n : p + 4 + n + payload_size]))
        p += 4 + n + payload_size
    return head, blocks


def replicate(src: bytes, kernels: int) -> bytes:
    """`src` with its result entries repeated until the report holds `kernels` of them."""
    out = bytearray()
    for piece in replicate_pieces(src, kernels):
        out += piece
    return bytes(out)


def write_replicated(src: bytes, kernels: int, dst: Path) -> None:
    """replicate() streamed into `dst` (a 2,016-kernel full-set report is ~3.3 GB: never held in memory)."""
    with dst.open("wb") as fh:
        for piece in replicate_pieces(src, kernels):
            fh.write(piece)


def replicate_pieces(src: bytes, kernels: int) -> Iterator[bytes]:
    """The replicated report as pieces: `src` itself, then one block per further kernel."""
    head, blocks = _blocks(src)
    results = []
    for header, payload in blocks:
        fields = {f: (w, v) for f, w, v in iter_fields(header, 0, len(header))}
        if fields.get(2, (0, 0))[1] == 1 and fields.get(1, (0, 0))[1] == 0:
            process = header[fields[6][1][0] : fields[6][1][1]] if 6 in fields else b""
            results.append((payload, process))
    if not results:
        raise SystemExit("the source report holds no one-result block to replicate")
    yield src
    for i in range(len(results), kernels):
        payload, process = results[i % len(results)]
        header = (b"\x08\x00\x10\x01" + b"\x28" + _varint(len(payload))
                  + (b"\x32" + _varint(len(process)) + process if process else b""))
        yield struct.pack("<I", len(header)) + header
        yield payload


def main() -> int:
    src, dst, kernels = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    data = src.read_bytes()
    if src.suffix == ".gz":
        data = gzip.decompress(data)
    write_replicated(data, kernels, dst)
    print(f"{dst}: {kernels} kernels, {dst.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
