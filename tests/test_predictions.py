"""The prediction ledger (issue 31, point 4): each publish records its next-lever predictions; a later measurement of
the same work on the same chip, on another stack, settles them.

Real data: the H100 pair (campaigns/h100-decode-compile) published before (eager) then after (torch.compile): the
eager cell's predictions are settled by the compiled cell and refuted end to end (compiled is slower), though the
kernels they name were fused away. Synthetic: the example's decode cell re-published on another engine commit with
its GEMMs 30% faster, the realized kernel gain checked against the rows' own arithmetic.
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import read_download, run_cli
from test_lake import DECODE, EXAMPLE, full_only, make_campaign

from perfreport.config.campaign import load_campaign
from perfreport.frontier.candidates import rank_campaign
from perfreport.frontier.levers import load_levers, settle_lever
from perfreport.lake.predictions import as_dicts, lake_predictions
from perfreport.lake.query import lake_query
from perfreport.lake.regressions import trial_regressions
from perfreport.lake.writer import publish_to_lake
from perfreport.warehouse.campaign_import import import_campaign
from perfreport.warehouse.gather import gather

PAIR = Path(__file__).resolve().parents[1] / "campaigns" / "h100-decode-compile"
EAGER, COMPILED = "decode-b16-kv2048-eager", "decode-b16-kv2048-compiled"
LEVER = "fuse-norm-elementwise"


def _tpot(folder: str) -> float:
    doc = json.loads((PAIR / "captures" / folder / "inference_perfbench_v1.json").read_text())
    return statistics.median(r["layer_tpot_ms"] for r in doc["results"])


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    camp = tmp_path_factory.mktemp("ledger") / PAIR.name
    shutil.copytree(PAIR, camp, ignore=shutil.ignore_patterns("cells"))
    import_campaign(camp)
    lake = tmp_path_factory.mktemp("ledger-lake") / "lake"
    publish_to_lake(camp, lake=lake, cell_ids=[EAGER])  # the before, with its predictions
    publish_to_lake(camp, lake=lake, cell_ids=[COMPILED])  # the after: same work and chip, another stack.engine
    return camp, lake


def _rows(lake: Path, **kw: Any) -> list[dict[str, Any]]:
    return as_dicts(lake_predictions(lake, **kw))["predictions"]


def test_every_publish_records_its_predictions(pair: tuple[Path, Path]) -> None:
    camp, lake = pair
    data = gather(camp)
    first = {k.cell_id: k for k in reversed(rank_campaign(data)) if k.saved_pct}
    rows = lake_query(lake, "SELECT cell_id, kind, lever, kernel, predicted_pct FROM predictions "
                            "ORDER BY cell_id, kind").rows
    kinds = [(c, k) for c, k, *_ in rows]
    assert kinds == [(COMPILED, "amdahl bound"), (COMPILED, "ncu rule estimate"), (EAGER, "amdahl bound"),
                     (EAGER, "expected unlock"), (EAGER, "ncu rule estimate")]
    amdahl = {c: p for c, k, _, _, p in rows if k == "amdahl bound"}
    assert amdahl == pytest.approx({c: first[c].saved_pct for c in (EAGER, COMPILED)})
    lever = next(r for r in rows if r[1] == "expected unlock")
    levers = load_levers(load_campaign(camp))
    assert levers is not None and lever[2] == LEVER
    # fraction 0.6 of the matched kernels' time share (moves_roof: bounded by the share itself)
    shares = sum(r["time_share_pct"] for r in data.join if r["cell_id"] == EAGER
                 and r["function"] in ("vectorized_layer_norm_kernel", "vectorized_elementwise_kernel"))
    assert lever[4] == pytest.approx(0.6 * shares)


def test_the_pair_settles_the_before_and_refutes_it_end_to_end(pair: tuple[Path, Path]) -> None:
    _, lake = pair
    rows = _rows(lake)
    eager = [r for r in rows if r["cell_id"] == EAGER]
    assert {r["kind"] for r in eager} == {"amdahl bound", "ncu rule estimate", "expected unlock"}
    assert all(r["settled_by"].startswith(f"h100-decode-compile/{COMPILED} (pub-") for r in eager)
    e2e = 100 * (_tpot("eager") - _tpot("compiled")) / _tpot("eager")  # from the bundles, not the lake
    assert e2e == pytest.approx(-7.84, abs=0.01)
    for r in eager:
        assert r["e2e_metric"] == "layer_tpot_ms"
        assert r["realized_e2e_pct"] == pytest.approx(e2e)
        assert r["error_e2e_pp"] == pytest.approx(e2e - r["predicted_pct"])
        assert r["outcome"].startswith("refuted: layer_tpot_ms 1.078x [1.07") and "slower (n = 9 before, 9 after)" \
            in r["outcome"]
    lever = next(r for r in eager if r["kind"] == "expected unlock")
    assert lever["note"] == "4 of 4 named kernel(s) absent after (fused or dropped; counted as removed)"
    assert lever["realized_kernel_pct"] > lever["predicted_pct"] > 0  # the kernels went: more than predicted
    assert 0 < lever["realized_gpu_pct"] < lever["realized_kernel_pct"]  # what replaced them gave most of it back
    compiled = [r for r in rows if r["cell_id"] == COMPILED]
    assert compiled and all(r["settled_by"] is None and r["note"].startswith("open:") for r in compiled)


def test_the_error_per_kind_and_chip(pair: tuple[Path, Path]) -> None:
    _, lake = pair
    result = run_cli("lake", "predictions", "--lake", str(lake), "--format", "json", ok=True)
    summary = {r["kind"]: r for r in json.loads(result.output)["summary"]}
    assert set(summary) == {"amdahl bound", "ncu rule estimate", "expected unlock"}
    assert {r["hardware"] for r in summary.values()} == {"h100_sm90"}
    assert (summary["amdahl bound"]["predictions"], summary["amdahl bound"]["settled"]) == (2, 1)
    rows = {r["kind"]: r for r in _rows(lake) if r["cell_id"] == EAGER}
    for kind, s in summary.items():
        assert s["mean_abs_error_e2e_pp"] == pytest.approx(abs(rows[kind]["error_e2e_pp"]))
    table = run_cli("lake", "predictions", "--lake", str(lake), ok=True).output
    assert "error per prediction kind and chip" in table and "refuted" in table
    assert run_cli("lake", "predictions", "--lake", str(lake), "--campaign", "nope", "--format", "json",
                   ok=True).output.count('"kind"') == 0


def test_value_view_settles_the_lever_from_the_ledger(pair: tuple[Path, Path], tmp_path: Path) -> None:
    camp, lake = pair
    copy = tmp_path / PAIR.name
    shutil.copytree(camp, copy)
    out = run_cli("value_view", "--campaign", str(copy), "--lake", str(lake), ok=True)
    assert f"lever {LEVER}: refuted (refuted: layer_tpot_ms 1.078x" in out.stderr
    assert yaml.safe_load((copy / "levers.yaml").read_text())["levers"][0]["status"] == "open"  # shown, not written
    out = run_cli("value_view", "--campaign", str(copy), "--lake", str(lake), "--settle", ok=True)
    assert "wrote it into" in out.stderr
    text = (copy / "levers.yaml").read_text()
    lever = yaml.safe_load(text)["levers"][0]
    assert lever["status"] == "refuted" and lever["evidence"][0].startswith(f"lake {lake}: publication h100-decode")
    assert lever["why_lost"].endswith("predicted 3.12% of the cell's time, realized end to end -7.84%")
    assert text.startswith("# The grind frontier of the before cell")  # comments kept
    levers = load_levers(load_campaign(copy))
    assert levers is not None and levers.levers[0].status == "refuted"
    with pytest.raises(Exception, match="cannot be settled in place: its status is refuted, not open"):
        settle_lever(load_campaign(copy), LEVER, "won", ["x"])
    bad = run_cli("value_view", "--campaign", str(copy), "--settle")
    assert bad.exit_code != 0 and "give --lake LAKE too" in bad.output and "Traceback" not in bad.output


def test_the_history_page_draws_predicted_vs_realized(pair: tuple[Path, Path], tmp_path: Path) -> None:
    camp, lake = pair
    run_cli("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site"), "--lake", str(lake), ok=True)
    page = tmp_path / "site" / PAIR.name
    html = (page / "08-history.html").read_text()
    assert 'id="predicted-vs-realized"' in html
    table = json.loads(read_download(page / "08-history.predictions.json"))["rows"]
    assert [r["kind"] for r in table if r["settled_by"]] == ["amdahl bound", "ncu rule estimate", "expected unlock"]
    assert all(r["outcome"].startswith("refuted") for r in table if r["settled_by"])


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("ledger-ex") / EXAMPLE.name, full_only)


def test_a_faster_gemm_on_another_commit_realizes_its_kernel_gain(example: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    publish_to_lake(example, lake=lake, cell_ids=[DECODE])
    again = publish_to_lake(example, lake=lake, cell_ids=[DECODE])  # identical: held, no second publication
    assert again.held_by
    kinds = lake_query(lake, "SELECT kind, lever FROM predictions ORDER BY kind, lever").rows
    assert kinds == [("amdahl bound", None), ("expected unlock", "fp8-gemm-decode"),
                     ("expected unlock", "fp8-kv-decode-attention"),
                     ("expected unlock", "fuse-rmsnorm-residual-decode"),
                     ("expected unlock", "gemm-no-splitk-decode"), ("ncu rule estimate", None)]
    (pred,) = [r for r in _rows(lake) if r["kind"] == "amdahl bound"]
    assert pred["settled_by"] is None
    path = example / "cells" / DECODE / "ncu_kernels.json"
    doc = json.loads(path.read_text())
    before = {k["id"]: k["duration_ns"] * k["launches"] for k in doc["kernels"] if k["duration_ns"] is not None}
    for k in doc["kernels"]:
        if k["function"].startswith("nvjet") and k["duration_ns"] is not None:
            k["duration_ns"] = round(k["duration_ns"] * 0.7, 1)
    after = {k["id"]: k["duration_ns"] * k["launches"] for k in doc["kernels"] if k["duration_ns"] is not None}
    path.write_text(json.dumps(doc))
    config = example / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    cfg["context"]["stack"]["engine_commit"] = "0123abcd (the lever pulled)"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    publish_to_lake(example, lake=lake, cell_ids=[DECODE])
    rows = {r["kind"]: r for r in _rows(lake) if r["publication_id"] == pred["publication_id"]}
    gpu = 100 * (sum(before.values()) - sum(after.values())) / sum(before.values())
    assert rows["amdahl bound"]["realized_gpu_pct"] == pytest.approx(gpu)
    named = pred["kernel"]
    ids = [k["id"] for k in doc["kernels"] if k.get("label") == named or k["function"] == named]
    if named.startswith("nvjet"):
        assert rows["amdahl bound"]["realized_kernel_pct"] > 0
    else:  # the first-ranked kernel is not a GEMM: it did not change
        assert rows["amdahl bound"]["realized_kernel_pct"] == pytest.approx(
            100 * sum(before[i] - after[i] for i in ids) / sum(before.values()), abs=1e-9)
    assert rows["amdahl bound"]["outcome"] is None  # the example has no trials: realized, but no verdict
    assert "no end-to-end trials" in rows["amdahl bound"]["note"]


def _trial_tpots(folder: str) -> list[float]:
    doc = json.loads((PAIR / "captures" / folder / "inference_perfbench_v1.json").read_text())
    return [r["layer_tpot_ms"] for r in doc["results"]]


def test_the_pairs_trials_show_the_change_point_at_the_after(pair: tuple[Path, Path]) -> None:
    _, lake = pair
    result = trial_regressions(lake)
    tpot = [r for r in result.rows if r.metric == "layer_tpot_ms"]
    assert len(tpot) == 1, [r.row() for r in result.rows]
    row = tpot[0]
    after_pub = lake_query(lake, f"SELECT publication_id FROM cells WHERE cell_id = '{COMPILED}'").rows[0][0]
    before, after = _trial_tpots("eager"), _trial_tpots("compiled")
    assert (row.label, row.cell_id, row.publication_id, row.points, row.index) == (
        "regression", COMPILED, after_pub, len(before) + len(after), len(before))
    assert row.before == pytest.approx(statistics.mean(before)) and row.after == pytest.approx(statistics.mean(after))
    assert row.change_pct == pytest.approx(100 * (row.after / row.before - 1)) and 7 < row.change_pct < 8.5
    assert row.p_value is not None and row.p_value < 1e-6
    # a number only the before measures (a kernel fused away) is a series of its 9 trials, with no change point in them
    norm = [s for s in result.all_series if s.metric.startswith("vectorized_layer_norm_kernel")]
    assert norm and all(len(s.points) == len(before) and s.cell_id == EAGER and s.rows == [] for s in norm)


def test_lake_regressions_trials_from_the_cli_and_page_08(pair: tuple[Path, Path], tmp_path: Path) -> None:
    camp, lake = pair
    out = run_cli("lake", "regressions", "--lake", str(lake), "--trials", "--metric", "tpot", "--format", "json",
                  ok=True)
    rows = json.loads(out.stdout)["rows"]
    assert [(r["metric"], r["label"], r["cell_id"], r["kernel"]) for r in rows] == [
        ("layer_tpot_ms", "regression", COMPILED, "trials")]
    bad = run_cli("lake", "regressions", "--lake", str(lake), "--trials", "--kernel", "nvjet")
    assert bad.exit_code == 2 and "--kernel picks kernel series" in bad.output and "Traceback" not in bad.output
    run_cli("report_render", "--campaign", str(camp), "--out", str(tmp_path / "site"), "--lake", str(lake), ok=True)
    page = tmp_path / "site" / PAIR.name
    assert 'id="trials-001"' in (page / "08-history.html").read_text()
    table = json.loads(read_download(page / "08-history.trial_changes.json"))["rows"]
    found = [(r["label"], r["cell_id"], r["points"]) for r in table if r["metric"] == "layer_tpot_ms"]
    assert found == [("regression", COMPILED, 18)]
    assert {r["label"] for r in table} >= {"regression", "no change point"}
