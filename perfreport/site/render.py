"""Stage 4: `report_render` gathers everything, then builds and writes every page into a staging folder it swaps in.

Layout of <out>/: index.html (every campaign rendered into <out>), static/ (the stylesheet, the table script and
the plotly.js bundles the pages load, copied once per site), <campaign>/ with 01-08 pages, cell-<id>.html,
compare-*.html, each table's CSV and JSON (gzip) next to its page, and site.json (the manifest index.html is built
from, with each page's inputs digest: a re-render keeps the pages whose inputs did not change).
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
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
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
from perfreport.site.kernel_pages import CLICK_SCRIPT, kernel_page, link_kernels, script_text
from perfreport.site.kernel_pages import SCRIPT as KERNEL_SCRIPT
from perfreport.site.page_model import Chart, Page
from perfreport.site.staging import Staging, link_or_copy
from perfreport.site.templating import NUM_COLUMN_RULES, environment, templates_dir
from perfreport.warehouse.db import NCU_FILE
from perfreport.warehouse.gather import CampaignData, CellData, gather

STATIC = "static"
PLOTLY_JS = "plotly.min.js"  # the full bundle, from the installed plotly package
PLOTLY_BASIC = "plotly-basic.min.js"  # vendored: perfreport/site/static/
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})  # the trace types of plotly.js's basic bundle
VENDORED = ("tablesort.min.js",)  # perfreport/site/static/, loaded by every page
OWN_STATIC = ("site.css", "site-tables.js")  # templates/, loaded by every page
STYLESHEET = "site.css"  # rendered (its per-column rules are generated), not copied
MANIFEST = "site.json"
WRITERS = 8
JOBS_ENV = "PERFREPORT_RENDER_JOBS"  # worker processes for the pages; default the CPU count (at most MAX_JOBS)
MAX_JOBS = 4
CHUNK = 8  # pages per task handed to a worker: small enough for progress, large enough to amortize the hand-off
STEPS = ("gather", "build", "html", "downloads", "write")  # the timing split report_render prints
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
    seconds: dict[str, float] = field(default_factory=dict)  # STEPS (summed over the workers) and "wall"
    jobs: int = 1  # worker processes that built and wrote the pages
    kept: int = 0  # pages whose inputs were those of the last render: kept as it wrote them, not built again


def chart_html(chart: Chart) -> Markup:
    """Render a figure as a div + script (no plotly.js), with a fixed div id; refuse an unescaped `</`."""
    fig = chart.figure.to_plotly_json()
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
    types = {t for chart in page.charts.values() for t in chart.figure.trace_types()}
    return PLOTLY_BASIC if types <= BASIC_TRACES and basic_bundle_usable() else PLOTLY_JS


def _render_page(page: Page, campaign: str, nav: list[dict[str, Any]], plotly: str | None) -> str:
    template = environment().get_template(page.template)
    charts = {cid: {"html": chart_html(c), "note": c.note} for cid, c in page.charts.items()}
    return template.render(
        title=page.title, campaign_id=campaign, static=f"../{STATIC}/", nav=nav, current=page.filename,
        tables=page.tables, charts=charts, version=__version__, max_rows=MAX_HTML_ROWS, home="../index.html",
        plotly=plotly, **page.context,
    )


@dataclass(frozen=True)
class Builder:
    """What builds one page, and the digest of everything it reads (None: the page reads every cell, so it is
    built on every render); a page whose digest is the one the last render recorded is kept as it was."""

    build: Callable[[], Page]
    inputs: str | None = None
    name: str = ""  # the page's file name, known before it is built where `inputs` is set


@lru_cache(maxsize=1)
def code_digest() -> str:
    """Digest of the code and templates that turn data into pages: a page is rebuilt after any change to them."""
    h = hashlib.sha256(__version__.encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.yaml"), *templates_dir().rglob("*"),
                        *(Path(str(resources.files("perfreport.site"))) / STATIC).glob("*")]):
        if path.is_file():
            h.update(str(path.relative_to(path.parents[1])).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _digest(*parts: Any) -> str:
    """A stable digest of JSON-able parts (dataclasses and other objects by their repr, which lists their fields)."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=repr, separators=(",", ":"))
    if " object at 0x" in text:  # a repr without its fields: the digest would differ on every render
        found = re.findall(r"<[^<>]* object at 0x[0-9a-f]+>", text)[:1]
        raise PerfReportError(f"page inputs hold an object without a stable repr: {found}")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cell_inputs(data: CampaignData, cd: CellData) -> str:
    """Digest of one cell's data as its pages read it: the files of its folder (its ncu_kernels.json as read, kernel
    times, samples: the warehouse's rows of the cell follow from them and the shared inputs), its config entry,
    context, bundles, join rows, roofline points and trials."""
    files = hashlib.blake2b(cd.kernels_json.encode("utf-8"))
    folder = cd.cell.cell_dir(data.campaign)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.is_file() and path.name != NCU_FILE:
            files.update(path.name.encode() + b"\0" + path.read_bytes())
    return _digest(cd.id, files.hexdigest(), cd.cell, cd.context, cd.sources, cd.bundles, cd.serving, cd.steps,
                   cd.trials, data.join_by_cell.get(cd.id, []), data.points_by_cell.get(cd.id, []),
                   data.trial_samples(cd.id))


