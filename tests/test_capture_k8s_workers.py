"""capture k8s, sister of a server with several CUDA processes (vLLM tensor parallel): one release per port.

Under `ncu --mode launch` every CUDA process of the server blocks at its first CUDA call and listens on its own port
from 49152 up (H200, tests/data/h200_capture/release_ports.log: two workers on 49152 and 49153). A plain release
re-attaches the lowest port, so each worker gets an exact-port release (`--port P --max-connections 2`, the session
accepted only on P). The fake kubectl answers as the process on port P (pid 692 + P - 49152).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_capture_k8s import FAST, KUBECTL, SISTER_POD, argvs, fake, launched_pod, load, opts, services, spec

from perfreport.bundle.receipt import load_receipt
from perfreport.capture.k8s.plan import k8s_plan
from perfreport.capture.k8s.steps import run_plan
from perfreport.errors import PerfReportError

__all__ = ["fake"]  # the fixture, imported so pytest finds it here
NO_KERNEL = "regex:^perfreport_release_matches_no_kernel$"


def deployment_with(*args: str) -> dict[str, Any]:
    doc = copy.deepcopy(load("deployment.json"))
    doc["spec"]["template"]["spec"]["containers"][0]["args"] += list(args)
    return doc


def tp_plan(tmp_path: Path, *args: str, **kw: Any) -> Any:
    return k8s_plan("sister", spec(), opts(**kw), tmp_path / "plan", deployment=deployment_with(*args),
                    services=services())


def releases(plan: Any) -> list[list[str]]:
    return [list(s.argv) for s in plan.steps if s.action == "attach" and s.capture is None]


def test_tensor_parallel_args_give_one_exact_release_per_worker_port(tmp_path: Path) -> None:
    plan = tp_plan(tmp_path, "--tensor-parallel-size", "2")
    assert plan.workers == 2
    names = [s.name for s in plan.steps]
    assert names[4:9] == ["release-49152", "release-49152-interrupt", "release-49153", "release-49153-interrupt",
                          "wait-ready"]
    for port, argv in zip((49152, 49153), releases(plan), strict=True):
        remote = argv[argv.index("/ncu/ncu"):]
        assert remote == ["/ncu/ncu", "--mode", "attach", "--hostname", "127.0.0.1", "--port", str(port),
                          "--max-connections", "2", "--kernel-name", NO_KERNEL, "--launch-count", "1"]
    found = [f for f in plan.findings if f.code == "k8s-sister-workers"]
    assert len(found) == 1 and found[0].level == "info"
    assert "tensor-parallel-size 2 in the server's arguments" in found[0].message
    assert "49152 to 49153" in found[0].message
    written = json.loads((tmp_path / "plan" / "k8s-plan.json").read_text())
    assert written["workers"] == 2
    assert [s.get("port") for s in written["steps"] if s["name"].startswith("release-4915")
            and not s["name"].endswith("interrupt")] == [49152, 49153]


@pytest.mark.parametrize(("args", "workers"), [
    (("-tp=2", "--pipeline-parallel-size", "2"), 4),       # vLLM short form with '=', times pipeline stages
    (("--tp-size", "8"), 8),                                # SGLang
    (("--tensor-parallel-size", "4", "--tensor-parallel-size", "2"), 2),  # the last one wins, as argparse
    ((), 1),
])
def test_worker_count_is_inferred_from_the_server_arguments(tmp_path: Path, args: tuple[str, ...],
                                                            workers: int) -> None:
    plan = tp_plan(tmp_path, *args)
    assert plan.workers == workers
    assert len(releases(plan)) == workers
    if workers == 1:  # one release on any port, as before: no --port, no finding
        assert "--port" not in releases(plan)[0] and [s.name for s in plan.steps][4] == "release"
        assert not [f for f in plan.findings if f.code == "k8s-sister-workers"]


def test_explicit_workers_wins_and_a_bad_size_warns(tmp_path: Path) -> None:
    plan = tp_plan(tmp_path, "--tensor-parallel-size", "2", workers=3)
    assert plan.workers == 3 and [a[a.index("--port") + 1] for a in releases(plan)] == ["49152", "49153", "49154"]
    assert "--workers 3" in next(f.message for f in plan.findings if f.code == "k8s-sister-workers")
    bad = tp_plan(tmp_path, "--tensor-parallel-size", "two")
    assert bad.workers == 1
    warn = next(f for f in bad.findings if f.code == "k8s-sister-workers")
    assert warn.level == "warn" and "'two'" in warn.message and "--workers N" in warn.message
    dbg = k8s_plan("debug", spec(), opts(workers=2), tmp_path / "dbg", pod=launched_pod())
    assert any(f.code == "k8s-workers-ignored" and f.level == "warn" for f in dbg.findings)


def test_sister_run_releases_both_workers_then_captures(tmp_path: Path, fake: Path) -> None:
    plan = tp_plan(tmp_path, "--tensor-parallel-size", "2")
    said: list[str] = []
    result = run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, progress=said.append, **FAST)
    assert result.ok and result.pod == SISTER_POD
    calls = argvs(fake)
    attach_ports = [a[a.index("--port") + 1] for a in calls if NO_KERNEL in a]
    assert attach_ports == ["49152", "49153"]
    order = [a[-1] if a[0] == "wait" else a[0] for a in calls]
    assert order.index("--timeout=900s") > max(i for i, a in enumerate(calls) if NO_KERNEL in a)  # ready after both
    profiles = tmp_path / "bundle" / "ncu-profiles"
    first = (profiles / "cap1-release-49152.ncu-output.txt").read_text()
    second = (profiles / "cap1-release-49153.ncu-output.txt").read_text()
    assert "on port 49152." in first and "Connected to process 692" in first
    assert "on port 49153." in second and "Connected to process 693" in second
    assert not (profiles / "cap1-release.ncu-output.txt").exists()
    assert "release-49153: connected on port 49153 and detached (rc=0); the server runs on" in said
    session = load_receipt(profiles / "cap1-cleanup.receipt.json")
    assert [s["step"] for s in session["steps"]][4:8] == ["release-49152", "release-49152-interrupt",
                                                          "release-49153", "release-49153-interrupt"]
    assert load_receipt(profiles / "capture.receipt.json")["kernel_names"] == [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]


def test_a_worker_port_that_never_answers_fails_its_release_and_cleans_up(tmp_path: Path, fake: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_ANY_PORT", "1")  # every attach lands on 49152, the worker released first
    plan = tp_plan(tmp_path, "--tensor-parallel-size", "2")
    said: list[str] = []
    with pytest.raises(PerfReportError, match="step 'release-49153' failed") as err:
        run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, progress=said.append, **{**FAST, "release_attempts": 2})
    assert "cap1-release-49153.ncu-output.txt" in err.value.message and "--workers" in err.value.message
    assert "Cleanup done" in err.value.message
    assert said.count("release-49153: port 49152 answered, not 49153 (its process has not reached CUDA yet, or was "
                      "released before); detaching and retrying") == 2
    calls = argvs(fake)
    assert [a[a.index("--port") + 1] for a in calls if NO_KERNEL in a] == ["49152", "49153", "49153"]
    assert calls[-1][:2] == ["delete", "deployment"] and not any("--set" in a for a in calls)
    profiles = tmp_path / "bundle" / "ncu-profiles"
    assert load_receipt(profiles / "cap1-cleanup.receipt.json")["cleanup_done"] is True
    assert (profiles / "cap1-release-49152.ncu-output.txt").is_file()


def test_a_relative_kubectl_path_still_reaches_the_steps_run_in_the_staging_folder(
        tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # found on the H200 (k8s_local_device.sh): `--kubectl tests/data/k8s/node_kubectl` failed at `cp`, the one step
    # run with the staging folder as cwd
    monkeypatch.chdir(Path(KUBECTL).parents[3])
    relative = str(Path(KUBECTL).relative_to(Path.cwd()))
    result = run_plan(tp_plan(tmp_path), tmp_path / "bundle", kubectl=relative, **FAST)
    assert result.ok and (tmp_path / "bundle" / "ncu-profiles" / "capture.ncu-rep").stat().st_size > 0
    session = load_receipt(tmp_path / "bundle" / "ncu-profiles" / "cap1-cleanup.receipt.json")
    assert {s["argv"][0] for s in session["steps"]} == {KUBECTL}


def test_a_server_that_exits_before_its_release_fails_at_once(tmp_path: Path, fake: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # found on the H200: a sister whose server died (port in use) was retried 60 x 5 s before the run gave up
    monkeypatch.setenv("FAKE_KUBECTL_RELEASE_FAILS", "100")
    monkeypatch.setenv("FAKE_KUBECTL_EXITS_AFTER_POLLS", "1")  # running at wait-pod, terminated after
    with pytest.raises(PerfReportError, match="step 'release' failed") as err:
        run_plan(tp_plan(tmp_path), tmp_path / "bundle", kubectl=KUBECTL, **{**FAST, "release_attempts": 50})
    assert "no longer running" in err.value.message and "--previous" in err.value.message
    assert sum(1 for a in argvs(fake) if NO_KERNEL in a) == 1  # one attempt, not 50
    assert argvs(fake)[-1][:2] == ["delete", "deployment"]
