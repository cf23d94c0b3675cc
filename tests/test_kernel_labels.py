"""One label per kernel (perfreport/kernels/labels.py): the import table, every site page, the warehouse views,
value_view and the lake name a kernel alike; CUTLASS's `Kernel` rows are told apart by their template; lake compare
pairs kernels by identity; the roofline export never calls a placement TFLOP/s.

The disagreement this fixes is in the example campaign's decode cell (captures/decode/layer_full.ncu-rep.gz): the
nvjet GEMM `nvjet_sm90_tst_128x16_64x11_4x1_v_bz_NNT` ran at two grids, (4, 24, 1) and (4, 28, 1). The import table,
the site's kernel tables and the roofline numbered a kernel by its `instance` (launches of one grid split by their
work) and showed both rows bare; the warehouse view kernel_ncu numbered the rows of its kernel key per cell, so
SQL, page 4 and value_view said `#1`, `#2`. The three `vectorized_elementwise_kernel` instantiations (add, mul,
SiLU) were three bare `vectorized_elementwise_kernel`s in the import table and on pages 5 and 6, and simplify()'s
whole instantiation in SQL.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLE, kernel_page_data, read_download, run_cli, write_config
from test_lake import DECODE, make_campaign
from test_site_pages import tables

from perfreport.frontier.value_view import value_view
from perfreport.kernels.labels import kernel_labels, name_bases, shortened
from perfreport.lake.compare import lake_compare, pair_kernels
from perfreport.lake.query import lake_query
from perfreport.lake.writer import publish_to_lake
from perfreport.ncu.rep.reader import read_rep
from perfreport.site.render import RenderResult, report_render
from perfreport.warehouse.db import open_campaign

TESTS = Path(__file__).resolve().parent
CUTLASS = TESTS / "data" / "wild" / "panjd123-cutlass" / "cutlass_report.ncu-rep.gz"
GEMM = "nvjet_sm90_tst_128x16_64x11_4x1_v_bz_NNT"
EW = "vectorized_elementwise_kernel"
# the decode cell's labels where the places disagreed (the other kernels of the cell have one row and no sibling)
DECODE_LABELS = {
    "k011": f"{GEMM} #1",  # grid (4, 24, 1)
    "k016": f"{GEMM} #2",  # grid (4, 28, 1)
    "k014": "splitKreduce_kernel #1",  # one grid, launches that did different work (instance 1, 2)
    "k020": "splitKreduce_kernel #2",
    "k015": f"{EW}<…,CUDAFunctor_add<BFloat16>,…>",
    "k017": f"{EW}<…,silu_kernel::…,…>",
    "k018": f"{EW}<…,BinaryFunctor<…>,…>",
}


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _column(site: RenderResult, page: str, header: str) -> list[str]:
    """The cells of every table of the page under the header `header`."""
    out = []
    for t in tables((site.campaign_site / page).read_text(encoding="utf-8")):
        heads = [h for h, _ in t["head"]]
        if header in heads:
            out += [row[heads.index(header)][0] for row in t["rows"]]
    return out


def test_the_label_is_the_same_in_the_import_table_sql_every_page_and_value_view(
        example_campaign: Path, example_site: RenderResult, tmp_path: Path) -> None:
    cell = json.loads((example_campaign / "cells" / DECODE / "ncu_kernels.json").read_text())
    stored = {k["id"]: k["label"] for k in cell["kernels"]}
    assert {kid: stored[kid] for kid in DECODE_LABELS} == DECODE_LABELS
    grids = {k["id"]: k["grid_size"] for k in cell["kernels"] if k["function"] == GEMM}
    assert grids == {"k001": "(4, 24, 1)", "k006": "(4, 28, 1)", "k011": "(4, 24, 1)", "k016": "(4, 28, 1)"}
    assert stored["k001"] == stored["k011"] and stored["k006"] == stored["k016"]  # the basic source: the same labels
    assert stored["k004"] == "splitKreduce_kernel"  # the basic capture has no FLOPs to split its launches by

    # the import table: the CSV has every label whole, the table the same label cut to fit (its #n kept)
    camp = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    capture = camp / "captures" / "decode" / "layer_full.ncu-rep.gz"
    rows = _csv(run_cli("import_ncu", "--campaign", str(camp), "--cell-id", DECODE, "--bundle", str(capture),
                        "--format", "csv", ok=True).stdout)
    by_label = {r["label"]: r for r in rows}
    assert set(DECODE_LABELS.values()) <= set(by_label)
    assert by_label[f"{GEMM} #2"]["launches"] == "2" and by_label[f"{GEMM} #1"]["launches"] == "1"
    table = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", DECODE, "--bundle", str(capture),
                    ok=True).stdout
    assert f"{shortened(f'{GEMM} #2', 44 - 3)} ×2" in table and shortened(f"{GEMM} #1", 44) in table
    assert f"{shortened(DECODE_LABELS['k015'], 44 - 3)} ×2" in table

    # SQL: the views carry the stored label
    con = open_campaign(example_campaign)
    try:
        ncu = dict(con.execute("SELECT kernel_id, label FROM kernel_ncu WHERE cell_id = $1", [DECODE]).fetchall())
        join = dict(con.execute("SELECT kernel_id, label FROM kernel_join WHERE cell_id = $1", [DECODE]).fetchall())
        table_labels = dict(con.execute("SELECT kernel_id, label FROM ncu_kernels WHERE cell_id = $1",
                                        [DECODE]).fetchall())
    finally:
        con.close()
    assert {kid: ncu[kid] for kid in DECODE_LABELS} == DECODE_LABELS == {kid: join[kid] for kid in DECODE_LABELS}
    assert table_labels == stored

    # value_view ranks the same names
    ranked = {k.kernel_id: k.label for k in value_view(example_campaign).kernels if k.cell_id == DECODE}
    assert {kid: ranked[kid] for kid in DECODE_LABELS} == DECODE_LABELS

    # every page's kernel column shows the label (chart axes prefix it with cell and id)
    labels = set(DECODE_LABELS.values())
    for page in ("04-time-share.html", "05-roofline.html", "06-kernel-internals.html", f"cell-{DECODE}.html"):
        shown = set(_column(example_site, page, "kernel"))
        assert labels <= shown, (page, labels - shown)
    frontier = _csv(read_download(example_site.campaign_site / "07-frontier.kernels.csv"))
    assert labels <= {r["label"] for r in frontier if r["cell_id"] == DECODE}
    chart = (example_site.campaign_site / "06-kernel-internals.html").read_text(encoding="utf-8")
    assert f"{DECODE} \\u00b7 k016 {GEMM} #2" in chart  # the warp-stall chart's axis (plotly's JSON escapes ·)
    kernel_page = kernel_page_data(example_site.campaign_site / f"kernel-{DECODE}.html")
    assert "splitKreduce_kernel #2" in {k["label"] for k in kernel_page["doc"]["kernels"]}  # it draws label(k)


def test_cutlass_kernel_rows_are_told_apart_by_their_template(tmp_path: Path) -> None:
    """panjd123/cutlass's A100 report: three launches of `cutlass::Kernel`, two of a Gemm<...> instantiation (4,382
    characters) and one of a B2bGemm<...> one (7,262): two rows whose labels differ by the template, not by #n."""
    capture = read_rep(CUTLASS)
    assert {launch.function for launch in capture.launches} == {"Kernel"}
    assert len({launch.name for launch in capture.launches}) == 2
    camp = write_config(tmp_path / "camp", hardware="a100_pcie_80gb_sm80")
    out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(CUTLASS), ok=True).stdout
    cell = json.loads((camp / "cells" / "c1" / "ncu_kernels.json").read_text())
    assert [(k["function"], k["label"], k["launches"]) for k in cell["kernels"]] == [
        ("Kernel", "Kernel<Gemm<…>>", 2), ("Kernel", "Kernel<B2bGemm<…>>", 1)]
    assert "Kernel<Gemm<…>> ×2" in out and "Kernel<B2bGemm<…>>" in out and "#1" not in out
    con = open_campaign(camp)
    try:
        assert con.execute("SELECT label FROM kernel_join ORDER BY kernel_id").fetchall() == [
            ("Kernel<Gemm<…>>",), ("Kernel<B2bGemm<…>>",)]
    finally:
        con.close()


