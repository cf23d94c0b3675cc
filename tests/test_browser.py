"""The rendered site in a real headless Chromium (Debian's `chromium`, driven by playwright), from file://.

Chromium is the system package (`apt-get install -y chromium`, done by `make browser`, part of `make test`);
playwright's own browser download is never used. A missing browser is a failure, not a skip. The roofline
screenshot is written to tests/artifacts/05-roofline.png (gitignored).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EVIL_FIELD, EVIL_KERNEL, kernel_page_data, read_download
from test_site_pages import figures

from perfreport.site import charts
from perfreport.site.charts import USEFUL_NAME
from perfreport.site.render import RenderResult, report_render

CHROMIUM = os.environ.get("PERFREPORT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"

# Per roofline trace drawn as SVG: its marker symbol and the number of points plotly drew.
COUNT_POINTS = """(id) => {
  const gd = document.getElementById(id);
  return Array.from(gd.querySelectorAll('.scatterlayer .trace')).map(el => {
    const trace = el.__data__[0].trace;
    return {name: trace.name, meta: trace.meta || null, symbol: trace.marker ? trace.marker.symbol : null,
            mode: trace.mode, points: el.querySelectorAll('path.point').length};
  });
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: run `make venv` (it installs the [test] extra, which lists "
                    "playwright) or `.venv/bin/pip install playwright`.")
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's package as root with `apt-get update && "
                    f"apt-get install -y chromium` (`make browser`, part of `make test`, does this), or set "
                    f"PERFREPORT_CHROMIUM to its path. playwright's own browser download is not used.")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Visit:
    """One page opened from file://, with its console errors, page errors, requests and dialogs."""

    def __init__(self, browser: Any, path: Path, color_scheme: str = "light") -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900}, color_scheme=color_scheme)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", self._dialog)
        self.page.goto(path.as_uri(), wait_until="load")
        self.page.wait_for_timeout(150)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def check_offline_and_clean(self) -> None:
        assert self.errors == [], self.errors
        offline = [u for u in self.requests if not u.startswith(("file://", "data:"))]
        assert offline == [], f"network requests from a file:// page: {offline}"
        assert self.dialogs == []


def _pages(result: RenderResult) -> list[Path]:
    return [result.index_path] + [p for p, _ in result.pages]


# Per chart: the trace types it was given, and those plotly drew (a type missing from the loaded bundle comes back
# as visible: false).
DRAWN = """() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(gd => ({
  id: gd.id, svg: gd.querySelector('.main-svg') !== null, given: gd.data.map(t => t.type || 'scatter'),
  drawn: gd._fullData.map(t => t.visible === false ? 'NOT DRAWN ' + t.type : t.type)}))"""


def test_every_page_opens_offline_without_errors(browser: Any, example_site: RenderResult,
                                                 rich_site: RenderResult) -> None:
    """Pages without a chart load no plotly.js; pages with one draw every trace with the bundle they load (the
    basic bundle here: these campaigns have no WebGL roofline)."""
    charted = 0
    for path in _pages(example_site) + _pages(rich_site):
        visit = Visit(browser, path)
        try:
            visit.check_offline_and_clean()
            charts = visit.page.evaluate(DRAWN)
            loaded = visit.page.evaluate("typeof window.Plotly !== 'undefined'")
            assert loaded == bool(charts), f"{path.name}: plotly.js loaded {loaded}, charts {len(charts)}"
            for chart in charts:
                assert chart["svg"] and chart["drawn"] == chart["given"], (path.name, chart)
            charted += bool(charts)
        finally:
            visit.page.close()
    assert charted >= 10


# The sort value of one column's visible rows, in row order: data-sort where the cell has one (kernel pages), else
# its text; "" for a null (an em dash).
COLUMN = """([t, c]) => Array.from(document.querySelectorAll('table.data')[t].tBodies[0].rows)
  .filter(r => !r.hidden).map(r => { const td = r.cells[c];
    const v = td.hasAttribute('data-sort') ? td.getAttribute('data-sort') : td.textContent.trim();
    return v === '\u2014' ? '' : v; })"""
