"""The vendored browser files (perfreport/site/static/) and which plotly.js bundle a page loads."""

from __future__ import annotations

import re
from pathlib import Path

from perfreport.site import render
from perfreport.site.page_model import Chart, Figure, Page

STATIC = Path(render.__file__).parent / "static"


def test_vendored_files_carry_their_license_and_are_listed_with_version_and_hash() -> None:
    import hashlib

    readme = (STATIC / "README.md").read_text()
    for name, license_file, version in (("tablesort.min.js", "LICENSE.tablesort", "5.7.1"),
                                        ("plotly-basic.min.js", "LICENSE.plotly.js", "4.1.1")):
        body = (STATIC / name).read_text(encoding="utf-8")
        assert f"v{version}" in body[:300], name  # the package's own banner
        assert "MIT" in (STATIC / license_file).read_text()
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}`"))
        assert version in row and hashlib.sha256((STATIC / name).read_bytes()).hexdigest() in row


def test_the_basic_bundle_is_the_plotly_js_the_installed_plotly_writes_figures_for() -> None:
    """After a plotly upgrade this fails: re-vendor the basic bundle of the new plotly.js (static/README.md);
    until then report_render loads the full bundle on every chart page."""
    full = re.search(r"plotly\.js v(\S+)", render._plotly_source().read_text(encoding="utf-8")[:300])
    basic = re.search(r"v(\d+\.\d+\.\d+)", (STATIC / render.PLOTLY_BASIC).read_text(encoding="utf-8")[:300])
    assert full and basic and full.group(1) == basic.group(1)
    assert render.basic_bundle_usable()


def _page(*traces: dict[str, object]) -> Page:
    page = Page("p.html", "p.html", "p")
    for i, trace in enumerate(traces):
        page.add_chart(Chart(f"c{i}", Figure([trace], {})))
    return page


def test_a_page_loads_plotly_only_to_draw_and_the_full_bundle_only_for_webgl() -> None:
    assert render.plotly_bundle(_page()) is None
    assert render.plotly_bundle(_page({"type": "scatter"}, {"type": "bar"})) == "plotly-basic.min.js"
    assert render.plotly_bundle(_page({"type": "bar"}, {"type": "scattergl"})) == "plotly.min.js"
    assert render.plotly_bundle(_page({"type": "heatmap"})) == "plotly.min.js"  # any type the basic bundle lacks
