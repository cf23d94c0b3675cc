"""The measured launch cost the capture policy states (policy.LAUNCH_COST), re-read from the H200 artifacts.

Every number the `ncu-launch-cost` finding prints comes from these files (ncu 2025.3.1, driver 580.159.04):
launch_cost/*.log (a 1 KiB in-place add launched 4,000 times eagerly and 4,000 times from one CUDA graph, plain and
under ncu), graph_attach_probe_*.log (one process replaying a graph while attaches come and go) and the serving
benchmark runs overhead2/ (transformers engine, eager), overhead3/ (CUDA-graph engine, graph-mode release) and
overhead4/ (CUDA-graph engine, node-mode release).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from perfreport.capture.plan.policy import LAUNCH_COST

DATA = Path(__file__).parent / "data" / "h200_capture"
pytestmark = pytest.mark.evidence  # every test re-reads committed H200 artifacts; no product code parses them


def runs(name: str) -> dict[str, dict[str, float]]:
    """label -> the JSON line launch_cost.py printed."""
    out = {}
    for line in (DATA / "launch_cost" / name).read_text().splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            out.setdefault(doc["label"], doc)
    return out


def rates(name: str) -> list[tuple[float, float]]:
    """(t seconds, us per graph-replayed kernel) from graph_attach_probe.py's per-second lines."""
    text = (DATA / "launch_cost" / name).read_text()
    return [(float(t), float(us)) for t, us in re.findall(r"t=\s*([\d.]+) s .*\(([\d.]+) us/kernel\)", text)]


def window(doc: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(r for r in doc["rows"] if r["window"] == name)


def test_ncu_costs_70_to_100_us_per_eager_launch_and_graph_cost_follows_the_release_mode() -> None:
    """Re-reads launch_cost/launch_cost{,_detached,_graph}.log (launch_cost.py's JSON lines)."""
    a, b, c = runs("launch_cost.log"), runs("launch_cost_detached.log"), runs("launch_cost_graph.log")
    assert 7 < a["plain"]["eager_us_per_launch"] < 9 and a["plain"]["graph_us_per_kernel"] < 1.0
    under = [a["launched-released"], a["session-no-match"], a["session-after-count"], b["launched-detached"],
             b["launched-detached-after-graph-attach"], c["session-no-match-graph-profiling-graph"]]
    assert all(65 < r["eager_us_per_launch"] < 110 for r in under)  # "~70-100 us per eager launch", every state
    assert 55 <= b["launched-detached"]["graph_us_per_kernel"] <= 62  # node-mode release, detached
    assert b["launched-detached-after-graph-attach"]["graph_us_per_kernel"] < 1.3  # graph-mode release
    assert c["session-no-match-graph-profiling-graph"]["graph_us_per_kernel"] < 1.8


def test_first_node_mode_attach_slows_graphs_for_good() -> None:
    """Re-reads launch_cost/graph_attach_probe_*.log (graph_attach_probe.py's per-second rates)."""
    graph_first = rates("graph_attach_probe_graph_first.log")  # graph, (failed node), graph, node at ~30 s
    assert all(us < 1.9 for t, us in graph_first if t < 29) and all(us > 45 for t, us in graph_first if t > 31)
    then_node = rates("graph_attach_probe_graph_then_node.log")  # graph, node (profiled a kernel) at ~10 s, graph
    assert all(us < 2.1 for t, us in then_node if t < 8) and all(us > 45 for t, us in then_node if t > 13)
    assert "Profiling \"vectorized_elementwise_kernel\"" in (DATA / "launch_cost" /
                                                           "graph_attach_probe_graph_then_node.log").read_text()
    node_first = rates("graph_attach_probe_node_first.log")  # first attach node-mode: never fast afterwards
    assert min(us for _, us in node_first) > 45


@pytest.mark.parametrize(("run", "low", "high"), [("overhead2/capture_overhead.json", 0.17, 0.19),
                                                  ("overhead3/capture_overhead.json.gz", 0.81, 0.83),
                                                  ("overhead4/capture_overhead.json.gz", 0.07, 0.08)])
def test_launched_server_serves_slower_than_unprofiled(run: str, low: float, high: float) -> None:
    """Re-reads overhead{2,3,4}/capture_overhead.json[.gz] (window B0) against policy.LAUNCH_COST."""
    raw = (DATA / run).read_bytes()
    doc = json.loads(gzip.decompress(raw) if run.endswith(".gz") else raw)
    b0 = window(doc, "B0 launched, not attached")["vs_unprofiled"]["tokens_per_s"]
    assert low < b0 < high
    assert f"{b0:.2f}x" in LAUNCH_COST or f"{b0:.2f}-" in LAUNCH_COST


def test_graph_server_windows_stay_under_the_unprofiled_rate() -> None:
    """Re-reads overhead3/capture_overhead.json.gz (the B windows) against policy.LAUNCH_COST."""
    doc = json.loads(gzip.decompress((DATA / "overhead3" / "capture_overhead.json.gz").read_bytes()))
    ratios = [r["vs_unprofiled"]["tokens_per_s"] for r in doc["rows"] if r["window"].startswith("B")]
    assert max(ratios) < 0.97 < 1.0 and "0.96x" in LAUNCH_COST


def test_graph_server_released_node_mode_captures_every_phase() -> None:
    """overhead4/: the default node-mode release; every capture attached and profiled (overhead3/'s wedge did not
    happen), and serving under ncu stayed at ~0.06-0.08x of un-profiled in every window outside the replays.
    Re-reads overhead4/capture_overhead.json.gz."""
    doc = json.loads(gzip.decompress((DATA / "overhead4" / "capture_overhead.json.gz").read_bytes()))
    assert doc["config"]["release_graph_profiling"] == "node" and doc["config"]["engine"] == "llama-graph"
    caps = {c["label"]: c for c in doc["phase_b"]["captures"]}
    assert caps["B1 scoped basic"]["kernel_names"] == ["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"]
    assert caps["B2 scoped full"]["kernel_names"] == ["nvjet_sm90_tst_256x8_64x6_2x1_v_bz_NNT"]
    assert all(c["exit_status"] == -2 and c["timeline"]["connected"] for c in caps.values())
    a = window(doc, "A un-profiled")["tokens_per_s"]
    assert 2600 < a < 2800
    outside = [r["vs_unprofiled"]["tokens_per_s"] for r in doc["rows"]
               if r["window"].startswith("B") and not r["window"].endswith("capture")]
    assert min(outside) > 0.06 and max(outside) < 0.08
    assert window(doc, "B2 scoped full: capture")["vs_unprofiled"]["tokens_per_s"] < 0.011
