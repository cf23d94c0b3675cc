"""End-to-end `perftunereport import_ncu` on real captures: outputs, bundles, and bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import run_cli, write_config

from perfreport.kernels.cells import load_schema

TESTS = Path(__file__).parent
ORACLE = TESTS / "data" / "h200_oracle"
SHARED = TESTS / "data" / "h200_shared"
PREFILL = TESTS.parent / "campaigns" / "h200-decoder-layer" / "captures" / "prefill"

def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_import_writes_cell_json_valid_against_schema(campaign: Path) -> None:
    out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1",
                  "--bundle", str(ORACLE / "oracle_full.ncu-rep.gz"), ok=True).output
    path = campaign / "cells" / "c1" / "ncu_kernels.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, load_schema())
    assert data["schema_version"] == 1 and data["cell_id"] == "c1" and data["hardware"] == "h200_sm90"
    (src,) = data["sources"]
    assert src["format"] == "ncu-rep" and src["ncu_version"] == "2025.3.1.0" and src["section_set"] == "full"
    assert src["gpu"] == "NVIDIA H200" and src["kernels"] == 6
    assert [k["id"] for k in data["kernels"]] == [f"k{i:03d}" for i in range(6)]
    assert data["kernels"][0]["sol_ceiling_key"] == "h200_sm90.bf16_dense_tflops"
    # the summary table names kernels, the ceiling key and verdicts
    assert "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT" in out.replace("\n", "") or "nvjet_sm90_tst" in out
    assert "(fp8_dense_tflops)" in out and "compute" in out and "memory" in out


def test_dashed_alias_imports_and_a_rerun_writes_identical_bytes(campaign: Path) -> None:
    args = ["--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(ORACLE / "oracle_basic.ncu-rep.gz")]
    run_cli("import-ncu", *args, ok=True)
    first = (campaign / "cells/c1/ncu_kernels.json").read_bytes()
    run_cli("import_ncu", *args, ok=True)
    assert (campaign / "cells/c1/ncu_kernels.json").read_bytes() == first


def test_full_and_basic_sources_merge_in_one_cell(campaign: Path) -> None:
    for name in ("oracle_full.ncu-rep.gz", "oracle_basic.ncu-rep.gz"):
        run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1",
                "--bundle", str(ORACLE / name), ok=True)
    data = json.loads((campaign / "cells/c1/ncu_kernels.json").read_text())
    assert [s["id"] for s in data["sources"]] == ["oracle_basic.ncu-rep.gz", "oracle_full.ncu-rep.gz"]
    assert len(data["kernels"]) == 12
    basic = [k for k in data["kernels"] if k["source"] == "oracle_basic.ncu-rep.gz"]
    assert all(k["arithmetic_intensity"] is None and k["ai_measured"] is False for k in basic)
    assert "AI left null, not estimated" in run_cli(
        "import_ncu", "--campaign", str(campaign), "--cell-id", "c1",
        "--bundle", str(ORACLE / "oracle_basic.ncu-rep.gz")).output


def test_several_launches_aggregate_with_stats(campaign: Path) -> None:
    run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1",
            "--bundle", str(PREFILL / "layer_full.ncu-rep.gz"), ok=True)
    kernels = json.loads((campaign / "cells/c1/ncu_kernels.json").read_text())["kernels"]
    assert sum(k["launches"] for k in kernels) == 12  # one decoder layer: 12 launches
    k = kernels[0]
    assert k["function"] == "vectorized_layer_norm_kernel" and k["family"] == "norm"
    assert k["launches"] == 2 and k["launch_ids"] == [0, 5] and len(k["per_launch"]) == 2
    d = k["stats"]["duration_ns"]
    durations = [r["duration_ns"] for r in k["per_launch"]]
    assert d["n"] == 2 and d["min"] == min(durations) and d["max"] == max(durations)
    assert d["mean"] == pytest.approx(sum(durations) / 2) and k["duration_ns"] == pytest.approx(d["mean"])
    assert d["std"] > 0


def test_bundle_import_fills_kernel_internals_and_keeps_other_fields(tmp_path: Path, campaign: Path) -> None:
    run_cli("bundle", "init", "--id", "b1", "--root", str(tmp_path), ok=True)
    bundle = tmp_path / "experiments/artifacts/inference-perf-bench/b1"
    shutil.copy(ORACLE / "oracle_full.ncu-rep.gz", bundle / "ncu-profiles")
    doc_path = bundle / "inference_perfbench_v1.json"
    doc = json.loads(doc_path.read_text())
    doc["results"] = [{"metric": "tpot_ms", "value": 7.5}]
    doc["custom"] = {"kept": True}
    doc_path.write_text(json.dumps(doc))
    run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(bundle), ok=True)
    after = json.loads(doc_path.read_text())
    assert after["results"] == [{"metric": "tpot_ms", "value": 7.5}] and after["custom"] == {"kept": True}
    ki = after["kernel_internals"]
    assert "oracle_full.ncu-rep.gz" in ki["method"] and len(ki["per_kernel"]) == 6
    gemm = ki["per_kernel"][0]
    assert gemm["regs_per_thread"] == 168 and gemm["block_limit_factor"] == "registers+shared_mem"
    assert gemm["theoretical_occupancy_pct"] == 18.75 and gemm["sm_throughput_pct_peak"] > 90


def _assert_refused(campaign: Path, bundle: Path, *needles: str, cell: str = "c1") -> None:
    before = _files(campaign)
    code, out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", cell, "--bundle", str(bundle))
    assert code != 0
    assert "Traceback" not in out
    for n in needles:
        assert n in out, out
    assert _files(campaign) == before  # nothing written


def test_bad_inputs_each_give_one_clear_error(tmp_path: Path, campaign: Path) -> None:
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    _assert_refused(campaign, empty, "not an Nsight Compute report")
    raw = gzip.decompress((ORACLE / "oracle_full.ncu-rep.gz").read_bytes())
    trunc = tmp_path / "trunc.ncu-rep"
    trunc.write_bytes(raw[:100_000])
    _assert_refused(campaign, trunc, "holds no profiled kernel", "truncated")
    for cut in (200_000, 5_000_000, len(raw) - 700_000):
        trunc.write_bytes(raw[:cut])
        _assert_refused(campaign, trunc, "truncated or damaged", f"({cut} bytes)")
    badgz = tmp_path / "bad.ncu-rep.gz"
    badgz.write_bytes(b"not gzip at all")
    _assert_refused(campaign, badgz, "cannot gunzip")
    _assert_refused(campaign, tmp_path / "missing.ncu-rep", "no such file")
    other = tmp_path / "r.parquet"
    other.write_bytes(b"PAR1")
    _assert_refused(campaign, other, "unknown file type")
    _assert_refused(campaign, ORACLE / "oracle_full.ncu-rep.gz", "'../x'", cell="../x")
    _assert_refused(campaign, ORACLE / "oracle_full.ncu-rep.gz", "nope", cell="nope")


def test_bad_campaign_config_lists_every_problem(tmp_path: Path) -> None:
    d = write_config(tmp_path / "bad", sol_rigor="L9", context={"parallelism": {"tp": "eight"}})
    code, out = run_cli("import_ncu", "--campaign", str(d), "--cell-id", "c1",
                        "--bundle", str(ORACLE / "oracle_full.ncu-rep.gz"))
    assert code != 0 and "Traceback" not in out
    assert "sol_rigor" in out and "context.parallelism.tp" in out and "'eight'" in out
    assert not (d / "cells").exists()


def test_unknown_hardware_token_is_refused(tmp_path: Path) -> None:
    d = write_config(tmp_path / "hw", hardware="h999_sm99")
    code, out = run_cli("import_ncu", "--campaign", str(d), "--cell-id", "c1",
                        "--bundle", str(ORACLE / "oracle_full.ncu-rep.gz"))
    assert code != 0 and "h999_sm99" in out and "h200_sm90" in out
    assert not (d / "cells").exists()


def test_strict_refuses_basic_set_capture(campaign: Path) -> None:
    code, out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--strict",
                        "--bundle", str(ORACLE / "oracle_basic.ncu-rep.gz"))
    assert code != 0 and "--strict" in out and "--set full" in out
    assert not (campaign / "cells").exists()


def test_json_summary_is_the_whole_stdout_and_progress_goes_to_stderr(campaign: Path) -> None:
    res = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--json",
                  "--bundle", str(ORACLE / "oracle_full.ncu-rep.gz"), ok=True)
    doc = json.loads(res.stdout)  # progress goes to stderr: stdout stays one JSON document
    assert doc["kernels"] == 6 and doc["cell_id"] == "c1" and doc["sources"] == ["oracle_full.ncu-rep.gz"]
    assert res.stderr == "[1/1] reading oracle_full.ncu-rep.gz (1.5 MB)\n"


def test_progress_per_file_and_per_tenth_of_a_large_report(tmp_path: Path, campaign: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from perfreport.ncu.rep import reader as rep

    assert rep.progress_steps(19) == set() and rep.progress_steps(20) == {2, 4, 6, 8, 10, 12, 14, 16, 18, 20}
    assert rep.progress_steps(2016) == {*range(202, 2016, 202), 2016}
    run_cli("bundle", "init", "--id", "b1", "--root", str(tmp_path), ok=True)
    bundle = tmp_path / "experiments/artifacts/inference-perf-bench/b1"
    shutil.copy(ORACLE / "oracle_full.ncu-rep.gz", bundle / "ncu-profiles")
    shutil.copy(ORACLE / "oracle_basic-raw.csv", bundle / "ncu-profiles")
    monkeypatch.setattr(rep, "PROGRESS_MIN_KERNELS", 3)  # the real reports here hold 6 kernels
    lines = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(bundle),
                    ok=True).stderr.splitlines()
    assert lines[0].startswith("[1/2] reading oracle_basic-raw.csv (") and lines[0].endswith(" MB)")
    assert lines[1:] == ["[2/2] reading oracle_full.ncu-rep.gz (1.5 MB)"] + [
        f"oracle_full.ncu-rep.gz: {k}/6 kernels read" for k in range(1, 7)]


def test_public_ncu2020_metrics_capture_keeps_its_dram_bytes(campaign: Path) -> None:
    # ncu 2020.1 `--metrics dram__bytes.sum` export (public corpus): bytes are measured, FLOPs and time are not
    out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle",
                  str(TESTS / "data/public_csv/public_cyanguwa-DeepLearningProfiling_details-page_long_ncu2020.csv"),
                  ok=True).output
    kernels = json.loads((campaign / "cells/c1/ncu_kernels.json").read_text())["kernels"]
    # EigenMetaKernel launches of one grid moved 0.17 MB, 28.8 MB and ~7 KB: three pieces of work, three rows
    assert [(k["function"][:15], k["instance"], k["launch_ids"], k["dram_bytes"]) for k in kernels] == [
        ("EigenMetaKernel", 1, [0], 167616.0), ("EigenMetaKernel", 2, [1], 28820608.0),
        ("EigenMetaKernel", 3, [2, 5], 7264.0), ("SwapDimension1A", None, [3], 113641568.0),
        ("EigenMetaKernel", None, [4], 10650624.0)]
    assert all(k["dram_bytes_method"] == "dram__bytes.sum" for k in kernels)
    assert all(k["arithmetic_intensity"] is None and k["duration_ns"] is None for k in kernels)
    assert "5 without FLOP counters" in out


@pytest.mark.parametrize(("name", "needles"), [
    ("h200_oracle/empty.log", ["No kernels were profiled", "distribution_elementwise_grid_stride_kernel"]),
    ("h200_shared/trap_noenv.log", ["without CSV", "ncu --import"]),
])
def test_logs_without_kernels_are_refused_and_write_nothing(campaign: Path, name: str, needles: list[str]) -> None:
    _assert_refused(campaign, TESTS / "data" / name, *needles)


def test_csv_errors_through_the_cli_write_nothing(tmp_path: Path, campaign: Path) -> None:
    raw = (ORACLE / "oracle_full-raw.csv").read_text().splitlines(keepends=True)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("".join(raw[:2]) + raw[2].rsplit(",", 5)[0] + "\n" + "".join(raw[3:]))
    _assert_refused(campaign, ragged, "fields, expected")
    cut = tmp_path / "cut.csv"
    cut.write_text("".join(raw)[: -5000])
    _assert_refused(campaign, cut, "truncated")
    dup = tmp_path / "dup.csv"
    header = raw[0].rstrip("\n") + ',"ID"\n'
    dup.write_text(header + "".join(raw[1:]))
    _assert_refused(campaign, dup, "'ID'")
    other = tmp_path / "other.csv"
    other.write_text("name,value\nfoo,1\n")
    _assert_refused(campaign, other, "ncu")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _assert_refused(campaign, empty, "empty")


def test_many_kernel_h200_report_reports_progress_and_matches_its_raw_export() -> None:
    """24 full-set elementwise launches captured on the H200 (device/h200_many/capture.sh): progress about
    every tenth without any patching, and the report and its `ncu --import --page raw` export agree."""
    from perfreport.ncu.read import read_export

    many = TESTS / "data" / "h200_many"
    said: list[str] = []
    rep = read_export(many / "many_full.ncu-rep.gz", said.append)
    raw = read_export(many / "many_full-raw.csv")
    assert said == [f"many_full.ncu-rep.gz: {k}/24 kernels read" for k in (3, 6, 9, 12, 15, 18, 21, 24)]
    assert len(rep.launches) == len(raw.launches) == 24 and rep.section_set == raw.section_set == "full"
    for a, b in zip(rep.launches, raw.launches, strict=True):
        assert a.function == b.function  # the CSV prints shortened scopes (`unnamed>::`) in the full name
        for key in ("gpu__time_duration.sum", "dram__bytes_read.sum", "launch__registers_per_thread"):
            assert a.metrics[key] == pytest.approx(b.metrics[key], rel=1e-3), key
    basic: list[str] = []
    assert len(read_export(many / "many_basic.ncu-rep.gz", basic.append).launches) == 40 and len(basic) == 10