def test_cutlass_instantiations_of_one_template_are_told_apart_deeper() -> None:
    """Two B2bGemm instantiations (this report's and the repository's report80.ncu-rep, with its GemmShape
    192x384x128 threadblock) differ inside the template: their tile shapes are shown, the rest elided."""
    b2b = next(launch.name for launch in read_rep(CUTLASS).launches if "B2bGemm" in launch.name)
    other = b2b.replace("GemmShape<(int)32, (int)384, (int)64>", "GemmShape<(int)192, (int)384, (int)128>")
    gemm = next(launch.name for launch in read_rep(CUTLASS).launches if "B2bGemm" not in launch.name)
    bases = name_bases([("Kernel", b2b), ("Kernel", other), ("Kernel", gemm)])
    assert bases == {
        ("Kernel", gemm): "Kernel<Gemm<…>>",
        ("Kernel", b2b): "Kernel<B2bGemm<B2bMmaMultistageSmemAccumulator<GemmShape<32,384,64>,…>,…>>",
        ("Kernel", other): "Kernel<B2bGemm<B2bMmaMultistageSmemAccumulator<GemmShape<192,384,128>,…>,…>>"}


def test_labels_number_rows_of_one_source_by_first_launch() -> None:
    rows = [{"name": "void k<int>(int)", "function": "k", "source": "a", "launch_ids": [7]},
            {"name": "void k<int>(int)", "function": "k", "source": "a", "launch_ids": [2]},
            {"name": "void k<int>(int)", "function": "k", "source": "b", "launch_ids": [0]},
            {"name": "void j<float>(float)", "function": "j", "source": "a", "launch_ids": [1]}]
    assert kernel_labels(rows) == ["k #2", "k #1", "k", "j"]
    assert shortened(f"{GEMM} #12", 20) == "nvjet_sm90_tst_… #12" and shortened("short", 20) == "short"


