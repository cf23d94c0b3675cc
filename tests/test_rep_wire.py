"""The byte reader (rep_wire, rep_bulk) gives exactly what NVIDIA's ncu_report gives, on every real report we have.

Every .ncu-rep under tests/data and campaigns/ (H200, ncu 2025.3.1: full, basic and custom sets, 1 to 150
kernels, attach and k8s captures, NVTX) is read both ways and the Captures compared whole: names, every metric
value and its unit, strings, rules (section, rule, type, message), sections, section set, ncu version, command
line. A layout the reader does not know goes to ncu_report; a cut file is refused with what is missing.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.errors import InputError
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.rep import bulk as rep_bulk
from perfreport.ncu.rep import proto as rep_proto
from perfreport.ncu.rep import reader as rep
from perfreport.ncu.rep import rules as rep_rules
from perfreport.ncu.rep import wire as rep_wire

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted([*ROOT.glob("tests/data/**/*.ncu-rep.gz"), *ROOT.glob("tests/data/**/*.ncu-rep"),
                  *ROOT.glob("campaigns/**/*.ncu-rep.gz")])
MANY = ROOT / "tests/data/h200_oracle/many/many_basic.ncu-rep.gz"  # 150 launches of 3 kernels, basic set
FULL = ROOT / "tests/data/h200_oracle/oracle_full.ncu-rep.gz"  # 6 different kernels, full set


# range replay and graph profiling write another result kind (block header field 7 / 9): ncu_report reads those
HANDED_OVER = {"h200_rep_layouts/range_replay.ncu-rep.gz": 7, "h200_rep_layouts/graph.ncu-rep.gz": 9}


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_there_are_reports_of_every_kind() -> None:
    assert len(REPORTS) >= 20
    sets = {rep.read_rep(p).section_set for p in REPORTS}
    assert {"full", "basic"} <= sets


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_byte_reader_equals_ncu_report(path: Path) -> None:
    said: list[str] = []
    ours = rep.read_rep(path, said.append)
    theirs = rep.read_rep(path, reader="ncu_report")
    field = HANDED_OVER.get(str(path.relative_to(ROOT / "tests/data")) if "tests/data" in str(path) else "")
    handed = [s for s in said if "reading with ncu_report" in s]
    if field is None:
        assert not handed, said  # the byte reader read it itself
    else:
        assert len(handed) == 1 and f"block header field {field} = 1 (range or graph results" in handed[0], said
        assert [k.function for k in ours.launches] == ["range" if field == 7 else "graph"]
    assert _nan_equal(ours) == _nan_equal(theirs)
    assert ours.launches and all(k.metrics and k.units.keys() == k.metrics.keys() for k in ours.launches)


def _plain(v: Any) -> Any:
    """A value as comparable data: dataclasses by their compared fields, dicts by sorted items, NaN (ncu's value
    for a counter it did not collect) as "nan" so that it equals itself."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return tuple((f.name, _plain(getattr(v, f.name))) for f in dataclasses.fields(v) if f.compare)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _plain(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(_plain(x) for x in v)
    return "nan" if isinstance(v, float) and math.isnan(v) else v


def _nan_equal(capture: Any) -> Any:
    """The capture with NaN values (ncu's for a counter it did not collect) spelled "nan", so that == holds."""
    launches = [dataclasses.replace(k, metrics={m: "nan" if math.isnan(v) else v for m, v in k.metrics.items()})
                for k in capture.launches]
    return dataclasses.replace(capture, launches=launches)


def test_every_unit_in_the_table_is_the_one_ncu_report_gives() -> None:
    """metrics.yaml rep_units: each entry seen in a real report with exactly that unit; every numeric metric the
    catalog reads that any report holds has an entry."""
    table = load_catalog().rep_units
    seen: dict[str, set[str]] = {}
    for path in REPORTS:
        for launch in rep.read_rep(path, reader="ncu_report").launches:
            for name, unit in launch.units.items():
                seen.setdefault(name, set()).add(unit)
    assert all(len(units) == 1 for units in seen.values()), seen
    assert {name: next(iter(units)) for name, units in seen.items()} == table
    assert table["dram__bytes.sum"] == "byte" and table["gpu__time_duration.sum"] == "ns"


