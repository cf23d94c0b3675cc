"""Lake history, time travel and compare on a real pyiceberg SQLite catalog in tmp."""

from __future__ import annotations

import copy
import io
import json
from csv import DictReader
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_lake import DECODE, PREFILL, make_campaign

from perfreport.errors import PerfReportError
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
    assert "expected section.field, one of identity.model, " in bad.output and "workload.concurrency" in bad.output
    assert PREFILL  # the example's prefill cell is not in this campaign


def test_vary_has_one_spelling_section_dot_field_and_a_bare_field_is_refused_naming_it(compare_lake: Path) -> None:
    """Issue: `--vary concurrency` and `--vary workload.concurrency` both worked; config.yaml and the site write
    `workload.concurrency`, so that is the one spelling, the default, and what the output names."""
    bare = run_cli("lake", "compare", "--lake", str(compare_lake), "--metric", "sol_pct", "--vary", "concurrency")
    assert bare.exit_code == 2 and "Traceback" not in bare.output
    (line,) = [x for x in bare.output.splitlines() if x.startswith("Error:")]
    assert line == ("Error: lake compare --vary 'concurrency': expected section.field (the one spelling, as in "
                    "config.yaml's context and the site), got the bare field name. Use --vary workload.concurrency")
    with pytest.raises(PerfReportError, match=r"--vary 'tp': expected section\.field .* Use --vary parallelism\.tp$"):
        lake_compare(compare_lake, "sol_pct", vary="tp")
    default = json.loads(run_cli("lake", "compare", "--lake", str(compare_lake), "--metric", "sol_pct", "--format",
                                 "json", ok=True).stdout)
    assert default["vary"] == "workload.concurrency"
    assert [c["workload.concurrency"] for c in default["groups"][0]["cells"]] == [16, 32]
    assert lake_compare(compare_lake, "sol_pct").vary == "workload.concurrency"
    shown = run_cli("lake", "compare", "--help", ok=True).output
    assert "[default: workload.concurrency]" in " ".join(shown.split())
    assert "--vary concurrency" not in shown


FULL, BASIC = "captures/prefill/layer_full.ncu-rep.gz", "captures/prefill/layer_basic.ncu-rep.gz"
SETS = {PREFILL: (8, [FULL]), "prefill-basic": (16, [BASIC]), "prefill-both": (32, [BASIC, FULL])}


def prefill_in_three_sets(doc: dict[str, Any]) -> None:
    """The prefill cell three times, concurrency 8/16/32: captured with --set full, --set basic, and both."""
    prefill = next(c for c in doc["cells"] if c["id"] == PREFILL)
    prefill.pop("timelines")
    doc["cells"] = []
    for cell_id, (concurrency, captures) in SETS.items():
        cell = copy.deepcopy(prefill)
        cell.update(id=cell_id, captures=captures)
        cell["context"]["workload"]["concurrency"] = concurrency
        doc["cells"].append(cell)


def test_compare_lines_up_a_kernel_across_section_sets_and_says_which_set_a_cell_gave(tmp_path: Path) -> None:
    """Issue: a kernel captured with --set full in one cell and --set basic in another was two rows (one `removed`,
    one `added`), split by section set; it is one row, and a cell holding both gives its full row."""
    lake = tmp_path / "lake"
    publish_to_lake(make_campaign(tmp_path / "c", prefill_in_three_sets), lake=lake)
    held = lake_query(lake, "SELECT cell_id, label, section_set, duration_ns FROM kernels").rows
    duration = {(cell, label, kset): ns for cell, label, kset, ns in held}
    result = lake_compare(lake, "duration_ns", vary="workload.concurrency")
    (group,) = result.groups
    assert [c[1:] for c in group.cells] == [(PREFILL, 8), ("prefill-basic", 16), ("prefill-both", 32)]
    labels = sorted({label for cell, label, kset, _ in held if cell == PREFILL})
    assert len(labels) == 9 and len(held) == 9 + 9 + 18
    assert [r[:3] for r in group.rows] == [(label, "full/basic/full", "paired") for label in labels]
    for label, _, _, at8, at16, at32 in group.rows:
        assert (at8, at16, at32) == (duration[(PREFILL, label, "full")], duration[("prefill-basic", label, "basic")],
                                     duration[("prefill-both", label, "full")]), label
    assert duration[("prefill-both", labels[0], "basic")] != duration[("prefill-both", labels[0], "full")]
    note = ("h200-decoder-layer/prefill-both: 8 kernel(s) captured in both full and basic; compared from the full "
            "rows (the largest section set)")
    assert result.notes == [note] and result.not_comparable == []
    out = run_cli("lake", "compare", "--lake", str(lake), "--metric", "sol_pct", ok=True).output
    assert f"note: {note}" in out
    csv = run_cli("lake", "compare", "--lake", str(lake), "--metric", "sol_pct", "--format", "csv", ok=True)
    assert csv.stderr.splitlines() == [f"note: {note}"]
    rows = list(DictReader(io.StringIO(csv.stdout)))
    assert len(rows) == 9 * 3 and {r["set"] for r in rows} == {"full/basic/full"}
    assert {r["sol_pct"] for r in rows if r["cell_id"] == "prefill-basic"} == {""}  # basic measured no %SoL
    assert all(r["sol_pct"] != "" for r in rows if r["cell_id"] == "prefill-both")  # its full row's, not the null
