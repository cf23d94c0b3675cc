"""Pure chart builders: rows (or the roofline model) -> plotly Figure. No I/O, no templates, no randomness.

Text that plotly draws (names, hover, annotations) goes through `_t`: plotly interprets a few HTML-like tags in
strings, and kernel names carry `<` and `>`, so they are entity-escaped and shown literally.
"""

from __future__ import annotations

import html
import math
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from perfreport.kernels.labels import shortened
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.site.page_model import Figure
from perfreport.warehouse.roofline import FAR_BELOW_PCT, PADDING_FLAG, RooflineModel, RoofPoint

# More kernel points than this: one trace per compute roof and marker kind for every cell (the cell on hover), not
# one per cell: plotly pays more for 400 traces and legend entries than for 10,000 SVG points.
COMPACT_THRESHOLD = 2000
# More than this: WebGL (Scattergl). Below, SVG draws sooner: WebGL needs the full plotly bundle (4x the basic one)
# and starts slowly under SwiftShader; past ~20,000 SVG points a zoom takes over a second (bench_render).
GL_THRESHOLD = 20_000
MAX_ANNOTATIONS = 12
UNMEASURED_LABEL = "AI unmeasured (at SM busy %)"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
STALL_COLORS = PALETTE + ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
                          "#dbdb8d", "#9edae5")
ROOF_COLORS = {"dram": "#b8860b", "l2": "#6b8e23", "l1": "#4682b4"}
# Each compute roof its own colour (bf16, fp8, fp32 ... never share one), in order of peak
COMPUTE_COLORS = ("#222222", "#c0392b", "#8e44ad", "#16a085", "#d35400", "#2c3e50")
TOP_LABELS = 6  # the biggest kernels by time share (else ncu time) carry a label
ANNOTATION_WIDTH = 48  # characters of a kernel label on the chart (kernels/labels.shortened keeps its ` #n`)
STRIP_DOMAIN = (0.0, 0.09)  # the "AI unmeasured" strip, left of the roofline
PLOT_DOMAIN = (0.16, 1.0)
_LAYOUT = dict(template={}, font=dict(family="system-ui, sans-serif", size=12), paper_bgcolor="white",
               plot_bgcolor="white", hoverlabel=dict(align="left"), margin=dict(l=70, r=20, t=50, b=60))


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> Figure:
    """The Figure as plain dicts, never through go.Figure (its validation and copies dominate a render); tests
    validate every chart kind once with go.Figure(fig.to_plotly_json())."""
    return Figure(data, {**_LAYOUT, **layout})


def _t(text: Any) -> str:
    return html.escape(str(text), quote=False)


def _r(v: float | None, digits: int = 4) -> float | None:
    """Round to significant digits: smaller JSON, same picture."""
    if v is None or v == 0 or not math.isfinite(v):
        return v
    return round(v, digits - 1 - int(math.floor(math.log10(abs(v)))))


def _opt(v: float | None, fmt: str, suffix: str = "") -> str:
    return "—" if v is None else format(v, fmt) + suffix


def _axis(title: str, **kw: Any) -> dict[str, Any]:
    return dict(title=dict(text=title), showgrid=True, gridcolor="#e5e5e5", zeroline=False, linecolor="#999",
                **kw)


def _x_extent(model: RooflineModel) -> tuple[int, int]:
    mem = model.memory_roof
    xs = [p.ai for p in model.points if p.measured and p.ai]
    xs += [p.useful[0] for p in model.points if p.useful]
    if mem is not None:
        xs += [r.value / mem.value for r in model.roofs if not r.is_memory]
    if not xs:
        return -1, 3
    return math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs))) + 1


def _roof_colors(model: RooflineModel) -> dict[str, str]:
    """Each datasheet roof its own colour; a measured (achievable) roof takes its datasheet roof's, dotted."""
    compute = [r for r in model.roofs if not r.is_memory and r.measured_for is None]
    colors = {r.key: COMPUTE_COLORS[i % len(COMPUTE_COLORS)] for i, r in enumerate(compute)}
    colors.update({r.key: ROOF_COLORS[r.level] for r in model.roofs if r.is_memory and r.measured_for is None})
    colors.update({r.key: colors.get(r.measured_for, "#999999") for r in model.roofs if r.measured_for})
    return colors


_WORDS = {"hbm": "HBM", "l2": "L2", "l1": "L1", "dram": "DRAM", "gemm": "GEMM"}


