"""Issue 21's pages as rendered: numbers right-aligned with their unit in the header and their raw value to sort on,
time share split per cell, one colour per warp-stall reason on every page, markdown in prose, a readable dark mode.
(Sorting and filtering in a browser: tests/test_browser.py. The empty state of every page:
tests/test_render.py::test_empty_campaign_renders_with_notes.)"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import read_download

from perfreport.site.render import RenderResult, report_render

EM_DASH = "—"


class Tables(HTMLParser):
    """Every <table class="data">: headers as (text, attrs), rows as cells (text, attrs)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict[str, Any]] = []
        self._cell: tuple[str, dict[str, str | None], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "data") in attrs:
            self.tables.append({"head": [], "rows": [], "attrs": dict(attrs)})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("th", "td") and self.tables:
            self._cell = (tag, dict(attrs), [])

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[2].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            kind, attrs, text = self._cell
            table = self.tables[-1]
            (table["head"] if kind == "th" else table["rows"][-1]).append(("".join(text), attrs))
            self._cell = None
        elif tag == "table" and self.tables:
            self.tables[-1]["rows"] = [r for r in self.tables[-1]["rows"] if r]


def tables(html: str) -> list[dict[str, Any]]:
    parser = Tables()
    parser.feed(html)
    return parser.tables


def _page(site: RenderResult, name: str) -> str:
    return (site.campaign_site / name).read_text(encoding="utf-8")


def _column(table: dict[str, Any], header: str) -> tuple[dict[str, str | None], list[tuple[str, dict[str, Any]]]]:
    i = [h for h, _ in table["head"]].index(header)
    return table["head"][i][1], [row[i] for row in table["rows"]]


def figures(page: str) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Every chart of a page: div id -> (data, layout), as its Plotly.newPlot call receives them."""
    decoder, out = json.JSONDecoder(), {}
    for start in (m.end() for m in re.finditer(r"Plotly\.newPlot\(", page)):
        args, rest = [], page[start:]
        for _ in range(3):
            rest = rest.lstrip().lstrip(",").lstrip()
            value, end = decoder.raw_decode(rest)
            args.append(value)
            rest = rest[end:]
        out[args[0]] = (args[1], args[2])
    return out


class Text(HTMLParser):
    """The text a reader sees (no script or style)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self._skip = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip = tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip = False

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.texts.append(data.strip())


@pytest.mark.parametrize(("page", "header", "unit"), [
    ("04-time-share.html", "time share (%)", "%"), ("04-time-share.html", "ncu duration (ms)", "ms"),
    ("04-time-share.html", "AI (FLOP/B)", None), ("06-kernel-internals.html", "shared mem/block (KiB)", None),
    ("cell-decode-b16-kv2048.html", "duration (µs)", "µs"), ("07-frontier.html", "time saved (ms)", "ms"),
])
def test_numbers_are_right_aligned_with_their_unit_in_the_header(example_site: RenderResult, page: str, header: str,
                                                                 unit: str | None) -> None:
    """Each cell shows the number alone, in the header's unit (what the browser sorts on); the download holds the
    raw value."""
    section, table = next((s, t) for s, t in zip(re.findall(r'<section class="table" id="table-([^"]+)">',
                                                             _page(example_site, page)),
                                                  tables(_page(example_site, page)), strict=False)
                          if header in [h for h, _ in t["head"]])
    head, cells = _column(table, header)
    assert head.get("class") == "num" and head.get("data-sort-method") == "num", header
    index = [h for h, _ in table["head"]].index(header)  # the download's columns are the table's, in order
    assert str(index + 1) in table["attrs"]["data-num"].split()  # site.css right-aligns the column's cells
    css = (example_site.site_dir / "static" / "site.css").read_text()
    assert f'table[data-num~="{index + 1}"] td:nth-child({index + 1})' in css
    doc = json.loads(read_download(example_site.campaign_site / f"{page[:-5]}.{section}.json"))
    key = doc["columns"][index]["key"]
    assert header.startswith(doc["columns"][index]["label"] + " (")
    raws = [r[key] for r in doc["rows"]]
    assert len(cells) == len(raws) >= 5
    scale = {"µs": 1e-3, "KiB": 2**-10}.get(header.rsplit("(", 1)[-1].rstrip(")"), 1.0)
    for (text, attrs), raw in zip(cells, raws, strict=True):
        assert "class" not in attrs and "data-sort" not in attrs, (header, text)  # no per-cell weight
        if raw is None:
            assert text == EM_DASH, header  # null: the browser keeps it last
            continue
        assert not (unit and text.endswith(unit)), (header, text)  # the unit is in the header, not in the cell
        assert float(text.replace(",", "")) == pytest.approx(raw * scale, rel=5e-3, abs=0.051), (header, text, raw)


def test_text_columns_stay_left_aligned_and_show_nulls_as_a_dash(example_site: RenderResult) -> None:
    join = tables(_page(example_site, "04-time-share.html"))[0]
    head, cells = _column(join, "kernel")
    assert "class" not in head and "data-sort-method" not in head  # site-tables.js sorts it as text
    assert str([h for h, _ in join["head"]].index("kernel") + 1) not in join["attrs"]["data-num"].split()
    assert all("num" not in (a.get("class") or "") for _, a in cells)
    _, split = _column(join, "share split by")
    assert EM_DASH in {t for t, _ in split} and len({t for t, _ in split}) > 1