# Per data table: its rows, whether tablesort took it, whether a filter box stands above its scroll box.
TABLES = """() => Array.from(document.querySelectorAll('table.data')).map(t => [t.tBodies[0].rows.length,
  t.querySelector('th[role=columnheader]') !== null,
  !!(t.parentNode.previousElementSibling && t.parentNode.previousElementSibling.classList.contains('filter'))])"""
NATURAL = """(values) => values.every((v, i) => i === 0 ||
  values[i - 1].localeCompare(v, undefined, {numeric: true, sensitivity: 'base'}) <= 0)"""


def _sorted(page: Any, values: list[str], numeric: bool, descending: bool) -> bool:
    """Sorted with nulls ("") last: numbers by value, text in natural order."""
    present = [v for v in values if v != ""]
    if values != present + [""] * (len(values) - len(present)):
        return False
    if numeric:  # as shown: 1,234.5
        return present == sorted(present, key=lambda v: float(v.replace(",", "")), reverse=descending)
    return bool(page.evaluate(NATURAL, present[::-1] if descending else present))


def _check_table(page: Any, index: int, name: str) -> None:
    """Click a header (the first numeric column with a null if there is one, else the first numeric one, else the
    first column): rows sorted by it, nulls last; click again: the other way; then the filter box narrows rows."""
    table = page.locator("table.data").nth(index)
    heads = table.locator("thead th")
    numeric = [i for i in range(heads.count()) if heads.nth(i).get_attribute("data-sort-method") == "num"]
    with_null = [i for i in numeric if "" in page.evaluate(COLUMN, [index, i])]
    col = (with_null or numeric or [0])[0]
    is_num = col in numeric
    before = page.evaluate(COLUMN, [index, col])
    heads.nth(col).click()
    first = page.evaluate(COLUMN, [index, col])
    assert sorted(first) == sorted(before) and _sorted(page, first, is_num, descending=is_num), (name, col, first)
    heads.nth(col).click()
    second = page.evaluate(COLUMN, [index, col])
    assert _sorted(page, second, is_num, descending=not is_num), (name, col, second)
    if len({v for v in first if v}) > 1:
        assert first != second, (name, col)
    rows = table.locator("tbody tr")
    total = rows.count()
    box = table.locator("xpath=../preceding-sibling::div[@class='filter'][1]/input")
    word = rows.nth(0).inner_text().split()[0]
    box.fill(word)
    shown = [r for r in rows.all() if r.is_visible()]
    assert shown and all(word.lower() in r.inner_text().lower() for r in shown), (name, word)
    box.fill("no row holds this text")
    assert not any(r.is_visible() for r in rows.all()) and total >= 5, name
    box.fill("")
    assert rows.count() == total and all(r.is_visible() for r in rows.all()), name


def test_every_table_of_five_rows_sorts_and_filters(browser: Any, example_site: RenderResult,
                                                    rich_site: RenderResult) -> None:
    checked = 0
    for path in _pages(example_site) + _pages(rich_site):
        visit = Visit(browser, path)
        try:
            counts = visit.page.evaluate(TABLES)
            for i, (rows, sortable, filtered) in enumerate(counts):
                assert sortable or rows < 2, (path.name, i)
                assert filtered == (rows >= 5), (path.name, i, rows)
                if rows >= 5:
                    _check_table(visit.page, i, f"{path.name} table {i}")
                    checked += 1
            visit.check_offline_and_clean()
        finally:
            visit.page.close()
    assert checked >= 20


