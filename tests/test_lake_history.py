"""Lake history, time travel and compare on a real pyiceberg SQLite catalog in tmp."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_lake import DECODE, PREFILL, make_campaign

from perfreport.lake.compare import lake_compare
from perfreport.lake.history import lake_history
from perfreport.lake.query import lake_query
from perfreport.lake.writer import publish_to_lake


def test_history_one_commit_per_publish_and_time_travel(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / "c")
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    config = camp / "config.yaml"
    config.write_text(config.read_text().replace("cache: warm", "cache: cold"))
    publish_to_lake(camp, lake=lake)
    for table in ("kernels", "cells", "publications"):
        commits = lake_history(lake, table)
        assert len(commits) == 2, table
        assert commits[1].parent_id == commits[0].snapshot_id
    first, second = lake_history(lake, "cells")
    assert first.operation == "append" and first.counts["added-records"] == 2
    assert second.counts["deleted-records"] == 2 and second.counts["total-records"] == 2
    sql = "SELECT DISTINCT k.cache, c.cache FROM kernels k JOIN cells c USING (cell_id)"
    assert lake_query(lake, sql).rows == [("cold", "cold")]
    kernels_first = lake_history(lake, "kernels")[0].snapshot_id
    assert lake_query(lake, "SELECT DISTINCT cache FROM kernels", snapshot=kernels_first).rows == [("warm",)]
    ledger_first = lake_history(lake, "publications")[0].snapshot_id  # appended last: every table committed
    assert lake_query(lake, sql, snapshot=ledger_first).rows == [("warm", "warm")]
    out = run_cli("lake", "history", "--lake", str(lake), "--table", "kernels", ok=True)
    assert str(kernels_first) in out.output and "added-records 39" in out.output
    out = run_cli("lake", "query", "--lake", str(lake), "--snapshot", str(first.snapshot_id), "--format", "csv",
                  "SELECT DISTINCT cache FROM cells", ok=True)
    assert out.output.splitlines() == ["cache", "warm"]
    bad = run_cli("lake", "query", "--lake", str(lake), "--snapshot", "123", "SELECT 1")
    assert bad.exit_code != 0 and "no snapshot 123" in bad.output and "Traceback" not in bad.output


def three_decode_cells(doc: dict[str, Any]) -> None:
    decode = next(c for c in doc["cells"] if c["id"] == DECODE)
    c32 = copy.deepcopy(decode)
    c32["id"] = "decode-c32"
    c32["context"]["workload"]["concurrency"] = 32
    odd = copy.deepcopy(decode)
    odd["id"] = "decode-odd"
    odd["context"]["workload"].update(isl=4096, concurrency=64)
    odd["context"]["regime"]["tier"] = "throughput"
    doc["cells"] = [decode, c32, odd]


@pytest.fixture(scope="module")
def compare_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compare")
    lake = root / "lake"
    publish_to_lake(make_campaign(root / "c", three_decode_cells), lake=lake)
    return lake


def test_compare_pairs_cells_differing_only_in_concurrency(compare_lake: Path) -> None:
    result = lake_compare(compare_lake, "sol_pct", vary="workload.concurrency")
    assert len(result.groups) == 1
    group = result.groups[0]
    assert [c[1:] for c in group.cells] == [(DECODE, 16), ("decode-c32", 32)]
    assert group.columns == ["kernel", "set", "change", "concurrency=16", "concurrency=32"]
    gemm = next(r for r in group.rows if r[0].startswith("nvjet_sm90_tst_128x16_64x11_4x1") and r[1] == "full")
    assert gemm[0] == "nvjet_sm90_tst_128x16_64x11_4x1_v_bz_NNT #1" and gemm[2] == "paired"
    assert gemm[3] == pytest.approx(73.69883040935672) and gemm[4] == pytest.approx(gemm[3])
    assert result.not_comparable == [
        f"h200-decoder-layer/decode-odd: differs from h200-decoder-layer/{DECODE} in isl (4096 vs 2048), "
        "tier (throughput vs latency)"]
    out = run_cli("lake", "compare", "--lake", str(compare_lake), "--metric", "sol_pct",
                  "--campaign", "h200-decoder-layer", ok=True)
    assert "concurrency=32" in out.output and "not comparable: h200-decoder-layer/decode-odd" in out.output
    assert "isl (4096 vs 2048)" in out.output


def test_compare_refuses_an_unknown_metric_or_vary_field_without_a_traceback(compare_lake: Path) -> None:
    bad = run_cli("lake", "compare", "--lake", str(compare_lake), "--metric", "speed")
    assert bad.exit_code != 0 and "unknown metric" in bad.output and "sol_pct" in bad.output
    assert "Traceback" not in bad.output
    bad = run_cli("lake", "compare", "--lake", str(compare_lake), "--metric", "sol_pct", "--vary", "colour")
    assert bad.exit_code != 0 and "not a descriptor field" in bad.output
    assert PREFILL  # the example's prefill cell is not in this campaign
