"""An AMD cell on the site (issue 33, point 4): the MI200 vcopy workload (rocprof-compute's own test data) imported,
rendered, and its kernel page drawn in headless Chromium with AMD's field names: rocprof-compute counters per
derived number (formulas.yaml for gfx90a), the rocprof-compute command that opens the workload, no ncu wording."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import kernel_page_data, run_cli
from test_browser import Visit, browser  # noqa: F401 - the fixture
from test_rocprof_cli import DATA, campaign

from perfreport.rocprof.derive import formulas_doc
from perfreport.rocprof.expr import compile_formula
from perfreport.rocprof.fields import field_table


@pytest.fixture(scope="module")
def amd_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("amd-site")
    root = campaign(tmp)
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    run_cli("report_render", "--campaign", str(root), "--out", str(tmp / "site"), ok=True)
    return tmp / "site" / "amd-vcopy"


def test_the_amd_field_table_names_the_counters_of_its_gfx() -> None:
    table = {r["field"]: r for r in field_table("gfx90a")}
    hbm = formulas_doc()["archs"]["gfx90a"]["formulas"]
    read, write = compile_formula(hbm["hbm_read_bytes"]), compile_formula(hbm["hbm_write_bytes"])
    assert table["dram_bytes"]["metrics"] == sorted({*read.counters, *write.counters})
    assert "TCC_EA_RDREQ_32B_sum" in table["dram_bytes"]["metrics"]
    assert table["duration_ns"]["metrics"] == ["End_Timestamp", "Start_Timestamp"]
    assert "$lds_banks_per_cu" in table["lds_bytes"]["metrics"]
    # gfx942 reads HBM through TCC_BUBBLE; gfx908 (MI100) has no FLOP counter at all
    assert "TCC_BUBBLE_sum" in {r["field"]: r for r in field_table("gfx942")}["dram_bytes"]["metrics"]
    assert {r["field"]: r for r in field_table("gfx908")}["flops"]["metrics"] == [
        "no counter of this gfx: not captured"]
    assert field_table("gfx000") == []


def test_the_amd_kernel_page_reads_as_rocprof_compute(browser: Any, amd_site: Path) -> None:  # noqa: F811
    page = amd_site / "kernel-vcopy.html"
    (row,) = kernel_page_data(page)["doc"]["kernels"]
    assert row["vendor"] == "amd" and row["rocprof"]["gfx_arch"] == "gfx90a"
    visit = Visit(browser, page)
    try:
        visit.page.goto(page.as_uri() + "#" + row["id"])
        visit.page.wait_for_selector("#derived-table")
        visit.check_offline_and_clean()
        title = visit.page.locator("#derived h3, #derived h2").first.inner_text()
        assert "rocprof-compute counters" in title and "ncu" not in title
        head = visit.page.locator("#derived-table thead").inner_text()
        assert "rocprof-compute counters" in head and "ncu metrics" not in head
        dram = visit.page.locator("#derived-table tr", has_text="dram_bytes").first.inner_text()
        assert "TCC_EA_RDREQ_sum" in dram and "L2-Fabric read + write bytes" in dram
        assert f"{row['dram_bytes']:.4g}".split(".")[0] in dram.replace(",", "")
        commands = visit.page.locator("#open pre").all_inner_texts()
        assert commands and commands[0].startswith("rocprof-compute analyze -p ")
        assert f"--dispatch {row['launch_ids'][0]}" in commands[0]
        assert "Nsight" not in visit.page.locator("#open").inner_text()
        assert "per CU" in visit.page.locator("#stalls").inner_text()  # no ncu section advice for an AMD row
    finally:
        visit.page.close()


def test_the_next_lever_of_an_amd_kernel_names_its_profiler(tmp_path: Path) -> None:
    """No timeline imported: the lever stands in with the profiler's duration share, rocprof-compute's here."""
    root = campaign(tmp_path)
    run = run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    said = " ".join(run.output.split())
    assert "rocprof-compute duration share x the distance to its measured roof" in said
    assert "(rocprof-compute serializes kernels)" in said and "ncu" not in said.split("next lever")[1]


def test_the_warehouse_query_verb_scores_an_amd_campaign_with_its_chip(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    sql = "SELECT vendor, round(sol_pct, 2) AS sol, sol_ceiling_key FROM kernel_join WHERE kernel_id IS NOT NULL"
    run = run_cli("query", "--campaign", str(root), "--format", "csv", sql, ok=True)
    assert run.output.splitlines()[1:] == ["amd,53.03,mi210_gfx90a.hbm_tbps"]