def test_roofline_draws_one_point_per_kernel_per_cell(browser: Any, example_site: RenderResult) -> None:
    kernels = []
    for cell in ("decode-b16-kv2048", "prefill-b8-s1024"):
        table = json.loads(read_download(example_site.campaign_site / f"cell-{cell}.kernels.json"))
        kernels += table["rows"]
    # every kernel of these cells has a --set full row: their --set basic rows are not drawn; the hollow strip holds
    # the attach cell's three --set basic rows (no full twin)
    with_ai = sum(1 for k in kernels if k["arithmetic_intensity"] is not None)
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html")
    try:
        visit.check_offline_and_clean()
        assert visit.page.locator("#roofline .main-svg").count() >= 1
        traces = visit.page.evaluate(COUNT_POINTS, "roofline")
        markers = [t for t in traces if t["mode"] == "markers"]
        filled = sum(t["points"] for t in markers if t["symbol"] == "circle")
        hollow = sum(t["points"] for t in markers if t["symbol"] == "circle-open")
        ridges = sum(t["points"] for t in markers if t["name"] == "ridge points")
        assert (filled, hollow, ridges) == (with_ai, 3, 2) == (20, 3, 2)
        useful = sum(t["points"] for t in markers if t["symbol"] == "diamond-open")  # decode attention's useful work
        # L2/L1 points: legend-only
        assert visit.page.locator("#roofline path.point").count() == filled + hollow + ridges + useful == 26
        roofs = {t["meta"] for t in traces if t["mode"] == "lines" and t["name"] != USEFUL_NAME}
        assert roofs == {"h200_sm90.hbm_tbps", "h200_sm90.bf16_dense_tflops", "h200_sm90.fp32_tflops",
                         "h200_sm90.empirical.l2_tbps", "h200_sm90.empirical.bf16_gemm_burst_tflops",
                         "h200_sm90.empirical.device_copy_tbps", "h200_sm90.empirical.l2_copy_tbps"}
        assert visit.page.get_by_text("SM busy % (AI unmeasured").count() == 1
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "05-roofline.png"
        visit.page.locator("#roofline").screenshot(path=str(shot))
        print(f"roofline screenshot: {shot}")
        assert shot.stat().st_size > 20_000
    finally:
        visit.page.close()


def test_legend_click_hides_a_cell(browser: Any, example_site: RenderResult) -> None:
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html")
    try:
        before = visit.page.locator("#roofline path.point").count()
        traces = visit.page.evaluate(COUNT_POINTS, "roofline")
        hidden = next(t["points"] for t in traces if t["name"] == "prefill-b8-s1024 · AI measured")
        entry = visit.page.locator("#roofline g.traces").filter(
            has=visit.page.locator(".legendtext", has_text="prefill-b8-s1024 · AI measured"))
        entry.locator("rect.legendtoggle").click()  # plotly waits out its double-click delay, then redraws
        visit.page.wait_for_function(f"document.querySelectorAll('#roofline path.point').length < {before}",
                                     timeout=5000)
        assert visit.page.locator("#roofline path.point").count() == before - hidden == 26 - 9
    finally:
        visit.page.close()


def test_hostile_names_render_as_text_and_no_dialog_fires(browser: Any, evil_site: RenderResult) -> None:
    for path in _pages(evil_site):
        visit = Visit(browser, path)
        try:
            visit.check_offline_and_clean()
            assert visit.page.locator("main img").count() == 0
            if path.name == "cell-decode-b16-kv2048.html":
                assert visit.page.get_by_text(EVIL_KERNEL, exact=True).count() >= 1
            if path.name == "01-summary.html":
                assert visit.page.get_by_text(EVIL_FIELD, exact=True).count() == 1
            if path.name == "kernel-decode-b16-kv2048.html":  # the kernel list, drawn by kernel-page.js
                assert visit.page.locator("#kernel-list-table").get_by_text(EVIL_KERNEL, exact=True).count() >= 1
        finally:
            visit.page.close()


def _kernel_doc(page: Path) -> dict[str, Any]:
    return dict(kernel_page_data(page))