@pytest.mark.parametrize("path", REPORTS, ids=_ids(REPORTS))
def test_bulk_and_entry_walk_agree(path: Path) -> None:
    data = path.read_bytes()
    data = gzip.decompress(data) if path.suffix == ".gz" else data
    wanted = rep._wanted()
    if any(str(path).endswith(k) for k in HANDED_OVER):
        with pytest.raises(rep_proto.UnknownLayout, match="block header field"):
            rep_wire.read_report(data, wanted)
        return
    a, b = rep_wire.read_report(data, wanted, bulk=False), rep_wire.read_report(data, wanted, bulk=True)
    assert _plain(a) == _plain(b) and a.sessions


def test_known_values_of_a_real_gemm() -> None:
    """Spot values from the report itself (ncu_report printed them): bf16 GEMM 8192x8192x8192 on the H200."""
    launch = rep.read_rep(FULL).launches[0]
    assert launch.function == "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
    assert launch.metrics["gpu__time_duration.sum"] == 1388928.0 and launch.units["gpu__time_duration.sum"] == "ns"
    assert launch.metrics["launch__registers_per_thread"] == 168.0
    assert launch.metrics["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(93.26524960697571)
    assert launch.grid_size == "(2, 66, 1)" and launch.block_size == "(384, 1, 1)" and launch.cc == "9.0"
    first = launch.rules[0]
    assert (first.section, first.rule, first.type) == ("SpeedOfLight", "SOLBottleneck", "1")
    assert launch.rules[0].description.startswith("This workload is utilizing greater than 80.0%")


@pytest.mark.parametrize("reader", ["auto", "ncu_report"])
def test_rule_results_are_read_only_when_asked(reader: str) -> None:
    """The importer asks for no rule results (ncu_kernels.json holds none): both readers then skip them, and
    every metric, unit and text value is the same as when they are read."""
    with_rules = rep.read_rep(FULL, reader=reader)
    without = rep.read_rep(FULL, reader=reader, rules=False)
    assert all(k.rules for k in with_rules.launches) and not any(k.rules for k in without.launches)
    for a, b in zip(with_rules.launches, without.launches, strict=True):
        assert (a.metrics, a.units, a.text, a.name, a.grid_size) == (b.metrics, b.units, b.text, b.name, b.grid_size)
    assert (with_rules.sections, with_rules.section_set) == (without.sections, without.section_set)


@pytest.mark.parametrize("chunk", [128 << 20, 1 << 20])
def test_the_provenance_hash_is_the_files_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The hash reads the mapping the parse reads (its pages mapped piece by piece first): it is still exactly the
    file's SHA-256, in one piece or in many, read alone or through the importer (hash started before the config)."""
    import hashlib

    from perfreport.ncu.importer import import_ncu

    monkeypatch.setattr(rep, "_HASH_CHUNK", chunk)
    plain = tmp_path / "layers16_basic.ncu-rep"
    plain.write_bytes(gzip.decompress((ROOT / "tests/data/h200_many_layers/layers16_basic.ncu-rep.gz").read_bytes()))
    want = hashlib.sha256(plain.read_bytes()).hexdigest()
    assert plain.stat().st_size > 20 * chunk or chunk > plain.stat().st_size  # many pieces, or one
    assert rep.read_rep(plain, rules=False).sha256 == want
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / "config.yaml").write_text("schema_version: 1\ncampaign: c\nhardware: h200_sm90\nsol_rigor: L2\n"
                                      "cells:\n  - id: a\n")
    result = import_ncu(camp, "a", plain)
    assert [s["sha256"] for s in result.sources] == [want]


def test_a_real_decode_mix_is_read_in_bulk() -> None:
    """16 decode layers (tests/data/h200_many_layers): 7 kernels, 224 launches, every one read in bulk."""
    from perfreport.ncu.rep.bulk import read_runs

    data = gzip.decompress((ROOT / "tests/data/h200_many_layers/layers16_basic.ncu-rep.gz").read_bytes())
    wanted = rep._wanted()
    f = rep_wire.frame(data, wanted)
    runs = read_runs(data, f.results, f.wanted)
    assert len(runs) == 224 and all(r is not None for r in runs)
    assert len({a.function for a in rep_wire.read_report(data, wanted).actions}) == 7


