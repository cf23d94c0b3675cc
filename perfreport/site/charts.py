"""Pure chart builders: rows (or the roofline model) -> plotly Figure. No I/O, no templates, no randomness.

Text that plotly draws (names, hover, annotations) goes through `_t`: plotly interprets a few HTML-like tags in
strings, and kernel names carry `<` and `>`, so they are entity-escaped and shown literally.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from perfreport.warehouse.roofline import FAR_BELOW_PCT, RooflineModel, RoofPoint

GL_THRESHOLD = 2000  # more kernel points than this: WebGL traces (Scattergl) stay interactive at 10,000
MAX_ANNOTATIONS = 12
UNMEASURED_LABEL = "%SoL only / AI unmeasured"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
STALL_COLORS = PALETTE + ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
                          "#dbdb8d", "#9edae5")
ROOF_COLORS = {"compute": "#444444", "dram": "#b8860b", "l2": "#6b8e23", "l1": "#4682b4"}
_LAYOUT = dict(template={}, font=dict(family="system-ui, sans-serif", size=12), paper_bgcolor="white",
               plot_bgcolor="white", hoverlabel=dict(align="left"), margin=dict(l=70, r=20, t=50, b=60))


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """Build the Figure from plain dicts without plotly's per-property validation (it dominates a render);
    tests validate every chart kind once with go.Figure(fig.to_plotly_json())."""
    return go.Figure(data=data, layout={**_LAYOUT, **layout}, _validate=False)


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
    if mem is not None:
        xs += [r.value / mem.value for r in model.roofs if not r.is_memory]
    if not xs:
        return -1, 3
    return math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs))) + 1


def _roof_traces(model: RooflineModel, lo: int, hi: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    traces, notes = [], []
    x0, x1 = 10.0**lo, 10.0**hi
    peaks = [r.value for r in model.roofs if not r.is_memory] or [1.0]
    for roof in model.roofs:
        if roof.is_memory:
            ridge = max(peaks) / roof.value
            xs, ys = [x0, ridge], [x0 * roof.value, max(peaks)]
            label, unit = f"{roof.key} = {roof.value:g} TB/s", "TB/s"
            at = (x0 * 1.15, x0 * 1.15 * roof.value, "left")
        else:
            mem = model.memory_roof
            start = roof.value / mem.value if mem is not None else x0
            xs, ys = [start, x1], [roof.value, roof.value]
            label, unit = f"{roof.key} = {roof.value:g} TFLOP/s", "TFLOP/s"
            at = (x1 / 1.15, roof.value, "right")
        traces.append(dict(
            type="scatter", x=xs, y=ys, mode="lines", name=roof.key, legendgroup="roofs",
            legendgrouptitle=dict(text="roofs (key path)"),
            line=dict(color=ROOF_COLORS[roof.level], width=2, dash="solid" if roof.level in ("compute", "dram")
                      else "dash"),
            hovertemplate=f"{_t(roof.key)}: {roof.value:g} {unit}<extra></extra>",
        ))
        notes.append(dict(x=math.log10(at[0]), y=math.log10(at[1]), text=_t(label), showarrow=False,
                          xanchor=at[2], yanchor="bottom", font=dict(size=10, color=ROOF_COLORS[roof.level])))
    return traces, notes


def _short_key(key: str | None) -> str:
    """A key path without its hardware token (the chart's title names it): h200_sm90.hbm_tbps -> hbm_tbps."""
    return "—" if key is None else key.split(".", 1)[-1]


def _customdata(p: RoofPoint) -> list[Any]:
    """Per point, short (10,000 points must fit a 2 MB page); slots differ by kind, see HOVER_MEASURED/UNMEASURED.

    A number formatted by the hover template must never be null (plotly would print 0): optional ones are strings.
    """
    dur = "—" if p.duration_ns is None else f"{p.duration_ns / 1e3:.1f}"
    tail = [p.bound or "—", dur, p.launches, _opt(p.time_share_pct, ".1f", "%")]
    if p.measured:
        return [_t(p.function), f"{p.kernel_id} {p.source}", _r(p.pct_of_roof, 3), _opt(p.sm_pct, ".1f", "%"),
                _opt(p.sol_pct, ".1f", "%"), _short_key(p.sol_key), *tail]
    return [_t(p.function), f"{p.kernel_id} {p.source}", _r(p.sm_pct, 3), _short_key(p.ceiling_key), *tail]


def _hover(body: str, first_tail_slot: int) -> str:
    n = first_tail_slot
    return ("<b>%{customdata[0]}</b> %{customdata[1]} · CELL<br>CONTEXT" + body +
            f"<br>bound %{{customdata[{n}]}} · %{{customdata[{n + 1}]}} µs × %{{customdata[{n + 2}]}} · time share "
            f"%{{customdata[{n + 3}]}}<extra></extra>")


HOVER_MEASURED = _hover("AI %{x:.3g} FLOP/B · %{y:.3g} TFLOP/s · %{customdata[2]}% of roof here<br>%SoL "
                        "%{customdata[4]} of HW.%{customdata[5]} · SM busy %{customdata[3]}", 6)
HOVER_UNMEASURED = _hover(UNMEASURED_LABEL + ": SM busy %{customdata[2]}% × HW.%{customdata[3]} = %{y:.3g} "
                          "TFLOP/s, a placement, not a FLOP rate", 4)


def _size(p: RoofPoint) -> float:
    return 9.0 if p.time_share_pct is None else round(6.0 + 2.2 * math.sqrt(max(p.time_share_pct, 0.0)), 2)


def _kernel_traces(model: RooflineModel, band_x: float, use_gl: bool,
                   contexts: Mapping[str, str]) -> list[dict[str, Any]]:
    by_cell: dict[str, list[RoofPoint]] = {}
    for p in model.points:
        by_cell.setdefault(p.cell_id, []).append(p)
    traces: list[dict[str, Any]] = []
    hollow_index = 0
    for i, cell in enumerate(sorted(by_cell)):
        color = PALETTE[i % len(PALETTE)]
        for measured in (True, False):
            pts = [p for p in by_cell[cell] if p.measured is measured]
            if not pts:
                continue
            if measured:
                xs = [_r(p.ai) for p in pts]
            else:
                xs = []
                for _ in pts:
                    xs.append(_r(band_x * 10 ** (0.035 * ((hollow_index % 9) - 4))))
                    hollow_index += 1
            sizes = [_size(p) for p in pts]
            kind = "AI measured" if measured else "AI unmeasured (%SoL only)"
            context = f"{_t(contexts[cell])}<br>" if contexts.get(cell) else ""
            template = (HOVER_MEASURED if measured else HOVER_UNMEASURED).replace("CELL", _t(cell))
            template = template.replace("CONTEXT", context)
            traces.append(dict(
                type="scattergl" if use_gl else "scatter", x=xs, y=[_r(p.tflops) for p in pts], mode="markers",
                name=f"{cell} · {kind}", legendgroup=cell, legendgrouptitle=dict(text=cell),
                marker=dict(color=color, symbol="circle" if measured else "circle-open",
                            size=sizes if len(set(sizes)) > 1 else sizes[0],
                            line=dict(color=color, width=1.5 if not measured else 0.5)),
                customdata=[_customdata(p) for p in pts], hovertemplate=template.replace("HW.", f"{model.hardware}."),
            ))
    return traces


def _far_below(model: RooflineModel, x_range: tuple[float, float],
               y_range: tuple[float, float]) -> list[dict[str, Any]]:
    """Label kernels under FAR_BELOW_PCT of their roof; labels stacked so they do not overlap (approximate pixels)."""
    far = [p for p in model.points if p.measured and p.pct_of_roof is not None and p.pct_of_roof < FAR_BELOW_PCT]
    far.sort(key=lambda p: (-(p.duration_ns or 0.0) * p.launches, p.cell_id, p.kernel_id))
    width, height = 900.0, 530.0  # plot area of a 640 px figure next to its legend, roughly
    placed: list[tuple[float, float, float]] = []  # label (left, top, right) in pixels from the plot's top left
    out = []
    for p in sorted(far[:MAX_ANNOTATIONS], key=lambda p: (-p.tflops, p.cell_id, p.kernel_id)):
        name = p.function if len(p.function) <= 32 else p.function[:31] + "…"
        text = f"{name} ({p.cell_id}): {p.pct_of_roof:.1f}% of roof"
        px = (math.log10(p.ai or 1.0) - x_range[0]) / (x_range[1] - x_range[0]) * width
        py = (y_range[1] - math.log10(p.tflops)) / (y_range[1] - y_range[0]) * height
        left, top = px + 30, py - 40
        right = left + 5.6 * len(text)
        while any(top < t + 15 and top + 15 > t and left < r and right > lf for lf, t, r in placed):
            top -= 16
        placed.append((left, top, right))
        out.append(dict(x=math.log10(p.ai or 1.0), y=math.log10(p.tflops), showarrow=True, arrowhead=2,
                        arrowsize=0.8, arrowcolor="#888", ax=round(left - px), ay=round(top - py),
                        xanchor="left", font=dict(size=10), bgcolor="rgba(255,255,255,0.85)", text=_t(text)))
    return out


def roofline(model: RooflineModel, title: str, gl_threshold: int = GL_THRESHOLD,
             contexts: Mapping[str, str] | None = None) -> go.Figure:
    """Log-log roofline: roofs named by key path, filled markers (measured AI), hollow ones in a left band.

    contexts: cell id -> a short context line shown in that cell's hover (e.g. the fields that vary).
    """
    lo, hi = _x_extent(model)
    band_x = 10.0 ** (lo - 1)
    roofs, annotations = _roof_traces(model, lo, hi)
    use_gl = len(model.points) > gl_threshold
    traces = roofs + _kernel_traces(model, band_x, use_gl, contexts or {})
    ys = [p.tflops for p in model.points] + [r.value for r in model.roofs if not r.is_memory]
    mem = model.memory_roof
    if mem is not None:
        ys.append(10.0**lo * mem.value)
    ys = [y for y in ys if y > 0] or [1.0]
    y_lo, y_hi = math.log10(min(ys)) - 0.3, math.log10(max(ys)) + 0.4
    has_hollow = any(not p.measured for p in model.points)
    tickvals = [10.0**d for d in range(lo, hi + 1)]
    ticktext = [f"{v:g}" for v in tickvals]
    shapes = []
    if has_hollow:
        tickvals.insert(0, band_x)
        ticktext.insert(0, "AI<br>unmeasured")
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=band_x / 10**0.3, x1=band_x * 10**0.3, y0=0, y1=1,
                           fillcolor="#f0f0f0", line=dict(width=0), layer="below"))
        annotations.append(dict(x=lo - 1, y=1.0, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                                text="AI unmeasured band<br>(%SoL only: y = SM busy × ceiling)",
                                font=dict(size=10, color="#555")))
    annotations += _far_below(model, (lo - 1.4, hi), (y_lo, y_hi))
    return _figure(traces, dict(
        title=dict(text=_t(title)), height=640, hovermode="closest",
        xaxis=_axis("Arithmetic intensity (FLOP/byte, DRAM)", type="log", range=[lo - 1.4, hi],
                    tickvals=tickvals, ticktext=ticktext),
        yaxis=_axis("Achieved TFLOP/s", type="log", range=[y_lo, y_hi], dtick=1),
        legend=dict(groupclick="toggleitem", font=dict(size=10)), annotations=annotations, shapes=shapes,
    ))


