"""Rendered site: golden pages (compared as parsed HTML structure), determinism, escaping, every section.

Regenerate the golden pages after an intended change, then review the diff:
    PERFREPORT_REGEN_GOLDEN=1 .venv/bin/pytest tests/test_render.py && git diff tests/golden/site
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import EVIL_FIELD, EVIL_KERNEL, read_download, run_cli

from perfreport.site.render import RenderResult, report_render

GOLDEN = Path(__file__).parent / "golden" / "site"
CAMPAIGN = "h200-decoder-layer"
PAGES = ["01-summary.html", "02-serving.html", "03-step-budget.html", "04-time-share.html", "05-roofline.html",
         "06-kernel-internals.html", "07-frontier.html", "08-history.html", "cell-decode-b16-kv2048.html",
         "cell-prefill-b8-s1024.html", "cell-prefill-b8-s1024-attach.html"]
# one kernel page per cell, drawn in the browser from its data (tests/test_kernel_pages.py, tests/test_browser.py)
KERNEL_PAGES = ["kernel-decode-b16-kv2048.html", "kernel-prefill-b8-s1024.html",
                "kernel-prefill-b8-s1024-attach.html"]
KEPT_ATTRS = ("id", "class", "href", "src", "rel", "lang", "charset", "data-num", "data-sort-method")
# the pages that draw a chart in the example campaign: only they load plotly.js (the basic bundle: no WebGL trace)
CHART_PAGES = {"02-serving.html", "03-step-budget.html", "04-time-share.html", "05-roofline.html",
               "06-kernel-internals.html", "cell-decode-b16-kv2048.html", "cell-prefill-b8-s1024.html",
               "cell-prefill-b8-s1024-attach.html"}
STATIC_FILES = ["plotly-basic.min.js", "site-tables.js", "site.css", "tablesort.min.js"]


class Outline(HTMLParser):
    """Element structure: start/end tags with stable attributes, whitespace-normalized text, plotly figures."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[Any] = []
        self._script: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.items.append(["<" + tag, {k: v for k, v in attrs if k in KEPT_ATTRS}])
        if tag == "script":
            self._script = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            body, self._script = "".join(self._script), None
            if "Plotly.newPlot(" in body:
                self.items.append(["plotly", *plotly_args(body)])
        self.items.append(["/" + tag])

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
        elif text := " ".join(data.split()):
            self.items.append(["text", text])


def plotly_args(script: str) -> list[Any]:
    """The (div id, data, layout) a Plotly.newPlot call receives, parsed as JSON."""
    decoder = json.JSONDecoder()
    rest = script[script.index("Plotly.newPlot(") + len("Plotly.newPlot("):]
    args = []
    for _ in range(3):
        rest = rest.lstrip().lstrip(",").lstrip()
        value, end = decoder.raw_decode(rest)
        args.append(value)
        rest = rest[end:]
    return args


def outline(html: str) -> list[Any]:
    parser = Outline()
    parser.feed(html)
    return parser.items


