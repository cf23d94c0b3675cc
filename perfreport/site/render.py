"""Stage 4: `report_render` gathers everything, builds every page in memory, then writes the static site.

Layout of <out>/: index.html (every campaign rendered into <out>), static/ (the stylesheet, the table script and
the plotly.js bundles the pages load, copied once per site), <campaign>/ with 01-08 pages, cell-<id>.html,
compare-*.html, each table's CSV and JSON next to its page, and site.json (the manifest index.html is built from).
Pages open from file://: no network, relative links only. Output is deterministic: fixed div ids, sorted rows, no
timestamps but the lake's own publication times on page 08.

plotly.js is loaded only by a page that draws a chart: the official basic bundle (scatter, bar, pie; a quarter of
the full one) where every trace is of those types, else the full bundle of the installed plotly package (a
roofline of more than 2,000 points is WebGL, `scattergl`). perfreport/site/static/README.md says why and how the
vendored files are updated.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly.io as pio
from markupsafe import Markup

from perfreport import __version__
from perfreport.errors import InputError, PerfReportError
from perfreport.files import locked, write_text_atomic
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
from perfreport.site.cell_pages import cell_page, compare_page
from perfreport.site.comparison import comparisons
from perfreport.site.history_page import History, history_page
from perfreport.site.kernel_pages import CLICK_SCRIPT, kernel_pages, link_kernels, script_text
from perfreport.site.kernel_pages import SCRIPT as KERNEL_SCRIPT
from perfreport.site.page_model import Chart, Page
from perfreport.site.staging import Staging, link_or_copy
from perfreport.site.templating import NUM_COLUMN_RULES, environment, templates_dir
from perfreport.warehouse.gather import CampaignData, gather

STATIC = "static"
PLOTLY_JS = "plotly.min.js"  # the full bundle, from the installed plotly package
PLOTLY_BASIC = "plotly-basic.min.js"  # vendored: perfreport/site/static/
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})  # the trace types of plotly.js's basic bundle
VENDORED = ("tablesort.min.js",)  # perfreport/site/static/, loaded by every page
OWN_STATIC = ("site.css", "site-tables.js")  # templates/, loaded by every page
STYLESHEET = "site.css"  # rendered (its per-column rules are generated), not copied
MANIFEST = "site.json"
WRITERS = 8
MAX_HTML_ROWS = 400  # tables longer than this show their first rows; the CSV/JSON downloads have them all
NAV = (("01-summary.html", "Summary"), ("02-serving.html", "Serving"), ("03-step-budget.html", "Step budget"),
       ("04-time-share.html", "Time share"), ("05-roofline.html", "Roofline"),
       ("06-kernel-internals.html", "Kernel internals"), ("07-frontier.html", "Frontier"),
       ("08-history.html", "History"))


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
    static: list[Path]  # the files in <out>/static/ this campaign's pages load


def chart_html(chart: Chart) -> Markup:
    """Render a figure as a div + script (no plotly.js), with a fixed div id; refuse an unescaped `</`."""
    # the figure's own data and layout, not a copy: Figure.to_dict deep-copies every trace, which cost a render of
    # 200 cells a second or more; to_html only reads them
    fig = {"data": chart.figure._data, "layout": chart.figure._layout}
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=chart.div_id,
                       config={"displaylogo": False, "responsive": True}, validate=False,
                       post_script=CLICK_SCRIPT if chart.kernel_links else None)
    script = html[html.index("<script"):html.rindex("</script>")]
    if "</" in script:
        raise PerfReportError(f"chart {chart.div_id!r}: the figure JSON holds an unescaped '</'; plotly's JSON "
                              f"encoder should write it as \\u003c/. Upgrade plotly (>= 5.20) and render again.")
    return Markup(html)  # noqa: S704 - plotly's own markup; every string in its JSON is escaped above


def _static_source(name: str) -> Path:
    """Where a static file comes from: the site package's vendored files, templates/, or the plotly package."""
    if name == PLOTLY_JS:
        return _plotly_source()
    if name in OWN_STATIC:
        return templates_dir() / name
    return Path(str(resources.files("perfreport.site"))) / STATIC / name


def stylesheet() -> str:
    """site.css: templates/site.css with its per-column alignment rules (page_model.HtmlTable) generated."""
    return environment().get_template(STYLESHEET).render(num_rules=NUM_COLUMN_RULES)


def _bundle_version(path: Path) -> str | None:
    with path.open("rb") as f:
        match = re.search(rb"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)", f.read(300))
    return match.group(1).decode() if match else None


