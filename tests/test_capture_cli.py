"""The capture verbs end to end: run (launch-and-attach, attach, empty, refused, --import), diagnose, preflight,
release, harness. ncu cannot run here: tests/data/fake_ncu/ncu replays real H200 ncu 2025.3.1 output and writes a
real .ncu-rep; the same verbs ran on the H200 (device/h200_capture/capture_device.sh, docs/capture.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from perfreport.bundle.receipt import load_receipt
from perfreport.files import sha256_file

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "data" / "fake_ncu"
NCU, SMI = str(FAKE / "ncu"), str(FAKE / "nvidia-smi")
HOSTILE = "a'; rm -rf / #"


def run_args(bundle: Path, *extra: str) -> list[str]:
    """capture run against the fake ncu."""
    return ["capture", "run", "--bundle", str(bundle), "--ncu", NCU, "--nvidia-smi", SMI, *extra]


def test_launch_and_attach_writes_report_exports_and_a_valid_receipt(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    run_cli(*run_args(bundle, "--mode", "launch-and-attach", "--kernel-name", "regex:nvjet",
                      "--campaign", "h200-oracle", "--cell-id", "oracle", "--output", "gemm",
                      "--env", "PYTHONUNBUFFERED=1", "--", "python3", "oracle.py", "--only", "gemm"), ok=True)
    prof = bundle / "ncu-profiles"
    assert sorted(p.name for p in prof.iterdir()) == ["gemm-raw.csv", "gemm-sol.csv", "gemm.ncu-output.txt",
                                                       "gemm.ncu-rep", "gemm.receipt.json"]
    r = load_receipt(prof / "gemm.receipt.json")
    assert (r["campaign"], r["cell_id"], r["capture_kind"], r["mode"]) == ("h200-oracle", "oracle", "local",
                                                                            "launch-and-attach")
    assert r["ncu_version"] == "2025.3.1.0" and r["gpu_name"] == "NVIDIA H200" and r["driver_version"] == "580.159.04"
    assert r["kernel_patterns"] == ["regex:nvjet"] and r["section_set"] == "basic" and r["launch_count"] == 1
    assert r["argv"][-5:] == ["--", "python3", "oracle.py", "--only", "gemm"]
    assert "--kernel-name" in r["argv"] and r["exit_status"] == 0 and r["kernels_profiled"] == 6
    rep = next(o for o in r["outputs"] if o["path"].endswith("gemm.ncu-rep"))
    report = prof / "gemm.ncu-rep"
    assert rep["sha256"] == sha256_file(report) and rep["bytes"] == report.stat().st_size
    assert [d["code"] for d in r["diagnosis"]] == ["ok"] and r["cleanup_done"] is True
    launched = [json.loads(line) for line in fake_ncu.read_text().splitlines() if '"argv"' in line]
    assert any("--kernel-name" in e["argv"] for e in launched)
    assert not list(prof.glob(".*.tmp"))  # staging removed


def test_attach_waits_for_the_kernels_then_interrupts_its_own_ncu(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    run_cli(*run_args(bundle, "--kernel-name", HOSTILE, "--output", "live", "--timeout", "30"), ok=True)
    events = [json.loads(line) for line in fake_ncu.read_text().splitlines()]
    argv = next(e["argv"] for e in events if "argv" in e and "attach" in e["argv"])
    assert argv[argv.index("--kernel-name") + 1] == HOSTILE  # one argv element, no shell
    assert any(e.get("signal") == "SIGINT" for e in events)
    r = load_receipt(bundle / "ncu-profiles" / "live.receipt.json")
    assert r["exit_status"] == -2 and r["kernels_profiled"] == 1
    assert any(c["step"] == "sigint-ncu" for c in r["cleanup"])
    attaches = [e["argv"] for e in events if "argv" in e and "attach" in e["argv"]]
    assert len(attaches) == 1 and "--graph-profiling" not in attaches[0]  # node mode: kernels inside graphs


def test_graph_profiling_option_reaches_the_attach_argv(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    run_cli(*run_args(bundle, "--kernel-name", "regex:nvjet", "--graph-profiling", "graph",
                      "--output", "g", "--timeout", "30"), ok=True)
    attaches = [json.loads(line)["argv"] for line in fake_ncu.read_text().splitlines() if '"argv"' in line
                and "attach" in json.loads(line)["argv"]]
    assert len(attaches) == 1 and attaches[0][attaches[0].index("--graph-profiling") + 1] == "graph"
    r = load_receipt(bundle / "ncu-profiles" / "g.receipt.json")
    assert r["argv"][r["argv"].index("--graph-profiling") + 1] == "graph"


def test_empty_capture_fails_with_the_diagnosis_and_keeps_the_receipt(fake_ncu: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_SCENARIO", "empty")
    bundle = tmp_path / "b"
    code, out = run_cli(*run_args(bundle, "--mode", "launch-and-attach", "--kernel-name", "regex:elementwise_kern",
                                  "--output", "empty", "--", "python3", "tiny.py"))
    assert code == 2
    assert "0 kernel(s) profiled" in out and "no-kernels-profiled" in out
    assert "--kernel-name regex:elementwise_kernel" in out  # the closest name ncu listed
    r = load_receipt(bundle / "ncu-profiles" / "empty.receipt.json")
    assert r["kernels_profiled"] == 0 and [d["code"] for d in r["diagnosis"]] == ["no-kernels-profiled"]
    assert not (bundle / "ncu-profiles" / "empty.ncu-rep").exists()


def test_refused_plan_runs_nothing_and_writes_nothing(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    code, out = run_cli(*run_args(bundle, "--set", "full", "--output", "x"))
    assert code == 2 and "refused by the capture policy" in out
    assert "unscoped" in out and "basic-before-full" in out
    assert not fake_ncu.exists() and not (bundle / "ncu-profiles" / "x.receipt.json").exists()


def test_existing_evidence_is_never_overwritten(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    args = run_args(bundle, "--mode", "launch-and-attach", "--kernel-name", "regex:nvjet", "--output", "g", "--",
                    "python3", "x.py")
    run_cli(*args, ok=True)
    code, out = run_cli(*args)
    assert code == 2 and "refusing to overwrite evidence" in out and "--output g-2" in out


def test_run_then_import_into_the_campaign(fake_ncu: Path, tmp_path: Path, campaign: Path) -> None:
    bundle = tmp_path / "b"
    run_cli(*run_args(bundle, "--mode", "launch-and-attach", "--kernel-name", "regex:nvjet",
                      "--cell-id", "c1", "--output", "g", "--import", str(campaign), "--", "python3",
                      "x.py"), ok=True)
    cell = json.loads((campaign / "cells" / "c1" / "ncu_kernels.json").read_text())
    src = cell["sources"][0]
    assert src["file"].endswith("g-raw.csv") and src["format"] == "csv-raw"
    assert [k["function"] for k in cell["kernels"]][0].startswith("nvjet_sm90")
    r = load_receipt(bundle / "ncu-profiles" / "g.receipt.json")
    assert [s["step"] for s in r["steps"]][-1] == "import_ncu" and r["steps"][-1]["rc"] == 0


def test_diagnose_verb_prints_the_failure_code_and_exit_status_on_real_logs() -> None:
    data = ROOT / "tests" / "data"
    code, out = run_cli("capture", "diagnose", str(data / "h200_capture" / "launch_clock_control.log"))
    assert code == 1 and out.startswith("launch-mode-option:") and "--clock-control" in out
    code, out = run_cli("capture", "diagnose", "--json", str(data / "h200_oracle" / "oracle_full.log"))
    assert code == 0 and [d["code"] for d in json.loads(out)] == ["ok"]
    code, out = run_cli("capture", "diagnose", str(data / "h200_shared" / "empty.log"))
    assert code == 1 and out.startswith("no-kernels-profiled:") and "reduce_kernel" in out
    code, out = run_cli("capture", "diagnose", str(data / "nope.log"))
    assert code == 2 and "does not exist" in out


def test_preflight_verb_passes_on_the_recorded_h200_answers_and_fails_without_ncu(fake_ncu: Path) -> None:
    code, out = run_cli("capture", "preflight", "--ncu", NCU, "--nvidia-smi", SMI, "--kernel-name", "regex:nvjet",
                        "--json")
    doc = json.loads(out)
    checks = {c["name"]: c["status"] for c in doc["checks"]}
    assert checks["ncu"] == "ok" and checks["gpu"] == "ok" and checks["ncu-options"] == "ok"
    assert code == (0 if doc["ok"] else 1)
    code, out = run_cli("capture", "preflight", "--ncu", str(FAKE / "no-such-ncu"), "--nvidia-smi", SMI)
    assert code == 1 and "fail ncu" in out


def test_release_verb_detaches_and_reports_the_pid(fake_ncu: Path, tmp_path: Path) -> None:
    out = run_cli("capture", "release", "--ncu", NCU, "--log", str(tmp_path / "rel.txt"), "--attempts", "2",
                  ok=True).output
    assert "released process 692 after 1 attach attempt(s)" in out
    events = [json.loads(line) for line in fake_ncu.read_text().splitlines()]
    argv = next(e["argv"] for e in events if "argv" in e)
    assert argv[argv.index("--kernel-name") + 1] == "regex:^perfreport_release_matches_no_kernel$"


def test_harness_verb_prints_the_ncu_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "perfreport", "harness", "gemm", "--shape", "m=16,n=4096,k=4096",
                           "--warmup", "7", "--print-ncu"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--launch-skip 7 --launch-count 1" in proc.stdout
    assert "-- python3 -m perfreport.capture.harness.runner gemm" in proc.stdout


def test_exports_fall_back_to_ncu_report_when_ncu_import_fails(fake_ncu: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_IMPORT_FAILS", "1")
    bundle = tmp_path / "b"
    out = run_cli(*run_args(bundle, "--mode", "launch-and-attach", "--kernel-name", "regex:nvjet",
                            "--output", "g", "--", "python3", "x.py"), ok=True).output
    assert "written through ncu_report" in out
    prof = bundle / "ncu-profiles"
    raw = (prof / "g-raw.csv").read_text().splitlines()
    assert raw[0].startswith('"ID","Process ID"') and len(raw) == 3  # header, units, one kernel
    assert '"GPU Speed Of Light Throughput","Duration","ns"' in (prof / "g-sol.csv").read_text()
    steps = {s["step"]: s["rc"] for s in load_receipt(prof / "g.receipt.json")["steps"]}
    assert steps["export-raw"] == 1 and steps["export-sol"] == 1 and steps["export-ncu_report"] == 0
