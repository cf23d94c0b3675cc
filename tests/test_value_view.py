"""value_view: levers.yaml validation, value x cost ranking bounded by Amdahl, the closing lines, HANDOFF.md."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import run_cli

from perfreport.config.campaign import load_campaign
from perfreport.errors import ConfigError
from perfreport.frontier.candidates import rank_campaign
from perfreport.frontier.levers import LeverSpec, load_levers, load_schema, rank_frontier, value_lever
from perfreport.frontier.value_view import HEADING, build_view, replace_section, update_handoff, value_view
from perfreport.site.render import report_render
from perfreport.warehouse.gather import gather

DECODE, PREFILL = "decode-b16-kv2048", "prefill-b8-s1024"
EXAMPLE_ORDER = ["fp8-gemm-prefill", "fp8-gemm-decode", "fp8-kv-decode-attention", "fuse-rmsnorm-residual-decode",
                 "fuse-swiglu-prefill", "gemm-no-splitk-decode", "fa3-prefill-attention",
                 "decode-sdpa-tensor-core-path"]


def lever(**over: Any) -> dict[str, Any]:
    base = {"id": "l1", "lever": "fuse it", "kernel": "regex:^nvjet", "cost": "low", "gate": "ncu says so",
            "status": "open", "unlock": {"direction": "faster", "fraction": 0.5}}
    return {**base, **over}


def spec(**over: Any) -> LeverSpec:
    base: dict[str, Any] = {"id": "l1", "lever": "x", "kernel": "regex:^gemm", "cells": None, "direction": "faster",
                            "fraction": 0.5, "moves_roof": False, "cost": "low", "gate": "g", "status": "open"}
    return LeverSpec(**{**base, **over})


def write_levers(camp: Path, doc: Any) -> None:
    (camp / "levers.yaml").write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture()
def camp(example_campaign: Path, tmp_path: Path) -> Path:
    """A writable copy of the imported example campaign (its levers.yaml included)."""
    return Path(shutil.copytree(example_campaign, tmp_path / example_campaign.name))


# --- levers.yaml validation ----------------------------------------------------------------------------------


def test_schema_is_valid_and_the_example_levers_load() -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema())
    example = load_campaign(Path(__file__).parents[1] / "campaigns" / "h200-decoder-layer")
    levers = load_levers(example, strict=True)
    assert levers is not None and [lv.id for lv in levers.levers][0] == "fp8-gemm-prefill"
    assert levers.warnings == [] and levers.sol_wall is None


def test_every_levers_problem_with_its_path_in_one_error(camp: Path) -> None:
    write_levers(camp, {"schema_version": 2, "levers": [
        lever(unlock={"direction": "sideways", "fraction": 1.5}, cells=[DECODE, "nope"]),
        lever(id="l2", status="refuted", kernel="regex:(unclosed"),
        lever(id="l 3", cost="cheap", status="done"),
        {k: v for k, v in lever(id="l4", status="won", evidence=[]).items() if k != "gate"},
        lever(id="l1"),
    ]})
    with pytest.raises(ConfigError) as err:
        load_levers(load_campaign(camp))
    problems = err.value.problems
    assert problems[-3].startswith("levers[1].kernel: kernel-name pattern 'regex:(unclosed': not a valid regular "
                                   "expression (")
    assert problems[:-3] + problems[-2:-1] == [
        "schema_version: expected 1 (the only version this perfreport reads), got 2",
        "levers[0].unlock.direction: expected faster or slower, got 'sideways'",
        "levers[0].unlock.fraction: expected a number in (0, 1]: the share of the matched kernels' time it "
        "removes, got 1.5",
        "levers[1].why_lost: required key is missing",
        "levers[1].evidence: required key is missing",
        "levers[2].id: expected an id matching ^[A-Za-z0-9][A-Za-z0-9._-]*$, e.g. fp8-gemm-decode, got 'l 3'",
        "levers[2].cost: expected low, medium or high, got 'cheap'",
        "levers[2].status: expected open, won, refuted or banked, got 'done'",
        "levers[3].evidence: expected at least one path or link, got a list",  # in file order: gate was absent
        "levers[3].gate: required key is missing",
        f"levers[0].cells[1]: unknown cell 'nope'; cells of config.yaml: {PREFILL}, {DECODE}, "
        f"{PREFILL}-attach",
        "levers[4].id: duplicate lever id 'l1' (also levers[0].id); rename one",
    ]
    assert "docs/frontier.md" in problems[-1]
    assert str(camp / "levers.yaml") in err.value.message


def test_unknown_keys_warn_and_fail_with_strict(camp: Path) -> None:
    write_levers(camp, {"schema_version": 1, "levers": [lever(gates="typo")], "owner": "me"})
    levers = load_levers(load_campaign(camp))
    assert levers is not None
    assert levers.warnings == ["levers[0].gates: unknown key; did you mean 'gate'?, ignored",
                               "owner: unknown key; known keys here: schema_version, sol_wall, levers, ignored"]
    with pytest.raises(ConfigError) as err:
        load_levers(load_campaign(camp), strict=True)
    assert err.value.problems[0] == "levers[0].gates: unknown key; did you mean 'gate'? (not allowed with --strict)"


def test_yaml_syntax_error_names_the_line(camp: Path) -> None:
    write_levers(camp, "schema_version: 1\nlevers:\n  - id: [unclosed\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+: YAML syntax error"):
        load_levers(load_campaign(camp))


# --- value: bounded by Amdahl ------------------------------------------------------------------------------------


ROWS = [
    {"cell_id": "a", "function": "gemm_big", "time_share_pct": 60.0, "amdahl_bound_pct": 12.0, "sol_pct": 80.0},
    {"cell_id": "a", "function": "gemm_small", "time_share_pct": 10.0, "amdahl_bound_pct": 5.0, "sol_pct": 50.0},
    {"cell_id": "a", "function": "norm", "time_share_pct": 30.0, "amdahl_bound_pct": 29.0, "sol_pct": 3.0},
    {"cell_id": "b", "function": "gemm_big", "time_share_pct": None, "ncu_share_pct": 90.0, "sol_pct": 60.0},
]


def test_value_is_bounded_by_the_amdahl_bound_unless_the_lever_moves_the_roof() -> None:
    at_roof = value_lever(spec(fraction=0.5, cells=("a",)), ROWS)
    # per kernel min(0.5 x share, Amdahl bound): min(30, 12) + min(5, 5)
    assert (at_roof.cell_id, at_roof.value_pct, at_roof.bound_pct, at_roof.share_pct) == ("a", 17.0, 17.0, 70.0)
    assert at_roof.score == pytest.approx(17.0)  # cost low: ease 1
    assert at_roof.matched == ("gemm_big", "gemm_small")
    assert at_roof.basis == "bounded by their Amdahl bound (17.0%: time share x distance to roof)"
    moves = value_lever(spec(fraction=0.5, cells=("a",), moves_roof=True, cost="medium"), ROWS)
    assert (moves.value_pct, moves.bound_pct, moves.score) == (35.0, 70.0, 17.5)
    assert moves.basis == "bounded by their time share (70.0%): the lever moves the roof"


def test_value_without_a_timeline_uses_the_labelled_ncu_proxy_and_the_best_cell_wins() -> None:
    proxy = value_lever(spec(fraction=0.5, cells=("b",)), ROWS)
    assert proxy.value_pct == pytest.approx(36.0)  # min(0.5 x 90, 90 x (1 - 0.6))
    assert "ncu duration share (a proxy: no timeline imported)" in proxy.basis
    best = value_lever(spec(fraction=0.5), ROWS)
    assert best.cell_id == "b"  # worth 36% there, 17% in cell a


def test_slower_levers_count_against_and_unmatched_levers_are_unknown() -> None:
    slower = value_lever(spec(kernel="norm", direction="slower", fraction=0.1), ROWS)
    assert slower.value_pct == pytest.approx(-3.0)
    none = value_lever(spec(kernel="regex:^attention"), ROWS)
    assert (none.value_pct, none.score, none.cell_id) == (None, None, None)
    assert none.basis == ("unknown: no kernel of the warehouse matches 'regex:^attention'; capture it (import_ncu) "
                          "or fix the pattern")


def test_ranking_order_open_by_score_then_settled() -> None:
    specs = [spec(id="cheap-norm", kernel="norm", fraction=0.5, moves_roof=True),   # 15 x 1.0
             spec(id="big-gemm", fraction=0.5, moves_roof=True, cost="high"),        # 45 x 0.25 (cell b)
             spec(id="unknown", kernel="regex:^attention"),
             spec(id="won-one", kernel="norm", status="won", evidence=("x",)),
             spec(id="lost", kernel="norm", status="refuted", evidence=("x",), why_lost="y"),
             spec(id="medium", kernel="gemm_small", cost="medium", cells=("a",))]   # 5 x 0.5
    ranked = rank_frontier(specs, ROWS)
    assert [v.spec.id for v in ranked] == ["cheap-norm", "big-gemm", "medium", "unknown", "won-one", "lost"]
    assert [v.score for v in ranked[:3]] == [pytest.approx(15.0), pytest.approx(11.25), pytest.approx(2.5)]


def _top(campaign: Path) -> Any:
    return next(k for k in rank_campaign(gather(campaign)) if k.saved_pct)


def test_example_campaign_ranking_uses_the_warehouse(example_campaign: Path) -> None:
    view = value_view(example_campaign)
    assert [v.spec.id for v in view.levers] == EXAMPLE_ORDER
    join = gather(example_campaign).join
    nvjet = [r for r in join if r["cell_id"] == PREFILL and r["function"].startswith("nvjet_sm90_")]
    share = sum(r["time_share_pct"] for r in nvjet)
    top = view.levers[0]
    assert (top.cell_id, top.share_pct) == (PREFILL, pytest.approx(share))
    assert top.value_pct == pytest.approx(0.35 * share) and top.score == pytest.approx(0.35 * share * 0.5)
    splitk = next(v for v in view.levers if v.spec.id == "gemm-no-splitk-decode")
    amdahl = sum(r["amdahl_bound_pct"] for r in join if r["cell_id"] == DECODE and "splitK" in r["function"])
    assert splitk.bound_pct == pytest.approx(amdahl) and splitk.value_pct <= amdahl
    # the next lever is the first of the one ranking (measured), with levers.yaml's lever for it named an estimate
    top = _top(example_campaign)
    assert view.final_lines()[0].startswith(f"next lever: {top.headline()}")
    match = next(v for v in view.open if v.spec.id == "fuse-rmsnorm-residual-decode")
    assert f"levers.yaml proposes {match.spec.id}" in view.next_lever and "(an estimate: ~" in view.next_lever
    assert view.gate == match.spec.gate and not view.exhausted


# --- output: always ends with the next lever; "exhausted" needs a documented wall ----------------------------


def test_cli_output_ends_with_next_lever_unlock_and_gate(example_campaign: Path) -> None:
    out = run_cli("value_view", "--campaign", str(example_campaign), ok=True).output
    last = out.rstrip("\n").splitlines()[-3:]
    assert [line.split(":")[0] for line in last] == ["next lever", "expected unlock", "gate"]
    top = _top(example_campaign)
    assert last[0].startswith(f"next lever: {top.headline()}")
    assert last[1].startswith(f"expected unlock: up to {top.saved_pct:.1f}% of {top.cell_id}'s timeline")
    assert "exhausted" not in out
    assert "kernels by time saved, measured before estimated (the one ranking; top 10)" in out


def test_empty_frontier_without_a_wall_is_not_exhausted(camp: Path) -> None:
    write_levers(camp, {"schema_version": 1, "levers": [
        lever(status="refuted", evidence=["cells/x.json"], why_lost="already at the roof")]})
    out = run_cli("value_view", "--campaign", str(camp), ok=True).output
    assert "exhausted" not in out.lower()
    last = out.rstrip("\n").splitlines()[-3:]
    top = _top(camp)
    assert last[0] == f"next lever: {top.headline()}"  # no open lever matches it: none named
    assert last[1].startswith(f"expected unlock: up to {top.saved_pct:.1f}% of {top.cell_id}'s timeline")
    assert last[2] == f"gate: {top.action}; write it into levers.yaml with the measurement that proves or refutes it"


def test_exhausted_only_with_an_empty_frontier_and_a_documented_wall(camp: Path) -> None:
    wall = {"statement": "every kernel over 2% of the step is within 10% of its roof",
            "evidence": ["captures/prefill/layer_full.ncu-rep.gz"]}
    write_levers(camp, {"schema_version": 1, "sol_wall": wall, "levers": [lever()]})
    code, out = run_cli("value_view", "--campaign", str(camp))
    assert code == 0 and "exhausted" not in out  # a wall with an open lever: the lever comes first
    write_levers(camp, {"schema_version": 1, "sol_wall": wall, "levers": [
        lever(status="banked", evidence=["bench/fused.md"])]})
    code, out = run_cli("value_view", "--campaign", str(camp))
    assert code == 0 and "exhausted" not in out  # a wall, but a measured kernel still has time to give back
    # every kernel at its floor: only then does the documented wall end the search
    data = gather(camp)
    at_floor = replace(data, join=[{**r, "amdahl_bound_pct": 0.0 if r.get("amdahl_bound_pct") is not None else None,
                                    "ncu_share_pct": None} for r in data.join])
    view = build_view(load_campaign(camp), at_floor, load_levers(load_campaign(camp)))
    last = view.final_lines()
    assert last[0] == ("next lever: none: the frontier is exhausted at the documented speed-of-light wall: every "
                       "kernel over 2% of the step is within 10% of its roof")
    assert last[1].startswith("expected unlock: none beyond the speed-of-light wall")
    assert last[2].startswith("gate: re-open a lever in levers.yaml")
    assert view.exhausted and view.open == [] and [v.spec.id for v in view.closed] == ["l1"]


def test_missing_levers_file_warns_and_falls_back_to_the_warehouse(camp: Path) -> None:
    (camp / "levers.yaml").unlink()
    data = gather(camp)
    view = build_view(load_campaign(camp), data, None)
    assert view.warnings == [f"{camp / 'levers.yaml'}: not found; write it (docs/frontier.md) to track levers, "
                             f"their gates and status"]
    assert view.next_lever == _top(camp).headline() and not view.exhausted
    empty = build_view(load_campaign(camp), replace(data, join=[]), None)
    assert empty.next_lever.startswith("none known:") and "exhausted" not in " ".join(empty.final_lines())


def test_json_output_matches_its_schema(example_campaign: Path) -> None:
    out = run_cli("value-view", "--campaign", str(example_campaign), "--json", ok=True).output
    doc = json.loads(out)
    schemas = Path(__file__).parents[1] / "perfreport" / "config" / "schemas"
    schema = json.loads((schemas / "value_view.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == 1 and [r["id"] for r in doc["levers"]] == EXAMPLE_ORDER
    assert [r["rank"] for r in doc["levers"]] == list(range(1, 9))
    top = _top(example_campaign)
    assert doc["next_lever"].startswith(top.headline()) and doc["exhausted"] is False
    assert (doc["next_kernel"]["cell_id"], doc["next_kernel"]["label"]) == (top.cell_id, top.label)
    assert doc["kernels"][0] == doc["next_kernel"] and doc["next_kernel"]["saved_pct"] == pytest.approx(top.saved_pct)


# --- HANDOFF.md ---------------------------------------------------------------------------------------------


HANDOFF = """# Handoff: h200 decode