def test_many_launches_are_read_in_bulk() -> None:
    """147 of 150 launches repeat the layout of their kernel's first launch: read in bulk, not walked."""
    from perfreport.ncu.rep.bulk import read_runs

    data = gzip.decompress(MANY.read_bytes())
    wanted = rep._wanted()
    report = rep_wire.read_report(data, wanted)
    assert len(report.actions) == 150 and len({a.function for a in report.actions}) == 3
    f = rep_wire.frame(data, wanted)
    runs = read_runs(data, f.results, f.wanted)
    assert sum(r is not None for r in runs) == 150  # the first launch matches itself


def test_a_launch_that_differs_from_its_template_is_walked(tmp_path: Path) -> None:
    """Lengthen one metric entry of launch #4 (a later launch of kernel #1): bulk must notice and walk it."""
    data = bytearray(gzip.decompress(MANY.read_bytes()))
    wanted = rep._wanted()
    start, end = rep_wire.frame(bytes(data), wanted).results[3]
    p, _ = rep_bulk.prefix(bytes(data), start, end)
    assert p is not None
    # swap the first two metric entries: same bytes, other order: header bytes now differ from the template
    n1 = data[p + 1] + 2
    n2 = data[p + n1 + 1] + 2
    first, second = bytes(data[p : p + n1]), bytes(data[p + n1 : p + n1 + n2])
    assert first != second and data[p] == data[p + n1] == 0x6A
    data[p : p + n1 + n2] = second + first
    plain = rep_wire.read_report(bytes(data), wanted, bulk=False)
    bulk = rep_wire.read_report(bytes(data), wanted, bulk=True)
    assert plain == bulk


def test_the_fields_after_a_run_are_checked_against_the_first_launch() -> None:
    """Launch #4 repeats its kernel's first launch up to its first rule result: its walk resumes there, with the
    first launch's sections. A changed varint value there (same length) still matches; a changed section
    identifier does not: that launch is walked entry by entry, and the bulk read gives the walk's result."""
    from perfreport.ncu.rep.bulk import read_runs
    from perfreport.ncu.rep.proto import iter_fields

    data = bytearray(gzip.decompress(MANY.read_bytes()))
    wanted = rep._wanted()
    f = rep_wire.frame(bytes(data), wanted)
    run = read_runs(bytes(data), f.results, f.wanted)[3]
    assert run is not None and run.resume > run.stop
    assert run.sections == ("LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution")
    fields = list(iter_fields(bytes(data), run.stop, f.results[3][1]))
    assert [n for n, _, _ in fields[:7]] == [14, 15, 16, 17, 17, 17, 17] and fields[7][0] == 19
    # field 14, a varint of 5 bytes: flip the lowest bit of its first byte (same length, another value)
    at = run.stop + 1
    assert data[at] >= 0x80
    data[at] ^= 1
    again = read_runs(bytes(data), f.results, f.wanted)[3]
    assert again is not None and again.resume == run.resume
    assert rep_wire.read_report(bytes(data), wanted, bulk=False) == rep_wire.read_report(bytes(data), wanted)
    # the third section's identifier: "SpeedOfLight" -> "TpeedOfLight"
    _, _, (lo, hi) = fields[5]
    ident = bytes(data).index(b"SpeedOfLight", lo, hi)
    data[ident] = ord("T")
    assert read_runs(bytes(data), f.results, f.wanted)[3] is None
    plain = rep_wire.read_report(bytes(data), wanted, bulk=False)
    assert plain == rep_wire.read_report(bytes(data), wanted)
    assert plain.actions[3].sections[2] == "TpeedOfLight" and plain.actions[4].sections[2] == "SpeedOfLight"


