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
from perfreport.lake.iceberg import TABLES
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


ATTACH = "prefill-b8-s1024-attach"


def make_campaign(dst: Path, edit: Callable[[dict[str, Any]], None] | None = None, whole: bool = False) -> Path:
    """Copy the example campaign (not its cells/) to dst, edit its config, import every capture. The lake's
    mechanics are held on the example's two cells of full-set captures (prefill, decode); `whole` keeps its third,
    the --set basic attach cell too (the example as shipped; tests/test_demo_features.py holds that cell)."""
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    config = dst / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    if not whole:
        doc["cells"] = [c for c in doc["cells"] if c["id"] != ATTACH]
    if edit is not None:
        edit(doc)
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    _keep_levers_of(dst, {c["id"] for c in doc["cells"]})
    import_campaign(dst)
    return dst


def _keep_levers_of(dst: Path, cells: set[str]) -> None:
    """levers.yaml naming only cells the edited config keeps (a lever of a dropped cell is a config error)."""
    path = dst / "levers.yaml"
    if path.is_file():
        levers = yaml.safe_load(path.read_text())
        for lever in levers["levers"]:
            lever["cells"] = [c for c in lever.get("cells", []) if c in cells]
        levers["levers"] = [lv for lv in levers["levers"] if lv["cells"]]
        if levers["levers"]:
            path.write_text(yaml.safe_dump(levers, sort_keys=False))
        else:
            path.unlink()


def unfill(doc: dict[str, Any]) -> None:
    """The example with the fields it marks `n/a: why` (and its baseline) emptied: what the gate must list."""
    for path in EMPTY_IN_EXAMPLE:
        section, name = path.split(".")
        doc["context"][section][name] = None


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
def unfilled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("unfilled") / EXAMPLE.name, unfill)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("filled") / EXAMPLE.name, fill_context)


