"""Lake: gate, Iceberg writer (real pyiceberg + SQLite catalog in tmp) and DuckDB query, end to end."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from perfreport.config.context import CAN_BE_INAPPLICABLE, context_value_problem
from perfreport.lake.gate import GateError, context_problems
from perfreport.lake.query import lake_query
from perfreport.lake.writer import publish_to_lake, resolve_lake
from perfreport.warehouse.campaign_import import import_campaign

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "campaigns" / "h200-decoder-layer"
DECODE = "decode-b16-kv2048"
PREFILL = "prefill-b8-s1024"
EMPTY_IN_EXAMPLE = [
    "identity.hf_path", "serving.max_num_seqs", "serving.max_num_batched_tokens",
    "serving.gpu_memory_utilization", "serving.max_model_len", "stack.engine_commit", "grounding.baseline",
]
FILLED = {
    "identity": {"hf_path": "meta-llama/Meta-Llama-3-8B"},
    "serving": {"max_num_seqs": 16, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9,
                "max_model_len": 4096},
    "stack": {"engine_commit": "torch-2.11.0+cu130"},
    "grounding": {"baseline": "none (first capture)"},
}


def make_campaign(dst: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Copy the example campaign (not its cells/) to dst, edit its config, import every capture."""
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    if edit is not None:
        config = dst / "config.yaml"
        doc = yaml.safe_load(config.read_text())
        edit(doc)
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
    import_campaign(dst)
    return dst


def fill_context(doc: dict[str, Any]) -> None:
    for section, values in FILLED.items():
        doc["context"][section].update(values)


def full_only(doc: dict[str, Any]) -> None:
    fill_context(doc)
    for cell in doc["cells"]:
        cell["captures"] = [c for c in cell["captures"] if "basic" not in c]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("lake") / EXAMPLE.name)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("filled") / EXAMPLE.name, fill_context)


