"""The not-applicable marker (issue 21 item 5): a context field that does not apply to the cell (no serving engine ran)
is set to `n/a` (best `n/a: why`); the strict gate accepts it where a field can be inapplicable, numeric columns store
null, the site shows it; a placeholder stays refused, and so does n/a where the field always applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_lake import DECODE, PREFILL, full_only, make_campaign

from perfreport.config.campaign import load_campaign
from perfreport.config.context import CAN_BE_INAPPLICABLE, context_value_problem, is_not_applicable
from perfreport.errors import ConfigError
from perfreport.lake.gate import context_problems
from perfreport.lake.query import lake_query
from perfreport.warehouse.db import query

NO_ENGINE = "n/a: a PyTorch eager layer, no serving engine"


def _not_applicable(doc: dict[str, Any]) -> None:
    """The example campaign, honest: every serving field and the engine commit do not apply; full-set captures."""
    full_only(doc)
    doc["context"]["serving"].update({k: NO_ENGINE for k in ("max_num_seqs", "max_num_batched_tokens",
                                                             "gpu_memory_utilization", "max_model_len")})
    doc["context"]["stack"]["engine_commit"] = "N/A"
    doc["context"]["identity"]["hf_path"] = "n/a: synthetic weights of Llama-3-8B's shapes"


def test_the_marker_and_where_it_may_stand() -> None:
    assert is_not_applicable("n/a") and is_not_applicable(" N/A: no engine ") and not is_not_applicable("na")
    assert not is_not_applicable("n/a-ish") and not is_not_applicable(None) and not is_not_applicable(16)
    assert {"serving.max_num_seqs", "workload.concurrency", "stack.engine_commit"} <= CAN_BE_INAPPLICABLE
    assert not {"identity.model", "identity.hardware", "parallelism.tp", "grounding.trials"} & CAN_BE_INAPPLICABLE
    assert context_value_problem("max_num_seqs", NO_ENGINE) is None
    assert context_value_problem("max_num_seqs", "TBD") == "placeholder 'TBD'; write the real value"
    why = context_value_problem("model", "n/a")
    assert why is not None and "identity.model applies to every cell" in why


def test_strict_publish_accepts_n_a_and_stores_null_in_numeric_columns(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / "c", _not_applicable)
    assert context_problems(camp) == {PREFILL: [], DECODE: []}
    lake = tmp_path / "lake"
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--strict", ok=True)
    rows = lake_query(lake, "SELECT cell_id, max_num_seqs, gpu_memory_utilization, engine_commit, hf_path, "
                            "context_complete FROM cells ORDER BY 1").rows
    assert rows == [(c, None, None, "N/A", "n/a: synthetic weights of Llama-3-8B's shapes", True)
                    for c in (DECODE, PREFILL)]
    # the warehouse too: text stays text, a typed column holds null, never the string
    cells = query(camp, "SELECT cell_id, concurrency, context->>'$.serving.max_num_seqs' FROM cells ORDER BY 1")
    assert cells.rows == [(DECODE, 16, NO_ENGINE), (PREFILL, 8, NO_ENGINE)]


def test_a_placeholder_still_fails_strict_publish(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        _not_applicable(doc)
        doc["context"]["stack"]["engine_commit"] = "TBD"

    camp = make_campaign(tmp_path / "c", edit)
    result = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(tmp_path / "lake"), "--strict",
                     ok=False)
    assert f"  - context.stack.engine_commit: placeholder 'TBD'; write the real value (cell(s) {PREFILL}, {DECODE})" \
        in result.output
    assert not (tmp_path / "lake").exists()


def test_n_a_for_a_typed_field_that_always_applies_is_refused_at_load(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["context"]["parallelism"]["tp"] = "n/a"

    with pytest.raises(ConfigError) as err:
        make_campaign(tmp_path / "c", edit)
    assert "context.parallelism.tp" in str(err.value) and "'n/a'" in str(err.value)


def test_the_site_shows_n_a_as_written(tmp_path: Path) -> None:
    from perfreport.site.render import report_render

    camp = make_campaign(tmp_path / "c", _not_applicable)
    assert load_campaign(camp).context["serving"]["max_num_seqs"] == NO_ENGINE
    result = report_render(camp, tmp_path / "site")
    summary = (result.campaign_site / "01-summary.html").read_text()
    assert NO_ENGINE in summary and "serving.max_num_seqs" in summary
