"""Issue 30, point 6: the shipped example shows every headline feature, from its real captures and traces.

A cell captured by attach at --set basic (hollow markers, published under --strict because the cell says why its
%SoL is not measured), a step budget from real profiler steps (page 3), decode attention flagged on the roofline
for executing 16x its useful FLOPs (a trace recorded with shapes), kernel pages that lead with the answer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_browser import BOXES, Visit, browser  # noqa: F401  (the browser fixture)

from perfreport.config.campaign import load_campaign
from perfreport.errors import ConfigError
from perfreport.lake.gate import check_campaign
from perfreport.site.charts import USEFUL_NAME, roofline
from perfreport.site.render import RenderResult
from perfreport.warehouse.gather import gather
from perfreport.warehouse.roofline import PADDING_FLAG

ATTACH = "prefill-b8-s1024-attach"


def test_the_attach_cell_is_hollow_and_publishes_under_strict(example_campaign: Path) -> None:
    """Its basic rows have no AI (hollow markers) and no %SoL; the cell's `not_measured:` turns each into a note
    that says why, so the gate has no problem with them; the full-set cells are untouched by it."""
    data = gather(example_campaign)
    hollow = [p for p in data.roofline.points if p.cell_id == ATTACH]
    assert len(hollow) == 3 and not any(p.measured for p in hollow)
    assert all(p.ai is None and p.sm_pct is not None and p.sm_pct > 0 for p in hollow)
    checks = {c.cell_id: c for c in check_campaign(load_campaign(example_campaign))}
    attach = checks[ATTACH]
    assert attach.problems() == []
    assert sorted(attach.kernel_notes) == ["k000", "k001", "k002"]
    assert all(n.startswith("not measured (basic set): captured at --set basic by attach")
               for n in attach.kernel_notes.values())


def test_without_not_measured_the_basic_rows_are_gaps(example_campaign: Path, tmp_path: Path) -> None:
    camp = tmp_path / "c"
    shutil.copytree(example_campaign, camp)
    doc = yaml.safe_load((camp / "config.yaml").read_text())
    del next(c for c in doc["cells"] if c["id"] == ATTACH)["not_measured"]
    (camp / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    problems = {c.cell_id: c.problems() for c in check_campaign(load_campaign(camp))}
    assert problems[ATTACH] == [f"cells[{ATTACH}].kernels[k00{i}].sol_pct: not measured (basic set)"
                                for i in range(3)]


@pytest.mark.parametrize("value", ["n/a", "n/a:  ", "basic on purpose", 3])
def test_not_measured_must_say_why(example_campaign: Path, tmp_path: Path, value: Any) -> None:
    camp = tmp_path / "c"
    shutil.copytree(example_campaign, camp)
    doc = yaml.safe_load((camp / "config.yaml").read_text())
    next(c for c in doc["cells"] if c["id"] == ATTACH)["not_measured"] = value
    (camp / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_campaign(camp)
    assert "cells[2].not_measured: expected `n/a: why`" in err.value.message
    assert repr(value) in err.value.message


def test_the_step_budget_comes_from_the_cells_profiler_steps(example_campaign: Path) -> None:
    """`steps:` in config.yaml: six ProfilerStep annotations per cell, written into cells/<id>/'s bundle JSON;
    eager decode is host-bound (the host gap is most of each step), prefill is GPU-bound."""
    bundle = json.loads((example_campaign / "cells" / "decode-b16-kv2048" / "inference_perfbench_v1.json")
                        .read_text())
    assert [s["step"] for s in bundle["step_budget"]] == [f"ProfilerStep#{i}" for i in range(1, 7)]
    assert bundle["step_budget_source"]["file"] == "steps_torch_trace.json.gz"
    data = gather(example_campaign)
    steps = {cd.id: cd.steps for cd in data.cells}
    assert len(steps["decode-b16-kv2048"]) == len(steps["prefill-b8-s1024"]) == 6 and steps[ATTACH] == []
    decode = sum(s["host_gap_ms"] for s in steps["decode-b16-kv2048"]) / sum(
        s["wall_ms"] for s in steps["decode-b16-kv2048"])
    prefill = sum(s["host_gap_ms"] for s in steps["prefill-b8-s1024"]) / sum(
        s["wall_ms"] for s in steps["prefill-b8-s1024"])
    assert 0.6 < decode < 0.7 and prefill < 0.05
    assert all(0.2 < s["gpu_busy_ms"] < 0.22 for s in steps["decode-b16-kv2048"])


def test_page_2_shows_each_cells_step_latency(example_campaign: Path) -> None:
    """The steps' wall times (GPU busy + host gap) are a `results` entry of the cell's bundle: page 2's numbers."""
    data = gather(example_campaign)
    serving = {cd.id: cd.serving for cd in data.cells}
    (decode,) = serving["decode-b16-kv2048"]
    steps = data.cells[[cd.id for cd in data.cells].index("decode-b16-kv2048")].steps
    walls = sorted(s["wall_ms"] for s in steps)
    assert decode["result"] == "steps_torch_trace.json.gz: 6 profiled steps"
    assert decode["step_latency_ms.median"] == pytest.approx((walls[2] + walls[3]) / 2, abs=1e-4)
    assert decode["step_latency_ms.min"] == pytest.approx(walls[0], abs=1e-4) and 0.4 < walls[0] < 0.5
    assert 5.6 < serving["prefill-b8-s1024"][0]["step_latency_ms.median"] < 5.9 and serving[ATTACH] == []