## Status
Captured both cells.

```text
## Frontier (inside a code fence: not a heading)
```

## Frontier
old table
### old sub-heading, part of the section
- stale lever

## Next steps
- keep me exactly, trailing spaces too\x20\x20
"""


def test_handoff_replaces_only_the_frontier_section(example_campaign: Path, tmp_path: Path) -> None:
    path = tmp_path / "HANDOFF.md"
    path.write_bytes(HANDOFF.encode())
    run_cli("value_view", "--campaign", str(example_campaign), "--handoff", str(path), ok=True)
    text = path.read_bytes().decode()
    head, rest = HANDOFF.split("## Frontier\nold table")
    tail = rest[rest.index("## Next steps"):]
    assert text.startswith(head) and text.endswith("\n\n" + tail)
    section = text[len(head):-len(tail)]
    assert section.startswith(HEADING + "\n") and "stale lever" not in section and "old sub-heading" not in section
    assert "| 1 | fp8-gemm-prefill: FP8 (e4m3) weights" in section
    assert "- decode-sdpa-tensor-core-path (refuted): the kernel is HBM-bound at 88.5%" in section
    assert "(fp8-kv-decode-attention); evidence: cells/decode-b16-kv2048/ncu_kernels.json, captures/" in section
    assert [line[:13] for line in section.rstrip("\n").splitlines()[-3:]] == [
        "- next lever:", "- expected un", "- gate: decod"]
    assert "`regex:^vectorized_(layer_norm\\|elementwise)_kernel$`" in section  # a pipe never splits a cell
    update_handoff(path, value_view(example_campaign))
    assert path.read_bytes().decode() == text  # idempotent


def test_handoff_is_created_or_appended_and_keeps_crlf(example_campaign: Path, tmp_path: Path) -> None:
    view = value_view(example_campaign)
    created = update_handoff(tmp_path / "new" / "HANDOFF.md", view)
    assert created.read_text().startswith(HEADING + "\n\nWritten by `perftunereport value_view --handoff`")
    crlf = "# Handoff\r\n\r\n## Status\r\nok\r\n"
    assert replace_section(crlf, "## Frontier\n\nbody\n") == crlf + "\r\n## Frontier\r\n\r\nbody\r\n"
    assert replace_section("# H\nno newline", "## Frontier\n") == "# H\nno newline\n\n## Frontier\n"
    assert replace_section("", "## Frontier\n") == "## Frontier\n"


# --- page 7 ----------------------------------------------------------------------------------------------------


def test_page_7_shows_levers_rubric_label_and_problems(camp: Path, tmp_path: Path) -> None:
    config = camp / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["krhpa"]["candidate"]["H"] = "high"
    doc["krhpa"]["speedup"] = 1.3
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    html = (report_render(camp, tmp_path / "site").campaign_site / "07-frontier.html").read_text()
    assert 'id="krhpa-label">DRAFT<' in html
    assert "krhpa.candidate.H: expected integer 1..4, got &#39;high&#39;" in html
    assert "&#39;high&#39; (not an integer 1..4)" in html  # the rubric shows what is wrong in place
    assert "4 · vendor production library (cuBLAS/cuBLASLt, cuDNN)" in html
    assert html.index("fp8-gemm-prefill") < html.index("fp8-gemm-decode") < html.index("fa3-prefill-attention")
    assert f"next lever: {_top(camp).label} in {_top(camp).cell_id}" in html

    doc["krhpa"]["candidate"]["H"] = 4
    doc["krhpa"]["candidate"]["P"] = 4
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    (camp / "levers.yaml").unlink()
    html = (report_render(camp, tmp_path / "site2").campaign_site / "07-frontier.html").read_text()
    # fair and a typed speedup, but no trials to test it: a DRAFT saying what a VERDICT needs
    assert 'id="krhpa-label">DRAFT<' in html and "the candidate beats the baseline: 1.30x" in html
    assert "no trials test the speedup" in html
    assert "No data yet." in html and "write levers.yaml next to config.yaml" in html
