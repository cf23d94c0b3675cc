"""K/R/H/P/A: block defects named by path, every DRAFT/VERDICT branch, the gate, and the lake's krhpa_label."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, write_config
from test_lake import DECODE, PREFILL, cli_query, full_only, make_campaign

from perfreport.config.campaign import load_campaign
from perfreport.frontier.krhpa import (
    block_problems,
    krhpa_label,
    krhpa_problems,
    krhpa_verdict,
    level_text,
    rubric_rows,
)
from perfreport.lake.gate import GateError
from perfreport.lake.writer import publish_to_lake
from perfreport.warehouse.stats import compare

CUBLAS = {"name": "cuBLASLt bf16 nvjet GEMM (torch.matmul)", "K": 4, "R": 3, "H": 4, "P": 4, "A": 4}
CANDIDATE = {"name": "CUTLASS FP8 GEMM, persistent, warp-specialised", "K": 3, "R": 3, "H": 4, "P": 3, "A": 2}
TRITON = {"name": "Triton matmul tutorial kernel (default configs)", "K": 2, "R": 1, "H": 2, "P": 2, "A": 3}
# Trials of a time (ms): the candidate (after) ~1.3x faster than the baseline (before), and a pair with no difference.
BASE_MS = [1.30, 1.31, 1.29, 1.30, 1.32, 1.30]
FASTER_T = compare(BASE_MS, [1.00, 1.01, 0.99, 1.00, 1.02, 1.00])
SLOWER_T = compare(BASE_MS, [1.45, 1.44, 1.46, 1.45, 1.47, 1.45])
NOISE_T = compare(BASE_MS, [1.31, 1.29, 1.30, 1.32, 1.30, 1.31])


def block(candidate: dict[str, Any] | None = None, baseline: dict[str, Any] | None = None,
          **rest: Any) -> dict[str, Any]:
    return {"candidate": dict(candidate or CANDIDATE), "baseline": dict(baseline or CUBLAS), **rest}


# --- block_problems: every defect with its path --------------------------------------------------------------


def test_a_well_formed_block_has_no_problem() -> None:
    assert block_problems(block(speedup=1.25, evidence=["captures/fp8.ncu-rep.gz"])) == []
    assert block_problems(block(evidence="bench/fp8.md")) == []


def test_each_defect_is_named_with_its_path() -> None:
    bad = block(
        {**CANDIDATE, "H": "high", "K": 2.0, "R": 0, "extra": 1},
        {**CUBLAS, "P": True, "R": 5, "name": "   "},
        speedup="fast", owner="perf-team", evidence=[3],
    )
    del bad["baseline"]["A"]
    assert block_problems(bad) == [
        "krhpa.candidate.K: expected integer 1..4, got 2.0",
        "krhpa.candidate.R: expected integer 1..4, got 0",
        "krhpa.candidate.H: expected integer 1..4, got 'high'",
        "krhpa.candidate.extra: unknown key; known keys: name, K, R, H, P, A",
        "krhpa.baseline.name: expected a non-empty string, got '   '; name the production-representative kernel "
        "or library, e.g. 'cuBLASLt bf16 nvjet GEMM (torch.matmul)'",
        "krhpa.baseline.R: expected integer 1..4, got 5",
        "krhpa.baseline.P: expected integer 1..4, got True",
        "krhpa.baseline.A: missing; expected integer 1..4 (availability / adoption)",
        "krhpa.speedup: expected a number > 0 (baseline time / candidate time on the same shapes), got 'fast'",
        "krhpa.evidence: expected a path or text, or a list of them, got a list",
        "krhpa.owner: unknown key; known keys: candidate, baseline, speedup, evidence, cells",
    ]


def test_missing_sides_names_and_bad_speedups_are_each_named_with_the_fix() -> None:
    assert block_problems({"speedup": 1.1}) == [
        "krhpa.candidate: missing; add `candidate: {name: ..., K: 1..4, R: 1..4, H: 1..4, P: 1..4, A: 1..4}`",
        "krhpa.baseline: missing; add `baseline: {name: ..., K: 1..4, R: 1..4, H: 1..4, P: 1..4, A: 1..4}`",
    ]
    no_name = block(baseline={k: v for k, v in CUBLAS.items() if k != "name"})
    assert block_problems(no_name) == [
        "krhpa.baseline.name: missing; name the production-representative kernel or library, e.g. "
        "'cuBLASLt bf16 nvjet GEMM (torch.matmul)'"]
    assert block_problems({"candidate": ["K", 4], "baseline": CUBLAS}) == [
        "krhpa.candidate: expected a mapping with keys name, K, R, H, P, A, got a list"]
    assert block_problems("fp8") == [
        "krhpa: expected a mapping with keys candidate, baseline, speedup, evidence, cells, got 'fp8'"]
    for speedup in (0, -1.5, float("nan"), True):
        assert [p.split(",")[0] for p in block_problems(block(speedup=speedup))] == [
            "krhpa.speedup: expected a number > 0 (baseline time / candidate time on the same shapes)"]


# --- krhpa_verdict: each branch ------------------------------------------------------------------------------


def test_no_block_has_no_label() -> None:
    assert krhpa_verdict(None) == (None, ["no krhpa block: no candidate-vs-baseline claim to label"])


def test_malformed_block_is_a_draft_listing_its_problems() -> None:
    label, reasons = krhpa_verdict(block({**CANDIDATE, "H": "high"}, speedup=2.0))
    assert label == "DRAFT"
    assert reasons == ["the krhpa block has 1 problem(s): krhpa.candidate.H: expected integer 1..4, got 'high'"]


def test_fair_baseline_and_a_significant_speedup_is_a_verdict() -> None:
    label, reasons = krhpa_verdict(block(speedup=1.3), FASTER_T)
    assert label == "VERDICT"
    assert reasons == ["fair baseline: 'cuBLASLt bf16 nvjet GEMM (torch.matmul)' at H=4 >= 4, R=3 >= 3, P=4",
                       "the candidate beats the baseline: 1.30x", f"trials (candidate / baseline): {FASTER_T.text()}"]


def test_a_verdict_needs_significance() -> None:
    # a fair typed speedup without trials, with trials showing no difference, or contradicting it, is a DRAFT
    label, reasons = krhpa_verdict(block(speedup=1.3))
    assert label == "DRAFT" and reasons[-1].startswith("no trials test the speedup: name the measured cells")
    label, reasons = krhpa_verdict(block(speedup=1.3), NOISE_T)
    assert NOISE_T.verdict == "no significant change"
    assert label == "DRAFT" and reasons[-1].endswith("no VERDICT without a significant difference")
    label, reasons = krhpa_verdict(block(speedup=1.3), SLOWER_T)
    assert label == "DRAFT" and reasons[-1].endswith("contradicts the speedup 1.30x: re-measure or correct `speedup:`")
    few = compare(BASE_MS[:3], [1.0, 1.01, 0.99])
    label, reasons = krhpa_verdict(block(speedup=1.3), few)
    assert label == "DRAFT" and "insufficient trials (n = 3 before, 3 after)" in reasons[-1]
    # without a typed speedup the trials measure it: baseline median / candidate median
    label, reasons = krhpa_verdict(block(), FASTER_T)
    assert label == "VERDICT" and reasons[1] == f"the candidate beats the baseline: {1 / FASTER_T.ratio:.2f}x"
    label, reasons = krhpa_verdict(block(), SLOWER_T)
    assert label == "VERDICT" and reasons[1] == f"the candidate does not beat the baseline: {1 / SLOWER_T.ratio:.2f}x"


def test_speedup_over_a_weaker_hardware_path_is_a_draft_never_a_verdict() -> None:
    # a tensor-core candidate against generic Triton while production runs a vendor tensor-core library
    label, reasons = krhpa_verdict(block(baseline={**TRITON, "P": 4, "R": 3}, speedup=1.8), FASTER_T)
    assert label == "DRAFT"
    assert reasons[0].startswith("baseline H=2 < candidate H=4: the baseline takes a weaker hardware path")
    assert reasons[-2:] == ["the candidate beats the baseline: 1.80x",
                            f"trials (candidate / baseline): {FASTER_T.text()}"]


def test_speedup_over_a_less_rigorous_baseline_is_a_draft() -> None:
    label, reasons = krhpa_verdict(block(baseline={**CUBLAS, "R": 1}, speedup=1.2), FASTER_T)
    assert label == "DRAFT"
    assert reasons == ["baseline R=1 < candidate R=3: the baseline was tuned or measured less rigorously than "
                       "the candidate", "the candidate beats the baseline: 1.20x",
                       f"trials (candidate / baseline): {FASTER_T.text()}"]


def test_every_unfair_rule_is_listed() -> None:
    label, reasons = krhpa_verdict(block(baseline=TRITON, speedup=2.5), FASTER_T)
    assert label == "DRAFT"
    assert [r.split(":")[0] for r in reasons] == [
        "baseline H=2 < candidate H=4", "baseline R=1 < candidate R=3", "baseline P=2 < 4",
        "the candidate beats the baseline", "trials (candidate / baseline)"]
    assert "'Triton matmul tutorial kernel (default configs)' is not what production runs" in reasons[2]


def test_non_production_baseline_is_a_draft() -> None:
    label, reasons = krhpa_verdict(block(baseline={**CUBLAS, "P": 3}, speedup=1.4))
    assert label == "DRAFT"
    assert reasons[0].startswith("baseline P=3 < 4: 'cuBLASLt bf16 nvjet GEMM (torch.matmul)' is not what "
                                 "production runs")


def test_no_measured_speedup_is_a_draft() -> None:
    label, reasons = krhpa_verdict(block())
    assert (label, reasons[0]) == (
        "DRAFT", "no measured speedup: add `speedup:` (baseline time / candidate time on the same shapes)")


def test_candidate_at_lower_h_that_does_not_beat_production_is_shown_as_such() -> None:
    label, reasons = krhpa_verdict(block({**CANDIDATE, "H": 3}, speedup=0.82), SLOWER_T)
    assert label == "VERDICT"
    assert reasons[-2] == ("the candidate, at lower H (3 < 4) than the production baseline, does not beat it: "
                           "0.82x")


def test_equal_time_does_not_beat_the_baseline() -> None:
    assert krhpa_verdict(block(speedup=1.0))[1][-2] == "the candidate does not beat the baseline: 1.00x"
    assert krhpa_verdict(block(speedup=0.9), SLOWER_T) == ("VERDICT", [
        "fair baseline: 'cuBLASLt bf16 nvjet GEMM (torch.matmul)' at H=4 >= 4, R=3 >= 3, P=4",
        "the candidate does not beat the baseline: 0.90x", f"trials (candidate / baseline): {SLOWER_T.text()}"])


def test_rubric_rows_show_integers_with_names() -> None:
    rows = rubric_rows(block({**CANDIDATE, "H": "high"}, speedup=1.3))
    assert [r["letter"] for r in rows] == ["name", "K", "R", "H", "P", "A", "speedup"]
    h = rows[3]
    assert h["meaning"] == "hardware path"
    assert h["candidate"] == "'high' (not an integer 1..4)"
    assert h["baseline"] == "4 · the architecture's full path (sm90 wgmma + TMA, warp-specialised)"
    assert rows[-1]["candidate"] == "1.30x"
    assert level_text(None, "K") == "— (missing)" and level_text(1, "P") == "1 · microbenchmark or toy shapes"
    assert rubric_rows(None) == []


# --- the gate --------------------------------------------------------------------------------------------------


def _campaign(tmp_path: Path, sol_rigor: str, krhpa: Any) -> Path:
    block = {} if krhpa is None else {"krhpa": krhpa}
    return write_config(tmp_path / "c", campaign="c", sol_rigor=sol_rigor, cells=[{"id": "c1"}], **block)


def test_l4_needs_a_krhpa_block_lower_rigor_does_not(tmp_path: Path) -> None:
    (problem,) = krhpa_problems(load_campaign(_campaign(tmp_path, "L4", None)))
    assert problem.startswith("krhpa: missing; sol_rigor L4 renders an L4 ncu roofline")
    assert krhpa_problems(load_campaign(_campaign(tmp_path, "L3", None))) == []
    assert krhpa_label(load_campaign(_campaign(tmp_path, "L3", None)))[0] is None


def test_gate_checks_a_given_block_at_any_rigor_and_placeholder_names(tmp_path: Path) -> None:
    camp = load_campaign(_campaign(tmp_path, "L2", block(baseline={**CUBLAS, "name": "TBD"}, speedup=1.3)))
    assert krhpa_problems(camp) == ["krhpa.baseline.name: placeholder 'TBD'; write the real value"]
    assert krhpa_verdict(camp.krhpa, FASTER_T)[0] == "VERDICT"  # the pure rubric cannot see a placeholder ...
    label, reasons = krhpa_label(camp)  # ... the gate can: never a VERDICT with a gate problem
    assert label == "DRAFT" and "krhpa.baseline.name: placeholder 'TBD'" in reasons[0]


# --- the lake ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example campaign with its context filled and only --set full captures: the gate's only problems are
    the ones a test puts in krhpa."""
    return make_campaign(tmp_path_factory.mktemp("krhpa") / "h200-decoder-layer", full_only)


