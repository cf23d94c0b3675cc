"""Walk the framing of a .ncu-rep: the magic, a u32-sized FileHeader, then blocks to the end of the file, each a
u32-sized BlockHeader and a payload of u32-sized entries (the block's sources, then its results).

The one walker of that framing: the byte reader (wire) reads its blocks and entries through it, and `capture
diagnose` walks it to tell a cut file from a whole one. It says where and why a walk stops: Truncated (the file ends
inside a size, a header, an entry or a payload, or right after the file header) or Damaged (an UnknownLayout: a
block header or payload does not end where its size says). Standard library only: `capture diagnose` runs it on
the GPU machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from struct import unpack_from

from perfreport.ncu.rep.proto import (
    BLOCK_NUM_RESULTS,
    BLOCK_NUM_SOURCES,
    BLOCK_PAYLOAD_SIZE,
    BLOCK_SESSION_DETAILS,
    BLOCK_STRING_TABLE,
    LEN,
    MAGIC,
    VARINT,
    Damaged,
    ReportBytes,
    Truncated,
    UnknownLayout,
    key,
    read_varint,
    skip_field,
)

_SOURCES_TAG = key(BLOCK_NUM_SOURCES, VARINT)
_RESULTS_TAG = key(BLOCK_NUM_RESULTS, VARINT)
_PAYLOAD_TAG = key(BLOCK_PAYLOAD_SIZE, VARINT)
_SESSION_TAG = key(BLOCK_SESSION_DETAILS, LEN)
_STRING_TABLE_TAG = key(BLOCK_STRING_TABLE, LEN)


@dataclass(slots=True)
class Block:
    """One block: where its header and payload lie, and what its header says."""

    at: int  # where its u32 size lies
    header: tuple[int, int]  # its BlockHeader message
    payload: tuple[int, int]  # its payload, by the header's PayloadSize (past the end of a cut file)
    sources: int  # NumSources: the payload's first entries
    results: int  # NumResults: the entries after them, one profiled kernel each
    whole: int  # the results of the blocks before this one
    sessions: list[tuple[int, int]] = field(default_factory=list)  # its SessionDetails messages
    string_tables: list[tuple[int, int]] = field(default_factory=list)  # its StringTable messages, in order
    other: tuple[int, int] | None = None  # (field, value) of another count it holds: range (7) or graph (9) results


def file_header(b: ReportBytes) -> tuple[int, int]:
    """Where the FileHeader message lies, after the magic and its u32 size (past the end of a cut file).

    Raises UnknownLayout without the magic, Truncated when the file ends inside the header's size.
    """
    if b[:4] != MAGIC:
        raise UnknownLayout("no NVR header")
    if len(b) < 8:
        raise Truncated(4, 4, 0)
    return 8, 8 + int(unpack_from("<I", b, 4)[0])


def blocks(b: ReportBytes, start: int) -> Iterator[Block]:
    """Every block of the file from `start` (the end of its FileHeader), in file order.

    The next block starts where the payload ends by its PayloadSize: a caller that walks each payload (entries)
    learns of a cut at the entry it cuts; one that does not, here, when the next block is due. Raises Truncated
    where the file ends inside a block's size, header or payload, or holds no block (ncu writes its session block
    with the file header: a file that ends there was cut); Damaged where a header does not parse to its size.
    """
    total = len(b)
    p, whole = start, 0
    last: Block | None = None
    while p < total:
        if p + 4 > total:
            raise Truncated(p, 4, whole)
        size = int(unpack_from("<I", b, p)[0])
        if p + 4 + size > total:
            raise Truncated(p, size, whole)
        try:
            block = _block(b, p, (p + 4, p + 4 + size), whole)
        except IndexError as exc:  # a varint that runs past the end of the file
            raise Damaged(f"block header at byte {p} runs past the file ({exc})") from exc
        except Damaged:
            raise
        except UnknownLayout as exc:  # a wire type or varint no BlockHeader holds: its bytes are not a header
            raise Damaged(f"block header at byte {p}: {exc}") from exc
        yield block
        last, whole, p = block, whole + block.results, block.payload[1]
    if last is None and p == total:
        raise Truncated(p, 4, 0)
    if p > total:  # the file ends inside the last payload, or inside the file header
        at = last.payload[0] if last is not None else 8
        raise Truncated(at, p - at, last.whole if last is not None else 0)


def _block(b: ReportBytes, at: int, head: tuple[int, int], whole: int) -> Block:
    """Parse the BlockHeader b[head]: its counts, PayloadSize, session records and string tables.

    One-byte keys and values are read inline: a report of many launches holds a block per launch or two.
    """
    sources = results = payload = 0
    sessions: list[tuple[int, int]] = []
    tables: list[tuple[int, int]] = []
    other: tuple[int, int] | None = None
    q, stop = head
    while q < stop:
        k = b[q]
        if k < 0x80:
            q += 1
        else:
            k, q = read_varint(b, q)
        if k < 8:  # field number 0: no protobuf message holds one
            raise Damaged(f"block header at byte {at}: a field numbered 0 at byte {q}")
        if k & 7 == VARINT:
            value = b[q]
            if value < 0x80:
                q += 1
            else:
                value, q = read_varint(b, q)
            if k == _SOURCES_TAG:
                sources = value
            elif k == _RESULTS_TAG:
                results = value
            elif k == _PAYLOAD_TAG:
                payload = value
            elif value and other is None:
                other = (k >> 3, value)
        elif k == _STRING_TABLE_TAG:
            n, q = read_varint(b, q)
            tables.append((q, q + n))
            q += n
        elif k == _SESSION_TAG:
            n, q = read_varint(b, q)
            sessions.append((q, q + n))
            q += n
        else:
            q = skip_field(b, q, k)
    if q != stop:
        raise Damaged(f"block header ends at byte {q}, its size says {stop}")
    return Block(at, head, (stop, stop + payload), sources, results, whole, sessions, tables, other)


def entries(b: ReportBytes, block: Block) -> list[tuple[int, int]]:
    """Where each entry of the block's payload lies (its sources, then its results), each after its u32 size.

    Raises Truncated at the entry the file ends inside (with the whole results before it), Damaged when the
    entries do not fill the payload exactly.
    """
    total = len(b)
    p, stop = block.payload
    spans: list[tuple[int, int]] = []
    for k in range(block.sources + block.results):
        if p + 4 > total:
            raise Truncated(p, 4, block.whole + max(0, k - block.sources))
        n = unpack_from("<I", b, p)[0]
        if p + 4 + n > total:
            raise Truncated(p, n, block.whole + max(0, k - block.sources))
        spans.append((p + 4, p + 4 + n))
        p += 4 + n
    if p != stop:
        if stop > total:
            raise Truncated(p, stop - p, block.whole + block.results)
        raise Damaged(f"block payload ends at byte {p}, its header says {stop}")
    return spans