@pytest.fixture(scope="module")
def published(example: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake holding the example campaign published twice (non-strict)."""
    lake = tmp_path_factory.mktemp("published") / "lake"
    publish_to_lake(example, lake=lake, who="tester")
    publish_to_lake(example, lake=lake, who="tester")
    return lake


def cli_query(lake: Path, sql: str, fmt: str = "json") -> Any:
    result = run_cli("lake", "query", "--lake", str(lake), "--format", fmt, sql, ok=True)
    return json.loads(result.output) if fmt == "json" else result.output


def ncu_kernels(campaign: Path, cell: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((campaign / "cells" / cell / "ncu_kernels.json").read_text())
    return data


def test_gate_lists_every_empty_field_with_its_path(example: Path) -> None:
    problems = context_problems(example)
    assert set(problems) == {PREFILL, DECODE}
    for cell, listed in problems.items():
        context = [p for p in listed if ".context." in p]
        assert context == [f"cells[{cell}].context.{path}: missing" for path in EMPTY_IN_EXAMPLE]
    assert f"cells[{DECODE}].context.serving.max_num_seqs: missing" in problems[DECODE]
    basic = [p for p in problems[DECODE] if ".kernels[" in p]
    assert basic == [f"cells[{DECODE}].kernels[k{i:03d}].sol_pct: not measured (basic set)" for i in range(10)]


def test_gate_placeholders_and_impossible_zero(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        fill_context(doc)
        doc["context"]["identity"]["hf_path"] = "TBD"
        doc["context"]["stack"]["engine_commit"] = "unknown"
        doc["context"]["grounding"]["baseline"] = " n/a "
        doc["cells"][1]["context"]["regime"] = {"tier": None}
        doc["context"]["identity"]["quant"] = "?"

    camp = make_campaign(tmp_path / "c", edit)
    listed = [p for p in context_problems(camp)[DECODE] if ".context." in p]
    assert listed == [
        f"cells[{DECODE}].context.identity.hf_path: placeholder 'TBD'; write the real value",
        f"cells[{DECODE}].context.identity.quant: placeholder '?'; write the real value",
        f"cells[{DECODE}].context.regime.tier: missing",
        f"cells[{DECODE}].context.stack.engine_commit: placeholder 'unknown'; write the real value",
        f"cells[{DECODE}].context.grounding.baseline: ' n/a ' (not applicable) is allowed only where a field can "
        f"be inapplicable ({', '.join(sorted(CAN_BE_INAPPLICABLE))}); grounding.baseline applies to every cell: "
        "write the real value",
    ]
    assert context_value_problem("isl", 0) == "0 is impossible here (expected > 0); write the real value"
    assert context_value_problem("trials", 0) is not None and context_value_problem("tp", 0) is not None
    assert context_value_problem("enforce_eager", False) is None
    assert context_value_problem("dataset", "") == "empty"


def test_strict_fails_listing_every_problem_and_writes_nothing(example: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = run_cli("publish_to_lake", "--campaign", str(example), "--lake", str(lake), "--strict", ok=False)
    for cell in (PREFILL, DECODE):
        for path in EMPTY_IN_EXAMPLE:
            assert f"cells[{cell}].context.{path}: missing" in result.output
    assert "Nothing was written" in result.output
    assert not lake.exists()
    with pytest.raises(GateError) as err:
        publish_to_lake(example, lake=lake, strict=True)
    assert len(err.value.problems) == sum(len(v) for v in context_problems(example).values())
    assert not lake.exists()


def test_dry_run_writes_nothing(example: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = run_cli("publish-to-lake", "--campaign", str(example), "--lake", str(lake), "--dry-run", ok=True)
    assert "would write (dry run, nothing written) 39 kernels, 2 cells, 4 captures" in result.output
    assert f"cells[{DECODE}].context.serving.max_num_seqs: missing" in result.output
    assert not lake.exists()


def test_non_strict_records_problems_and_incomplete_context(published: Path) -> None:
    rows = cli_query(published, "SELECT cell_id, kernel_id, context_complete, problems FROM kernels "
                                "ORDER BY cell_id, kernel_id")
    assert len(rows) == 39
    assert all(r["context_complete"] is False for r in rows)
    k0 = next(r for r in rows if r["cell_id"] == DECODE and r["kernel_id"] == "k000")
    assert f"cells[{DECODE}].context.serving.max_num_seqs: missing" in k0["problems"]
    assert f"cells[{DECODE}].kernels[k000].sol_pct: not measured (basic set)" in k0["problems"]
    cells = cli_query(published, "SELECT cell_id, context_complete, tp, isl, max_num_seqs, context_json "
                                 "FROM cells ORDER BY cell_id")
    assert [(c["cell_id"], c["tp"], c["isl"], c["max_num_seqs"]) for c in cells] == [
        (DECODE, 1, 2048, None), (PREFILL, 1, 1024, None)]
    assert json.loads(cells[0]["context_json"])["regime"] == {"cache": "warm", "tier": "latency"}


def test_publish_twice_replaces_rows_and_ledger_has_one_row_per_publish(published: Path) -> None:
    counts = cli_query(published, "SELECT (SELECT count(*) FROM kernels) k, (SELECT count(*) FROM cells) c, "
                                  "(SELECT count(*) FROM captures) s, "
                                  "(SELECT count(DISTINCT cell_id || kernel_id) FROM kernels) uk")
    assert counts == [{"k": 39, "c": 2, "s": 4, "uk": 39}]
    ledger = cli_query(published, "SELECT * FROM publications ORDER BY published_at")
    assert len(ledger) == 2
    assert ledger[0]["publication_id"] == ledger[1]["publication_id"]  # same content -> same id
    assert ledger[0]["publication_id"].startswith("pub-")
    assert ledger[0]["who"] == "tester" and ledger[0]["kernel_rows"] == 39 and ledger[0]["incomplete_cells"] == 2
    assert sorted(ledger[0]["cells"]) == sorted([DECODE, PREFILL])
    ids = cli_query(published, "SELECT DISTINCT publication_id FROM kernels")
    assert ids == [{"publication_id": ledger[0]["publication_id"]}]


def test_query_values_match_ncu_kernels_json(example: Path, published: Path) -> None:
    data = ncu_kernels(example, DECODE)
    sources = {s["id"]: s for s in data["sources"]}
    gemm = next(k for k in data["kernels"]
                if k["family"] == "gemm" and k["tensor_dtype"] == "bf16" and k["sol_pct"] is not None)
    row = cli_query(published, f"SELECT * FROM kernels WHERE cell_id = '{DECODE}' AND kernel_id = '{gemm['id']}'")
    assert len(row) == 1
    r = row[0]
    assert r["sol_ceiling_key"] == gemm["sol_ceiling_key"]
    assert r["sol_ceiling_key"].startswith("h200_sm90.")
    assert r["arithmetic_intensity"] == pytest.approx(gemm["arithmetic_intensity"])
    assert r["sol_pct"] == pytest.approx(gemm["sol_pct"])
    assert r["flops_total"] == pytest.approx(gemm["flops"]["total"])
    assert r["dram_bytes"] == pytest.approx(gemm["dram_bytes"])
    assert r["source_sha256"] == sources[gemm["source"]]["sha256"] and r["section_set"] == "full"
    assert (r["model"], r["quant"], r["tp"], r["concurrency"], r["sol_rigor"], r["trials"]) == (
        "Llama-3-8B decoder-layer shapes (synthetic weights)", "bf16", 1, 16, "L2", 1)
    basic = cli_query(published, "SELECT count(*) n, count(arithmetic_intensity) ai, count(sol_pct) sol, "
                                 "min(sol_pct_note) note FROM kernels WHERE section_set = 'basic'")
    assert basic == [{"n": 19, "ai": 0, "sol": 0, "note": "not measured (basic set)"}]
    captures = cli_query(published, f"SELECT source_id, sha256, ncu_version FROM captures WHERE cell_id = '{DECODE}' "
                                    "ORDER BY source_id")
    assert captures == [{"source_id": s["id"], "sha256": s["sha256"], "ncu_version": s["ncu_version"]}
                        for s in sorted(data["sources"], key=lambda s: s["id"])]


def test_query_csv_and_table_formats(published: Path) -> None:
    csv_out = cli_query(published, "SELECT cell_id, count(*) n FROM kernels GROUP BY 1 ORDER BY 1", fmt="csv")
    assert csv_out.splitlines() == ["cell_id,n", f"{DECODE},21", f"{PREFILL},18"]
    table = cli_query(published, "SELECT count(*) AS n FROM cells", fmt="table")
    assert "n" in table and "2" in table
    bad = run_cli("lake", "query", "--lake", str(published), "SELECT * FROM nope", ok=False)
    assert "captures, cells, kernels, publications" in bad.output


def test_filled_context_is_complete(filled: Path, tmp_path: Path) -> None:
    problems = context_problems(filled)
    assert all(".context." not in p for listed in problems.values() for p in listed)
    lake = tmp_path / "lake"
    publish_to_lake(filled, lake=lake)
    rows = lake_query(lake, "SELECT DISTINCT context_complete FROM kernels").rows
    assert rows == [(True,)]
    cells = lake_query(lake, "SELECT cell_id, max_num_seqs, gpu_memory_utilization, hf_path FROM cells "
                             "ORDER BY 1").rows
    assert cells == [(DECODE, 16, 0.9, "meta-llama/Meta-Llama-3-8B"), (PREFILL, 16, 0.9, "meta-llama/Meta-Llama-3-8B")]


def test_strict_passes_when_context_filled_and_every_kernel_has_sol(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / "c", full_only)
    assert context_problems(camp) == {PREFILL: [], DECODE: []}
    lake = tmp_path / "lake"
    result = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--strict", "--who", "ci",
                     ok=True)
    assert "wrote 20 kernels, 2 cells, 2 captures, 1 publications" in result.output
    assert lake_query(lake, "SELECT strict, problem_count, who FROM publications").rows == [(True, 0, "ci")]
    assert (lake / "catalog.db").is_file() and (lake / "warehouse" / "perfreport" / "kernels").is_dir()


def test_republishing_one_cell_keeps_the_others(example: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    publish_to_lake(example, lake=lake)
    publish_to_lake(example, lake=lake, cell_ids=[DECODE])
    rows = lake_query(lake, "SELECT cell_id, count(*) FROM kernels GROUP BY 1 ORDER BY 1").rows
    assert rows == [(DECODE, 21), (PREFILL, 18)]


def test_concurrent_publishers_of_different_cells_both_land(example: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    publish_to_lake(example, lake=lake, cell_ids=[PREFILL])  # tables exist: writers race on commits only
    errors: list[BaseException] = []

    def publish(cell: str) -> None:
        try:
            publish_to_lake(example, lake=lake, cell_ids=[cell])
        except BaseException as exc:  # noqa: BLE001 - re-raised by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(c,)) for c in (DECODE, PREFILL)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = lake_query(lake, "SELECT cell_id, count(*) FROM kernels GROUP BY 1 ORDER BY 1").rows
    assert rows == [(DECODE, 21), (PREFILL, 18)]
    assert lake_query(lake, "SELECT count(*) FROM publications").rows == [(3,)]


def test_lake_location_option_env_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFREPORT_LAKE", raising=False)
    assert resolve_lake(None) == tmp_path / "lake"
    monkeypatch.setenv("PERFREPORT_LAKE", str(tmp_path / "envlake"))
    assert resolve_lake(None) == tmp_path / "envlake"
    assert resolve_lake(tmp_path / "opt") == tmp_path / "opt"
    assert resolve_lake(f"file://{tmp_path}/u") == tmp_path / "u"
    with pytest.raises(Exception, match="only the embedded lake"):
        resolve_lake("thrift://metastore:9083")