def bars(rows: Sequence[Mapping[str, Any]], label_key: str, value_key: str, title: str, axis_title: str,
         limit: int = 30) -> go.Figure:
    """Horizontal bars of value_key per row (largest first, at most `limit`), e.g. time share per kernel."""
    rows = sorted((r for r in rows if r.get(value_key) is not None),
                  key=lambda r: (-float(r[value_key]), str(r[label_key])))[:limit]
    trace = dict(type="bar", y=[_t(r[label_key]) for r in rows][::-1],
                 x=[_r(float(r[value_key])) for r in rows][::-1], orientation="h", marker=dict(color=PALETTE[0]),
                 hovertemplate="%{y}: %{x:.3g}<extra></extra>")
    return _figure([trace], dict(title=dict(text=_t(title)), height=max(260, 60 + 22 * len(rows)),
                                 xaxis=_axis(axis_title), yaxis=dict(automargin=True)))


def warp_stalls(rows: Sequence[Mapping[str, Any]], title: str, limit: int = 40) -> go.Figure:
    """Stacked horizontal bars: each kernel's warp-stall breakdown (% of stall cycles per issued instruction)."""
    rows = [r for r in rows if r.get("warp_stalls_pct")][:limit]
    totals: dict[str, float] = {}
    for r in rows:
        for reason, v in r["warp_stalls_pct"].items():
            totals[reason] = totals.get(reason, 0.0) + float(v or 0.0)
    reasons = sorted(totals, key=lambda k: (-totals[k], k))
    labels = [_t(r["label"]) for r in rows][::-1]
    traces = [
        dict(type="bar", y=labels, x=[_r(float(r["warp_stalls_pct"].get(reason) or 0.0)) for r in rows][::-1],
             name=_t(reason), orientation="h", marker=dict(color=STALL_COLORS[i % len(STALL_COLORS)]),
             hovertemplate=f"%{{y}}<br>{_t(reason)}: %{{x:.1f}}%<extra></extra>")
        for i, reason in enumerate(reasons)
    ]
    return _figure(traces, dict(title=dict(text=_t(title)), barmode="stack", height=max(300, 90 + 22 * len(rows)),
                                xaxis=_axis("share of warp stall cycles (%)", range=[0, 100]),
                                yaxis=dict(automargin=True)))


def grouped(rows: Sequence[Mapping[str, Any]], x_key: str, series: Sequence[tuple[str, str]], title: str,
            axis_title: str, barmode: str = "group") -> go.Figure:
    """Bars of several series (key, label) per x (e.g. GPU busy vs host gap per decode step)."""
    xs = [_t(r[x_key]) for r in rows]
    traces = [dict(type="bar", x=xs, y=[_r(r.get(key)) for r in rows], name=_t(label),
                   marker=dict(color=PALETTE[i % len(PALETTE)]),
                   hovertemplate=f"%{{x}}<br>{_t(label)}: %{{y:.4g}}<extra></extra>")
              for i, (key, label) in enumerate(series)]
    return _figure(traces, dict(title=dict(text=_t(title)), barmode=barmode, height=360,
                                xaxis=dict(type="category", automargin=True), yaxis=_axis(axis_title)))
