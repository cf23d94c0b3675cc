"""The one walker of the .ncu-rep framing (rep_walk) and the named field numbers (rep_proto).

The walk of real reports tiles each file exactly; a cut or damaged file stops it with where and why; the field
constants equal the numbering table of docs/ncu_rep.md and, read from real bytes, give what ncu_report decodes.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from perfreport.ncu.rep import proto
from perfreport.ncu.rep import reader as rep
from perfreport.ncu.rep import wire as rep_wire
from perfreport.ncu.rep.proto import MAGIC, Truncated, UnknownLayout
from perfreport.ncu.rep.walk import Block, blocks, entries, file_header

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests/data/h200_shared/attach_basic.ncu-rep.gz"  # 2 launches
FULL = ROOT / "tests/data/h200_oracle/oracle_full.ncu-rep.gz"  # 6 kernels, full set
MANY = ROOT / "tests/data/h200_oracle/many/many_basic.ncu-rep.gz"  # 150 launches
LAYOUTS = ROOT / "tests/data/h200_rep_layouts"


def _raw(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def _walk(data: bytes) -> list[Block]:
    return list(blocks(data, file_header(data)[1]))


@pytest.mark.parametrize(("path", "kernels"), [(SMALL, 2), (FULL, 6), (MANY, 150)], ids=["small", "full", "many"])
def test_the_blocks_and_entries_of_a_real_report_tile_the_file(path: Path, kernels: int) -> None:
    data = _raw(path)
    start, stop = file_header(data)
    assert (start, data[:4]) == (8, MAGIC)
    walked = _walk(data)
    at = stop
    whole = 0
    for block in walked:
        assert (block.at, block.header[0], block.payload[0]) == (at, at + 4, block.header[1])
        assert block.whole == whole and block.other is None
        spans = entries(data, block)
        assert len(spans) == block.sources + block.results
        q = block.payload[0]
        for s, e in spans:  # each after its u32 size, right after the one before
            assert (s, int.from_bytes(data[q : q + 4], "little")) == (q + 4, e - s)
            q = e
        assert q == block.payload[1]
        at, whole = block.payload[1], whole + block.results
    assert at == len(data) and whole == kernels == len(rep.read_rep(path, reader="ncu_report").launches)
    version, cmdline = rep._session_facts([data[s:e] for b in walked for s, e in b.sessions])
    assert version == "2025.3.1.0" and cmdline is not None and cmdline.startswith("ncu ")


@pytest.mark.parametrize(("name", "field"), [("range_replay", 7), ("graph", 9)])
def test_a_block_of_range_or_graph_results_says_which_count_it_holds(name: str, field: int) -> None:
    walked = _walk(_raw(LAYOUTS / f"{name}.ncu-rep.gz"))
    assert [b.other for b in walked if b.other is not None] == [(field, 1)]


def test_a_file_cut_inside_a_payload_stops_at_the_entry_it_cuts() -> None:
    data = _raw(FULL)
    whole = _walk(data)
    last = max((b for b in whole if b.results), key=lambda b: b.payload[0])
    first_entry = entries(data, last)[0]
    cut = data[: last.payload[0] + 100]  # inside the block's first entry
    walked = []
    with pytest.raises(Truncated) as err:  # walked without its entries (capture diagnose): when the next block is due
        for block in blocks(cut, file_header(cut)[1]):
            walked.append(block)
    size = last.payload[1] - last.payload[0]
    assert (err.value.offset, err.value.needed, err.value.results) == (last.payload[0], size, last.whole)
    assert walked[-1] == last
    with pytest.raises(Truncated) as err:  # walked entry by entry (rep_wire): at the entry
        entries(cut, last)
    needed = first_entry[1] - first_entry[0]
    assert (err.value.offset, err.value.needed, err.value.results) == (last.payload[0], needed, last.whole)
    assert last.whole == 5 and last.sources == 0 and last.results == 1
    with pytest.raises(Truncated) as err:
        rep_wire.frame(cut, rep._wanted())
    assert (err.value.offset, err.value.needed, err.value.results) == (last.payload[0], needed, 5)


def test_a_file_cut_inside_a_size_or_header() -> None:
    data = _raw(SMALL)
    second = _walk(data)[1]
    with pytest.raises(Truncated) as err:
        _walk(data[: second.at + 2])  # inside the block's u32 size
    assert (err.value.offset, err.value.needed, err.value.results) == (second.at, 4, 0)
    with pytest.raises(Truncated) as err:
        _walk(data[: second.header[0] + 3])  # inside its header
    assert (err.value.offset, err.value.needed) == (second.at, second.header[1] - second.header[0])
    assert _walk(data[: second.at]) == _walk(data)[:1]  # a cut between blocks leaves whole blocks
    with pytest.raises(Truncated) as err:
        file_header(MAGIC + b"\x02\x00")
    assert (err.value.offset, err.value.needed, err.value.results) == (4, 4, 0)
    with pytest.raises(Truncated, match="at byte 8 an entry needs 2 bytes"):
        _walk(data[:9])  # inside the file header


def test_bytes_that_are_not_the_framing_are_an_unknown_layout() -> None:
    data = bytearray(_raw(SMALL))
    with pytest.raises(UnknownLayout, match="no NVR header"):
        file_header(b"PK\x03\x04" + bytes(data[4:]))
    first = _walk(bytes(data))[0]
    data[first.header[0]] = 1 << 3 | 7  # a key of wire type 7, which protobuf has not
    with pytest.raises(UnknownLayout, match=rf"wire type 7 \(field 1\) at byte {first.header[0] + 1}"):
        _walk(bytes(data))
    data = bytearray(_raw(SMALL))
    second = _walk(bytes(data))[1]
    grown = bytearray(data)
    grown[second.payload[0] : second.payload[0] + 4] = (second.payload[1] - second.payload[0]).to_bytes(4, "little")
    with pytest.raises((UnknownLayout, Truncated)):  # the entry now claims more than its payload
        entries(bytes(grown), second)


_ROW = re.compile(r"^\| `([A-Z0-9_]+)` \| (\w+) \| (\w+) \| (\d+) \|$", re.MULTILINE)
_NOT_FIELDS = {"VARINT", "I64", "LEN", "I32"}  # protobuf's wire types, not NVIDIA's numbering


def test_every_field_constant_is_the_documented_number() -> None:
    table = {name: int(number) for name, _, _, number in _ROW.findall((ROOT / "docs/ncu_rep.md").read_text())}
    fields = {name: value for name, value in vars(proto).items()
              if re.fullmatch(r"[A-Z][A-Z0-9_]*(?<!_TAG)", name) and type(value) is int and name not in _NOT_FIELDS}
    assert len(table) == 31 and table == fields
    assert (proto.VARINT, proto.I64, proto.LEN, proto.I32) == (0, 1, 2, 5)
    # the keys the hot loops compare with, as the bytes of real reports hold them (0x6A: test_rep_wire)
    assert (proto.METRIC_TAG, proto.ID_TAG, proto.VALUE_TAG) == (0x6A, 0x08, 0x12)
    assert proto.key(proto.RESULT_RULES, proto.LEN) == 0x9A  # a two-byte key: 0x9A 0x01


def test_the_field_numbers_read_from_real_bytes_give_what_ncu_report_decodes() -> None:
    """Names, section identifiers and a metric's value, read by the named numbers alone, equal ncu_report's."""
    data = _raw(FULL)
    theirs = rep.read_rep(FULL, reader="ncu_report")
    f = rep_wire.frame(data, {"gpu__time_duration.sum"})
    nid = next(iter(f.wanted))
    sections: set[str] = set()
    for (start, end), launch in zip(f.results, theirs.launches, strict=True):
        texts: dict[int, str] = {}
        duration = None
        for number, wire, value in proto.iter_fields(data, start, end):
            if wire != proto.LEN:
                continue
            if number in (proto.RESULT_MANGLED_NAME, proto.RESULT_FUNCTION_NAME, proto.RESULT_DEMANGLED_NAME):
                texts[number] = proto.field_text(data, value)
            elif number == proto.RESULT_SECTIONS:
                ident = proto.first_string(data, *value)
                assert ident is not None
                sections.add(proto.field_text(data, ident))
            elif number == proto.RESULT_METRICS:
                entry = {n: v for n, _, v in proto.iter_fields(data, *value)}
                if entry[proto.METRIC_NAME_ID] == nid:
                    duration = proto.metric_value(data, *entry[proto.METRIC_VALUE])
        assert texts[proto.RESULT_MANGLED_NAME] == launch.mangled
        assert texts[proto.RESULT_FUNCTION_NAME] == launch.function
        assert (texts.get(proto.RESULT_DEMANGLED_NAME) or texts[proto.RESULT_MANGLED_NAME]) == launch.name
        assert duration == launch.metrics["gpu__time_duration.sum"] and isinstance(duration, int | float)
    assert sorted(sections) == theirs.sections and "SpeedOfLight" in sections
