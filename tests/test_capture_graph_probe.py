"""The H200 graph-attach probes (tests/data/h200_capture/graph_server_probe/): what a node-mode attach does to a
process that replays CUDA graphs, after a graph-mode or a node-mode release, re-read from the committed logs.

These logs are the evidence for `diagnose.GRAPH_WEDGE`, the default node-mode release (`capture/release.py`) and
docs/capture.md ("What a process under ncu costs"); the counts below must agree with what those say.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

import pytest

from perfreport.capture.diagnose.log import GRAPH_WEDGE, diagnose_text

PROBE = Path(__file__).resolve().parent / "data" / "h200_capture" / "graph_server_probe"
_VARIANT = re.compile(r"^--- \S+ variant thread=(?P<thread>\d) matmul=(?P<matmul>\d) release=(?P<mode>\w+)$", re.M)
_RATE = re.compile(r"^t=\s*(?P<t>[\d.]+) s\s+\d+ graph replays/s\s+\((?P<us>[\d.]+) us/kernel\)$", re.M)


def _variants(name: str) -> list[dict[str, object]]:
    """Each probe life of a micro-variant log: its factors, both attach outcomes and the per-kernel cost."""
    text = (PROBE / name).read_text()
    starts = [m for m in _VARIANT.finditer(text)]
    out = []
    for m, end in zip(starts, [s.start() for s in starts[1:]] + [len(text)], strict=True):
        block = text[m.start():end]
        first = block.split("node attach 1")[1].split("node attach 2")[0]
        second = block.split("node attach 2")[1] if "node attach 2" in block else ""
        rates = [float(r["us"]) for r in _RATE.finditer(block) if float(r["t"]) >= 12]  # after the first attach
        out.append({**m.groupdict(), "profiled_1": '==PROF== Profiling "' in first,
                    "empty_1": "No kernels were profiled" in first,
                    "unattachable_2": "No attachable process found" in second, "us_after": rates})
    return out


def _wedged(v: dict[str, object]) -> bool:
    return bool(v["empty_1"] and v["unattachable_2"])


@pytest.mark.evidence
def test_graph_mode_release_then_node_attach_wedges_in_four_of_six_micro_lives() -> None:
    """Re-reads micro_variants_graph_release.log."""
    lives = _variants("micro_variants_graph_release.log")
    assert len(lives) == 6 and {v["mode"] for v in lives} == {"graph"}
    assert [_wedged(v) for v in lives] == [False, True, False, True, True, True]
    # every factor combination wedged at least once: neither the replay thread nor a cuBLAS kernel in the graph is it
    assert {(v["thread"], v["matmul"]) for v in lives if _wedged(v)} == {("1", "1"), ("1", "0"), ("0", "1")}
    # the sixth life was cut off by the device time limit before its target's rates were printed
    assert [bool(v["us_after"]) for v in lives] == [True] * 5 + [False]
    for v in lives:
        us = v["us_after"]
        assert isinstance(us, list)
        if _wedged(v) and us:  # the attach never took effect: replay speed stays graph-mode fast
            assert max(us) < 2.0, us
        elif us:  # a node attach that profiled: ~60-95 us per graph-replayed kernel for good
            assert v["profiled_1"] and statistics.median(us) > 50, us


@pytest.mark.evidence
def test_node_mode_release_never_wedged_in_the_micro_probe() -> None:
    """Re-reads micro_variants_node_release.log."""
    lives = _variants("micro_variants_node_release.log")
    assert len(lives) == 4 and {v["mode"] for v in lives} == {"node"}
    assert all(v["profiled_1"] and not v["unattachable_2"] for v in lives)
    last = lives[-1]["us_after"]
    assert isinstance(last, list) and last and statistics.median(last) > 50


def _windows(name: str) -> list[tuple[float, float]]:
    """(start s, tok/s) of the closed-loop load's 2-second windows."""
    rows = re.findall(r"^\s*(\d+)s\s+\d+ req\s+([\d.]+) tok/s", (PROBE / name).read_text(), re.M)
    return [(float(t), float(r)) for t, r in rows]