@lru_cache(maxsize=1)
def basic_bundle_usable() -> bool:
    """True when the vendored basic bundle is the plotly.js version the installed plotly package writes figures
    for; otherwise every chart page loads the full bundle (tests/test_site_static.py flags the mismatch)."""
    basic = _bundle_version(_static_source(PLOTLY_BASIC))
    return basic is not None and basic == _bundle_version(_plotly_source())


def plotly_bundle(page: Page) -> str | None:
    """The plotly.js file a page loads: none without a chart, the basic bundle when it draws every trace."""
    if not page.charts:
        return None
    types = {trace.type for chart in page.charts.values() for trace in chart.figure.data}
    return PLOTLY_BASIC if types <= BASIC_TRACES and basic_bundle_usable() else PLOTLY_JS


def _render_page(page: Page, campaign: str, nav: list[dict[str, Any]], plotly: str | None) -> str:
    template = environment().get_template(page.template)
    charts = {cid: {"html": chart_html(c), "note": c.note} for cid, c in page.charts.items()}
    return template.render(
        title=page.title, campaign_id=campaign, static=f"../{STATIC}/", nav=nav, current=page.filename,
        tables=page.tables, charts=charts, version=__version__, max_rows=MAX_HTML_ROWS, home="../index.html",
        plotly=plotly, **page.context,
    )


def build_pages(data: CampaignData, history: History | None = None) -> list[Page]:
    """Every page of one campaign, in a fixed order (`history`: the lake's series for page 08, None without a lake)."""
    groups, mismatches = comparisons([(cd.id, cd.context) for cd in data.cells])
    link_kernels(data)  # before any table is built: every kernel row links to its kernel page
    pages = [summary_page(data, groups, mismatches), serving_page(data), step_budget_page(data),
             time_share_page(data), roofline_page(data), internals_page(data), frontier_page(data),
             history_page(history, data.campaign.id)]
    contexts = cell_contexts(data)
    pages += [cell_page(data, cd, groups, contexts) for cd in data.cells]
    pages += [compare_page(data, g) for g in groups]
    pages += kernel_pages(data)
    return pages


def _files(data: CampaignData, pages: list[Page]) -> tuple[dict[str, str], list[str]]:
    """Every file of the campaign folder (name -> text), and the static files its pages load."""
    campaign = data.campaign.id
    nav = [{"href": href, "label": label} for href, label in NAV]
    files: dict[str, str] = {KERNEL_SCRIPT: script_text()}
    static = {*VENDORED, *OWN_STATIC}
    for page in pages:
        bundle = plotly_bundle(page)
        if bundle:
            static.add(bundle)
        files[page.filename] = _render_page(page, campaign, nav, bundle)
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
    return files, sorted(static)


def _plotly_source() -> Path:
    src = Path(str(resources.files("plotly"))) / "package_data" / PLOTLY_JS
    if not src.is_file():
        raise PerfReportError(f"plotly.js not found at {src}; reinstall plotly (pip install --force-reinstall "
                              f"plotly) so report_render can vendor it into <out>/{STATIC}/.")
    return src


def _stage_static(site: Path, staging: Staging, names: list[str]) -> list[Path]:
    """Stage each static file unless an identical copy is in <site>/static/ (files other campaigns' pages load,
    such as the full plotly bundle, are left there)."""
    paths = []
    for name in names:
        src, dst = _static_source(name), site / STATIC / name
        if not src.is_file():
            raise PerfReportError(f"report_render: static file {name!r} not found at {src}; reinstall perftunereport "
                                  f"(the wheel ships perfreport/site/static/ and templates/) and render again.")
        staged = staging.root / name
        if name == STYLESHEET:
            text = stylesheet()
            if not (dst.is_file() and dst.read_text(encoding="utf-8") == text):
                write_text_atomic(staged, text)
                staging.add(staged, dst)
        elif not (dst.is_file() and filecmp.cmp(src, dst, shallow=False)):
            shutil.copyfile(src, staged)  # created as open() creates: 0666 less the umask
            staging.add(staged, dst)
        paths.append(dst)
    return paths


def _listed(folder: Path) -> set[str]:
    """The files a previous render of this campaign wrote, from its manifest (none when absent or unreadable)."""
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in listed if isinstance(n, str)}


