"""The rendered site in a real headless Chromium (Debian's `chromium`, driven by playwright), from file://.

Chromium is the system package (`apt-get install -y chromium`, done by `make browser`, part of `make test`);
playwright's own browser download is never used. A missing browser is a failure, not a skip. The roofline
screenshot is written to tests/artifacts/05-roofline.png (gitignored).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EVIL_FIELD, EVIL_KERNEL

from perfreport.site.render import RenderResult

CHROMIUM = os.environ.get("PERFREPORT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"

# Per roofline trace drawn as SVG: its marker symbol and the number of points plotly drew.
COUNT_POINTS = """(id) => {
  const gd = document.getElementById(id);
  return Array.from(gd.querySelectorAll('.scatterlayer .trace')).map(el => {
    const trace = el.__data__[0].trace;
    return {name: trace.name, symbol: trace.marker ? trace.marker.symbol : null, mode: trace.mode,
            points: el.querySelectorAll('path.point').length};
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

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
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


def test_every_page_opens_offline_without_errors(browser: Any, example_site: RenderResult,
                                                 rich_site: RenderResult) -> None:
    for path in _pages(example_site) + _pages(rich_site):
        visit = Visit(browser, path)
        try:
            visit.check_offline_and_clean()
            for chart in visit.page.query_selector_all(".plotly-graph-div"):
                assert chart.query_selector(".main-svg") is not None, f"{path.name}: a chart did not draw"
        finally:
            visit.page.close()


def test_roofline_draws_one_point_per_kernel_per_cell(browser: Any, example_site: RenderResult) -> None:
    kernels = []
    for cell in ("decode-b16-kv2048", "prefill-b8-s1024"):
        table = json.loads((example_site.campaign_site / f"cell-{cell}.kernels.json").read_text())
        kernels += table["rows"]
    # every kernel has a --set full row: the --set basic rows of the same kernels are not drawn (no hollow strip)
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
        assert (filled, hollow, ridges) == (with_ai, 0, 2) == (20, 0, 2)
        assert visit.page.locator("#roofline path.point").count() == filled + ridges  # L2/L1 points: legend-only
        roofs = {t["name"] for t in traces if t["mode"] == "lines"}
        assert roofs == {"h200_sm90.hbm_tbps", "h200_sm90.bf16_dense_tflops", "h200_sm90.fp32_tflops",
                         "h200_sm90.empirical.l2_tbps", "h200_sm90.empirical.bf16_gemm_burst_tflops",
                         "h200_sm90.empirical.device_copy_tbps", "h200_sm90.empirical.l2_copy_tbps"}
        assert visit.page.get_by_text("SM busy % (AI unmeasured").count() == 0
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
        assert visit.page.locator("#roofline path.point").count() == before - hidden == 22 - 9
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
    text = page.read_text()
    start = text.index('id="kernel-data">') + len('id="kernel-data">')
    return json.loads(text[start:text.index("</script>", start)])


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
        assert join.count() == 1 and "%" in join.inner_text()
        commands = visit.page.locator("#open pre").all_inner_texts()
        assert f"--launch-skip {row['launch_ids'][0]} --launch-count 1" in commands[1]
        derived = visit.page.locator("#derived-table").inner_text()
        for metric in ("gpu__time_duration.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "lts__t_sector_hit_rate.pct"):
            assert metric in derived
        assert "flops.total / dram_bytes" in derived
        tensor_row = visit.page.locator("#derived-table tr", has_text="tensor_pipe_active_pct").inner_text()
        assert f"{row['tensor_pipe_active_pct']:.4g}".split(".")[0] in tensor_row
        stalls = visit.page.locator("#stalls-table tbody tr")
        assert stalls.count() == len(row["warp_stall_cycles"])
        top = max(row["warp_stall_cycles"], key=row["warp_stall_cycles"].get)
        assert stalls.first.inner_text().startswith(top)
        rules = visit.page.locator("#rules-table tbody tr")
        assert rules.count() == len(row["rules"]) > 3
        with_speedup = [r for r in row["rules"] if r["speedup_pct"] is not None]
        assert visit.page.locator("#rules-table").get_by_text(f"% ({with_speedup[0]['speedup_type']})").count() >= 1
        assert visit.page.locator("#launches-table tbody tr").count() == row["launches"]
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
