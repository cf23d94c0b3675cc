"""AMD cells in the lake: an MI200 campaign (import_rocprof, a ROCm torch trace, report_render) published under
--strict, the measurement context the gate asks of an AMD source, and the `vendor` column beside NVIDIA rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import read_download, run_cli
from test_rocprof_cli import DATA
from test_rocprof_join import TRACE

from perfreport.warehouse.campaign_import import import_campaign

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "campaigns" / "h200-decoder-layer"
# every descriptor field filled (`n/a: why` where the field cannot apply to a HIP test program)
CONFIG = """schema_version: 1
campaign: amd-vcopy
hardware: from-capture
sol_rigor: L2
ceilings_override: null
context:
  identity:
    model: "vcopy (rocprof-compute's test program: an 8 MiB fp64 copy)"
    hf_path: "n/a: no model"
    hardware: 1x AMD Instinct MI210 (gfx90a)
    quant: fp64
    kv_cache_dtype: none
  parallelism: {tp: 1, dp: 1, pp: 1, ep: 1, strategy: single-gpu}
  serving:
    max_num_seqs: "n/a: no serving engine"
    max_num_batched_tokens: "n/a: no serving engine"
    gpu_memory_utilization: "n/a: no serving engine"
    max_model_len: "n/a: no serving engine"
    cudagraph_mode: "n/a: no serving engine"
    enforce_eager: "n/a: no serving engine"
    async_scheduling: "n/a: no serving engine"
    prefix_caching: "n/a: no serving engine"
  workload:
    dataset: "vcopy -n 1048576 -b 256 -i 3"
    isl: "n/a: no tokens"
    osl: "n/a: no tokens"
    concurrency: "n/a: one process"
    num_prompts: "n/a: no prompts"
  regime: {cache: warm, tier: "n/a: a test program"}
  stack:
    image: "ROCm 6.0.2 (rocprof-compute's test machine)"
    engine_commit: "n/a: no engine"
    bench_backend: rocprof-compute profile
    engine: hip-vcopy
  grounding: {trials: 1, same_node: true, baseline: "first measurement of vcopy: no earlier run"}
cells:
  - id: vcopy
    description: rocprof-compute's vcopy test workload
    captures: []