@pytest.fixture(scope="module")
def published(unfilled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake holding the example campaign, its n/a fields emptied, published twice (non-strict)."""
    lake = tmp_path_factory.mktemp("published") / "lake"
    publish_to_lake(unfilled, lake=lake, who="tester")
    publish_to_lake(unfilled, lake=lake, who="tester")
    return lake


def cli_query(lake: Path, sql: str, fmt: str = "json") -> Any:
    result = run_cli("lake", "query", "--lake", str(lake), "--format", fmt, sql, ok=True)
    return json.loads(result.output) if fmt == "json" else result.output


def ncu_kernels(campaign: Path, cell: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((campaign / "cells" / cell / "ncu_kernels.json").read_text())
    return data


def test_gate_lists_every_empty_field_with_its_path(unfilled: Path) -> None:
    problems = context_problems(unfilled)
    assert set(problems) == {PREFILL, DECODE}
    for cell, listed in problems.items():
        context = [p for p in listed if ".context." in p]
        assert context == [f"cells[{cell}].context.{path}: missing" for path in EMPTY_IN_EXAMPLE]
    assert f"cells[{DECODE}].context.serving.max_num_seqs: missing" in problems[DECODE]
    # every --set basic row has its --set full twin in the same cell: the cheaper capture, no problem
    assert [p for p in problems[DECODE] if ".kernels[" in p] == []


def test_the_example_publishes_under_strict_as_shipped(tmp_path: Path) -> None:
    shipped = make_campaign(tmp_path / EXAMPLE.name, whole=True)
    lake = tmp_path / "lake"
    out = run_cli("publish_to_lake", "--campaign", str(shipped), "--lake", str(lake), "--strict", ok=True).output
    for cell in (PREFILL, DECODE, ATTACH):
        assert f"cell {cell}: context complete, 0 problem(s)" in out
    notes = cli_query(lake, "SELECT cell_id = 'prefill-b8-s1024-attach' attach, count(*) n, count(sol_pct) sol, "
                            "min(sol_pct_note) note FROM kernels WHERE section_set = 'basic' GROUP BY 1 ORDER BY 1")
    twins, attach = notes
    assert twins["n"] == 19 and twins["sol"] == 0
    assert twins["note"].startswith("not measured (basic set): the full-set row k")
    assert twins["note"].endswith(" of the same kernel carries its %SoL")
    # the attach cell has no full twin: its config's `not_measured:` says why, and the row keeps that why
    assert attach["n"] == 3 and attach["sol"] == 0
    assert attach["note"] == ("not measured (basic set): captured at --set basic by attach to a running process "
                              "(the cheap census of a live server)")


def test_a_basic_row_without_a_full_twin_is_a_problem(tmp_path: Path) -> None:
    def basic_only(doc: dict[str, Any]) -> None:
        doc["cells"][1]["captures"] = [c for c in doc["cells"][1]["captures"] if "full" not in c]

    camp = make_campaign(tmp_path / EXAMPLE.name, basic_only)
    problems = context_problems(camp)[DECODE]
    assert [p for p in problems if ".kernels[" in p] == [
        f"cells[{DECODE}].kernels[k{i:03d}].sol_pct: not measured (basic set)" for i in range(10)]


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


def test_strict_fails_listing_every_problem_and_writes_nothing(unfilled: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = run_cli("publish_to_lake", "--campaign", str(unfilled), "--lake", str(lake), "--strict", ok=False)
    lines = [x for x in result.output.splitlines() if x.startswith("  - ")]
    # one line per kind, naming its cells: 14 problems, 7 lines
    assert "14 problem(s) of 7 kind(s):" in result.output
    assert lines == [f"  - context.{path}: missing (cell(s) {PREFILL}, {DECODE})" for path in EMPTY_IN_EXAMPLE]
    assert "Nothing was written" in result.output and "`n/a: why` where a field does not apply" in result.output
    assert not lake.exists()
    with pytest.raises(GateError) as err:
        publish_to_lake(unfilled, lake=lake, strict=True)
    assert len(err.value.problems) == sum(len(v) for v in context_problems(unfilled).values()) == 14
    assert not lake.exists()


def test_dry_run_writes_nothing(unfilled: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = run_cli("publish-to-lake", "--campaign", str(unfilled), "--lake", str(lake), "--dry-run", ok=True)
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
    assert not any(".kernels[" in p for p in k0["problems"])  # a basic row beside its full twin: a note, no problem
    cells = cli_query(published, "SELECT cell_id, context_complete, tp, isl, max_num_seqs, context_json "
                                 "FROM cells ORDER BY cell_id")
    assert [(c["cell_id"], c["tp"], c["isl"], c["max_num_seqs"]) for c in cells] == [
        (DECODE, 1, 2048, None), (PREFILL, 1, 1024, None)]
    assert json.loads(cells[0]["context_json"])["regime"] == {"cache": "warm", "tier": "latency"}


def test_publish_twice_keeps_one_copy_of_the_rows_and_one_publication(published: Path) -> None:
    counts = cli_query(published, "SELECT (SELECT count(*) FROM kernels) k, (SELECT count(*) FROM cells) c, "
                                  "(SELECT count(*) FROM captures) s, "
                                  "(SELECT count(DISTINCT cell_id || kernel_id) FROM kernels) uk")
    assert counts == [{"k": 39, "c": 2, "s": 4, "uk": 39}]
    ledger = cli_query(published, "SELECT * FROM publications ORDER BY published_at")
    assert len(ledger) == 1  # the same content published again wrote no second publication
    assert ledger[0]["publication_id"].startswith("pub-")
    assert ledger[0]["who"] == "tester" and ledger[0]["kernel_rows"] == 39 and ledger[0]["incomplete_cells"] == 2
    assert sorted(ledger[0]["cells"]) == sorted([DECODE, PREFILL])
    ids = cli_query(published, "SELECT DISTINCT publication_id FROM kernels")
    assert ids == [{"publication_id": ledger[0]["publication_id"]}]


def lake_files(lake: Path) -> dict[str, bytes]:
    return {str(p.relative_to(lake)): p.read_bytes() for p in sorted(lake.rglob("*")) if p.is_file()}


def test_an_identical_republish_writes_nothing_and_says_which_publication_holds_the_rows(
        example: Path, tmp_path: Path) -> None:
    """Issue: publishing the same content twice wrote a second ledger row (same id, two publications)."""
    lake = tmp_path / "lake"
    first = publish_to_lake(example, lake=lake, who="ana")
    assert first.held_by == [] and first.counts["publications"] == 1
    before = lake_files(lake)
    out = run_cli("publish_to_lake", "--campaign", str(example), "--lake", str(lake), "--who", "ben", ok=True)
    assert out.output.splitlines()[0] == (
        f"campaign h200-decoder-layer: nothing changed: publication {first.publication_id} already holds these rows "
        f"(39 kernels, 2 cells, 4 captures) in lake {lake}; nothing written")
    assert "committed:" not in out.output
    assert lake_files(lake) == before  # not a byte written: no data file, manifest, metadata or catalog change
    # the content decides, not the cells named: one cell of it re-published is held by the same publication
    again = publish_to_lake(example, lake=lake, who="cy", cell_ids=[DECODE])
    assert again.held_by == [first.publication_id] and again.publication_id != first.publication_id
    assert lake_files(lake) == before
    assert lake_query(lake, "SELECT publication_id, who FROM publications").rows == [(first.publication_id, "ana")]
    # changed content is written: a new publication replaces the cell's rows
    config = example.parent / "changed" / example.name
    shutil.copytree(example, config)
    (config / "config.yaml").write_text((config / "config.yaml").read_text().replace("cache: warm", "cache: cold"))
    changed = publish_to_lake(config, lake=lake, who="dee", cell_ids=[DECODE])
    assert changed.held_by == [] and changed.counts["publications"] == 1
    assert lake_query(lake, "SELECT who FROM publications ORDER BY published_at").rows == [("ana",), ("dee",)]
    assert lake_query(lake, "SELECT cell_id, cache, publication_id FROM cells ORDER BY 1").rows == [
        (DECODE, "cold", changed.publication_id), (PREFILL, "warm", first.publication_id)]
    # and back to the first content: the cell's rows differ from the lake's again, so it is written again
    back = publish_to_lake(example, lake=lake, who="eve")
    assert back.held_by == [] and back.publication_id == first.publication_id
    assert len(lake_query(lake, "SELECT * FROM publications").rows) == 3


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
    assert basic[0]["n"] == 19 and basic[0]["ai"] == 0 and basic[0]["sol"] == 0
    assert basic[0]["note"].startswith("not measured (basic set): the full-set row k")
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
    assert ", ".join(sorted(TABLES)) in bad.output


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


def test_concurrent_publishers_of_different_cells_both_land(example: Path, filled: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    # tables exist: writers race on commits only; other rows than the example's, so that both writers write
    publish_to_lake(filled, lake=lake, cell_ids=[PREFILL])
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