def _reorder(cell_file: Path, rename: dict[str, str]) -> None:
    """Reverse a cell's kernel list (new ids k000.. in the new order, new first launches), and rename kernels."""
    data = json.loads(cell_file.read_text())
    kernels = data["kernels"][::-1]
    for i, k in enumerate(kernels):
        k["id"] = f"k{i:03d}"
        k["launch_ids"] = [1000 + i]
        if k["function"] in rename:
            k["name"] = k["name"].replace(k["function"], rename[k["function"]])
            k["function"] = rename[k["function"]]
    for k, label in zip(kernels, kernel_labels(kernels), strict=True):  # as import_ncu labels them
        k["label"] = label
    data["kernels"] = kernels
    cell_file.write_text(json.dumps(data))


def _two_decode_cells(doc: dict[str, Any]) -> None:
    decode = next(c for c in doc["cells"] if c["id"] == DECODE)
    decode["captures"] = [c for c in decode["captures"] if "basic" not in c]
    c32 = json.loads(json.dumps(decode))
    c32["id"] = "decode-c32"
    c32["context"]["workload"]["concurrency"] = 32
    doc["cells"] = [decode, c32]


def test_lake_compare_pairs_kernels_by_identity_when_the_order_changes(tmp_path: Path) -> None:
    camp = make_campaign(tmp_path / "c", _two_decode_cells)
    # the second trial lists its kernels the other way round, and ran a fused norm instead of the layer norm
    _reorder(camp / "cells" / "decode-c32" / "ncu_kernels.json", {"vectorized_layer_norm_kernel": "fused_norm"})
    lake = tmp_path / "lake"
    publish_to_lake(camp, lake=lake)
    kernels = lake_query(lake, "SELECT * FROM kernels ORDER BY cell_id, kernel_id")
    rows = [dict(zip(kernels.columns, r, strict=True)) for r in kernels.rows]
    first = [r for r in rows if r["cell_id"] == DECODE]
    second = [r for r in rows if r["cell_id"] == "decode-c32"]
    assert [r["kernel_id"] for r in first][:2] == ["k000", "k001"] and second[0]["function"] == "splitKreduce_kernel"

    pairs = pair_kernels([first, second])
    by_label = {}
    for a, b in pairs:
        by_label[(a or b or {})["label"]] = (a["kernel_id"] if a else None, b["kernel_id"] if b else None)
    assert by_label == {
        "vectorized_layer_norm_kernel": ("k000", None), "fused_norm": (None, "k010"),
        f"{GEMM} #1": ("k001", "k009"), f"{GEMM} #2": ("k006", "k004"),
        "splitKreduce_kernel #1": ("k004", "k006"), "splitKreduce_kernel #2": ("k010", "k000"),
        DECODE_LABELS["k015"]: ("k005", "k005"), DECODE_LABELS["k017"]: ("k007", "k003"),
        DECODE_LABELS["k018"]: ("k008", "k002"),
        "nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_NNT": ("k003", "k007"),
        "nvjet_sm90_tst_128x16_64x11_2x1_v_bz_splitK_NNT": ("k009", "k001"),
        next(r["label"] for r in first if r["function"].startswith("cudnn")): ("k002", "k008"),
    }
    for a, b in pairs:  # a paired kernel is the same kernel: its counters are the same
        if a is not None and b is not None:
            assert (a["name"], a["grid_size"], a["sol_pct"]) == (b["name"], b["grid_size"], b["sol_pct"])

    result = lake_compare(lake, "duration_ns", vary="workload.concurrency")
    (group,) = result.groups
    assert group.columns == ["kernel", "set", "change", "concurrency=16", "concurrency=32"]
    table = {r[0]: r[2:] for r in group.rows}
    change, at16, at32 = table["vectorized_layer_norm_kernel"]
    assert change == "removed" and at16 is not None and at32 is None
    change, at16, at32 = table["fused_norm"]
    assert change == "added" and at16 is None and at32 is not None
    assert table[f"{GEMM} #2"][0] == "paired" and table[f"{GEMM} #2"][1] == table[f"{GEMM} #2"][2]
    assert all(change == "paired" and a == b for change, a, b in (table[lab] for lab in DECODE_LABELS.values()))
    out = run_cli("lake", "compare", "--lake", str(lake), "--metric", "duration_ns", "--format", "csv", ok=True)
    long = _csv(out.stdout)
    assert {r["kernel"] for r in long if r["change"] == "added"} == {"fused_norm"}
    assert [r["duration_ns"] for r in long if r["kernel"] == f"{GEMM} #2"] == [
        str(first[6]["duration_ns"]), str(first[6]["duration_ns"])]