"""


def amd_campaign(tmp_path: Path, workload: Path) -> Path:
    root = tmp_path / "amd-vcopy"
    root.mkdir()
    (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(workload), ok=True)
    return root


def cell_kernel(root: Path, cell: str = "vcopy") -> dict[str, Any]:
    (k,) = json.loads((root / "cells" / cell / "ncu_kernels.json").read_text(encoding="utf-8"))["kernels"]
    return k  # type: ignore[no-any-return]


def query(lake: Path, sql: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        run_cli("lake", "query", "--lake", str(lake), "--format", "json", sql, ok=True).stdout)
    return rows


def publish(root: Path, lake: Path, *extra: str, ok: bool = True) -> Any:
    return run_cli("publish_to_lake", "--campaign", str(root), "--lake", str(lake), *extra, ok=ok)


def failure(run: Any) -> list[str]:
    assert run.exit_code == 2 and "Traceback" not in run.output
    return [line.strip() for line in run.stderr.splitlines()]


def nvidia_campaign(dst: Path, edit: Any = None) -> Path:
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    if edit is not None:
        config = dst / "config.yaml"
        doc = yaml.safe_load(config.read_text(encoding="utf-8"))
        edit(doc)
        config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    import_campaign(dst)
    return dst


def test_the_mi200_campaign_renders_joins_a_rocm_trace_and_publishes_under_strict(tmp_path: Path) -> None:
    root = amd_campaign(tmp_path, DATA / "MI200")
    run_cli("import_torch_trace", "--campaign", str(root), "--cell-id", "vcopy", str(TRACE), ok=True)
    run_cli("report_render", "--campaign", str(root), "--out", str(tmp_path / "site"), ok=True)
    # page 4 joins the trace's 14 kernel events (12 kernel keys) and vcopy's counters (no time: another program)
    joined = json.loads(read_download(tmp_path / "site" / "amd-vcopy" / "04-time-share.join.json"))["rows"]
    assert sorted(r["matched_sources"] for r in joined) == ["ncu"] + ["times"] * 12
    assert sum(r["time_share_pct"] or 0 for r in joined) == pytest.approx(100.0, abs=1e-3)
    assert sum(r["instances"] or 0 for r in joined) == 14
    lake = tmp_path / "lake"
    out = publish(root, lake, "--strict").stdout
    assert "wrote 1 kernels, 1 cells, 1 captures, 1 publications" in out
    assert "cell vcopy: context complete, 0 problem(s)" in out
    k = cell_kernel(root)
    (row,) = query(lake, "SELECT * FROM kernels")
    assert (row["vendor"], row["function"], row["launches"], row["family"]) == ("amd", "vecCopy", 3, "copy")
    for field in ("duration_ns", "dram_bytes", "arithmetic_intensity", "achieved_tflops", "sol_pct"):
        assert row[field] == pytest.approx(k[field]), field
    assert row["sol_pct"] == pytest.approx(53.03, abs=0.01) and row["sol_ceiling_key"] == "mi210_gfx90a.hbm_tbps"
    assert row["ncu_version"] is None and row["problems"] == [] and row["context_complete"] is True
    (capture,) = query(lake, "SELECT * FROM captures")
    assert (capture["vendor"], capture["format"], capture["gpu"]) == ("amd", "rocprof-compute", "MI200 (gfx90a)")
    measured = json.loads(capture["measurement_json"])
    assert measured["chip"] == "mi210_gfx90a" and measured["vendor"] == "amd" and measured["roofline_csv"] is True
    # the measurement context, as sysinfo.csv records it
    assert {k: measured["sysinfo"][k] for k in ("version", "rocm_version", "gpu_model", "gpu_arch", "max_sclk",
                                                 "cur_sclk", "max_mclk", "cur_mclk")} == {
        "version": "2", "rocm_version": "6.0.2-115", "gpu_model": "MI200", "gpu_arch": "gfx90a",
        "max_sclk": "1700", "cur_sclk": "1700", "max_mclk": "1600", "cur_mclk": "1600"}


@pytest.mark.parametrize("gpu", ["MI100", "MI300A_A1", "MI300X_A1"])
def test_each_other_workload_under_strict(tmp_path: Path, gpu: str) -> None:
    root = amd_campaign(tmp_path, DATA / gpu)
    lake = tmp_path / "lake"
    if gpu == "MI100":  # no FLOP counter on gfx908, but its HBM %SoL is measured: a clean publish
        assert "cell vcopy: context complete, 0 problem(s)" in publish(root, lake, "--strict").stdout
        (row,) = query(lake, "SELECT vendor, sol_pct, flops_total FROM kernels")
        assert row["vendor"] == "amd" and row["flops_total"] is None
        assert row["sol_pct"] == pytest.approx(58.46, abs=0.01)
        return
    # MI300's timestamps are rounded (docs/rocprof.md): no duration, no %SoL; the gate says so and writes nothing
    lines = failure(publish(root, lake, "--strict", ok=False))
    assert "- kernels[...].sol_pct: not measured (no kernel duration in the capture, so no rate to set against a " \
           "roof; the import's warnings say why) (cell vcopy: 1 kernel(s) k000)" in lines
    assert "(SQ|LDS" not in " ".join(lines)  # rocprof's profiled blocks are no ncu section set
    assert not lake.exists()


def test_an_amd_source_without_its_measurement_context_fails_closed(tmp_path: Path) -> None:
    workload = tmp_path / "MI200"
    shutil.copytree(DATA / "MI200", workload)
    sysinfo = workload / "sysinfo.csv"
    header, values = sysinfo.read_text(encoding="utf-8").splitlines()[:2]
    row = dict(zip(header.split(","), values.split(","), strict=True))
    row.update({"rocm_version": "", "cur_sclk": "NA"})  # a sysinfo.csv that lost two columns' values
    sysinfo.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n", encoding="utf-8")
    root = tmp_path / "amd-vcopy"
    root.mkdir()
    (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
    run = run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", str(workload), ok=True)
    assert ("warning: workload 'MI200': sysinfo.csv does not record rocm_version (the ROCm version it ran under); "
            "cur_sclk (the engine clock in MHz during the profile): the kernels import, but publish_to_lake --strict "
            "refuses them") in " ".join(run.stdout.split())
    lake = tmp_path / "lake"
    lines = failure(publish(root, lake, "--strict", ok=False))
    assert lines[0].endswith("2 problem(s) of 2 kind(s):")
    assert lines[1:3] == [
        "- kernels[...].measurement_context: source MI200 does not record rocm_version (the ROCm version it ran "
        "under); its sysinfo.csv lacks it: re-profile with rocprof-compute (which writes it) and re-import (cell "
        "vcopy: 1 kernel(s) k000)",
        "- kernels[...].measurement_context: source MI200 does not record cur_sclk (the engine clock in MHz during "
        "the profile); its sysinfo.csv lacks it: re-profile with rocprof-compute (which writes it) and re-import "
        "(cell vcopy: 1 kernel(s) k000)"]
    assert not lake.exists()
    # without --strict the rows land, carrying their problems
    assert "cell vcopy: context complete, 2 problem(s)" in publish(root, lake).stdout
    (row,) = query(lake, "SELECT vendor, problems FROM kernels")
    assert row["vendor"] == "amd" and len(row["problems"]) == 2
    assert row["problems"][0].startswith("cells[vcopy].kernels[k000].measurement_context: source MI200 does not "
                                         "record rocm_version")


def test_nvidia_and_amd_campaigns_in_one_lake(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    nvidia = nvidia_campaign(tmp_path / EXAMPLE.name)
    assert "context complete, 0 problem(s)" in publish(nvidia, lake, "--strict").stdout
    amd = amd_campaign(tmp_path, DATA / "MI200")
    assert "cell vcopy: context complete, 0 problem(s)" in publish(amd, lake, "--strict").stdout
    rows = query(lake, "SELECT campaign, vendor, count(*) n FROM kernels GROUP BY ALL ORDER BY campaign")
    assert rows == [{"campaign": "amd-vcopy", "vendor": "amd", "n": 1},
                    {"campaign": "h200-decoder-layer", "vendor": "nvidia", "n": 42}]
    captures = query(lake, "SELECT campaign, vendor, count(*) n, count(measurement_json) m FROM captures "
                           "GROUP BY ALL ORDER BY campaign")
    assert captures == [{"campaign": "amd-vcopy", "vendor": "amd", "n": 1, "m": 1},
                        {"campaign": "h200-decoder-layer", "vendor": "nvidia", "n": 6, "m": 0}]
    # NVIDIA values as the cell files hold them
    decode = json.loads((nvidia / "cells" / "decode-b16-kv2048" / "ncu_kernels.json").read_text(encoding="utf-8"))
    got = {r["kernel_id"]: r["sol_pct"] for r in query(
        lake, "SELECT kernel_id, sol_pct FROM kernels WHERE cell_id = 'decode-b16-kv2048'")}
    assert got == {k["id"]: (None if k["sol_pct"] is None else pytest.approx(k["sol_pct"])) for k in decode["kernels"]}


def test_one_campaign_mixing_both_vendors(tmp_path: Path) -> None:
    def add_amd_cell(doc: dict[str, Any]) -> None:
        doc["cells"] = [c for c in doc["cells"] if c["id"] == "decode-b16-kv2048"]
        doc["cells"].append({"id": "vcopy", "description": "rocprof-compute's vcopy", "captures": []})

    root = nvidia_campaign(tmp_path / EXAMPLE.name, add_amd_cell)
    (root / "levers.yaml").unlink()  # its levers name the cells left out
    run_cli("import_rocprof", "--campaign", str(root), "--cell-id", "vcopy", "--hardware-mismatch", "warn",
            str(DATA / "MI200"), ok=True)
    lake = tmp_path / "lake"
    publish(root, lake)
    rows = query(lake, "SELECT cell_id, vendor, count(*) n, count(sol_pct) sol FROM kernels GROUP BY ALL "
                       "ORDER BY cell_id")
    assert rows == [{"cell_id": "decode-b16-kv2048", "vendor": "nvidia", "n": 21, "sol": 11},
                    {"cell_id": "vcopy", "vendor": "amd", "n": 1, "sol": 0}]  # an MI200 row has no h200 roof
    said = " ".join(failure(publish(root, tmp_path / "strict-lake", "--strict", ok=False)))
    assert ("not scored: the workload ran on mi210_gfx90a, the cell's hardware is h200_sm90 (imported with "
            "--hardware-mismatch warn)") in said
    assert "no ceiling of its precision" not in said
