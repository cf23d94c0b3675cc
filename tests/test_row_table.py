"""The kernel-row table (perfreport/kernels/row.py) against everything that names kernel-row fields.

The schema's kernel item is generated from it, the warehouse's ncu_kernels columns and the lake's measures are built
from it, and derive_launch / summarize_capture emit exactly its names on real captures.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from perfreport.config import validate
from perfreport.config.ceilings import load_ceilings
from perfreport.kernels import row
from perfreport.lake import rows as lake_rows
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.derive import DeriveContext, derive_launch
from perfreport.ncu.read import read_export
from perfreport.warehouse import db

TESTS = Path(__file__).parent
GOLDEN = sorted((TESTS / "golden").glob("*/ncu_kernels.json"))
CAPTURES = {
    "oracle_full": TESTS / "data/h200_oracle/oracle_full.ncu-rep.gz",
    "oracle_basic": TESTS / "data/h200_oracle/oracle_basic.ncu-rep.gz",
    "decode_layer_full": TESTS.parent / "campaigns/h200-decoder-layer/captures/decode/layer_full.ncu-rep.gz",
}


def test_committed_schema_is_what_the_generator_writes() -> None:
    text = row.SCHEMA_PATH.read_text(encoding="utf-8")
    assert text == row.render_schema(json.loads(text)), f"stale schema: run `{row.REGENERATE}`"
    assert row.main([]) == 0


def test_schema_kernel_item_lists_every_field_with_its_type() -> None:
    item = validate.load_schema("ncu_kernels")["properties"]["kernels"]["items"]
    assert list(item["properties"]) == list(row.names())
    assert item["required"] == [f.name for f in row.KERNEL_ROW if f.required]
    assert item["properties"]["duration_ns"] == {"type": ["number", "null"]}
    assert item["properties"]["launches"] == {"type": "integer", "minimum": 1}
    assert item["properties"]["bound"] == {"enum": list(row.BOUNDS)}


def test_stale_schema_is_reported_with_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "ncu_kernels.schema.json"
    schema = json.loads(row.SCHEMA_PATH.read_text(encoding="utf-8"))
    del schema["properties"]["kernels"]["items"]["properties"]["sm_hz"]
    stale.write_text(json.dumps(schema, indent=2), encoding="utf-8")
    monkeypatch.setattr(row, "SCHEMA_PATH", stale)
    assert row.main([]) == 1
    assert capsys.readouterr().out == f"ncu_kernels.schema.json: stale; run `{row.REGENERATE}`\n"
    assert row.main(["--write"]) == 0 and row.main([]) == 0
    assert stale.read_text(encoding="utf-8") == row.SCHEMA_PATH.read_text(encoding="utf-8")


def test_warehouse_ncu_kernels_columns_are_the_table() -> None:
    con = duckdb.connect(":memory:")
    db._create_tables(con)
    got = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                      "WHERE table_name = 'ncu_kernels' ORDER BY ordinal_position").fetchall()
    want = [("cell_id", "VARCHAR"), ("section_set", "VARCHAR"), ("flops_total", "DOUBLE")] + [
        (f.column or f.name, f.duckdb_type()) for f in row.KERNEL_ROW if f.warehouse] + [("kernel", "VARCHAR")]
    assert got == want
    assert ("kernel_id", "VARCHAR") in got and ("launch_ids", "INTEGER[]") in got and ("stats", "JSON") in got


def test_lake_kernel_columns_are_typed_by_the_table() -> None:
    renamed = {"kernel_id": "id", "source_id": "source"}
    checked = 0
    for column in lake_rows.KERNELS:
        name = renamed.get(column.name, column.name)
        if name in row.FIELDS:
            assert column.type == lake_rows.ARROW_TYPES[row.FIELDS[name].type], column.name
            checked += 1
    assert checked == 26  # with label, grid_size, block_size, instance, vendor
    assert dict(lake_rows.KERNEL_MEASURES)["launches"] == pa.int64()
    assert dict(lake_rows.KERNEL_MEASURES)["ai_measured"] == pa.bool_()
    assert [n for n, _ in lake_rows.KERNEL_MEASURES if n not in row.FIELDS] == ["flops_total", "sol_pct_note"]


@pytest.mark.parametrize("case", sorted(CAPTURES))
def test_derive_and_aggregate_emit_the_table_names(case: str) -> None:
    capture = read_export(CAPTURES[case], rules=False)
    ctx = DeriveContext(ceilings=load_ceilings(), hardware="h200_sm90")
    launch_keys = set(row.names("launch")) | {row.LAUNCH_ID}
    for launch in capture.launches:
        assert set(derive_launch(launch, ctx)) == launch_keys
    entries = summarize_capture(capture, ctx, CAPTURES[case].name)
    assert entries
    for entry in entries:
        assert set(entry) == set(row.names("launch", "kernel"))  # `id` is given by cells.merge_sources
        for launch_row in entry["per_launch"]:
            assert set(launch_row) == launch_keys
    if case == "decode_layer_full":
        assert any(len(e["per_launch"]) > 1 for e in entries)


@pytest.mark.parametrize("path", GOLDEN, ids=[p.parent.name for p in GOLDEN])
def test_golden_kernels_have_exactly_the_table_fields(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["kernels"]
    for kernel in data["kernels"]:
        assert set(kernel) == set(row.names())
    assert validate.check(data, "ncu_kernels") == []


def test_aggregation_lists_come_from_the_table() -> None:
    from perfreport.kernels import aggregate

    assert len(aggregate.STAT_FIELDS) == 34 and "duration_ns" in aggregate.STAT_FIELDS
    assert set(aggregate.CONSTANT_FIELDS) == {"family", "tensor_dtype", "block_limits", "block_limit_factor",
                                              "sol_ceiling_key", "family_ceiling_key", "dram_bytes_method",
                                              "achievable_key", "chip", "flops_uncounted"}
    assert set(aggregate.DICT_FIELDS) == {"flops", "tensor_ops_by_dtype", "warp_stalls_pct", "ncu_peaks",
                                          "warp_stall_cycles"}
    assert all(row.FIELDS[f].unit for f in aggregate.STAT_FIELDS)


def test_metrics_doc_lists_the_table() -> None:
    text = (TESTS.parent / "docs" / "metrics.md").read_text(encoding="utf-8")
    start = text.index("## The kernel row")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else None]
    listed = [line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")]
    assert listed == list(row.names())
    duration = row.FIELDS["duration_ns"].description
    assert f"| `duration_ns` | number or null | ns | launch | mean | yes | yes | {duration} |" in section