def test_roofline_export_never_calls_a_placement_tflops(tmp_path: Path) -> None:
    """A --set basic capture has no FLOPs: its kernels are hollow markers at their SM busy %, and the points table
    and its downloads leave achieved TFLOP/s null (there used to be a `tflops` column holding SM busy x roof)."""
    camp = tmp_path / "basic"
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    (camp / "levers.yaml").unlink()  # its levers name the prefill cell
    config = camp / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["cells"] = [c for c in doc["cells"] if c["id"] == DECODE]
    doc["cells"][0]["captures"] = [c for c in doc["cells"][0]["captures"] if "basic" in c]
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", DECODE, "--bundle",
            str(camp / "captures" / "decode" / "layer_basic.ncu-rep.gz"), ok=True)
    site = report_render(camp, tmp_path / "site")
    rows = _csv(read_download(site.campaign_site / "05-roofline.points.csv"))
    assert rows and list(rows[0])[:7] == ["cell_id", "kernel_id", "label", "source", "measured", "ai",
                                          "achieved_tflops"]
    assert not any("tflops" in c and c != "achieved_tflops" for c in rows[0])
    assert all(r["measured"] == "false" and r["achieved_tflops"] == "" and float(r["sm_pct"]) > 0 for r in rows)
    doc_json = json.loads(read_download(site.campaign_site / "05-roofline.points.json"))
    assert {c["key"]: c["label"] for c in doc_json["columns"]}["achieved_tflops"] == "achieved"
    assert all(r["achieved_tflops"] is None for r in doc_json["rows"])
    heads = [h for t in tables((site.campaign_site / "05-roofline.html").read_text(encoding="utf-8"))
             for h, _ in t["head"]]
    assert "achieved (TFLOP/s)" in heads and not any("placement" in h for h in heads)
    # the chart is what it was: hollow markers on the SM-busy axis at each kernel's SM busy %
    hollow = [t for t in site_figure(site) if t.get("marker", {}).get("symbol") == "circle-open"]
    assert hollow and sorted(y for t in hollow for y in t["y"]) == pytest.approx(
        sorted(float(r["sm_pct"]) for r in rows), rel=1e-3)


def site_figure(site: RenderResult) -> list[dict[str, Any]]:
    """The roofline figure's traces as the page embeds them (`Plotly.newPlot("roofline", [traces], layout)`)."""
    page = (site.campaign_site / "05-roofline.html").read_text(encoding="utf-8")
    start = page.index("[", page.index('"roofline"', page.index("Plotly.newPlot(")))
    data, _ = json.JSONDecoder().raw_decode(page[start:])
    return list(data)