def test_kernel_page_draws_every_part_of_one_kernel(browser: Any, example_site: RenderResult) -> None:
    """The prefill o-proj GEMM (#1 of its name, grid and block): identity, its time share, the ncu commands, every
    derived number with formula and metrics, stalls in cycles, rule results with estimated speedups, launches."""
    path = example_site.campaign_site / "kernel-prefill-b8-s1024.html"
    data = _kernel_doc(path)
    full = next(s["source"] for s in data["sources"] if s["section_set"] == "full")
    row = next(k for k in data["doc"]["kernels"] if k["source"] == full and k["instance"] == 1
               and k["function"].startswith("nvjet_sm90_tst_256x128"))
    visit = Visit(browser, path)
    try:
        visit.page.goto(path.as_uri() + "#" + row["id"])
        visit.page.wait_for_selector("#derived-table")
        visit.check_offline_and_clean()
        assert visit.page.locator("h2.kernel-title").inner_text() == f"{row['id']} {row['function']} #1"
        identity = visit.page.locator("#identity-table").inner_text()
        assert f"ncu launch ids {row['launch_ids'][0]}" in identity and "did different work" in identity
        join = visit.page.locator("#join-table tbody tr")
        share = next(r["time_share_pct"] for r in data["join"] if r["kernel_id"] == row["id"])
        assert join.count() == 1 and join.locator("td").nth(1).inner_text() == f"{share:.4g}"
        assert "time share (%)" in visit.page.locator("#join-table thead").inner_text()
        commands = visit.page.locator("#open pre").all_inner_texts()
        assert f"--launch-skip {row['launch_ids'][0]} --launch-count 1" in commands[1]
        derived = visit.page.locator("#derived-table").inner_text()
        for metric in ("gpu__time_duration.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct"):
            assert metric in derived
        assert "flops.total (else, where flops_uncounted, the counted parts' sum) / dram_bytes" in derived
        tensor_row = visit.page.locator("#derived-table tr", has_text="tensor_pipe_active_pct").inner_text()
        assert f"{row['tensor_pipe_active_pct']:.4g}".split(".")[0] in tensor_row
        stalls = visit.page.locator("#stalls-table tbody tr")
        assert stalls.count() == len(row["warp_stall_cycles"])
        top = max(row["warp_stall_cycles"], key=row["warp_stall_cycles"].get)
        assert stalls.first.inner_text().startswith(top)
        shown = [float(c) for c in visit.page.locator("#stalls-table tbody tr td:nth-child(2)").all_inner_texts()
                 if c.strip() not in ("", "\u2014")]
        said = visit.page.locator("#stalls p.note").first.inner_text()
        total = float(said.split("the rows below add up to ")[1].split(" cycles")[0].replace(",", ""))
        assert total == pytest.approx(sum(shown), rel=1e-3)  # the total said is the sum shown
        assert total == pytest.approx(sum(v for v in row["warp_stall_cycles"].values() if v is not None), rel=1e-3)
        assert "ncu's warp cycles per issued instruction: " in said
        rules = visit.page.locator("#rules-table tbody tr")
        assert rules.count() == len(row["rules"]) > 3
        with_speedup = [r for r in row["rules"] if r["speedup_pct"] is not None]
        assert visit.page.locator("#rules-table").get_by_text(f" ({with_speedup[0]['speedup_type']})").count() >= 1
        assert visit.page.locator("#launches-table tbody tr").count() == row["launches"]
        for name in ("derived-table", "stalls-table", "rules-table"):  # tables built in JS sort and filter too
            index = visit.page.evaluate(f"Array.from(document.querySelectorAll('table.data'))"
                                        f".findIndex(t => t.id === '{name}')")
            _check_table(visit.page, index, name)
        assert visit.page.locator("#identity-table th[role=columnheader]").count() == 0  # a list of facts
        visit.page.locator("a", has_text="all kernel rows of cell").click()  # back to the cell's list
        visit.page.wait_for_selector("#kernel-list-table")
        assert visit.page.locator("#kernel-list-table tbody tr").count() == len(data["doc"]["kernels"])
    finally:
        visit.page.close()


