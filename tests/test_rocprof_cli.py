"""`perftunereport import_rocprof` on rocprof-compute's vcopy workloads, its errors, report_render on an AMD cell."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from conftest import read_download, run_cli

from perfreport.kernels.cells import FILE_NAME
from perfreport.warehouse.gather import gather

DATA = Path(__file__).parent / "data" / "rocprof"
CONFIG = """schema_version: 1
campaign: amd-vcopy
hardware: from-capture
sol_rigor: L2
ceilings_override: null
context: {}
cells:
  - id: vcopy
    description: rocprof-compute's vcopy test workload
    captures: []
"""
# workload -> (chip token, the summary's %SoL cell, the cell's sol_pct or None)
EXPECTED = {
    "MI100": ("mi100_gfx908", "58.5% (hbm_tbps)", 58.46),
    "MI200": ("mi210_gfx90a", "53.0% (hbm_tbps) / 62.6% (roofline_hbm_tbps)", 53.03),
    "MI300A_A1": ("mi300a_gfx942", "— (mi300a_gfx942.hbm_tbps)", None),
    "MI300X_A1": ("mi300x_gfx942", "— (mi300x_gfx942.hbm_tbps)", None),
}


def campaign(tmp_path: Path) -> Path:
    root = tmp_path / "campaign"
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
    return root


def cell(root: Path) -> dict:
    return json.loads((root / "cells" / "vcopy" / FILE_NAME).read_text(encoding="utf-8"))


@pytest.mark.parametrize("gpu", sorted(EXPECTED))
def test_each_workload_imports_through_the_cli(tmp_path: Path, gpu: str) -> None:
    token, sol_cell, sol = EXPECTED[gpu]
    root = campaign(tmp_path)
    run = run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / gpu),
                  ok=True, env={"COLUMNS": "250"})
    assert f"amd-vcopy / vcopy ← {gpu} [rocprof-compute" in run.stdout
    assert "vecCopy ×3" in run.stdout and sol_cell in run.stdout
    assert f"wrote {root / 'cells' / 'vcopy' / FILE_NAME}" in run.stdout
    assert "next lever (campaign): " in run.stdout and "cannot be built" not in run.stdout
    data = cell(root)
    assert data["hardware"] == token and data["sources"][0]["format"] == "rocprof-compute"
    (k,) = data["kernels"]
    assert (k["vendor"], k["function"], k["launches"], k["family"]) == ("amd", "vecCopy", 3, "copy")
    assert k["sol_ceiling_key"] == f"{token}.hbm_tbps"
    assert k["sol_pct"] == (None if sol is None else pytest.approx(sol, abs=0.01))
    assert k["lds_bytes"] is not None and "lds_bytes" in k["pass_mixed"] and "lds_bytes" not in k["rocprof"]


def test_mi200_values_in_the_cell(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    run = run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    assert "warning: workload 'MI200': values combining counters of different perfmon passes" in run.stdout
    (k,) = cell(root)["kernels"]
    assert k["dram_pct_of_peak"] == pytest.approx(53.0, abs=0.05)  # HBM % of $hbm_bw (docs/rocprof.md)
    assert k["rocprof"]["hbm_read_bytes"] == pytest.approx(8389525.33, abs=0.01)
    assert k["l2_hit_rate_pct"] == pytest.approx(35.09, abs=0.005)
    assert k["achievable_key"] == "mi210_gfx90a.empirical.roofline_hbm_tbps"
    low, high = k["pct_of_achievable_ci"]
    assert low <= k["pct_of_achievable"] <= high


def _fails(*args: str) -> str:
    run = run_cli("import_rocprof", *args, ok=False)
    assert run.exit_code == 2 and "Traceback" not in run.output
    (line,) = [x for x in run.stderr.splitlines() if x.startswith("Error: ")]
    return line


def test_missing_folder(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    line = _fails("--campaign", str(root), "--cell-id", "vcopy", str(tmp_path / "nowhere"))
    assert "no such folder; expected a rocprof-compute workload folder" in line
    assert not (root / "cells" / "vcopy" / FILE_NAME).exists()


def test_partial_folder(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    part = tmp_path / "MI200"
    part.mkdir()
    shutil.copy(DATA / "MI200" / "sysinfo.csv", part)
    line = _fails("--campaign", str(root), "--cell-id", "vcopy", str(part))
    assert "no pmc_perf.csv" in line and "got sysinfo.csv" in line
    assert not (root / "cells" / "vcopy" / FILE_NAME).exists()


def test_bad_cell_id(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    line = _fails("--campaign", str(root), "--cell-id", "nope", str(DATA / "MI200"))
    assert "no cell with id 'nope'; known cell ids: vcopy" in line
    line = _fails("--campaign", str(root), "--cell-id", "bad/id", str(DATA / "MI200"))
    assert "cell id 'bad/id' is not allowed" in line


def test_mismatch_warn_keeps_the_campaigns_hardware(tmp_path: Path) -> None:
    root = tmp_path / "nvidia"
    root.mkdir()
    (root / "config.yaml").write_text(CONFIG.replace("from-capture", "h200_sm90"), encoding="utf-8")
    line = _fails("--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"))
    assert "not on the campaign's hardware h200_sm90" in line and "--hardware-mismatch warn" in line
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", "--hardware-mismatch", "warn",
            str(DATA / "MI200"), ok=True)
    data = cell(root)
    assert data["hardware"] == "h200_sm90" and data["kernels"][0]["sol_pct"] is None


def test_report_render_on_the_mi200_cell(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"), ok=True)
    out = tmp_path / "site"
    run_cli("report_render", "--campaign", str(root), "--out", str(out), ok=True)
    site = out / "amd-vcopy"
    (k,) = cell(root)["kernels"]
    # the cell's own GPU's roofs, from chips.yaml, with their AMD sources
    roofs = {r["key"]: r for r in json.loads(read_download(site / "05-roofline.roofs.json"))["rows"]}
    assert roofs["mi210_gfx90a.hbm_tbps"]["value"] == pytest.approx(1.6384)
    assert roofs["mi210_gfx90a.fp32_tflops"]["value"] == pytest.approx(22.6)
    assert all("https://www.amd.com/" in r["source"] for r in roofs.values())
    # vcopy does no FLOP: AI 0 is no position on a log axis, and AMD has no SM-busy % for the unmeasured band
    assert k["arithmetic_intensity"] == 0.0 and k["sm_throughput_pct"] is None
    assert json.loads(read_download(site / "05-roofline.points.json"))["rows"] == []
    model = gather(root).roofline
    assert model.hardware == "mi210_gfx90a" and not model.points
    assert any("AI measured as 0" in n for n in model.notes)
    (row,) = json.loads(read_download(site / "cell-vcopy.kernels.json"))["rows"]
    assert (row["label"], row["sol_ceiling_key"], row["bound"]) == ("vecCopy", "mi210_gfx90a.hbm_tbps", "memory")
    for key in ("duration_ns", "arithmetic_intensity", "achieved_tflops", "sol_pct", "pct_of_achievable"):
        assert row[key] == pytest.approx(k[key]), key


def test_the_import_prints_csv_and_json_like_import_ncu(tmp_path: Path) -> None:
    root = campaign(tmp_path)
    args = ("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(DATA / "MI200"))
    rows = list(csv.DictReader(io.StringIO(run_cli(*args, "--format", "csv", ok=True).stdout)))
    (k,) = cell(root)["kernels"]
    assert [(r["function"], float(r["sol_pct"])) for r in rows] == [("vecCopy", k["sol_pct"])]
    doc = json.loads(run_cli(*args, "--format", "json", "--replace", ok=True).stdout)
    assert doc["cell_id"] == "vcopy" and doc["kernels"] == 1 and "rocprof-compute" in doc["next_lever"]