def page_builders(data: CampaignData, history: History | None = None) -> list[Builder]:
    """What builds each page of one campaign, in a fixed order (`history`: the lake's series for page 08, None
    without a lake); what several pages share (comparisons, cell contexts, kernel links) is computed here once.

    A cell's page and kernel page read that cell and what every page shares (the campaign, its ceilings, the roofs,
    the comparison groups, the cells' context lines); a comparison page the cells it compares; pages 01-08 every
    cell (no digest: always built)."""
    groups, mismatches = comparisons([(cd.id, cd.context) for cd in data.cells])
    link_kernels(data)  # before any table is built: every kernel row links to its kernel page
    contexts = cell_contexts(data)
    shared = _digest(code_digest(), data.campaign, data.ceilings, replace(data.roofline, points=[], notes=[]),
                     groups, contexts)
    cells = {cd.id: _cell_inputs(data, cd) for cd in data.cells}
    return [*(Builder(b) for b in (
                partial(summary_page, data, groups, mismatches), partial(serving_page, data),
                partial(step_budget_page, data), partial(time_share_page, data), partial(roofline_page, data),
                partial(internals_page, data), partial(frontier_page, data),
                partial(history_page, history, data.campaign.id))),
            *(Builder(partial(cell_page, data, cd, groups, contexts), _digest("cell", shared, cells[cd.id]),
                      f"cell-{cd.id}.html") for cd in data.cells),
            *(Builder(partial(compare_page, data, g), _digest("compare", shared, [cells[c] for c in g.cell_ids]),
                      f"{g.slug}.html") for g in groups),
            *(Builder(partial(kernel_page, data, cd), _digest("kernel", shared, cells[cd.id]), f"kernel-{cd.id}.html")
              for cd in data.cells)]


def build_pages(data: CampaignData, history: History | None = None) -> list[Page]:
    """Every page of one campaign, in a fixed order."""
    return [b.build() for b in page_builders(data, history)]


@dataclass(frozen=True)
class _Work:
    """What a render worker needs, inherited by fork (never pickled): the builders and where files go."""

    builders: list[Builder]
    campaign: str
    staged: Path


_WORK: _Work | None = None
Written = list[tuple[str, int, str | None]]  # (file name, bytes, plotly bundle of a page or None)