def test_a_value_stored_another_way_in_one_launch_is_decoded_by_itself() -> None:
    """Launch #4 stores one wanted double as a uint64 varint of the same length (same header bytes, so it still
    matches its kernel's template): the launches of that kernel no longer store every value alike, so each value
    is decoded by itself. Bulk and walk agree, and the launch holds the varint's value, not the double's."""
    from perfreport.ncu.rep.bulk import _walk, read_runs, wanted_table

    data = bytearray(gzip.decompress(MANY.read_bytes()))
    wanted = rep._wanted()
    f = rep_wire.frame(bytes(data), wanted)
    start, end = f.results[3]
    p, _ = rep_bulk.prefix(bytes(data), start, end)
    assert p is not None
    w = _walk(bytes(data), np.frombuffer(bytes(data), dtype=np.uint8), p, end, wanted_table(f.wanted))
    assert w is not None
    values = zip(w.value_at.tolist(), w.nid.tolist(), strict=True)
    # the first whose value field is: its tag, length 9, the double's tag, 8 bytes
    q, nid = next((q, nid) for q, nid in values if data[q : q + 3] == bytes([2 << 3 | 2, 9, 3 << 3 | 1]))
    name = f.wanted[nid]
    before = rep_wire.read_report(bytes(data), wanted).actions[3].values[name]
    assert isinstance(before, float)
    data[q + 2 : q + 11] = bytes([5 << 3 | 0, *[0xFF] * 7, 0x01])  # a uint64 varint: 7 bytes of 0x7F, then 1
    expected = sum(0x7F << (7 * i) for i in range(7)) | 1 << 49
    plain = rep_wire.read_report(bytes(data), wanted, bulk=False)
    bulk = rep_wire.read_report(bytes(data), wanted, bulk=True)
    assert plain == bulk
    assert bulk.actions[3].values[name] == expected and isinstance(bulk.actions[3].values[name], int)
    assert read_runs(bytes(data), f.results, f.wanted)[3] is not None  # still read in bulk, value by value


@pytest.mark.parametrize(("module", "name", "value", "said_part"), [
    (rep_wire, "FILE_VERSIONS", frozenset({99}), "(file format version 7, this reader knows [99]); reading with"),
    (rep_rules, "MSG_TYPES", {0: "0", 1: "1", 2: "3"}, "rule message type 4"),  # as if bit 4 were never seen
], ids=["file-version", "rule-message-type"])
def test_what_the_reader_does_not_know_goes_to_ncu_report(monkeypatch: pytest.MonkeyPatch, module: object,
                                                         name: str, value: object, said_part: str) -> None:
    monkeypatch.setattr(module, name, value)
    said: list[str] = []
    got = rep.read_rep(FULL, said.append)
    assert any(said_part in s for s in said), said
    monkeypatch.undo()
    assert got == rep.read_rep(FULL)


def test_a_metric_without_a_known_unit_goes_to_ncu_report(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = load_catalog()
    units = dict(cat.rep_units)
    del units["gpu__time_duration.sum"]
    monkeypatch.setattr(rep, "load_catalog", lambda: type(cat)(**{**cat.__dict__, "rep_units": units}))
    said: list[str] = []
    got = rep.read_rep(FULL, said.append)
    assert any("no unit known for gpu__time_duration.sum" in s for s in said), said
    assert got.launches[0].units["gpu__time_duration.sum"] == "ns"


@pytest.mark.parametrize("cut", [100_000, 200_000, 5_000_000, -700_000, -1])
def test_a_cut_report_is_refused_with_what_is_missing(tmp_path: Path, cut: int) -> None:
    data = gzip.decompress(FULL.read_bytes())
    part = data[:cut]
    path = tmp_path / "cut.ncu-rep"
    path.write_bytes(part)
    with pytest.raises(InputError) as err:
        rep.read_rep(path)
    msg = err.value.message
    assert f"({len(part)} bytes)" in msg and "truncated or damaged" in msg and "==PROF== Report:" in msg
    if cut in (100_000, 200_000):  # inside the string table, inside the first kernel
        assert "holds no profiled kernel" in msg
    else:
        assert "whole kernel(s) before it" in msg


def _both_reads(raw: bytes, wanted: frozenset[str]) -> list[object]:
    """The entry-by-entry read and the bulk read of `raw`: each a Report, or the name of what refused it."""
    outcomes: list[object] = []
    for bulk in (False, True):
        try:
            outcomes.append(rep_wire.read_report(raw, wanted, bulk=bulk))
        except (rep_proto.UnknownLayout, rep_proto.Truncated) as exc:
            outcomes.append(type(exc).__name__)
    return outcomes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_bytes_never_crash_the_reader(data: st.DataObject) -> None:
    """Any byte flipped or cut: the reader returns a report, or says the layout is unknown or the file is cut;
    bulk and entry walks still agree (no other exception, no half result)."""
    raw = bytearray(_SMALL)
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(8, len(raw)))]
    wanted = rep._wanted()
    walked, bulk = _both_reads(bytes(raw), wanted)
    assert walked == bulk