def roof_name(key: str, value: float, unit: str, measured: bool) -> str:
    """A roof as its legend names it: readable words, its value and which roof (the key path is on hover):
    h200_sm90.empirical.device_copy_tbps -> `device copy 4.4 TB/s (measured)`."""
    return f"{_roof_words(key)} {value:g} {unit} ({'measured' if measured else 'datasheet'})"


def _roof_words(key: str) -> str:
    """A roof's key path as readable words: h200_sm90.bf16_dense_tflops -> `bf16 dense`."""
    leaf = key.rsplit(".", 1)[-1].removesuffix("_tflops").removesuffix("_tbps")
    return " ".join(_WORDS.get(w, w) for w in leaf.split("_"))


def _roof_traces(model: RooflineModel, lo: int, hi: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A line per roof (each its colour), named in the legend by readable words and value with its key path on
    hover (labels on the plot overlapped where roofs lie close), and a marker at each compute roof's ridge point
    (where the DRAM roof meets it: kernels left of it are bandwidth-bound on that roof)."""
    traces: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    x0, x1 = 10.0**lo, 10.0**hi
    peaks = [r.value for r in model.roofs if not r.is_memory and r.measured_for is None] or [1.0]
    colors = _roof_colors(model)
    mem = model.memory_roof
    measured_mem = next((r for r in model.roofs if r.level == "dram" and r.measured_for), None)
    for roof in model.roofs:
        color = colors[roof.key]
        if roof.is_memory:
            ridge = max(peaks) / roof.value
            xs, ys = [x0, ridge], [x0 * roof.value, max(peaks)]
            unit = "TB/s"
        else:
            under = measured_mem if roof.measured_for and measured_mem is not None else mem  # its own ridge
            start = roof.value / under.value if under is not None else x0
            xs, ys = [start, x1], [roof.value, roof.value]
            unit = "TFLOP/s"
        traces.append(dict(
            type="scatter", x=xs, y=ys, mode="lines", legendgroup="roofs", meta=_t(roof.key),
            name=_t(roof_name(roof.key, roof.value, unit, roof.measured_for is not None or ".empirical." in roof.key)),
            legendgrouptitle=dict(text="roofs (dotted: measured; key path on hover)"),
            line=dict(color=color, width=2, dash="dot" if roof.measured_for else
                      "solid" if roof.level in ("compute", "dram") else "dash"),
            hovertemplate=f"{_t(roof.key)}: {roof.value:g} {unit}<extra></extra>",
        ))
    if mem is not None:
        ridges = [r for r in model.roofs if not r.is_memory and r.measured_for is None]
        traces.append(dict(
            type="scatter", x=[_r(r.value / mem.value) for r in ridges], y=[r.value for r in ridges],
            mode="markers", name="ridge points", legendgroup="roofs", showlegend=True,
            marker=dict(symbol="diamond", size=9, color=[colors[r.key] for r in ridges],
                        line=dict(color="white", width=1)),
            customdata=[[_t(r.key), f"{mem.value:g}"] for r in ridges],
            hovertemplate="ridge of %{customdata[0]}: AI %{x:.3g} FLOP/B = %{y:g} TFLOP/s / %{customdata[1]} TB/s"
                          "<extra></extra>",
        ))
    return traces, notes


def _short_key(key: str | None) -> str:
    """A key path without its hardware token (the chart's title names it): h200_sm90.hbm_tbps -> hbm_tbps."""
    return "—" if key is None else key.split(".", 1)[-1]


def _sci(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def _customdata(p: RoofPoint, inputs: bool = True) -> list[Any]:
    """Per point, short (10,000 points must fit a 2 MB page); slots differ by kind, see HOVER_MEASURED/UNMEASURED.
    `inputs`: the FLOPs and bytes behind AI and TFLOP/s (left out of a WebGL roofline of thousands of points: the
    kernel tables hold them).

    A number formatted by the hover template must never be null (plotly would print 0): optional ones are strings.
    """
    dur = "—" if p.duration_ns is None else f"{p.duration_ns / 1e3:.1f}"
    tail = [p.bound or "—", dur, p.launches, _opt(p.time_share_pct, ".1f", "%")]
    if p.measured:
        return [_t(p.label), f"{p.kernel_id} {p.source}", _r(p.pct_of_roof, 3), _opt(p.sm_pct, ".1f", "%"),
                _opt(p.sol_pct, ".1f", "%"), _short_key(p.sol_key), *tail,
                *((_sci(p.flops), _sci(p.dram_bytes)) if inputs else ())]
    return [_t(p.label), f"{p.kernel_id} {p.source}", _r(p.sm_pct, 3), _short_key(p.ceiling_key), *tail]


def _hover(body: str, first_tail_slot: int) -> str:
    n = first_tail_slot
    return ("<b>%{customdata[0]}</b> %{customdata[1]} · CELL<br>CONTEXT" + body +
            f"<br>bound %{{customdata[{n}]}} · %{{customdata[{n + 1}]}} µs × %{{customdata[{n + 2}]}} · time share "
            f"%{{customdata[{n + 3}]}}<extra></extra>")


HOVER_MEASURED = _hover("AI = %{customdata[10]} FLOP / %{customdata[11]} B (DRAM) = %{x:.3g} FLOP/B<br>"
                        "%{y:.3g} TFLOP/s = %{customdata[10]} FLOP / %{customdata[7]} µs · %{customdata[2]}% of the "
                        "datasheet roof here<br>%SoL %{customdata[4]} of HW.%{customdata[5]} · "
                        "SM busy %{customdata[3]}", 6)
HOVER_MEASURED_GL = _hover("AI %{x:.3g} FLOP/B · %{y:.3g} TFLOP/s · %{customdata[2]}% of the datasheet roof "
                           "here<br>%SoL %{customdata[4]} of HW.%{customdata[5]} · SM busy %{customdata[3]}", 6)
HOVER_UNMEASURED = _hover(UNMEASURED_LABEL + ": SM busy %{y:.3g}% (no FLOP or DRAM-byte counters in this "
                          "capture; its %SoL ceiling would be HW.%{customdata[3]})", 4)


def _size(p: RoofPoint) -> float:
    return 9.0 if p.time_share_pct is None else round(6.0 + 2.2 * math.sqrt(max(p.time_share_pct, 0.0)), 2)


def _kernel_traces(model: RooflineModel, use_gl: bool, contexts: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per cell: filled markers at (AI, TFLOP/s); hollow ones in the AI-unmeasured strip at their SM busy %;
    hierarchical L2 / L1 points (legend-only until clicked) where those AIs were measured."""
    by_cell: dict[str, list[RoofPoint]] = {}
    for p in model.points:
        by_cell.setdefault(p.cell_id, []).append(p)
    traces: list[dict[str, Any]] = []
    hollow_index = 0
    for i, cell in enumerate(sorted(by_cell)):
        color = PALETTE[i % len(PALETTE)]
        context = f"{_t(contexts[cell])}<br>" if contexts.get(cell) else ""
        for measured in (True, False):
            pts = [p for p in by_cell[cell] if p.measured is measured]
            if not pts:
                continue
            if measured:
                xs, ys, axes = [_r(p.ai) for p in pts], [_r(p.achieved_tflops) for p in pts], {}
            else:
                xs = []
                for _ in pts:
                    xs.append(round(0.5 + 0.08 * ((hollow_index % 9) - 4), 3))
                    hollow_index += 1
                ys, axes = [_r(p.sm_pct) for p in pts], {"xaxis": "x2", "yaxis": "y2"}
            sizes = [_size(p) for p in pts]
            kind = "AI measured" if measured else "AI unmeasured (at SM busy %)"
            hover = (HOVER_MEASURED_GL if use_gl else HOVER_MEASURED) if measured else HOVER_UNMEASURED
            template = hover.replace("CELL", _t(cell))
            template = template.replace("CONTEXT", context)
            traces.append(dict(
                type="scattergl" if use_gl else "scatter", x=xs, y=ys, mode="markers", **axes,
                name=f"{cell} · {kind}", legendgroup=cell, legendgrouptitle=dict(text=cell),
                marker=dict(color=color, symbol="circle" if measured else "circle-open",
                            size=sizes if len(set(sizes)) > 1 else sizes[0],
                            line=dict(color=color, width=1.5 if not measured else 0.5)),
                customdata=[_customdata(p, not use_gl) for p in pts],
                hovertemplate=template.replace("HW.", f"{model.hardware}."),
            ))
    traces += _useful_traces(model)
    # one legend-only trace per level; left out of WebGL traces (thousands of points), where they would double the page
    for level, symbol in (("l2", "square-open"), ("l1", "triangle-up-open")) if not use_gl else ():
        pts = [p for p in model.points if getattr(p, f"ai_{level}") is not None]
        if pts:
            traces.append(dict(
                type="scatter", mode="markers", visible="legendonly",
                x=[_r(getattr(p, f"ai_{level}"), 3) for p in pts], y=[_r(p.achieved_tflops, 3) for p in pts],
                name=f"{level.upper()} AI (every cell)", legendgroup=f"hierarchy-{level}",
                marker=dict(color=ROOF_COLORS[level], symbol=symbol, size=6),
                hovertemplate=f"{level.upper()} AI %{{x:.3g}} FLOP/B ({level.upper()} bytes) · %{{y:.3g}} TFLOP/s"
                              f"<extra></extra>",
            ))
    return traces


def _compact_kernel_traces(model: RooflineModel, use_gl: bool, contexts: Mapping[str, str]) -> list[dict[str, Any]]:
    """For every cell at once, per compute roof the kernels are judged against (ceiling_key), in that roof's colour:
    a trace of filled markers (measured AI) and one of hollow ones (the AI-unmeasured strip). Each point's last
    customdata slot starts with its cell, `cell-3 (isl=128)`: hover shows it and the click handler reads it (these
    traces have no cell legendgroup). No L2 / L1 points: they would double the page."""
    colors = _roof_colors(model)
    rank = {r.key: i for i, r in enumerate(model.roofs)}  # the roofs' legend order; filled traces first
    groups: dict[tuple[bool, int, str], list[RoofPoint]] = {}
    for p in sorted(model.points, key=lambda p: p.cell_id):  # stable: cell by cell, as the per-cell traces
        groups.setdefault((not p.measured, rank.get(p.ceiling_key, len(rank)), p.ceiling_key), []).append(p)
    traces: list[dict[str, Any]] = []
    hollow_index = 0
    for i, ((hollow, _, key), pts) in enumerate(sorted(groups.items())):
        xs: list[float | None]
        if hollow:
            xs = [round(0.5 + 0.08 * (((hollow_index + j) % 9) - 4), 3) for j in range(len(pts))]
            hollow_index += len(pts)
            ys, axes = [_r(p.sm_pct, 3) for p in pts], {"xaxis": "x2", "yaxis": "y2"}
        else:
            xs, ys, axes = [_r(p.ai, 3) for p in pts], [_r(p.achieved_tflops, 3) for p in pts], {}
        custom = [[*_customdata(p, False), f"{p.cell_id} ({_t(contexts[p.cell_id])})" if contexts.get(p.cell_id)
                   else p.cell_id] for p in pts]
        hover = (HOVER_UNMEASURED if hollow else HOVER_MEASURED_GL).replace("CONTEXT", "")
        traces.append(dict(
            type="scattergl" if use_gl else "scatter", x=xs, y=ys, mode="markers", **axes,
            name=_t(f"{_roof_words(key)} roof · {UNMEASURED_LABEL if hollow else 'AI measured'}"),
            # one colour per trace and no outline on filled markers: plotly styles each of 10,000 points (open
            # markers are stroked in their fill colour)
            marker=dict(color=colors.get(key, PALETTE[i % len(PALETTE)]), symbol="circle-open" if hollow else "circle",
                        size=[round(_size(p), 1) for p in pts], line=dict(width=1.5 if hollow else 0)),
            customdata=custom,
            hovertemplate=hover.replace("CELL", f"%{{customdata[{len(custom[0]) - 1}]}}").replace(
                "HW.", f"{model.hardware}."),
        ))
    return traces + _useful_traces(model)


USEFUL_NAME = f"useful work (kernels executing >= {PADDING_FLAG:g}x their op's FLOPs)"


def _useful_traces(model: RooflineModel) -> list[dict[str, Any]]:
    """Each padded kernel's useful point (its op's FLOPs from the traced shapes, over the same bytes and time: AI
    and TFLOP/s both divided by executed/useful), joined to its measured point by a dotted line."""
    pts = [(p, p.useful) for p in model.points if p.useful]
    if not pts:
        return []
    line_x: list[float | None] = []
    line_y: list[float | None] = []
    for p, (ux, uy) in pts:
        line_x += [_r(ux), _r(p.ai), None]
        line_y += [_r(uy), _r(p.achieved_tflops), None]
    return [
        dict(type="scatter", mode="lines", x=line_x, y=line_y, hoverinfo="skip", showlegend=False, name=USEFUL_NAME,
             legendgroup="useful", line=dict(color="#555", width=1, dash="dot")),
        dict(type="scatter", mode="markers", name=USEFUL_NAME, legendgroup="useful",
             x=line_x[0::3], y=line_y[0::3],
             marker=dict(color="#555", symbol="diamond-open", size=9, line=dict(width=1.5)),
             customdata=[[_t(p.label), p.cell_id, _r(p.executed_per_useful, 3)] for p, _ in pts],
             hovertemplate="<b>%{customdata[0]}</b> · %{customdata[1]}<br>useful work: AI %{x:.3g} FLOP/B, "
                           "%{y:.3g} TFLOP/s<br>executes %{customdata[2]}x the FLOPs its op needs (ncu FLOPs / "
                           "useful FLOPs of the traced shapes)<extra></extra>"),
    ]


def _tflops(p: RoofPoint) -> float:
    """A measured point's achieved TFLOP/s (build_roofline sets it on every measured point; 0 never is drawn)."""
    return p.achieved_tflops or 0.0


def _top_labels(model: RooflineModel) -> list[RoofPoint]:
    """The TOP_LABELS biggest measured kernels: by time share where imported, else by ncu time."""
    pts = [p for p in model.points if p.measured]
    return sorted(pts, key=lambda p: (-(p.time_share_pct if p.time_share_pct is not None else -1.0), -p.time_ns,
                                      p.cell_id, p.kernel_id))[:TOP_LABELS]


def _labels(model: RooflineModel, x_range: tuple[float, float], y_range: tuple[float, float],
            strip: bool) -> list[dict[str, Any]]:
    """Label the biggest kernels (TOP_LABELS) and those under FAR_BELOW_PCT of their roof; labels stacked so they
    do not overlap (approximate pixels)."""
    far = [p for p in model.points if p.measured and p.pct_of_roof is not None and p.pct_of_roof < FAR_BELOW_PCT]
    far.sort(key=lambda p: (-p.time_ns, p.cell_id, p.kernel_id))
    top = _top_labels(model)
    padded = [p for p in model.points if p.padded]  # always labelled: the padding is the headline of that kernel
    chosen = {(p.cell_id, p.kernel_id): p for p in [*top, *far[:MAX_ANNOTATIONS], *padded]}
    # the main plot's area in pixels at a 1,400 px page (935 x 530 without the strip, PLOT_DOMAIN of it beside it)
    width, height = 935.0 * ((PLOT_DOMAIN[1] - PLOT_DOMAIN[0]) if strip else 1.0), 530.0
    placed: list[tuple[float, float, float]] = []  # label (left, top, right) in pixels from the plot's top left
    out = []
    for p in sorted(chosen.values(), key=lambda p: (-_tflops(p), p.cell_id, p.kernel_id)):
        name = shortened(p.label, ANNOTATION_WIDTH)
        share = f", {p.time_share_pct:.0f}% of time" if p.time_share_pct is not None else ""
        text = f"{name} ({p.cell_id}{share}): {p.pct_of_roof:.0f}% of datasheet roof"
        if p.padded:
            text += f"; {p.executed_per_useful:.1f}x its useful FLOPs"
        px = (math.log10(p.ai or 1.0) - x_range[0]) / (x_range[1] - x_range[0]) * width
        py = (y_range[1] - math.log10(_tflops(p))) / (y_range[1] - y_range[0]) * height
        left, top_px = px + 30, py - 40
        w = 5.6 * len(text)
        if left + w > width:  # no room on the right: to the left of the point, else as far right as fits
            left = px - 30 - w if px - 30 - w >= 0 else max(0.0, width - w)
        right = left + w
        step = -16
        while any(top_px < t + 15 and top_px + 15 > t and left < r and right > lf for lf, t, r in placed) or \
                top_px < 0:
            if top_px < 0:  # above the plot it would cover the title: stack downward from the top instead
                top_px, step = max(top_px, 0.0) + 2, 16
            top_px += step
        placed.append((left, top_px, right))
        on_right = left > px or right - px > px - left  # the arrow meets the label's nearer end
        out.append(dict(x=math.log10(p.ai or 1.0), y=math.log10(_tflops(p)), showarrow=True, arrowhead=2,
                        arrowsize=0.8, arrowcolor="#888", ax=round(left - px if on_right else right - px),
                        ay=round(top_px - py), xanchor="left" if on_right else "right", font=dict(size=10),
                        bgcolor="rgba(255,255,255,0.85)", text=_t(text)))
    return out


def roofline(model: RooflineModel, title: str, gl_threshold: int = GL_THRESHOLD,
             contexts: Mapping[str, str] | None = None, compact_threshold: int | None = None) -> Figure:
    """Log-log roofline: roofs named by key path (each its colour) with ridge points, filled markers (measured AI)
    labelled for the biggest kernels, and a separate strip of hollow markers (AI unmeasured) by SM busy %.

    contexts: cell id -> a short context line shown in that cell's hover (e.g. the fields that vary).
    compact_threshold: more points than this (default COMPACT_THRESHOLD, read at call time): one trace per marker
    kind instead of one per cell.
    """
    lo, hi = _x_extent(model)
    roofs, annotations = _roof_traces(model, lo, hi)
    use_gl = len(model.points) > gl_threshold
    compact = len(model.points) > (COMPACT_THRESHOLD if compact_threshold is None else compact_threshold)
    traces = roofs + (_compact_kernel_traces if compact else _kernel_traces)(model, use_gl, contexts or {})
    ys = [_tflops(p) for p in model.points if p.measured] + [r.value for r in model.roofs if not r.is_memory]
    ys += [p.useful[1] for p in model.points if p.useful]
    mem = model.memory_roof
    if mem is not None:
        ys.append(10.0**lo * mem.value)
    ys = [y for y in ys if y > 0] or [1.0]
    y_lo, y_hi = math.log10(min(ys)) - 0.3, math.log10(max(ys)) + 0.4
    has_hollow = any(not p.measured for p in model.points)
    annotations += _labels(model, (lo, hi), (y_lo, y_hi), has_hollow)
    layout: dict[str, Any] = dict(
        title=dict(text=_t(title)), height=640, hovermode="closest",
        xaxis=_axis("Arithmetic intensity (FLOP/byte, DRAM)", type="log", range=[lo, hi], dtick=1,
                    domain=list(PLOT_DOMAIN) if has_hollow else [0, 1]),
        yaxis=_axis("Achieved TFLOP/s", type="log", range=[y_lo, y_hi], dtick=1, anchor="x"),
        legend=dict(groupclick="toggleitem", font=dict(size=10)), annotations=annotations,
    )
    if has_hollow:
        layout["xaxis2"] = dict(domain=list(STRIP_DOMAIN), range=[0, 1], showticklabels=False, showgrid=False,
                                zeroline=False, title=dict(text="AI<br>unmeasured", font=dict(size=10)))
        # the strip's axis and its legend entries say the same: hollow markers at SM busy %, AI not measured
        layout["yaxis2"] = _axis("SM busy % (AI unmeasured: no FLOP/byte counters)", anchor="x2", range=[0, 105])
    return _figure(traces, layout)


def bars(rows: Sequence[Mapping[str, Any]], label_key: str, value_key: str, title: str, axis_title: str,
         limit: int = 30) -> Figure:
    """Horizontal bars of value_key per row (largest first, at most `limit`), e.g. time share per kernel."""
    rows = sorted((r for r in rows if r.get(value_key) is not None),
                  key=lambda r: (-float(r[value_key]), str(r[label_key])))[:limit]
    trace = dict(type="bar", y=[_t(r[label_key]) for r in rows][::-1],
                 x=[_r(float(r[value_key])) for r in rows][::-1], orientation="h", marker=dict(color=PALETTE[0]),
                 hovertemplate="%{y}: %{x:.3g}<extra></extra>")
    return _figure([trace], dict(title=dict(text=_t(title)), height=max(260, 60 + 22 * len(rows)),
                                 xaxis=_axis(axis_title), yaxis=dict(automargin=True)))


# The reasons that usually dominate first, so they get the strongest colours of STALL_COLORS
STALL_FIRST = ("long_scoreboard", "wait", "barrier", "gmma", "short_scoreboard", "mio_throttle",
               "math_pipe_throttle", "lg_throttle", "no_instruction", "selected")


@lru_cache(maxsize=1)
def _stall_reasons() -> tuple[str, ...]:
    """STALL_FIRST, then the rest of the metric catalog's warp_stall_reasons (metrics.yaml) in its order."""
    return STALL_FIRST + tuple(r for r in load_catalog().warp_stalls if r not in STALL_FIRST)


def stall_color(reason: str) -> str:
    """One colour per warp-stall reason on every page: by its place in _stall_reasons (19 reasons, 20 colours), a
    reason the catalog does not list by a hash of its name."""
    known = _stall_reasons()
    i = known.index(reason) if reason in known else zlib.crc32(reason.encode("utf-8"))
    return STALL_COLORS[i % len(STALL_COLORS)]


def warp_stalls(rows: Sequence[Mapping[str, Any]], title: str, limit: int = 40) -> Figure:
    """Stacked horizontal bars: each kernel's warp-stall breakdown (% of stall cycles per issued instruction), each
    reason in its own colour (stall_color: the same on every page), biggest reasons first."""
    rows = [r for r in rows if r.get("warp_stalls_pct")][:limit]
    totals: dict[str, float] = {}
    for r in rows:
        for reason, v in r["warp_stalls_pct"].items():
            totals[reason] = totals.get(reason, 0.0) + float(v or 0.0)
    reasons = sorted(totals, key=lambda k: (-totals[k], k))
    # each trace places its bars at rows 0..n-1 (y0 0, dy 1: plotly's default, no y of its own) and the labels are
    # written once, as the axis's tick text: not once per reason trace (19 reasons x 50 labels was 66 KB a page);
    # the hover names the reason, the kernel is its row's tick label
    traces = [
        dict(type="bar", x=[_r(float(r["warp_stalls_pct"].get(reason) or 0.0)) for r in rows][::-1],
             name=_t(reason), orientation="h", marker=dict(color=stall_color(reason)),
             hovertemplate=f"{_t(reason)}: %{{x:.1f}}%<extra></extra>")
        for reason in reasons
    ]
    axis = dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=[_t(r["label"]) for r in rows][::-1],
                range=[-0.5, len(rows) - 0.5], showgrid=False, zeroline=False, automargin=True)
    return _figure(traces, dict(title=dict(text=_t(title)), barmode="stack", height=max(300, 90 + 22 * len(rows)),
                                xaxis=_axis("share of warp stall cycles (%)", range=[0, 100]), yaxis=axis))


def grouped(rows: Sequence[Mapping[str, Any]], x_key: str, series: Sequence[tuple[str, str]], title: str,
            axis_title: str, barmode: str = "group") -> Figure:
    """Bars of several series (key, label) per x (e.g. GPU busy vs host gap per decode step)."""
    xs = [_t(r[x_key]) for r in rows]
    traces = [dict(type="bar", x=xs, y=[_r(r.get(key)) for r in rows], name=_t(label),
                   marker=dict(color=PALETTE[i % len(PALETTE)]),
                   hovertemplate=f"%{{x}}<br>{_t(label)}: %{{y:.4g}}<extra></extra>")
              for i, (key, label) in enumerate(series)]
    return _figure(traces, dict(title=dict(text=_t(title)), barmode=barmode, height=360,
                                xaxis=dict(type="category", automargin=True), yaxis=_axis(axis_title)))


CHANGE_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "suspicious": "#ff7f0e"}


def history(points: Sequence[Mapping[str, Any]], changes: Sequence[Mapping[str, Any]], title: str,
            axis_title: str, unit: str = "publication") -> Figure:
    """One series over publications (`x` the publication's number, hover its id and time) with the level of each
    segment dotted; each change point (`x` its first publication of the new level) a dashed line between the two
    levels and a diamond in its label's colour, annotated with label and change."""
    xs = [p["x"] for p in points]
    line = dict(type="scatter", mode="lines+markers", x=xs, y=[_r(p["value"]) for p in points], name="value",
                marker=dict(color=PALETTE[0], size=6), line=dict(color=PALETTE[0], width=1.5),
                customdata=[[_t(p["publication_id"]), _t(p["published_at"])] for p in points],
                hovertemplate=f"{unit} %{{x}} · %{{customdata[0]}}<br>%{{customdata[1]}}<br>"
                              f"{_t(axis_title)}: %{{y:.4g}}<extra></extra>")
    edges = [0, *sorted(xs.index(c["x"]) for c in changes if c["x"] in xs), len(xs)]
    level_x: list[Any] = []
    level_y: list[Any] = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        if hi > lo:
            mean = _r(sum(p["value"] for p in points[lo:hi]) / (hi - lo))
            level_x += [xs[lo], xs[hi - 1], None]
            level_y += [mean, mean, None]
    level = dict(type="scatter", mode="lines", x=level_x, y=level_y, name="level (segment mean)",
                 line=dict(color="#7f7f7f", width=1, dash="dot"), hoverinfo="skip")
    traces = [line, level]
    shapes, notes = [], []
    for label in CHANGE_COLORS:
        mine = [c for c in changes if c["label"] == label and c["x"] in xs]
        if not mine:
            continue
        at = [points[xs.index(c["x"])] for c in mine]
        traces.append(dict(type="scatter", mode="markers", x=[c["x"] for c in mine], y=[_r(p["value"]) for p in at],
                           name=label, marker=dict(color=CHANGE_COLORS[label], size=13, symbol="diamond",
                                                   line=dict(color="white", width=1)),
                           customdata=[[_opt(c["change_pct"], "+.1f", "%")] for c in mine],
                           hovertemplate=f"{label} at {unit} %{{x}}: %{{customdata[0]}}<extra></extra>"))
        for c in mine:
            i = xs.index(c["x"])
            between = (xs[i - 1] + xs[i]) / 2 if i else xs[i] - 0.5  # between the old level's last point and this
            shapes.append(dict(type="line", xref="x", yref="paper", x0=between, x1=between, y0=0, y1=1,
                               line=dict(color=CHANGE_COLORS[label], width=1.5, dash="dash")))
            notes.append(dict(xref="x", yref="paper", x=between, y=1.0, yanchor="bottom", showarrow=False,
                              text=f"{label} {_opt(c['change_pct'], '+.1f', '%')}",
                              font=dict(color=CHANGE_COLORS[label], size=11)))
    ticks = dict(dtick=1) if len(xs) <= 30 else {}  # one tick per point while they fit
    return _figure(traces, dict(
        title=dict(text=_t(title)), height=350, shapes=shapes, annotations=notes, margin=dict(l=70, r=20, t=70, b=95),
        legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"),  # below the axis title
        xaxis=_axis(f"{unit} (oldest first)", range=[min(xs, default=1) - 0.6, max(xs, default=1) + 0.6], **ticks),
        yaxis=_axis(axis_title)))


def predicted_vs_realized(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Each settled prediction: predicted gain (x) against the realized end-to-end gain and the named kernels' realized
    gain (y), % of the cell's time, with the y = x line a perfect prediction sits on; one colour per kind."""
    kinds = sorted({str(r["kind"]) for r in rows})
    traces: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        mine = [r for r in rows if r["kind"] == kind]
        for key, name, symbol in (("realized_e2e_pct", "end to end", "circle"),
                                  ("realized_kernel_pct", "its kernels", "circle-open")):
            shown = [r for r in mine if r[key] is not None]
            if shown:
                traces.append(dict(
                    type="scatter", mode="markers", name=f"{kind}: {name}", x=[_r(r["predicted_pct"]) for r in shown],
                    y=[_r(r[key]) for r in shown], marker=dict(color=PALETTE[i % len(PALETTE)], size=11, symbol=symbol),
                    customdata=[[_t(r["cell_id"]), _t(r["lever"] or r["kernel"]), _t(r["settled_by"])] for r in shown],
                    hovertemplate="%{customdata[0]} · %{customdata[1]}<br>predicted %{x:.2f}%, realized %{y:.2f}%"
                                  "<br>settled by %{customdata[2]}<extra></extra>"))
    values = [v for r in rows for v in (r["predicted_pct"], r["realized_e2e_pct"], r["realized_kernel_pct"])
              if v is not None]
    lo, hi = min([0.0, *values]), max([0.0, *values])
    traces.append(dict(type="scatter", mode="lines", x=[lo, hi], y=[lo, hi], name="realized = predicted",
                       line=dict(color="#7f7f7f", width=1, dash="dot"), hoverinfo="skip"))
    return _figure(traces, dict(title=dict(text="Predicted vs realized gain (% of the cell's time)"), height=420,
                                legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"),
                                xaxis=_axis("predicted gain (%)"), yaxis=_axis("realized gain (%)")))
