"""The page per kernel: kernel-<cell>.html#<kernel id>, one page per cell, drawn in the browser from its data.

Each cell's page holds the cell's ncu_kernels.json as it was imported (every derived number, launch, stall and rule
result), the cell's kernel_join rows and its sources in one inline JSON block, not parsed or re-encoded here, but
deflated and base64-encoded (DATA_ENCODING): the JSON is ~5x the page otherwise, and 200 cells would weigh 135 MiB
(docs/benchmarks.md). kernel-page.js (one per campaign, from templates/) inflates it with the browser's
DecompressionStream, draws the kernel named after the '#', and the field table below: each derived number's
formula and the ncu metrics it read, resolved from the metric catalog.
"""

from __future__ import annotations

import base64
import json
import shlex
import zlib
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from perfreport.kernels.row import KERNEL_ROW
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.rocprof.context import FORMAT as ROCPROF_FORMAT
from perfreport.rocprof.fields import field_tables as amd_field_tables
from perfreport.site.page_model import Page
from perfreport.site.templating import templates_dir
from perfreport.warehouse.gather import CampaignData, CellData
from perfreport.warehouse.roofline import PADDING_FLAG

SCRIPT = "kernel-page.js"
TEMPLATE = "kernel.html"
# How each source opens at one launch, from the campaign folder: {launch} is the launch id (ncu's ID column).
# In import mode ncu applies its filter options to the report's results, so --launch-skip N selects ID N.
NCU_OPEN = "ncu --import {report} --launch-skip {{launch}} --launch-count 1 --page details --print-details all"
UI_OPEN = "ncu-ui {report}  (then pick ID {{launch}} in the result list)"
# The kernel data block: raw deflate (DecompressionStream("deflate-raw") reads it), then base64. Level 6 is within
# 2% of level 9's size (0.143 vs 0.140 of the JSON) at under half its time (docs/benchmarks.md).
DATA_ENCODING = "deflate-raw+base64"
DEFLATE_LEVEL = 6


# After a roofline is drawn: a click on a kernel marker opens its page. The cell is the trace's legendgroup or, in a
# trace of every cell (charts._compact_kernel_traces, no legendgroup), the first word of the point's last customdata
# slot; customdata[1] starts with the kernel id (charts._customdata); other traces (roofs, ridges) have no kernel id.
CLICK_SCRIPT = (
    "var gd = document.getElementById('{plot_id}');"
    "gd.on('plotly_click', function (e) {"
    " var p = e.points && e.points[0]; if (!p || !p.customdata) return;"
    " var cell = p.data.legendgroup || String(p.customdata[p.customdata.length - 1]).split(' ')[0];"
    " var k = String(p.customdata[1]).split(' ')[0]; if (!cell || !/^k[0-9]+$/.test(k)) return;"
    " window.location.href = 'kernel-' + encodeURIComponent(cell) + '.html#' + k; });"
)


def kernel_href(cell_id: str, kernel_id: str) -> str:
    """The link to one kernel's page, relative to the campaign folder."""
    return f"kernel-{quote(cell_id, safe='')}.html#{quote(kernel_id, safe='')}"


def link_kernels(data: CampaignData) -> None:
    """Give every kernel row and every kernel_join row with a kernel id its page link (`href`), in place."""
    for cd in data.cells:
        for k in cd.kernels:
            k["href"] = kernel_href(cd.id, k["id"])
    for r in data.join:
        if r.get("kernel_id"):
            r["href"] = kernel_href(r["cell_id"], r["kernel_id"])


def open_commands(source: dict[str, Any]) -> list[str]:
    """Commands that open a source at one launch ({launch} left to fill), run from the campaign folder."""
    path, fmt = str(source.get("source") or source.get("id") or ""), source.get("format")
    if fmt == ROCPROF_FORMAT:  # a workload folder: rocprof-compute analyzes it whole (dispatch ids as in pmc_perf)
        return [f"rocprof-compute analyze -p {shlex.quote(path)} --dispatch {{launch}}",
                f"rocprof-compute analyze -p {shlex.quote(path)} --gui   (all dispatches, in the browser)"]
    if fmt == "ncu-rep":
        report = path[:-3] if path.endswith(".gz") else path
        unzip = [f"gunzip -k {shlex.quote(path)}   # ncu reads the report uncompressed"] if report != path else []
        return [*unzip, NCU_OPEN.format(report=shlex.quote(report)), UI_OPEN.format(report=shlex.quote(report))]
    return [f"{path} is an ncu CSV export ({fmt}); the .ncu-rep it came from is not recorded here. Open that report "
            f"with: {NCU_OPEN.format(report='REPORT.ncu-rep')}"]


def field_table() -> list[dict[str, Any]]:
    """Every derived kernel-row field with its unit, description, formula and the ncu metrics it reads."""
    cat = load_catalog()
    return [{"field": f.name, "unit": f.unit, "description": f.description, "formula": f.formula,
             "metrics": cat.resolve(f.reads)} for f in KERNEL_ROW if f.formula]


def script_text() -> str:
    """kernel-page.js: the field tables (ncu's, and per gfx the AMD rows' with rocprof-compute counters) and the
    padding flag, then the drawing code (templates/kernel-page.js)."""
    fields = json.dumps(field_table(), ensure_ascii=False, separators=(",", ":"))
    amd = json.dumps(amd_field_tables(), ensure_ascii=False, separators=(",", ":"))
    code = (templates_dir() / SCRIPT).read_text(encoding="utf-8")
    return (f"var PERFREPORT_FIELDS = {fields};\nvar PERFREPORT_AMD_FIELDS = {amd};\n"
            f"var PERFREPORT_PADDING_FLAG = {PADDING_FLAG!r};\n{code}")


def kernel_data(data: CampaignData, cd: CellData) -> str:
    """The inline JSON of one cell's kernel page: cell, hardware, sources with their open commands, the cell's
    kernel_join rows, and its ncu_kernels.json text as imported (`doc`: null when the cell has none)."""
    sources = [{**s, "open": open_commands(s)} for s in cd.sources]
    join = data.join_by_cell.get(cd.id, [])
    head = json.dumps({"cell": cd.id, "hardware": data.campaign.hardware, "sources": sources, "join": join},
                      ensure_ascii=False, default=str, separators=(",", ":"))
    return head[:-1] + ',"doc":' + (cd.kernels_json or "null") + "}"


def encode_data(text: str) -> str:
    """The kernel data block's text (DATA_ENCODING): base64 holds no '<', so nothing in it ends its script."""
    deflate = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -15)  # wbits -15: raw deflate, no zlib header
    return base64.b64encode(deflate.compress(text.encode("utf-8")) + deflate.flush()).decode("ascii")


def decode_data(block: str) -> Any:
    """The JSON an encoded kernel data block holds (encode_data's inverse; kernel-page.js does the same)."""
    return json.loads(zlib.decompress(base64.b64decode(block), -15).decode("utf-8"))


def kernel_page(data: CampaignData, cd: CellData) -> Page:
    """A cell's kernel page (kernel-<cell>.html); it lists the cell's kernels when opened without a '#'."""
    page = Page(f"kernel-{cd.id}.html", TEMPLATE, f"Kernels of cell {cd.id}")
    # base64 (encode_data): nothing in it can end the script element it sits in
    page.context.update(cell_id=cd.id, kernel_data=Markup(encode_data(kernel_data(data, cd))),  # noqa: S704
                        encoding=DATA_ENCODING, script=SCRIPT)
    return page