def _stage_campaign(folder: Path, staged: Path, files: dict[str, str]) -> None:
    """Write every file into `staged`, plus what the old folder holds that no render wrote (kept, linked)."""
    staged.mkdir()
    if folder.is_dir():
        shutil.copymode(folder, staged)
        stale = _listed(folder)  # written by the previous render and not by this one: dropped
        for entry in folder.iterdir():
            if entry.name in files or entry.name in stale:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, staged / entry.name, symlinks=True, copy_function=link_or_copy)
            else:
                link_or_copy(entry, staged / entry.name)
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:  # file creation waits on the disk, not on the GIL
        list(pool.map(lambda item: write_text_atomic(staged / item[0], item[1]), sorted(files.items())))


def index_href(folder: str) -> str:
    """The index's link to a campaign folder: relative and percent-encoded, so no folder name forms a scheme
    (`javascript:`) or leaves the site."""
    return f"{quote(folder, safe='')}/01-summary.html"


def _index_html(site: Path, staged: dict[str, Path]) -> str:
    """index.html listing every campaign folder holding a site.json (`staged`: folder -> its staged copy)."""
    folders = {m.parent.name: m for m in site.glob(f"*/{MANIFEST}") if not m.parent.name.startswith(".")}
    folders.update({name: path / MANIFEST for name, path in staged.items()})
    entries = []
    for folder, manifest in sorted(folders.items()):
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        entries.append({"folder": folder, "href": index_href(folder), "campaign": doc.get("campaign", folder),
                        "hardware": doc.get("hardware"), "sol_rigor": doc.get("sol_rigor"),
                        "cells": len(doc.get("cells") or []), "pages": len(doc.get("pages") or [])})
    return environment().get_template("index.html").render(
        title="Campaigns", campaign_id=None, static=f"{STATIC}/", nav=[], current="index.html", tables={},
        charts={}, version=__version__, campaigns=entries, max_rows=MAX_HTML_ROWS, home="index.html", plotly=None)


def _site_root(out_dir: Path, campaign: str) -> Path:
    """The site root, refused up front where a file stands in the place of a folder the site needs."""
    site = Path(out_dir)
    for path, what in ((site / campaign, "this campaign's site folder"), (site / STATIC, "the site's static/ folder")):
        if path.is_symlink():  # a swap would write through it, or replace the link: the site is one real tree
            raise InputError(f"report_render: {str(path)!r} is a link (to {os.readlink(path)!r}), but it is {what}, "
                             f"which the render replaces whole and must be a real folder inside the site. Remove "
                             f"the link (render into --out where you want the site), and render again.")
    for path, what in ((site, "the site root (--out)"), (site / campaign, "this campaign's site folder"),
                       (site / STATIC, "the site's static/ folder")):
        if path.exists() and not path.is_dir():
            raise InputError(f"report_render: {str(path)!r} is a file, but it is {what}, which must be a folder. "
                             f"Pass another --out, or move the file away and render again.")
    return site


def report_render(campaign_dir: Path, out_dir: Path, history: History | None = None) -> RenderResult:
    """Render one campaign into <out_dir>/<campaign>/ and refresh <out_dir>/index.html, whole or not at all.

    `history` is the campaign's series from the lake (the CLI reads them: the site never imports the lake); without
    it page 08 says how to get them.

    Everything is rendered in memory, written into a staging folder, then swapped in (site/staging.py): a failure
    at any point leaves the site as it was.
    """
    data = gather(Path(campaign_dir))
    files, static = _files(data, build_pages(data, history))  # everything rendered before anything is written
    site = _site_root(out_dir, data.campaign.id)
    folder = site / data.campaign.id
    made = not site.exists()
    site.mkdir(parents=True, exist_ok=True)
    try:
        with locked(site / "index.html"):  # renders into one site take turns: each swaps a whole campaign
            staging = Staging(site, data.campaign.id)
            try:
                staged = staging.root / data.campaign.id
                _stage_campaign(folder, staged, files)
                staging.add(staged, folder)
                static_paths = _stage_static(site, staging, static)
                index = site / "index.html"
                write_text_atomic(staging.root / "index.html", _index_html(site, {data.campaign.id: staged}))
                staging.add(staging.root / "index.html", index)
                staging.commit()
            finally:
                staging.discard()
    except BaseException:
        if made:  # a first render that failed leaves no empty site folder behind
            with contextlib.suppress(OSError):
                site.rmdir()
        raise
    pages = [(folder / n, len(t.encode("utf-8"))) for n, t in files.items() if n.endswith(".html")]
    downloads = [len(t.encode("utf-8")) for n, t in files.items() if n.endswith((".csv", ".json")) and n != MANIFEST]
    return RenderResult(data.campaign.id, site, folder, index, pages, len(downloads), sum(downloads), static_paths)
