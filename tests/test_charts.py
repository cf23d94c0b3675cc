"""Charts as figure dicts (fig.to_plotly_json()) for the real example campaign's kernel rows."""

from __future__ import annotations

import html
import json
import random
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from perfreport.config.ceilings import load_ceilings
from perfreport.kernels.labels import shortened
from perfreport.site import charts
from perfreport.warehouse.roofline import RooflineModel, build_roofline

HW = "h200_sm90"


def _rows(campaign: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((campaign / "cells").glob("*/ncu_kernels.json")):
        data = json.loads(path.read_text())
        sets = {s["id"]: s["section_set"] for s in data["sources"]}
        rows += [{**k, "cell_id": data["cell_id"], "source_set": sets[k["source"]]} for k in data["kernels"]]
    return rows


def _kernel_traces(fig: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel-point traces (not the ridge points, the useful-work points or the legend-only L2/L1 points)."""
    return [t for t in fig["data"] if t.get("mode") == "markers" and t.get("legendgroup") not in ("roofs", "useful")
            and t.get("visible") != "legendonly"]


def _markers(fig: dict[str, Any], symbol: str) -> int:
    return sum(len(t["x"]) for t in _kernel_traces(fig) if t["marker"]["symbol"] == symbol)


@pytest.fixture(scope="module")
def rows(example_campaign: Path) -> list[dict[str, Any]]:
    return _rows(example_campaign)


@pytest.fixture(scope="module")
def model(rows: list[dict[str, Any]]) -> RooflineModel:
    return build_roofline(rows, load_ceilings(), HW)


@pytest.fixture(scope="module")
def fig(model: RooflineModel) -> dict[str, Any]:
    return charts.roofline(model, "Roofline").to_plotly_json()


def test_filled_and_hollow_markers_match_measured_ai(rows: list[dict[str, Any]], fig: dict[str, Any]) -> None:
    measured = [k for k in rows if k["ai_measured"] and k["arithmetic_intensity"]]
    unmeasured = [k for k in rows if not k["ai_measured"]]
    # full + basic capture of each of two cells, launches of different work split into rows of their own, and
    # the attach cell's three --set basic rows
    assert len(measured) == 20 and len(unmeasured) == 19 + 3
    assert _markers(fig, "circle") == len(measured)
    assert _markers(fig, "circle-open") == len(unmeasured)
    assert all(t["type"] == "scatter" for t in _kernel_traces(fig))


def test_filled_markers_sit_at_measured_ai_and_tflops(rows: list[dict[str, Any]], fig: dict[str, Any]) -> None:
    points = sorted((x, y) for t in _kernel_traces(fig) if t["marker"]["symbol"] == "circle"
                    for x, y in zip(t["x"], t["y"], strict=True))
    expected = sorted((k["arithmetic_intensity"], k["achieved_tflops"]) for k in rows if k["ai_measured"])
    assert [c for p in points for c in p] == pytest.approx([c for p in expected for c in p], rel=1e-3)


def test_ceiling_traces_carry_their_key_path_and_a_readable_legend_name(fig: dict[str, Any]) -> None:
    ceilings = load_ceilings()
    roofs = [t for t in fig["data"] if t.get("mode") == "lines"]
    names = [t["meta"] for t in roofs]
    assert set(names) == {f"{HW}.hbm_tbps", f"{HW}.bf16_dense_tflops", f"{HW}.fp32_tflops", f"{HW}.empirical.l2_tbps",
                          # the measured roofs beside the datasheet ones (achievable_ceiling_map)
                          f"{HW}.empirical.bf16_gemm_burst_tflops", f"{HW}.empirical.device_copy_tbps",
                          f"{HW}.empirical.l2_copy_tbps"}
    assert set(names) <= set(ceilings.key_paths(HW))
    for t in roofs:
        value = ceilings.value(t["meta"])
        assert (t["y"][0] == t["y"][1] == value) if "tflops" in t["meta"] else t["y"][1] / t["x"][1] == pytest.approx(
            value)
    # roofs are named in the legend (readable words, value, which roof) with the key path on hover; none is
    # written on the plot, where close roofs' labels overlapped
    labels = " ".join(a["text"] for a in fig["layout"]["annotations"])
    assert not any(name in labels for name in names)
    by_key = {t["meta"]: t for t in roofs}
    assert by_key[f"{HW}.bf16_dense_tflops"]["name"] == "bf16 dense 989.5 TFLOP/s (datasheet)"
    assert by_key[f"{HW}.empirical.device_copy_tbps"]["name"].startswith("device copy ")
    assert by_key[f"{HW}.empirical.device_copy_tbps"]["name"].endswith(" TB/s (measured)")
    assert by_key[f"{HW}.hbm_tbps"]["name"] == "HBM 4.8 TB/s (datasheet)"
    assert all(t["hovertemplate"].startswith(t["meta"] + ": ") for t in roofs)


def test_hollow_markers_sit_in_their_own_strip_at_sm_busy_percent(rows: list[dict[str, Any]],
                                                                  fig: dict[str, Any]) -> None:
    hollow = [t for t in _kernel_traces(fig) if t["marker"]["symbol"] == "circle-open"]
    assert hollow and all((t["xaxis"], t["yaxis"]) == ("x2", "y2") for t in hollow)  # never the achieved axis
    filled = [t for t in _kernel_traces(fig) if t["marker"]["symbol"] == "circle"]
    assert all("xaxis" not in t for t in filled)
    got = sorted(y for t in hollow for y in t["y"])
    assert got == pytest.approx(sorted(k["sm_throughput_pct"] for k in rows if not k["ai_measured"]), rel=1e-3)
    layout = fig["layout"]
    assert layout["yaxis2"]["title"]["text"].startswith("SM busy %") and layout["yaxis2"]["range"] == [0, 105]
    assert layout["yaxis"]["title"]["text"] == "Achieved TFLOP/s"
    assert layout["xaxis2"]["domain"][1] < layout["xaxis"]["domain"][0]  # the strip lies left of the roofline


def test_hollow_markers_are_labelled_sol_only_never_at_roof(fig: dict[str, Any]) -> None:
    hollow = [t for t in _kernel_traces(fig) if t["marker"]["symbol"] == "circle-open"]
    assert hollow and all(charts.UNMEASURED_LABEL in t["hovertemplate"] for t in hollow)
    assert all("AI unmeasured" in t["name"] for t in hollow)
    assert fig["layout"]["xaxis2"]["title"]["text"] == "AI<br>unmeasured"
    text = json.dumps(fig)
    assert "at roof" not in text and "at the roof" not in text  # basic-set SM busy 93% is never "at roof"


def test_biggest_kernels_and_those_far_below_their_roof_are_labelled(model: RooflineModel,
                                                                      fig: dict[str, Any]) -> None:
    far = [p for p in model.points if p.measured and p.pct_of_roof is not None and p.pct_of_roof < 10]
    assert far, "the decode cell has latency-bound kernels under 10% of their roof"
    notes = [a["text"] for a in fig["layout"]["annotations"] if "of datasheet roof" in a["text"]]
    top = sorted((p for p in model.points if p.measured), key=lambda p: -p.time_ns)[:charts.TOP_LABELS]
    labelled = {(p.cell_id, p.kernel_id) for p in [*top, *far[:charts.MAX_ANNOTATIONS]]}
    assert len(notes) == len(labelled)
    for p in top:  # the biggest kernels (by ncu time here: no time shares) carry their name
        assert any(html.unescape(n).startswith(shortened(p.label, charts.ANNOTATION_WIDTH)) and p.cell_id in n
                   for n in notes), p.label
    gemms = [p for p in model.points if p.cell_id == "prefill-b8-s1024" and p.family == "gemm" and p.measured]
    assert gemms and all(p.pct_of_roof is not None and p.pct_of_roof > 75 for p in gemms)


def test_roofs_have_distinct_colours_and_ridge_points(model: RooflineModel, fig: dict[str, Any]) -> None:
    lines = {t["meta"]: t for t in fig["data"] if t.get("mode") == "lines"}
    datasheet = [r for r in model.roofs if r.measured_for is None]
    colors = [lines[r.key]["line"]["color"] for r in datasheet]
    assert len(set(colors)) == len(colors) == len(datasheet)  # bf16 and fp32 never share a colour
    for r in model.roofs:  # a measured roof: dotted, in its datasheet roof's colour
        if r.measured_for is not None:
            assert lines[r.key]["line"]["dash"] == "dot"
            assert lines[r.key]["line"]["color"] == lines[r.measured_for]["line"]["color"]
    (ridge,) = [t for t in fig["data"] if t.get("name") == "ridge points"]
    hbm = model.memory_roof
    assert hbm is not None
    compute = [r for r in model.roofs if not r.is_memory and r.measured_for is None]
    assert list(ridge["y"]) == [r.value for r in compute]
    assert list(ridge["x"]) == pytest.approx([r.value / hbm.value for r in compute], rel=1e-3)
    assert ridge["x"][0] == pytest.approx(989.5 / 4.8, rel=1e-3)  # bf16 dense over HBM: 206 FLOP/B


def test_hover_shows_the_inputs_of_each_formula(model: RooflineModel, fig: dict[str, Any]) -> None:
    (prefill,) = [t for t in _kernel_traces(fig) if t["name"] == "prefill-b8-s1024 · AI measured"]
    assert "AI = %{customdata[10]} FLOP / %{customdata[11]} B (DRAM)" in prefill["hovertemplate"]
    points = sorted((p for p in model.points if p.cell_id == "prefill-b8-s1024" and p.measured),
                    key=lambda p: p.kernel_id)
    for p, data in zip(points, prefill["customdata"], strict=True):
        assert data[10] == f"{p.flops:.3g}" and data[11] == f"{p.dram_bytes:.3g}"
        assert p.flops is not None and p.dram_bytes is not None and p.ai == pytest.approx(p.flops / p.dram_bytes)


def test_hierarchical_points_only_where_measured(model: RooflineModel, fig: dict[str, Any]) -> None:
    l2 = [t for t in fig["data"] if t.get("name") == "L2 AI (every cell)"]
    assert len(l2) == 1 and l2[0]["visible"] == "legendonly"  # one trace for every cell: pages stay small
    assert sum(len(t["x"]) for t in l2) == sum(p.ai_l2 is not None for p in model.points)
    assert all(p.measured for p in model.points if p.ai_l2 is not None)


def test_one_trace_per_cell_and_kind_sorted(fig: dict[str, Any]) -> None:
    names = [t["name"] for t in _kernel_traces(fig)]
    assert names == [
        "decode-b16-kv2048 · AI measured", "decode-b16-kv2048 · AI unmeasured (at SM busy %)",
        "prefill-b8-s1024 · AI measured", "prefill-b8-s1024 · AI unmeasured (at SM busy %)",
        "prefill-b8-s1024-attach · AI unmeasured (at SM busy %)",
    ]
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"


def test_marker_size_by_time_share(rows: list[dict[str, Any]]) -> None:
    shares = {("prefill-b8-s1024", k["id"]): 40.0 for k in rows if k["family"] == "gemm"}
    fig = charts.roofline(build_roofline(rows, load_ceilings(), HW, shares), "t").to_plotly_json()
    sizes = [t["marker"]["size"] for t in _kernel_traces(fig) if t["name"].startswith("prefill-b8-s1024 ·")]
    assert all(isinstance(s, list) and max(s) > 9 for s in sizes)


def _many(rows: list[dict[str, Any]], n: int = 2500) -> RooflineModel:
    """n kernel rows sampled from the example's, over 40 cells (past charts.COMPACT_THRESHOLD)."""
    rng = random.Random(0)
    many = []
    for i in range(n):
        k = dict(rng.choice(rows))
        k.update(id=f"k{i:05d}", cell_id=f"cell-{i % 40:03d}")
        if k["arithmetic_intensity"]:
            k["arithmetic_intensity"] *= rng.uniform(0.5, 2.0)
        many.append(k)
    return build_roofline(many, load_ceilings(), HW)


def test_scattergl_above_threshold(rows: list[dict[str, Any]]) -> None:
    model = _many(rows)
    svg = charts.roofline(model, "big").to_plotly_json()  # 2,500 points: SVG, the basic plotly bundle
    assert {t["type"] for t in _kernel_traces(svg)} == {"scatter"}
    fig = charts.roofline(model, "big", gl_threshold=2000).to_plotly_json()
    kernel = _kernel_traces(fig)
    assert {t["type"] for t in kernel} == {"scattergl"}
    assert sum(len(t["x"]) for t in kernel) == 2500
    assert {t["type"] for t in fig["data"] if t.get("mode") == "lines"} == {"scatter"}


def test_many_points_draw_one_trace_per_roof_and_kind_with_the_cell_on_each_point(rows: list[dict[str, Any]]) -> None:
    model = _many(rows)
    contexts = {f"cell-{c:03d}": f"concurrency={c}" for c in range(0, 40, 2)}  # half the cells have a context
    fig = charts.roofline(model, "big", contexts=contexts).to_plotly_json()
    kernel = _kernel_traces(fig)
    groups = {(p.measured, p.ceiling_key) for p in model.points}
    assert len(kernel) == len(groups) < 10  # not one per cell (40 cells x 2 kinds): plotly's cost is per trace
    assert not any(t.get("legendgroup") for t in kernel)  # the click handler takes the cell from the point
    lines = {t["meta"]: t["line"]["color"] for t in fig["data"] if t.get("mode") == "lines" and t.get("meta")}
    by_point = {(p.cell_id, p.kernel_id): p for p in model.points}
    for t in kernel:
        hollow = t["marker"]["symbol"] == "circle-open"
        assert t["marker"]["symbol"] in ("circle", "circle-open") and (t.get("xaxis") == "x2") is hollow
        points = [by_point[(d[-1].split(" ")[0], d[1].split(" ")[0])] for d in t["customdata"]]
        assert {(p.measured, p.ceiling_key) for p in points} == {(not hollow, points[0].ceiling_key)}
        assert t["marker"]["color"] == lines[points[0].ceiling_key]  # in its compute roof's colour
        assert t["name"].startswith(charts._roof_words(points[0].ceiling_key) + " roof · ")
        assert ("AI unmeasured" in t["name"]) is hollow
        if not hollow:
            assert t["x"] == pytest.approx([p.ai for p in points], rel=1e-2)
            assert t["y"] == pytest.approx([p.achieved_tflops for p in points], rel=1e-2)
        else:
            assert t["y"] == pytest.approx([p.sm_pct for p in points], rel=1e-2)
        assert [d[-1] for d in t["customdata"]] == [
            f"{p.cell_id} ({contexts[p.cell_id]})" if p.cell_id in contexts else p.cell_id for p in points]
        last = len(t["customdata"][0]) - 1
        assert f"%{{customdata[1]}} · %{{customdata[{last}]}}<br>" in t["hovertemplate"]
        assert not any(placeholder in t["hovertemplate"] for placeholder in ("CELL", "CONTEXT", "HW."))
    assert sorted((p.cell_id, p.kernel_id) for p in model.points) == sorted(
        (d[-1].split(" ")[0], d[1].split(" ")[0]) for t in kernel for d in t["customdata"])
    assert _markers(fig, "circle-open") == sum(not p.measured for p in model.points) > 0
    assert not [t for t in fig["data"] if t.get("visible") == "legendonly"]  # no L2 / L1 points at this size


def test_l2_roof_drawn_when_ceilings_have_one(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    override = tmp_path / "ceilings.yaml"
    # the shipped H200 file carries the ncu-derived L2 peak (10.27 TB/s) and the measured L2-resident copy
    # (ceilings measure), drawn dotted beside it; a campaign override can take both away
    model = build_roofline(rows, load_ceilings(), HW)
    roofs = {t["meta"]: t for t in charts.roofline(model, "t").to_plotly_json()["data"] if t.get("mode") == "lines"}
    assert f"{HW}.empirical.l2_tbps" in roofs and roofs[f"{HW}.empirical.l2_copy_tbps"]["line"]["dash"] == "dot"
    assert not any("L2" in n for n in model.notes)
    unmeasured = "        value: null\n        method: test\n        measured: null\n        where: null\n"
    override.write_text(f"hardware:\n  {HW}:\n    empirical:\n      l2_tbps:\n{unmeasured}"
                        f"      l2_copy_tbps:\n{unmeasured}")
    without = build_roofline(rows, load_ceilings(override), HW)
    assert any("L2" in n for n in without.notes)


def test_kernel_names_are_escaped_in_chart_text(rows: list[dict[str, Any]]) -> None:
    evil = [{**rows[0], "function": "<img src=x onerror=alert(1)>", "label": "<img src=x onerror=alert(1)>"}]
    fig = charts.roofline(build_roofline(evil, load_ceilings(), HW), "t").to_plotly_json()
    text = json.dumps(fig)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_roofline_figure_is_identical_on_every_build(model: RooflineModel) -> None:
    a = charts.roofline(model, "Roofline").to_plotly_json()
    b = charts.roofline(model, "Roofline").to_plotly_json()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_every_chart_kind_passes_plotly_validation(rows: list[dict[str, Any]], model: RooflineModel) -> None:
    """Charts are built without per-property validation for speed; validate each kind here once."""
    stalls = [{**k, "label": k["id"]} for k in rows if k["warp_stalls_pct"]]
    figures = [
        charts.roofline(model, "r"), charts.roofline(model, "gl", gl_threshold=1),
        charts.roofline(model, "compact", compact_threshold=0, contexts={"decode-b16-kv2048": "b=16"}),
        charts.roofline(model, "compact gl", gl_threshold=0, compact_threshold=0),
        charts.bars([{"l": "a", "v": 1.0}], "l", "v", "t", "x"), charts.warp_stalls(stalls, "s"),
        charts.grouped([{"x": "a", "v": 1.0, "w": 2.0}], "x", [("v", "v"), ("w", "w")], "g", "ms", "stack"),
    ]
    for fig in figures:
        go.Figure(fig.to_plotly_json())  # raises ValueError on any invalid property


def test_warp_stalls_stack_per_reason_and_bars_put_the_largest_on_top(rows: list[dict[str, Any]]) -> None:
    stalls = [{**k, "label": k["id"]} for k in rows if k["warp_stalls_pct"]]
    fig = charts.warp_stalls(stalls, "stalls").to_plotly_json()
    assert fig["layout"]["barmode"] == "stack" and len(fig["data"]) == len({r for k in stalls for r in
                                                                              k["warp_stalls_pct"]})
    # the labels are written once, as the tick text of rows 0..n-1; the bars are placed by index (no y of their own)
    assert all("y" not in t and len(t["x"]) == len(stalls) for t in fig["data"])
    assert fig["layout"]["yaxis"]["tickvals"] == list(range(len(stalls)))
    assert fig["layout"]["yaxis"]["ticktext"] == [k["label"] for k in stalls][::-1]
    bars = charts.bars([{"l": "a", "v": 1.0}, {"l": "b", "v": 3.0}, {"l": "c", "v": None}], "l", "v", "t", "x")
    assert list(bars.to_plotly_json()["data"][0]["y"]) == ["a", "b"]  # largest at the top, None left out


def test_an_fp8_kernel_brings_the_fp8_roofs(rows: list[dict[str, Any]]) -> None:
    gemm = next(k for k in rows if k["family"] == "gemm" and k["ai_measured"])
    fp8 = [{**gemm, "id": "k900", "tensor_dtype": "fp8"}]
    without = {r.key for r in build_roofline([gemm], load_ceilings(), HW).roofs}
    with_fp8 = build_roofline([gemm, *fp8], load_ceilings(), HW)
    added = {r.key for r in with_fp8.roofs} - without
    # the datasheet fp8 roof and, dotted beside it, the measured fp8 GEMM burst rate (achievable_ceiling_map)
    assert added == {f"{HW}.fp8_dense_tflops", f"{HW}.empirical.fp8_gemm_burst_tflops"}
    (measured,) = [r for r in with_fp8.roofs if r.key == f"{HW}.empirical.fp8_gemm_burst_tflops"]
    assert measured.measured_for == f"{HW}.fp8_dense_tflops"