def test_decode_attention_is_flagged_for_its_padded_flops(example_campaign: Path) -> None:
    """The timeline was recorded with shapes: decode attention executes ~16x the FLOPs of its op (a 16-row tile
    over one query row), the GEMMs 1x; only the padded kernel gets the flag, its useful point and its label."""
    data = gather(example_campaign)
    model = data.roofline
    padded = [p for p in model.points if p.padded]
    assert [(p.cell_id, p.family) for p in padded] == [("decode-b16-kv2048", "attention")]
    (attn,) = padded
    assert attn.executed_per_useful == pytest.approx(16.3, abs=0.1)
    gemms = [p for p in model.points if p.family == "gemm" and p.executed_per_useful is not None]
    assert gemms and all(p.executed_per_useful < PADDING_FLAG for p in gemms)
    assert any(f"executes {attn.executed_per_useful:.1f}x the FLOPs its op needs" in n for n in model.notes)
    fig = roofline(model, "t").to_plotly_json()
    useful = next(t for t in fig["data"] if t.get("name") == USEFUL_NAME)
    assert useful["x"][0] == pytest.approx(attn.ai / attn.executed_per_useful, rel=1e-3)
    assert useful["y"][0] == pytest.approx(attn.achieved_tflops / attn.executed_per_useful, rel=1e-3)
    labels = [a["text"] for a in fig["layout"]["annotations"] if "useful FLOPs" in str(a.get("text"))]
    assert len(labels) == 1 and f"{attn.executed_per_useful:.1f}x its useful FLOPs" in labels[0]


# The main plot's area and every label's box, in page pixels
PLOT_AREA = """(id) => {
  const gd = document.getElementById(id), x = gd._fullLayout.xaxis, y = gd._fullLayout.yaxis;
  const r = gd.getBoundingClientRect();
  return [r.left + x._offset, r.top + y._offset, r.left + x._offset + x._length, r.top + y._offset + y._length];
}"""


def test_the_example_roofline_shows_hollow_markers_and_keeps_labels_on_the_plot(
        browser: Any, example_site: RenderResult) -> None:  # noqa: F811
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html")
    try:
        traces = visit.page.evaluate("() => document.getElementById('roofline').data.map(t => "
                                     "[t.name, t.marker ? t.marker.symbol : null, (t.x || []).length])")
        hollow = [t for t in traces if t[1] == "circle-open"]
        assert hollow == [[f"{ATTACH} · AI unmeasured (at SM busy %)", "circle-open", 3]]
        # the useful point, and its dotted link to the measured point (two ends and a gap)
        assert [t for t in traces if t[0] == USEFUL_NAME] == [[USEFUL_NAME, None, 3], [USEFUL_NAME, "diamond-open", 1]]
        area = visit.page.evaluate(PLOT_AREA, "roofline")
        labels = visit.page.evaluate(BOXES, "roofline")["labels"]
        assert len(labels) >= 6
        outside = [b for b in labels if b[0] < area[0] - 2 or b[2] > area[2] + 2]
        assert outside == []  # no label runs into the AI-unmeasured strip or past the plot
        assert visit.errors == []
    finally:
        visit.page.close()


def test_a_kernel_page_leads_with_the_answer(browser: Any, example_campaign: Path,  # noqa: F811
                                            example_site: RenderResult) -> None:
    """The first section under the kernel's title: AI, %SoL against its roof, bound, time share, padding."""
    attn = next(p for p in gather(example_campaign).roofline.points if p.padded)
    visit = Visit(browser, example_site.campaign_site / f"kernel-{attn.cell_id}.html")
    try:
        visit.page.evaluate(f"() => {{ location.hash = '{attn.kernel_id}'; }}")
        visit.page.wait_for_selector("#headline-table")
        sections = visit.page.evaluate("() => Array.from(document.querySelectorAll('#kernel section h2'))"
                                       ".map(h => h.textContent)")
        assert sections[0] == "At a glance" and sections[1] == "What this row is"
        rows = dict(visit.page.evaluate("() => Array.from(document.querySelectorAll('#headline-table tr'))"
                                        ".slice(1).map(r => Array.from(r.cells).map(c => c.textContent))"))
        assert rows["arithmetic intensity"] == "16.19 FLOP/B (DRAM), measured"
        assert rows["% of datasheet roof (%SoL)"] == f"{attn.sol_pct:.1f}% of h200_sm90.hbm_tbps"
        assert rows["bound"].startswith("memory: AI 16.2 < ridge")
        assert rows["time share"].endswith("% of the cell's timeline (torch)")
        assert rows["executed / useful FLOPs"].startswith("16.28x (aten::_cudnn_attention_forward): executes more")
        assert visit.errors == []
    finally:
        visit.page.close()