@pytest.mark.evidence
def test_server_graph_release_serves_fast_until_the_first_node_attach_then_slow_for_good() -> None:
    """Re-reads load_graph.log, load_graph.json.gz and probe.log."""
    w = _windows("load_graph.log")
    before = [r for t, r in w if t < 8]
    after = [r for t, r in w if 10 <= t < 40]
    assert min(before) > 2400 and statistics.median(after) < 300  # 0.92x of 2,696 un-profiled, then ~0.09x
    record = json.loads(gzip.decompress((PROBE / "load_graph.json.gz").read_bytes()))
    assert {"argv", "records", "windows", "total"} <= set(record)
    probe = (PROBE / "probe.log").read_text()
    assert probe.count('==PROF== Profiling "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"') >= 2


@pytest.mark.evidence
def test_server_node_release_serves_slow_throughout_and_every_attach_profiles() -> None:
    """Re-reads load_node.log and release_node.txt."""
    w = _windows("load_node.log")
    assert max(r for _, r in w) < 400  # never fast: the node-mode release already switched the replays
    text = (PROBE / "release_node.txt").read_text()
    assert "Available Kernels:" in text and "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT" in text


@pytest.mark.evidence
def test_the_wedge_counts_in_the_diagnosis_match_the_probes() -> None:
    """Re-reads the micro probe logs, probe.log, overhead3/capture_overhead.log and launch_cost's probe log against
    diagnose.GRAPH_WEDGE."""
    graph = _variants("micro_variants_graph_release.log")
    node = _variants("micro_variants_node_release.log")
    probe = (PROBE / "probe.log").read_text()
    micro = probe[probe.index("micro probe"):]
    server_graph_ok = '==PROF== Profiling "nvjet' in probe[probe.index("case graph:"):probe.index("case node:")]
    # graph-mode releases: 6 micro lives, the server life, the server's micro life, overhead3, launch_cost's probe
    overhead3 = (PROBE.parent / "overhead3" / "capture_overhead.log").read_text()
    then_node = (PROBE.parent / "launch_cost" / "graph_attach_probe_graph_then_node.log").read_text()
    lives = [_wedged(v) for v in graph] + [not server_graph_ok,
                                           "No kernels were profiled" in micro and "No attachable" in micro,
                                           "No attachable process found" in overhead3,
                                           '==PROF== Profiling "vectorized_elementwise_kernel"' not in then_node]
    assert (sum(lives), len(lives)) == (6, 10)
    assert "in 6 of 10 CUDA-graph processes released graph-mode" in GRAPH_WEDGE
    # node-mode releases of graph-replaying processes: 4 micro lives, the server's node life, launch_cost's probe
    assert len(node) + 2 == 6 and "after a node-mode release, 0 of 6 failed" in GRAPH_WEDGE


@pytest.mark.parametrize("start", ["micro release, --graph-profiling graph"])
def test_the_wedged_attach_is_diagnosed_with_the_restart_fix(start: str) -> None:
    probe = (PROBE / "probe.log").read_text()
    session = probe[probe.index(start):probe.index("micro node -k regex:elementwise")]
    found = diagnose_text(session)
    assert [d.code for d in found] == ["no-kernels-profiled"]
    d = found[0]
    assert d.details["attached"] is True and d.details["available_kernels"] == []
    assert d.evidence == ("==PROF== Connected to process 3673 (/usr/bin/python3.12)",
                          "==WARNING== No kernels were profiled.")
    assert "earlier attach on it was graph-mode" in d.message and "release it node-mode" in d.message
    after = diagnose_text(probe[probe.index("micro node -k regex:elementwise"):])
    assert [x.code for x in after] == ["no-attachable-process"]
    assert "restart it under `ncu --mode launch`" in after[0].message
