"""The page per kernel (issue 19 item 6): what the import adds for it (rule results with their estimated speedups,
stall cycles, waves, hit rates, tensor-pipe use), each derived number's formula and metrics, and the pages
themselves: one per cell, linked from every kernel table and drawn in headless Chromium (tests/test_browser.py)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from conftest import kernel_page_data, read_download

from perfreport.kernels.row import KERNEL_ROW
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.importer import import_ncu
from perfreport.ncu.model import rule_row
from perfreport.ncu.rep.reader import read_rep
from perfreport.site.kernel_pages import decode_data, encode_data, field_table, kernel_data, kernel_href, open_commands
from perfreport.site.render import RenderResult
from perfreport.warehouse.gather import gather

DATA = Path(__file__).parent / "data"
ORACLE = DATA / "h200_oracle"
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def oracle_rep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gzip

    path = tmp_path_factory.mktemp("rep") / "oracle_full.ncu-rep"
    path.write_bytes(gzip.decompress((ORACLE / "oracle_full.ncu-rep.gz").read_bytes()))
    return path


# --- rule results -------------------------------------------------------------------------------------------------


def test_both_report_readers_give_the_same_rules_with_speedups(oracle_rep: Path) -> None:
    by_bytes = read_rep(oracle_rep, reader="auto")
    by_ncu_report = read_rep(oracle_rep, reader="ncu_report")
    for a, b in zip(by_bytes.launches, by_ncu_report.launches, strict=True):
        assert a.rules == b.rules
    first = {(r.rule, r.speedup_type, r.speedup) for r in by_bytes.launches[0].rules}
    assert ("IssueSlotUtilization", "local", "5.573") in first and ("MemoryL2Compression", "global", "18.43") in first
    assert ("SOLBottleneck", "", "") in first  # a rule without an estimate carries none


def test_report_rules_equal_the_details_page_of_the_same_report(oracle_rep: Path) -> None:
    """ncu's own --page details export of this report prints rule, type and estimated speedup per kernel: the
    kernel row's rules (from the report's bytes) say the same."""
    rep = read_rep(oracle_rep)
    printed: dict[int, list[tuple[str, str, str, str, str]]] = {}
    with (ORACLE / "oracle_full-details.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Rule Name"]:
                printed.setdefault(int(row["ID"]), []).append(
                    (row["Section Name"], row["Rule Name"], row["Rule Type"], row["Estimated Speedup Type"],
                     row["Estimated Speedup"]))
    assert len(printed) == len(rep.launches) == 6
    for launch in rep.launches:
        rows = [rule_row(r, launch.launch_id) for r in launch.rules]
        ours = sorted((r["section"], r["rule"], r["type"], r["speedup_type"] or "",
                       "" if r["speedup_pct"] is None else f"{r['speedup_pct']:.4g}") for r in rows)
        theirs = sorted((s, n, t, st, "" if not sp else f"{float(sp):.4g}")
                        for s, n, t, st, sp in printed[launch.launch_id])
        assert ours == theirs, launch.name
    messages = [r["message"] for r in (rule_row(x, 0) for x in rep.launches[0].rules)]
    assert not any("@section:" in m for m in messages)  # ncu's link markup read as its text, as the page prints it
    assert any("Warp Stall Sampling (All Samples) table" in m for m in messages)


def test_details_csv_rules_reach_the_kernel_row_and_the_raw_page_has_none(tmp_path: Path) -> None:
    details = read_csv_export(ORACLE / "oracle_full-details.csv", frozenset(load_catalog().needed()))
    assert sum(len(k.rules) for k in details.launches) > 40
    raw = read_csv_export(ORACLE / "oracle_full-raw.csv", frozenset(load_catalog().needed()))
    assert all(not k.rules for k in raw.launches)


def _kernels(golden: str) -> list[dict]:  # type: ignore[type-arg]
    return json.loads((GOLDEN / golden / "ncu_kernels.json").read_text())["kernels"]


def test_kernel_rows_carry_rules_stall_cycles_waves_hit_rates_and_tensor_pipe() -> None:
    rows = {k["function"]: k for k in _kernels("oracle_full")}
    gemm = rows["nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"]
    add = next(k for f, k in rows.items() if "vectorized_elementwise" in f)
    # the bf16 GEMM keeps its tensor pipe ~97% busy; the elementwise add never touches it
    assert gemm["tensor_pipe_active_pct"] == pytest.approx(96.88, abs=0.01)
    assert add["tensor_pipe_active_pct"] == 0.0
    assert gemm["waves_per_sm"] == 1.0 and add["waves_per_sm"] == pytest.approx(124.12, abs=0.01)
    assert gemm["l2_hit_rate_pct"] == pytest.approx(70.64, abs=0.01) and gemm["l1_hit_rate_pct"] == 0.0
    for k in rows.values():  # the reasons' cycles add up to the cycles between two issued instructions
        assert sum(k["warp_stall_cycles"].values()) == pytest.approx(k["warp_cycles_per_issued_inst"], rel=0.05)
        shares = k["warp_stalls_pct"]
        top = max(shares, key=shares.get)
        assert top == max(k["warp_stall_cycles"], key=k["warp_stall_cycles"].get)
    assert add["warp_stall_cycles"]["long_scoreboard"] == pytest.approx(202.88, abs=0.01)
    rules = gemm["rules"]
    assert {r["launch_id"] for r in rules} == {gemm["launch_ids"][0]}
    assert {(r["rule"], r["type"], r["speedup_type"], r["speedup_pct"]) for r in rules} >= {
        ("IssueSlotUtilization", "OPT", "local", 5.573), ("SOLBottleneck", "INF", None, None)}


def test_a_basic_capture_leaves_the_full_set_numbers_null() -> None:
    for k in _kernels("oracle_basic"):
        assert k["tensor_pipe_active_pct"] is None and k["warp_stall_cycles"] is None
        assert k["waves_per_sm"] is not None and isinstance(k["rules"], list)


def test_a_raw_page_import_has_rules_null(tmp_path: Path, campaign: Path) -> None:
    result = import_ncu(campaign, "c1", ORACLE / "oracle_basic-raw.csv")
    kernels = json.loads(result.path.read_text())["kernels"]
    assert kernels and all(k["rules"] is None for k in kernels)
    assert all(k["waves_per_sm"] is not None for k in kernels)


# --- formulas and metrics -------------------------------------------------------------------------------------------


def test_every_derived_number_names_its_formula_and_real_metrics() -> None:
    needed = set(load_catalog().needed())
    table = {f["field"]: f for f in field_table()}
    for f in KERNEL_ROW:
        if f.level == "launch" and f.type in ("number", "object") and f.name not in ("stats", "per_launch"):
            assert f.formula and f.reads, f"{f.name}: no formula or metrics in perfreport/kernels/row.py"
    for name, entry in table.items():
        assert entry["metrics"], name
        assert set(entry["metrics"]) <= needed, name  # the catalog's names: what the readers extract
    assert table["duration_ns"]["metrics"] == ["gpu__time_duration.sum"]
    assert "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in table["arithmetic_intensity"]["metrics"]
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in \
        table["warp_stall_cycles"]["metrics"]
    with pytest.raises(KeyError):
        load_catalog().resolve(("scalars.no_such_metric",))


# --- the pages ------------------------------------------------------------------------------------------------------


def test_open_commands_name_the_report_and_the_launch() -> None:
    rep = open_commands({"source": "captures/prefill/layer_full.ncu-rep.gz", "format": "ncu-rep"})
    assert rep[0].startswith("gunzip -k captures/prefill/layer_full.ncu-rep.gz")
    assert rep[1] == ("ncu --import captures/prefill/layer_full.ncu-rep --launch-skip {launch} --launch-count 1 "
                      "--page details --print-details all")
    assert rep[2].startswith("ncu-ui captures/prefill/layer_full.ncu-rep")
    spaced = open_commands({"source": "run a/x.ncu-rep", "format": "ncu-rep"})
    assert spaced[0].startswith("ncu --import 'run a/x.ncu-rep' ")
    assert "not recorded" in open_commands({"source": "layer.csv", "format": "csv-raw"})[0]


def test_kernel_data_is_the_imported_json_and_cannot_end_its_script(example_site: RenderResult,
                                                                    example_campaign: Path) -> None:
    data = gather(example_campaign)
    for cd in data.cells:
        text = kernel_data(data, cd)
        block = encode_data(text)
        assert re.fullmatch(r"[A-Za-z0-9+/]+=*", block), "base64 only: nothing in it can end its <script>"
        assert len(block) < len(text) / 2, (len(block), len(text))  # deflated: the point of the encoding
        doc = json.loads(text)
        assert decode_data(block) == doc
        assert doc["cell"] == cd.id and doc["doc"] == json.loads(cd.kernels_json)
        assert {s["source"] for s in doc["sources"]} == {s["source"] for s in cd.sources}
        assert all("{launch}" in " ".join(s["open"]) for s in doc["sources"])
        assert doc["join"] and all(r["cell_id"] == cd.id for r in doc["join"])
        page = example_site.campaign_site / f"kernel-{cd.id}.html"
        assert kernel_page_data(page)["doc"]["kernels"] == doc["doc"]["kernels"]


def test_every_kernel_table_row_links_to_an_existing_kernel_page(example_site: RenderResult) -> None:
    site = example_site.campaign_site
    manifest = json.loads((site / "site.json").read_text())
    cells = manifest["cells"]
    assert {f"kernel-{c}.html" for c in cells} <= set(manifest["pages"])
    assert "kernel-page.js" in manifest["files"]
    ids: dict[str, set[str]] = {}  # each cell's kernel ids, from its kernel page's own data
    for c in cells:
        ids[c] = {k["id"] for k in kernel_page_data(site / f"kernel-{c}.html")["doc"]["kernels"]}
    linked: dict[str, int] = {}
    for name in ("06-kernel-internals.html", "04-time-share.html", "05-roofline.html", "07-frontier.html",
                 *[f"cell-{c}.html" for c in cells]):
        hrefs = re.findall(r'href="kernel-([^".]+)\.html#(k[0-9]+)"', (site / name).read_text())
        linked[name] = len(hrefs)
        for cell, kid in hrefs:
            assert kid in ids[cell], f"{name} links {cell}/{kid}, which has no kernel row"
    internals_rows = len(json.loads(read_download(site / "06-kernel-internals.internals.json"))["rows"])
    assert linked["06-kernel-internals.html"] == internals_rows == sum(len(v) for v in ids.values())
    assert all(n > 0 for n in linked.values()), linked
    assert kernel_href("a b", "k001") == "kernel-a%20b.html#k001"