def test_roofline_marker_click_opens_its_kernel_page(browser: Any, example_site: RenderResult) -> None:
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html")
    try:
        target = visit.page.evaluate("""() => {
          const gd = document.getElementById('roofline');
          const i = gd.data.findIndex(t => t.legendgroup === 'decode-b16-kv2048' && t.customdata);
          const p = {customdata: gd.data[i].customdata[0], data: gd.data[i]};
          gd.emit('plotly_click', {points: [p]});
          return String(p.customdata[1]).split(' ')[0];
        }""")
        visit.page.wait_for_url(f"**/kernel-decode-b16-kv2048.html#{target}")
        visit.page.wait_for_selector("#derived-table")
        assert visit.page.locator("h2.kernel-title").inner_text().startswith(target + " ")
    finally:
        visit.page.close()


@pytest.fixture(scope="module")
def compact_site(example_campaign: Path, tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    """The example site with its roofline laid out as past charts.COMPACT_THRESHOLD points (10,000 in bench_render):
    one trace per compute roof and kind for every cell, not one per cell."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(charts, "COMPACT_THRESHOLD", 0)
        return report_render(example_campaign, tmp_path_factory.mktemp("compact-site"))


# The kernel (cell, kernel id) a compact roofline trace's point stands for: its last customdata slot starts with the
# cell, customdata[1] with the kernel id.
COMPACT_POINT = """([curve, point]) => { const d = document.getElementById('roofline').data[curve].customdata[point];
  return [String(d[d.length - 1]).split(' ')[0], String(d[1]).split(' ')[0]]; }"""


def test_a_roofline_of_many_points_keeps_its_hollow_markers_and_click_through(
        browser: Any, compact_site: RenderResult) -> None:
    page = compact_site.campaign_site / "05-roofline.html"
    assert "plotly-basic.min.js" in page.read_text(encoding="utf-8")  # SVG traces: never the 4.8 MB full bundle
    rows = json.loads(read_download(compact_site.campaign_site / "05-roofline.points.json"))["rows"]
    # per compute roof and kind, the points the table lists: those of the per-cell layout (26 with ridges and useful)
    want = Counter(f"{charts._roof_words(r['ceiling_key'])} roof · "
                   f"{'AI measured' if r['measured'] else charts.UNMEASURED_LABEL}" for r in rows)
    visit = Visit(browser, page)
    try:
        visit.check_offline_and_clean()
        traces = visit.page.evaluate(COUNT_POINTS, "roofline")
        kernel = [t for t in traces if t["mode"] == "markers" and " roof · " in t["name"]]
        assert {t["name"]: t["points"] for t in kernel} == want and len(kernel) == 3
        assert all((t["symbol"] == "circle-open") is t["name"].endswith(charts.UNMEASURED_LABEL) for t in kernel)
        assert sum(t["points"] for t in kernel if t["symbol"] == "circle-open") == 3
        assert visit.page.locator("#roofline .x2y2 .scatterlayer path.point").count() == 3  # in the strip
        assert visit.page.locator("#roofline path.point").count() == 26
        curves = visit.page.evaluate("() => document.getElementById('roofline').data.map(t => t.name)")
        filled = curves.index("fp32 roof · AI measured")
        cell, kernel_id = visit.page.evaluate(COMPACT_POINT, [filled, 2])
        visit.page.evaluate("""([curve, point]) => { const gd = document.getElementById('roofline');
          gd.emit('plotly_click', {points: [{customdata: gd.data[curve].customdata[point], data: gd.data[curve]}]});
          }""", [filled, 2])
        visit.page.wait_for_url(f"**/kernel-{cell}.html#{kernel_id}")
        visit.page.wait_for_selector("#derived-table")
        assert visit.page.locator("h2.kernel-title").inner_text().startswith(kernel_id + " ")
    finally:
        visit.page.close()
    visit = Visit(browser, page)
    try:  # a real click on a hollow marker in the strip: plotly finds the point, the handler its cell
        marker = visit.page.locator("#roofline .x2y2 .scatterlayer path.point").first
        box = marker.bounding_box()
        assert box is not None
        visit.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        visit.page.mouse.down()
        visit.page.mouse.up()
        visit.page.wait_for_url("**/kernel-prefill-b8-s1024-attach.html#k*")
        kernel_id = visit.page.url.rsplit("#", 1)[1]
        visit.page.wait_for_selector("#derived-table")
        assert visit.page.locator("h2.kernel-title").inner_text().startswith(kernel_id + " ")
    finally:
        visit.page.close()


# The colours a reader sees: computed styles of the page, a header cell, a body cell, a link and a note.
COLOURS = """() => { const c = (sel, p) => getComputedStyle(document.querySelector(sel))[p];
  return {bg: c('body', 'backgroundColor'), fg: c('body', 'color'), th: c('table.data th', 'color'),
          th_bg: c('table.data th', 'backgroundColor'), td: c('table.data td', 'color'),
          link: c('main table.data a', 'color'), note: c('.note', 'color')}; }"""


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(int(x) / 255 for x in css[css.index("(") + 1:css.index(")")].split(",")[:3])


def _contrast(a: str, b: str) -> float:
    def lum(c: str) -> float:
        r, g, bl = (x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in _rgb(c))
        return 0.2126 * r + 0.7152 * g + 0.0722 * bl
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_is_readable_in_the_readers_colour_scheme(browser: Any, example_site: RenderResult,
                                                       scheme: str) -> None:
    """prefers-color-scheme: the dark scheme turns the page dark and keeps text, headers, links and notes at a
    readable contrast (WCAG AA, 4.5:1); charts keep their white plotly background."""
    # page 5 holds every kind of text checked: body, table headers and cells, links in a table, a note, a chart
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html", color_scheme=scheme)
    try:
        visit.check_offline_and_clean()
        c = visit.page.evaluate(COLOURS)
        dark = _contrast(c["bg"], "rgb(0, 0, 0)") < 1.5
        assert dark == (scheme == "dark"), c
        for fg, bg in (("fg", "bg"), ("td", "bg"), ("th", "th_bg"), ("link", "bg"), ("note", "bg")):
            assert _contrast(c[fg], c[bg]) >= 4.5, (scheme, fg, bg, c)
        card = visit.page.evaluate("getComputedStyle(document.querySelector('.plotly-graph-div')).backgroundColor")
        assert card == "rgb(255, 255, 255)"  # the chart's dark text sits on white in either scheme
    finally:
        visit.page.close()


def test_wide_tables_scroll_sideways_under_a_header_that_stays(browser: Any, example_site: RenderResult) -> None:
    """No width cap cuts a table: a table wider than the window scrolls inside its box (every column reachable),
    and its header row stays at the top of the box while the rows scroll."""
    visit = Visit(browser, example_site.campaign_site / "04-time-share.html")
    try:
        box = visit.page.locator("#table-join .scroll")
        size = box.evaluate("e => ({sw: e.scrollWidth, cw: e.clientWidth, sh: e.scrollHeight, ch: e.clientHeight,"
                            " right: e.getBoundingClientRect().right, win: window.innerWidth})")
        assert size["sw"] > size["cw"] and size["right"] <= size["win"], size  # wide: scrolls, inside the window
        last = visit.page.locator("#table-join thead th").last
        box.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
        assert last.evaluate("(th, box) => th.getBoundingClientRect().right <= box.getBoundingClientRect().right + 1",
                             box.element_handle())  # the last column comes into view
        align = visit.page.evaluate("""() => { const t = document.querySelector('#table-join table');
          const col = h => Array.from(t.tHead.rows[0].cells).findIndex(th => th.textContent.startsWith(h));
          const td = h => getComputedStyle(t.tBodies[0].rows[0].cells[col(h)]).textAlign;
          return [td('time share (%)'), td('ncu duration (ms)'), td('kernel')]; }""")
        assert align == ["right", "right", "left"]  # numbers right-aligned by site.css, text left
    finally:
        visit.page.close()
    visit = Visit(browser, example_site.campaign_site / "06-kernel-internals.html")  # 39 rows: taller than its box
    try:
        box = visit.page.locator("#table-internals .scroll")
        assert box.evaluate("e => e.scrollHeight > e.clientHeight + 200")
        box.evaluate("e => { e.scrollTop = 200; }")
        offset = visit.page.locator("#table-internals thead th").first.evaluate(
            "(th, box) => th.getBoundingClientRect().top - box.getBoundingClientRect().top", box.element_handle())
        assert abs(offset) <= 2, offset  # sticky: still at the top of the box
    finally:
        visit.page.close()


BOXES = """(id) => {
  const gd = document.getElementById(id);
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {title: box(gd.querySelector('.gtitle')),
          labels: Array.from(gd.querySelectorAll('.annotation .annotation-text-g')).map(box),
          legend: Array.from(gd.querySelectorAll('.legendtext')).map(el => el.textContent)};
}"""


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def test_the_roofline_reads_at_a_glance(browser: Any, example_site: RenderResult) -> None:
    """Issue 30, point 7: no label covers another or the title; roofs are readable names in the legend."""
    visit = Visit(browser, example_site.campaign_site / "05-roofline.html")
    try:
        boxes = visit.page.evaluate(BOXES, "roofline")
        labels = boxes["labels"]
        assert len(labels) >= 6  # the biggest kernels are labelled
        assert not any(_overlap(boxes["title"], b) for b in labels)
        assert not any(_overlap(a, b) for i, a in enumerate(labels) for b in labels[i + 1:])
        legend = boxes["legend"]
        assert "bf16 dense 989.5 TFLOP/s (datasheet)" in legend and "HBM 4.8 TB/s (datasheet)" in legend
        assert not any(t.startswith("h200_sm90.") for t in legend)  # the key path is on hover, not the name
        hover = visit.page.evaluate("() => document.getElementById('roofline').data"
                                    ".filter(t => t.mode === 'lines' && t.legendgroup !== 'useful')"
                                    ".map(t => t.hovertemplate)")  # the roofs, not the useful-work links
        assert all(h.startswith("h200_sm90.") for h in hover)
    finally:
        visit.page.close()


def test_the_warp_stall_chart_draws_each_kernel_on_its_labelled_row(browser: Any, example_site: RenderResult) -> None:
    """The chart's bars carry no y of their own (rows 0..n-1) and the labels are the axis's tick text, written once:
    every row's tick shows its kernel and every reason's bars stack on the rows, in the figure's order."""
    page = example_site.campaign_site / "cell-prefill-b8-s1024.html"
    visit = Visit(browser, page)
    try:
        visit.page.wait_for_selector("#cell-warp-stalls .ytick text")
        drawn = visit.page.evaluate("""() => { var gd = document.getElementById('cell-warp-stalls');
            return {ticks: Array.from(gd.querySelectorAll('.ytick text')).map(function (t) { return t.textContent; }),
                    rows: gd.calcdata.map(function (c) { return c.map(function (b) { return b.p; }); })}; }""")
        visit.check_offline_and_clean()
    finally:
        visit.page.close()
    data, layout = figures(page.read_text(encoding="utf-8"))["cell-warp-stalls"]
    labels = [html.unescape(t) for t in layout["yaxis"]["ticktext"]]
    assert labels and all(" · k" in t for t in labels)  # cell · kernel id label
    assert drawn["ticks"] == labels
    assert drawn["rows"] == [list(range(len(labels)))] * len(data)