def test_time_share_is_one_chart_per_cell_each_adding_up_to_100(example_site: RenderResult) -> None:
    charts = figures(_page(example_site, "04-time-share.html"))
    cells = ["decode-b16-kv2048", "prefill-b8-s1024", "prefill-b8-s1024-attach"]
    assert list(charts) == [f"time-share-{c}" for c in cells]
    join = json.loads(read_download(example_site.campaign_site / "04-time-share.join.json"))["rows"]
    for cell in cells:
        data, layout = charts[f"time-share-{cell}"]
        assert [t["type"] for t in data] == ["bar"] and cell in layout["title"]["text"]
        own = {r["label"]: r["time_share_pct"] for r in join if r["cell_id"] == cell}
        bars = dict(zip(map(html.unescape, data[0]["y"]), data[0]["x"], strict=True))  # plotly shows it as text
        assert set(bars) == set(own)  # this cell's kernels only, every one of them
        assert sum(bars.values()) == pytest.approx(100.0, abs=0.05)
        assert bars == pytest.approx(own, rel=1e-3)
        cell_chart = figures(_page(example_site, f"cell-{cell}.html"))["cell-time-share"][0]
        # the same chart on the cell's own page
        assert dict(zip(map(html.unescape, cell_chart[0]["y"]), cell_chart[0]["x"], strict=True)) == bars


def _stall_colours(html: str, div_id: str) -> dict[str, str]:
    data, _ = figures(html)[div_id]
    return {t["name"]: t["marker"]["color"] for t in data}


def test_a_stall_reason_has_one_colour_on_page_6_and_on_every_cell_page(example_site: RenderResult) -> None:
    campaign = _stall_colours(_page(example_site, "06-kernel-internals.html"), "warp-stalls-chart")
    assert len(set(campaign.values())) == len(campaign) >= 15  # every reason its own colour
    for cell in ("decode-b16-kv2048", "prefill-b8-s1024"):
        own = _stall_colours(_page(example_site, f"cell-{cell}.html"), "cell-warp-stalls")
        assert len(own) >= 15
        assert {r: campaign[r] for r in own} == own, cell
    # the reasons rank differently per page (by their stall cycles there), the colours do not follow the rank
    order = list(figures(_page(example_site, "cell-prefill-b8-s1024.html"))["cell-warp-stalls"][0])
    assert [t["name"] for t in order] != list(campaign)


def test_markdown_in_prose_is_rendered_not_shown(campaign: Path, tmp_path: Path) -> None:
    """The "no data yet" prose of a campaign with nothing imported: its `code` spans are <code>, never backticks."""
    site = report_render(campaign, tmp_path / "site")
    serving = _page(site, "02-serving.html")
    assert "<code>vllm bench serve</code>" in serving and "<code>captures:</code>" in serving
    for page in ("02-serving.html", "03-step-budget.html", "07-frontier.html"):
        text = Text()
        text.feed(_page(site, page))
        assert text.texts and not [t for t in text.texts if "`" in t], page


def _hex(colour: str) -> tuple[float, ...]:
    digits = colour[1:] if len(colour) == 7 else "".join(c * 2 for c in colour[1:])  # #222 = #222222
    return tuple(int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4))


def _contrast(a: str, b: str) -> float:
    def lum(c: str) -> float:
        r, g, bl = (x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in _hex(c))
        return 0.2126 * r + 0.7152 * g + 0.0722 * bl
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_dark_mode_sets_every_colour_and_stays_readable(example_site: RenderResult) -> None:
    css = (example_site.site_dir / "static" / "site.css").read_text()
    light_block, dark_block = css.split("@media (prefers-color-scheme: dark)")
    light = dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6}|#[0-9a-f]{3})\b", light_block))
    dark = dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6}|#[0-9a-f]{3})\b", dark_block))
    assert set(dark) == set(light)  # every colour the light scheme sets, the dark one sets too
    assert "color: var(--fg); background: var(--bg)" in css
    for scheme in (light, dark):
        for fg, bg in (("fg", "bg"), ("muted", "bg"), ("link", "bg"), ("fg", "th-bg"), ("fg", "row-alt"),
                       ("fg", "missing-bg"), ("draft-fg", "draft-bg"), ("verdict-fg", "verdict-bg"),
                       ("head-link", "head-bg")):
            assert _contrast(scheme[fg], scheme[bg]) >= 4.5, (fg, bg, scheme[fg], scheme[bg])
    assert _contrast(dark["bg"], "#000000") < 1.5  # dark indeed


def test_no_page_shows_a_python_none(example_site: RenderResult) -> None:
    """Issue 30, point 8: an empty value shows an em dash or says what is missing, never Python's `None`."""

    for path, _ in example_site.pages:
        text = re.sub(r"<script\b.*?</script>", "", path.read_text(encoding="utf-8"), flags=re.S)
        assert not re.search(r"\bNone\b", text), path.name