def with_krhpa(src: Path, dst: Path, krhpa: Any, sol_rigor: str | None = None) -> Path:
    shutil.copytree(src, dst)
    config = dst / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    if krhpa is None:
        doc.pop("krhpa", None)
    else:
        doc["krhpa"] = copy.deepcopy(krhpa)
    if sol_rigor:
        doc["sol_rigor"] = sol_rigor
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dst


def test_lake_records_verdict_and_draft(clean: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    fair = with_krhpa(clean, tmp_path / "fair" / clean.name, block(speedup=1.3))
    publish_to_lake(fair, lake=lake, strict=True)  # a fair typed speedup, no trials: a DRAFT
    cells = cli_query(lake, "SELECT cell_id, krhpa_label, krhpa_reasons, problems FROM cells ORDER BY cell_id")
    assert [(c["cell_id"], c["krhpa_label"]) for c in cells] == [(DECODE, "DRAFT"), (PREFILL, "DRAFT")]
    assert cells[0]["krhpa_reasons"] == krhpa_verdict(block(speedup=1.3))[1]
    assert cells[0]["krhpa_reasons"][-1].startswith("no trials test the speedup")
    assert cells[0]["problems"] == []
    kernels = cli_query(lake, "SELECT DISTINCT krhpa_label FROM kernels")
    assert kernels == [{"krhpa_label": "DRAFT"}]

    weak = with_krhpa(clean, tmp_path / "weak" / clean.name, block(baseline={**TRITON, "P": 4, "R": 3}, speedup=1.8))
    publish_to_lake(weak, lake=lake, strict=True)  # a weaker baseline is no gate problem: it is a DRAFT
    cells = cli_query(lake, "SELECT DISTINCT krhpa_label, krhpa_reasons FROM cells")
    assert len(cells) == 1 and cells[0]["krhpa_label"] == "DRAFT"
    assert cells[0]["krhpa_reasons"][0].startswith("baseline H=2 < candidate H=4")
    assert cli_query(lake, "SELECT DISTINCT krhpa_label FROM kernels") == [{"krhpa_label": "DRAFT"}]


def test_non_strict_publish_records_krhpa_problems(clean: Path, tmp_path: Path) -> None:
    bad = with_krhpa(clean, tmp_path / "bad" / clean.name, block({**CANDIDATE, "H": "high"}, speedup=1.3))
    lake = tmp_path / "lake"
    result = run_cli("publish_to_lake", "--campaign", str(bad), "--lake", str(lake), ok=True)
    assert "krhpa.candidate.H: expected integer 1..4, got 'high'" in result.output
    cells = cli_query(lake, "SELECT cell_id, krhpa_label, problems, context_complete FROM cells ORDER BY 1")
    for c in cells:
        assert c["problems"] == ["krhpa.candidate.H: expected integer 1..4, got 'high'"]
        assert c["krhpa_label"] == "DRAFT" and c["context_complete"] is True
    ledger = cli_query(lake, "SELECT problem_count, strict FROM publications")
    assert ledger == [{"problem_count": 2, "strict": False}]


def _bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_refused_strict_publish_leaves_the_lake_byte_for_byte(clean: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    publish_to_lake(clean, lake=lake, strict=True)
    before = _bytes(lake)
    bad = with_krhpa(clean, tmp_path / "bad" / clean.name,
                     block({**CANDIDATE, "H": "high"}, {**CUBLAS, "name": ""}, speedup="fast"))
    result = run_cli("publish_to_lake", "--campaign", str(bad), "--lake", str(lake), "--strict", ok=False)
    for problem in ("krhpa.candidate.H: expected integer 1..4, got 'high'",
                    "krhpa.baseline.name: expected a non-empty string, got ''",
                    "krhpa.speedup: expected a number > 0"):
        assert result.output.count(problem) == 1, problem  # carried by both cells, listed once
    assert "3 problem(s)" in result.output and "Nothing was written" in result.output
    assert _bytes(lake) == before

    missing = with_krhpa(clean, tmp_path / "l4" / clean.name, None, sol_rigor="L4")
    with pytest.raises(GateError) as err:
        publish_to_lake(missing, lake=lake, strict=True)
    assert [p.split(";")[0] for p in err.value.problems] == ["krhpa: missing"]
    assert _bytes(lake) == before


PAIR = Path(__file__).resolve().parents[1] / "campaigns" / "h100-decode-compile"
EAGER, COMPILED = "decode-b16-kv2048-eager", "decode-b16-kv2048-compiled"
INDUCTOR = {"name": "torch.compile (inductor) decode layer", "K": 2, "R": 2, "H": 3, "P": 4, "A": 3}
EAGER_SIDE = {"name": "PyTorch eager decode layer", "K": 4, "R": 2, "H": 3, "P": 4, "A": 4}


def test_verdict_from_the_real_trials_of_two_cells(tmp_path: Path) -> None:
    """The H100 pair's 9 trials per cell (campaigns/h100-decode-compile): a fair rubric naming the cells is a VERDICT
    because the trials differ significantly; the speedup is measured (compiled is slower); a claimed 1.2x speedup
    contradicts them and is a DRAFT."""
    cells = {"candidate": COMPILED, "baseline": EAGER, "metric": "layer_tpot_ms"}
    camp = with_krhpa(PAIR, tmp_path / "pair" / PAIR.name, {"candidate": INDUCTOR, "baseline": EAGER_SIDE,
                                                             "cells": cells})
    run_cli("demo", "--campaign", str(camp), "--out", str(tmp_path / "site"))
    label, reasons = krhpa_label(load_campaign(camp))
    assert label == "VERDICT", reasons
    assert reasons[1] == "the candidate does not beat the baseline: 0.93x"  # 0.4178 / 0.4495 ms, median per layer
    assert reasons[2].startswith("trials (candidate / baseline): 1.078x [1.07") and "slower (n = 9 before, 9 after)" \
        in reasons[2]
    publish_to_lake(camp, lake=tmp_path / "lake", strict=True)
    rows = cli_query(tmp_path / "lake", "SELECT DISTINCT krhpa_label FROM cells")
    assert rows == [{"krhpa_label": "VERDICT"}]

    claimed = with_krhpa(camp, tmp_path / "claimed" / PAIR.name, {"candidate": INDUCTOR, "baseline": EAGER_SIDE,
                                                                  "cells": cells, "speedup": 1.2})
    label, reasons = krhpa_label(load_campaign(claimed))
    assert label == "DRAFT" and reasons[-1].endswith("contradicts the speedup 1.20x: re-measure or correct `speedup:`")
    unknown = with_krhpa(camp, tmp_path / "unknown" / PAIR.name, {"candidate": INDUCTOR, "baseline": EAGER_SIDE,
                                                                  "cells": {**cells, "baseline": "nope"}})
    assert krhpa_problems(load_campaign(unknown)) == [
        f"krhpa.cells.baseline: 'nope' is no cell of config.yaml; known cells: {EAGER}, {COMPILED}"]