def assert_same(actual: Any, expected: Any, path: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(actual) == sorted(expected), path
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), path
        assert len(actual) == len(expected), f"{path}: {actual!r:.300} != {expected!r:.300}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-6), path
    else:
        assert actual == expected, path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _page(result: RenderResult, name: str) -> str:
    return (result.campaign_site / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("page", ["index.html", *PAGES])
def test_rendered_page_outline_matches_its_golden(example_site: RenderResult, page: str) -> None:
    actual = example_site.site_dir / page if page == "index.html" else example_site.campaign_site / page
    golden = GOLDEN / page if page == "index.html" else GOLDEN / CAMPAIGN / page
    if os.environ.get("PERFREPORT_REGEN_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(actual, golden)
    assert_same(outline(actual.read_text(encoding="utf-8")), outline(golden.read_text(encoding="utf-8")), page)


def test_only_chart_pages_load_plotly_no_network_urls_and_no_broken_links(example_site: RenderResult) -> None:
    site = example_site.site_dir
    assert sorted(p.name for p in (site / "static").iterdir()) == STATIC_FILES  # no full plotly.js: nothing is WebGL
    assert sorted(p.name for p in example_site.static) == STATIC_FILES
    assert sorted(p.name for p, _ in example_site.pages) == sorted(PAGES + KERNEL_PAGES)
    manifest = json.loads((example_site.campaign_site / "site.json").read_text())
    assert manifest["pages"] == PAGES + KERNEL_PAGES
    assert manifest["cells"] == ["decode-b16-kv2048", "prefill-b8-s1024", "prefill-b8-s1024-attach"]
    for page in PAGES + KERNEL_PAGES:
        html = _page(example_site, page)
        scripts = re.findall(r'<script src="([^"]+)"', html)
        assert [s for s in scripts if "plotly" in s] == (["../static/plotly-basic.min.js"] if page in CHART_PAGES
                                                          else []), page
        assert ("Plotly.newPlot(" in html) == (page in CHART_PAGES), page
        tables = [s for s in scripts if s.endswith(("tablesort.min.js", "site-tables.js"))]
        assert tables == ["../static/tablesort.min.js", "../static/site-tables.js"], page  # in this order
        assert not re.search(r'(src|href)="(https?:)?//', html), page  # nothing fetched from a network
        for link in re.findall(r'(?:href|src)="(?!data:)([^"#]+)"', html):
            assert (example_site.campaign_site / link).resolve().is_file(), f"{page}: broken link {link}"
    index = (site / "index.html").read_text()
    assert "plotly" not in index and 'src="static/site-tables.js"' in index


def test_every_table_has_csv_and_json_next_to_its_page(example_site: RenderResult) -> None:
    shared = 0
    for page in PAGES:
        html = _page(example_site, page)
        sections = re.findall(r'<section class="table" id="table-([^"]+)">(.*?)</section>', html, re.S)
        assert sections, page
        for table, body in sections:
            csv_name, json_name = re.search(r'download <a href="([^"]+)">CSV</a> · <a href="([^"]+)">JSON</a>',
                                            body).groups()
            assert csv_name.endswith(".csv.gz") and csv_name[:-7] == json_name[:-8]  # gzip-compressed, one stem
            doc = json.loads(read_download(example_site.campaign_site / json_name))
            rows = list(csv.DictReader(io.StringIO(read_download(example_site.campaign_site / csv_name))))
            assert doc["schema_version"] == 1 and len(doc["rows"]) == len(rows), json_name
            shown = int(re.search(r'<p class="downloads">(\d+) row', body).group(1))
            if csv_name == f"{page[:-5]}.{table}.csv.gz":
                assert len(rows) == shown, csv_name
                continue
            # a cell table's downloads are the campaign page's table: every row of this cell, every column shown
            shared += 1
            cell = page.removeprefix("cell-").removesuffix(".html")
            assert page.startswith("cell-") and f"cell_id `{cell}`" in body.replace("<code>", "`").replace(
                "</code>", "`"), (page, table)
            assert sum(r["cell_id"] == cell for r in rows) == shown, (page, table)
            keys = {c["key"] for c in doc["columns"]}
            heads = re.findall(r"<th[^>]*>", body)
            assert len(heads) <= len(keys), (page, table)
    assert shared >= 2  # the cells' join and internals tables
    names = {p.name for p in example_site.campaign_site.iterdir()}
    assert not any(n.startswith("cell-") and n.endswith((".join.csv.gz", ".internals.json.gz")) for n in names)


def test_render_is_deterministic(example_campaign: Path, example_site: RenderResult, tmp_path: Path) -> None:
    again = report_render(example_campaign, tmp_path / "site")
    assert _files(again.site_dir) == _files(example_site.site_dir)
    report_render(example_campaign, tmp_path / "site")
    assert _files(again.site_dir) == _files(example_site.site_dir)


def test_roofline_page_draws_one_point_per_kernel_per_cell_and_says_so(example_site: RenderResult,
                                                                         example_campaign: Path) -> None:
    html = _page(example_site, "05-roofline.html")
    figures = [i for i in outline(html) if i[0] == "plotly"]
    assert [f[1] for f in figures] == ["roofline"]
    data = figures[0][2]
    filled = sum(len(t["x"]) for t in data if t.get("marker", {}).get("symbol") == "circle")
    hollow = sum(len(t["x"]) for t in data if t.get("marker", {}).get("symbol") == "circle-open")
    # every kernel of the two full-set cells has a --set full row: the --set basic rows of the same kernels are not
    # drawn; the attach cell's --set basic rows have no twin, so they are the hollow markers
    full = sum(1 for cell in ("prefill-b8-s1024", "decode-b16-kv2048")
               for k in json.loads((example_campaign / "cells" / cell / "ncu_kernels.json").read_text())["kernels"]
               if k["ai_measured"])
    assert (filled, hollow) == (full, 3) == (20, 3)
    assert "kernels with measured arithmetic intensity (20)" in html and "kernels without it (3;" in html
    assert "kernel row(s) of a poorer capture" in html


def test_sections_without_data_say_what_to_capture(example_site: RenderResult) -> None:
    serving = _page(example_site, "02-serving.html")  # the step latency of each cell's profiled steps
    assert "No data yet." not in serving and "step_latency_ms.median" in serving
    steps = _page(example_site, "03-step-budget.html")  # from each cell's `steps:` trace (tests/test_demo_features)
    assert "No data yet." not in steps and "Kernel work is moot when host-bound" in steps
    assert "host-bound: the host gap is 64.9% of the steps&#39; time" in steps
    times = _page(example_site, "04-time-share.html")  # every cell carries a PyTorch-profiler timeline
    assert "torch" in times and "cells without one" not in times
    frontier = _page(example_site, "07-frontier.html")
    assert 'id="verdict-label">DRAFT<' in frontier and "krhpa:" in frontier
    summary = _page(example_site, "01-summary.html")
    assert "saves up to" in summary and "Assumption (measured): time share x the distance to its" in summary
    assert "workload.isl: 2048 vs 1024" in summary  # the two cells are not compared silently


def test_filled_campaign_renders_every_section(rich_site: RenderResult) -> None:
    names = sorted(p.name for p, _ in rich_site.pages)
    assert "compare-workload.concurrency-1.html" in names and "cell-decode-b16-kv2048-c32.html" in names
    serving = _page(rich_site, "02-serving.html")
    assert "No data yet." not in serving and "output_throughput_tok_s" in serving
    assert {i[1] for i in outline(serving) if i[0] == "plotly"} == {"serving-throughput", "serving-ttft",
                                                                      "serving-tpot", "serving-latency"}
    steps = _page(rich_site, "03-step-budget.html")
    assert "host-bound: the host gap is" in steps and "step-budget-chart" in steps
    summary = _page(rich_site, "01-summary.html")
    assert "saves up to" in summary and "torch" in summary
    assert "Assumption (measured): time share x the distance to its" in summary
    assert 'href="compare-workload.concurrency-1.html"' in summary
    compare = _page(rich_site, "compare-workload.concurrency-1.html")
    assert "except <strong>workload.concurrency</strong>" in compare
    frontier = _page(rich_site, "07-frontier.html")
    assert "fp8 weights" in frontier and "Kernels ranked by measured time saved" in frontier
    assert "levers.yaml: hand-written estimates" in frontier
    times = _page(rich_site, "04-time-share.html")
    assert "cells without one" not in times
    index = (rich_site.site_dir / "index.html").read_text()
    assert 'href="rich-campaign/01-summary.html"' in index


def test_index_lists_every_campaign_in_the_site(example_campaign: Path, rich_campaign: Path, tmp_path: Path) -> None:
    report_render(example_campaign, tmp_path)
    result = report_render(rich_campaign, tmp_path)
    index = result.index_path.read_text()
    assert index.index("h200-decoder-layer/01-summary.html") < index.index("rich-campaign/01-summary.html")
    assert sorted(p.name for p in (tmp_path / "static").iterdir()) == STATIC_FILES


def test_hostile_names_render_as_text(evil_site: RenderResult) -> None:
    for path, _ in evil_site.pages:
        html = path.read_text()
        assert "<img" not in html, path.name
        assert html.count("</script>") == html.count("<script"), path.name
        assert 'alert("field")</script>' not in html
    internals = _page(evil_site, "06-kernel-internals.html")
    assert "&lt;img" in internals  # the function (whitespace-normalized by the warehouse), escaped
    texts = [i[1] for i in outline(_page(evil_site, "01-summary.html")) if i[0] == "text"]
    assert EVIL_FIELD in texts
    cell = outline(_page(evil_site, "cell-decode-b16-kv2048.html"))
    assert any(i[0] == "text" and EVIL_KERNEL in i[1] for i in cell)
    figure = next(i for i in cell if i[0] == "plotly")
    assert "&lt;img" in json.dumps(figure)


def test_cli_prints_the_build_summary(example_campaign: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(out), ok=True)
    assert "05-roofline.html" in result.output and "14 pages" in result.output
    assert f"index: {out / 'index.html'}" in result.output.replace("\n", "")
    assert (out / CAMPAIGN / "01-summary.html").is_file()


def test_empty_campaign_renders_with_notes(tmp_path: Path) -> None:
    from perfreport.config.campaign import campaign_init

    camp = tmp_path / "empty-campaign"
    campaign_init(camp)
    result = report_render(camp, tmp_path / "site")
    assert sorted(p.name for p, _ in result.pages) == sorted([*PAGES[:8], "cell-example-cell.html",
                                                                        "kernel-example-cell.html"])
    roofline = _page(result, "05-roofline.html")
    assert "kernels with measured arithmetic intensity (0)" in roofline
    assert "No data yet." in roofline and "each kernel on the roofline" in roofline and "import_ncu" in roofline
    for page in [*PAGES[:8], "cell-example-cell.html"]:  # every page says what it would show and how to fill it
        html = _page(result, page)
        assert "No data yet." in html or "No kernel qualifies" in html, page
        assert "plotly" not in html and "Plotly.newPlot(" not in html, page  # nothing to draw, no plotly.js loaded
    assert "plotly-basic.min.js" not in {p.name for p in result.static}


def test_frontier_downloads_hold_the_table_they_are_named_for(example_site: RenderResult) -> None:
    site = example_site.campaign_site
    html = _page(example_site, "07-frontier.html")
    levers = json.loads(read_download(site / "07-frontier.levers.json"))
    kernels = json.loads(read_download(site / "07-frontier.kernels.json"))
    assert [c["key"] for c in levers["columns"]][:3] == ["rank", "id", "lever"]
    assert {r["id"] for r in levers["rows"]} >= {"fp8-gemm-prefill", "fuse-rmsnorm-residual-decode"}
    assert [c["key"] for c in kernels["columns"]][:3] == ["rank", "cell_id", "label"]
    assert all("saved_pct" in r for r in kernels["rows"])
    # each download link sits under its own table's heading
    assert html.index("Kernels ranked by measured time saved") < html.index('href="07-frontier.kernels.json.gz"') \
        < html.index("Levers (levers.yaml") < html.index('href="07-frontier.levers.json.gz"')