def _write_plain(path: Path, data: bytes) -> int:
    """Write a file of the staging folder (never seen before the swap: no temp file); return its bytes."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        if exc.filename is None:  # a write past the disk or size limit names no file: name it
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc
        raise
    return len(data)


def _render_chunk(indices: list[int]) -> tuple[dict[int, Written], dict[str, float]]:
    """Build, render and write the pages `indices` with their downloads; what each wrote and the time per step."""
    work = _WORK
    assert work is not None, "_render_chunk runs under _render_pages"
    nav = [{"href": href, "label": label} for href, label in NAV]
    spent = dict.fromkeys(STEPS, 0.0)
    written: dict[int, Written] = {}
    for i in indices:
        t0 = time.perf_counter()
        page = work.builders[i].build()
        if work.builders[i].name not in ("", page.filename):  # the name it is kept under must be the page's
            raise PerfReportError(f"page builder {i} names {work.builders[i].name!r} but built {page.filename!r}")
        t1 = time.perf_counter()
        bundle = plotly_bundle(page)
        texts = {page.filename: _render_page(page, work.campaign, nav, bundle).encode("utf-8")}
        t2 = time.perf_counter()
        for table in page.tables.values():
            if not table.shared:  # a shared table's downloads are the campaign page's
                texts.update(table.downloads())
        t3 = time.perf_counter()
        written[i] = [(name, _write_plain(work.staged / name, data), bundle if name == page.filename else None)
                      for name, data in texts.items()]
        t4 = time.perf_counter()
        for step, seconds in zip(STEPS[1:], (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            spent[step] += seconds
    return written, spent


def render_jobs(pages: int) -> int:
    """Worker processes for `pages` pages: PERFREPORT_RENDER_JOBS, else the CPU count (at most MAX_JOBS); 1 where
    fork is unavailable or for a small site, whose pages take less than starting a worker."""
    raw = os.environ.get(JOBS_ENV, "")
    if raw.strip():
        try:
            jobs = int(raw)
        except ValueError as exc:
            raise InputError(f"{JOBS_ENV}={raw!r}: expected a whole number of worker processes, e.g. "
                             f"{JOBS_ENV}=2 (1 renders in this process)") from exc
        if jobs < 1:
            raise InputError(f"{JOBS_ENV}={raw!r}: expected 1 or more worker processes, e.g. {JOBS_ENV}=2")
    else:
        jobs = min(os.cpu_count() or 1, MAX_JOBS) if pages > 4 * CHUNK else 1
    return jobs if "fork" in multiprocessing.get_all_start_methods() else 1


def _render_pages(work: _Work, jobs: int, progress: Callable[[int, int], None] | None,
                  kept: dict[int, Written] | None = None) -> tuple[list[Written], dict[str, float], int]:
    """Every page of `work` built, rendered and written into its staging folder (but those in `kept`: already
    there, as the last render wrote them), by forked workers when the site is large; `progress(done, total)` after
    each chunk. Returns what each page wrote (page order), the time per step summed over the workers, and the
    number of workers."""
    global _WORK
    kept = kept or {}
    total = len(work.builders)
    todo = [i for i in range(total) if i not in kept]
    # pages 01-08 (no digest: they read every cell, 0.3-0.6 s each on 200 cells) one per task, so the workers share
    # them; the per-cell pages in tasks of CHUNK
    chunks = [[i] for i in todo if work.builders[i].inputs is None]
    rest = [i for i in todo if work.builders[i].inputs is not None]
    chunks += [rest[i:i + CHUNK] for i in range(0, len(rest), CHUNK)]
    jobs = max(min(jobs, len(chunks)), 1)
    written: dict[int, Written] = dict(kept)
    spent = dict.fromkeys(STEPS[1:], 0.0)
    done = len(kept)

    def collect(result: tuple[dict[int, Written], dict[str, float]], n: int) -> None:
        nonlocal done
        written.update(result[0])
        for step in spent:
            spent[step] += result[1][step]
        done += n
        if progress:
            progress(done, total)

    _WORK = work
    try:
        if jobs == 1:
            for chunk in chunks:
                collect(_render_chunk(chunk), len(chunk))
        else:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for n, result in pool.imap_unordered(_numbered, list(enumerate(chunks))):
                    collect(result, len(chunks[n]))
    finally:
        _WORK = None
    return [written[i] for i in range(total)], spent, jobs


def _numbered(item: tuple[int, list[int]]) -> tuple[int, tuple[dict[int, Written], dict[str, float]]]:
    return item[0], _render_chunk(item[1])


def _last_manifest(folder: Path) -> dict[str, Any]:
    """The site.json the last render of this campaign wrote, read once (empty when absent or unreadable: then every
    page is built and nothing it listed is dropped)."""
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _last_built(last: dict[str, Any], campaign: str) -> dict[str, Any]:
    """What the last render of this campaign built per page ({page: {inputs, files, plotly}})."""
    built = last.get("built") if last.get("campaign") == campaign else None
    return built if isinstance(built, dict) else {}


def _keep_unchanged(work: _Work, folder: Path, last_manifest: dict[str, Any]) -> dict[int, Written]:
    """Link into the staging folder the files of each page whose inputs are those the last render built it from
    (and whose files are all still there): those pages are not built again."""
    last = _last_built(last_manifest, work.campaign)
    kept: dict[int, Written] = {}
    if not last:
        return kept
    for i, builder in enumerate(work.builders):
        if builder.inputs is None:
            continue
        entry = last.get(builder.name)
        if not isinstance(entry, dict) or entry.get("inputs") != builder.inputs:
            continue
        files = entry.get("files")
        if not (isinstance(files, list) and files and all(isinstance(n, str) and "/" not in n and n != MANIFEST
                                                          for n in files)):
            continue
        try:
            sizes = [(folder / n).stat().st_size for n in files]
            for n in files:
                link_or_copy(folder / n, work.staged / n)
        except OSError:
            continue  # a file of it is gone: build the page again
        bundle = entry.get("plotly") if entry.get("plotly") in (PLOTLY_JS, PLOTLY_BASIC) else None
        kept[i] = [(n, size, bundle if n == files[0] else None) for n, size in zip(files, sizes, strict=True)]
    return kept


def _manifest(data: CampaignData, names: list[str], built: dict[str, Any]) -> str:
    """site.json: what index.html lists, what the next render drops when no longer written, and what each page
    with an inputs digest was built from and wrote (`built`: the next render keeps it when its inputs are equal)."""
    manifest = {
        "schema_version": 1, "campaign": data.campaign.id, "hardware": data.campaign.hardware,
        "sol_rigor": data.campaign.sol_rigor, "cells": [cd.id for cd in data.cells],
        "pages": [n for n in names if n.endswith(".html")], "files": sorted([*names, MANIFEST]), "built": built,
        "perfreport_version": __version__,
    }
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


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


def _listed(last_manifest: dict[str, Any]) -> set[str]:
    """The files the last render of this campaign wrote, from its manifest."""
    listed = last_manifest.get("files", [])
    return {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()


def _carry_over(folder: Path, staged: Path, written: set[str], last_manifest: dict[str, Any]) -> None:
    """Link into `staged` what the old folder holds that no render wrote (kept: a user's own files); what the
    previous render wrote and this one did not is dropped."""
    if not folder.is_dir():
        return
    shutil.copymode(folder, staged)
    stale = _listed(last_manifest)
    for entry in folder.iterdir():
        if entry.name in written or entry.name in stale:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, staged / entry.name, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(entry, staged / entry.name)


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


def report_render(campaign_dir: Path, out_dir: Path, history: History | None = None,
                  progress: Callable[[int, int], None] | None = None) -> RenderResult:
    """Render one campaign into <out_dir>/<campaign>/ and refresh <out_dir>/index.html, whole or not at all.

    `history` is the campaign's series from the lake (the CLI reads them: the site never imports the lake); without
    it page 08 says how to get them.

    Every page and download is written into a staging folder (by forked workers on a large site, `progress(done,
    total)` after each batch of pages), then swapped in (site/staging.py): a failure at any point leaves the site as
    it was. The result carries the time per step (STEPS, summed over the workers) and the wall time.
    """
    start = time.perf_counter()
    data = gather(Path(campaign_dir))
    builders = page_builders(data, history)
    jobs = render_jobs(len(builders))  # a bad PERFREPORT_RENDER_JOBS is refused before anything is written
    gathered = time.perf_counter() - start
    site = _site_root(out_dir, data.campaign.id)
    folder = site / data.campaign.id
    made = not site.exists()
    site.mkdir(parents=True, exist_ok=True)
    try:
        with locked(site / "index.html"):  # renders into one site take turns: each swaps a whole campaign
            staging = Staging(site, data.campaign.id)
            try:
                staged = staging.root / data.campaign.id
                staged.mkdir()
                work = _Work(builders, data.campaign.id, staged)
                linking = time.perf_counter()
                last = _last_manifest(folder)
                kept = _keep_unchanged(work, folder, last)
                linking = time.perf_counter() - linking
                per_page, seconds, jobs = _render_pages(work, jobs, progress, kept)
                seconds["write"] += linking
                written = [w for files in per_page for w in files]
                built = {b.name: {"inputs": b.inputs, "files": [w[0] for w in files], "plotly": files[0][2]}
                         for b, files in zip(builders, per_page, strict=True) if b.inputs is not None}
                shared = {KERNEL_SCRIPT: script_text()}
                shared[MANIFEST] = _manifest(data, [*(w[0] for w in written), KERNEL_SCRIPT], built)
                with ThreadPoolExecutor(max_workers=WRITERS) as pool:
                    list(pool.map(lambda item: write_text_atomic(staged / item[0], item[1]), shared.items()))
                _carry_over(folder, staged, {w[0] for w in written} | set(shared), last)
                staging.add(staged, folder)
                static = sorted({*VENDORED, *OWN_STATIC, *(w[2] for w in written if w[2])})
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
    pages = [(folder / name, size) for name, size, _ in written if name.endswith(".html")]
    downloads = [size for name, size, _ in written if not name.endswith(".html")]
    seconds = {"gather": gathered, **seconds, "wall": time.perf_counter() - start}
    return RenderResult(data.campaign.id, site, folder, index, pages, len(downloads), sum(downloads), static_paths,
                        seconds, jobs, len(kept))