_SMALL = gzip.decompress((ROOT / "tests/data/h200_shared/attach_basic.ncu-rep.gz").read_bytes())  # 2 launches


_MANY_RAW = gzip.decompress(MANY.read_bytes())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_bytes_where_a_launch_is_checked_against_its_template(data: st.DataObject) -> None:
    """Bytes flipped where a later launch is compared with its kernel's first (its metric run, then its fields up
    to the first rule result: headers, values, varints, section identifiers): the bulk read gives exactly what
    the entry-by-entry walk gives, or both refuse the same way."""
    from perfreport.ncu.rep.bulk import read_runs

    raw = bytearray(_MANY_RAW)
    wanted = rep._wanted()
    f = rep_wire.frame(_MANY_RAW, wanted)
    run = read_runs(_MANY_RAW, f.results, f.wanted)[3]
    assert run is not None and run.resume > run.stop
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.one_of(st.integers(run.start, run.start + 64), st.integers(run.start, run.resume - 1),
                                 st.integers(run.stop, run.resume - 1)))
        raw[at] = data.draw(st.integers(0, 255))
    walked, bulk = _both_reads(bytes(raw), wanted)
    assert walked == bulk


def test_the_cli_gives_the_same_cell_with_either_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import run_cli, write_config

    cells = []
    for how in ("auto", "option", "env"):
        camp = write_config(tmp_path / how)
        args = ["import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(MANY)]
        monkeypatch.delenv("PERFREPORT_REP_READER", raising=False)
        if how == "option":
            args += ["--rep-reader", "ncu_report"]
        elif how == "env":
            monkeypatch.setenv("PERFREPORT_REP_READER", "ncu_report")
        run_cli(*args, ok=True)
        cells.append((camp / "cells/c1/ncu_kernels.json").read_text())
    assert cells[0] == cells[1] == cells[2] and '"launches": 150' in cells[0]
    monkeypatch.delenv("PERFREPORT_REP_READER", raising=False)
    run = run_cli("import_ncu", "--campaign", str(tmp_path / "auto"), "--cell-id", "c1",
                  "--bundle", str(MANY), "--rep-reader", "guess", ok=False)
    assert "'guess' is not one of 'auto', 'ncu_report'" in run.stderr


def test_a_report_replicated_by_kernel_is_one_ncu_report_reads(tmp_path: Path) -> None:
    """benchmarks/rep_replicate.py (the bench's large reports): ncu_report reads the copy, every replicated
    kernel equals its original, and the byte reader agrees (bulk: repeats of the same six kernels)."""
    from benchmarks.rep_replicate import replicate

    big = tmp_path / "big.ncu-rep"
    big.write_bytes(replicate(gzip.decompress(FULL.read_bytes()), 14))
    theirs = rep.read_rep(big, reader="ncu_report")
    ours = rep.read_rep(big)
    assert len(theirs.launches) == 14 and ours == theirs
    for i, launch in enumerate(ours.launches):
        first = ours.launches[i % 6]
        assert (launch.name, launch.metrics, launch.units, launch.rules) == (
            first.name, first.metrics, first.units, first.rules)


def test_a_refused_report_can_be_rewritten_at_once(tmp_path: Path) -> None:
    """A refused import leaves no hash reading the file: rewriting it right away, as a user re-copying a report
    does, never races a background read of the mapped file (the suite died of SIGBUS once when it did)."""
    from conftest import write_config

    from perfreport.ncu.importer import import_ncu

    camp = write_config(tmp_path / "camp")
    data = gzip.decompress(FULL.read_bytes())
    path = tmp_path / "r.ncu-rep"
    for cut in (200_000, 5_000_000, len(data) - 700_000) * 4:
        path.write_bytes(data[:cut])
        for reader in ("auto", "ncu_report"):
            with pytest.raises(InputError, match="truncated or damaged"):
                import_ncu(camp, "c1", path, rep_reader=reader)
        path.write_bytes(b"NVR\x00")  # shrinks the file the refused import just read
        with pytest.raises(InputError):
            rep.read_rep(path)
    assert not (camp / "cells").exists()
