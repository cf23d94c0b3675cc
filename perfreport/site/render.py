"""Stage 4: `report_render` gathers everything, builds every page in memory, then writes the static site.

Layout of <out>/: index.html (every campaign rendered into <out>), static/plotly.min.js (vendored once, from the
installed plotly package), <campaign>/ with 01-07 pages, cell-<id>.html, compare-*.html, each table's CSV and
JSON next to its page, and site.json (the manifest index.html is built from). Pages open from file://: no
network, relative links only. Output is deterministic: fixed div ids, sorted rows, no timestamps.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import plotly.io as pio
from markupsafe import Markup

from perfreport import __version__
from perfreport.files import write_text_atomic
from perfreport.site.cell_pages import cell_page, compare_page
from perfreport.site.comparison import comparisons
from perfreport.errors import PerfReportError
from perfreport.warehouse.gather import CampaignData, gather
from perfreport.site.page_model import Chart, Page
from perfreport.site.campaign_pages import (
    cell_contexts,
    frontier_page,
    internals_page,
    roofline_page,
    serving_page,
    step_budget_page,
    summary_page,
    time_share_page,
)
from perfreport.site.templating import environment

STATIC = "static"
PLOTLY_JS = "plotly.min.js"
MANIFEST = "site.json"
WRITERS = 8
MAX_HTML_ROWS = 400  # tables longer than this show their first rows; the CSV/JSON downloads have them all
NAV = (("01-summary.html", "Summary"), ("02-serving.html", "Serving"), ("03-step-budget.html", "Step budget"),
       ("04-time-share.html", "Time share"), ("05-roofline.html", "Roofline"),
       ("06-kernel-internals.html", "Kernel internals"), ("07-frontier.html", "Frontier"))


@dataclass
class RenderResult:
    """What report_render wrote: every HTML page with its size, the downloads, the index."""

    campaign: str
    site_dir: Path
    campaign_site: Path
    index_path: Path
    pages: list[tuple[Path, int]]
    downloads: int
    download_bytes: int
    plotly_js: Path


def chart_html(chart: Chart) -> Markup:
    """Render a figure as a div + script (no plotly.js), with a fixed div id; refuse an unescaped `</`."""
    html = pio.to_html(chart.figure, include_plotlyjs=False, full_html=False, div_id=chart.div_id,
                       config={"displaylogo": False, "responsive": True}, validate=False)
    script = html[html.index("<script"):html.rindex("</script>")]
    if "</" in script:
        raise PerfReportError(f"chart {chart.div_id!r}: the figure JSON holds an unescaped '</'; plotly's JSON "
                              f"encoder should write it as \\u003c/. Upgrade plotly (>= 5.20) and render again.")
    return Markup(html)  # noqa: S704 - plotly's own markup; every string in its JSON is escaped above


def _render_page(page: Page, campaign: str, nav: list[dict[str, Any]]) -> str:
    template = environment().get_template(page.template)
    charts = {cid: {"html": chart_html(c), "note": c.note} for cid, c in page.charts.items()}
    return template.render(
        title=page.title, campaign_id=campaign, static=f"../{STATIC}/", nav=nav, current=page.filename,
        tables=page.tables, charts=charts, version=__version__, max_rows=MAX_HTML_ROWS, home="../index.html",
        **page.context,
    )


def build_pages(data: CampaignData) -> list[Page]:
    """Every page of one campaign, in a fixed order."""
    groups, mismatches = comparisons([(cd.id, cd.context) for cd in data.cells])
    pages = [summary_page(data, groups, mismatches), serving_page(data), step_budget_page(data),
             time_share_page(data), roofline_page(data), internals_page(data), frontier_page(data)]
    contexts = cell_contexts(data)
    pages += [cell_page(data, cd, groups, contexts) for cd in data.cells]
    pages += [compare_page(data, g) for g in groups]
    return pages


def _files(data: CampaignData, pages: list[Page]) -> dict[str, str]:
    campaign = data.campaign.id
    nav = [{"href": href, "label": label} for href, label in NAV]
    files: dict[str, str] = {}
    for page in pages:
        files[page.filename] = _render_page(page, campaign, nav)
        for table in page.tables.values():
            files[table.csv_name] = table.csv_text()
            files[table.json_name] = table.json_text()
    manifest = {
        "schema_version": 1, "campaign": campaign, "hardware": data.campaign.hardware,
        "sol_rigor": data.campaign.sol_rigor, "cells": [cd.id for cd in data.cells],
        "pages": [p.filename for p in pages], "files": sorted([*files, MANIFEST]),
        "perfreport_version": __version__,
    }
    files[MANIFEST] = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    return files


def _vendor_plotly(site: Path) -> Path:
    """Copy plotly.min.js from the installed plotly package to <site>/static/ unless an identical copy is there."""
    src = Path(str(resources.files("plotly"))) / "package_data" / PLOTLY_JS
    dst = site / STATIC / PLOTLY_JS
    if not src.is_file():
        raise PerfReportError(f"plotly.js not found at {src}; reinstall plotly (pip install --force-reinstall "
                              f"plotly) so report_render can vendor it into {dst.parent}.")
    if not (dst.is_file() and filecmp.cmp(src, dst, shallow=False)):
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{PLOTLY_JS}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
    return dst


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """Delete files a previous render of this campaign listed in its manifest and this one no longer writes."""
    old = folder / MANIFEST
    if not old.is_file():
        return
    try:
        listed = json.loads(old.read_text(encoding="utf-8")).get("files", [])
    except ValueError:
        return
    for name in listed:
        if isinstance(name, str) and "/" not in name and name not in keep:
            (folder / name).unlink(missing_ok=True)


def render_index(site: Path) -> Path:
    """Write <site>/index.html listing every campaign folder holding a site.json, sorted by campaign."""
    entries = []
    for manifest in sorted(site.glob(f"*/{MANIFEST}")):
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except ValueError:
            continue
        entries.append({"folder": manifest.parent.name, "campaign": doc.get("campaign", manifest.parent.name),
                        "hardware": doc.get("hardware"), "sol_rigor": doc.get("sol_rigor"),
                        "cells": len(doc.get("cells") or []), "pages": len(doc.get("pages") or [])})
    html = environment().get_template("index.html").render(
        title="Campaigns", campaign_id=None, static=f"{STATIC}/", nav=[], current="index.html", tables={},
        charts={}, version=__version__, campaigns=entries, max_rows=MAX_HTML_ROWS, home="index.html")
    path = site / "index.html"
    write_text_atomic(path, html)
    return path


def report_render(campaign_dir: Path, out_dir: Path) -> RenderResult:
    """Render one campaign into <out_dir>/<campaign>/ and refresh <out_dir>/index.html."""
    data = gather(Path(campaign_dir))
    files = _files(data, build_pages(data))  # everything rendered before anything is written
    site = Path(out_dir)
    folder = site / data.campaign.id
    plotly_js = _vendor_plotly(site)
    _remove_stale(folder, set(files))
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:  # file creation waits on the disk, not on the GIL
        list(pool.map(lambda item: write_text_atomic(folder / item[0], item[1]), sorted(files.items())))
    index = render_index(site)
    pages = [(folder / n, len(t.encode("utf-8"))) for n, t in files.items() if n.endswith(".html")]
    downloads = [len(t.encode("utf-8")) for n, t in files.items() if n.endswith((".csv", ".json")) and n != MANIFEST]
    return RenderResult(data.campaign.id, site, folder, index, pages, len(downloads), sum(downloads), plotly_js)
