"""What `capture k8s run --method sister` did on the H200 with real ncu, replayed on the CPU.

device/h200_capture/k8s_local_device.sh ran the unchanged runner against a two-worker CUDA server
(device/k8s/tp_server.py, `--tensor-parallel-size 2`: a non-CUDA HTTP parent, /health 200 only once both
workers run) with tests/data/k8s/node_kubectl as kubectl (this node as the cluster: it starts the sister's container
command, `ncu --mode launch` included, as a local process). tp2: workers inferred from the server's arguments, two
exact-port releases, Ready, a full-set capture of the bf16 GEMM, exports, cleanup. tp2-one-release: `--workers 1`,
so one worker stayed blocked, readiness never passed, and the run failed at wait-ready and still cleaned up.
dbg1 (`ONLY_DEBUG=1`): `--method debug` on a "production" pod (tests/data/k8s/tp_pod.json: its server under
`ncu --mode launch`, started by the script and released with `capture release --workers 2`): an ephemeral-container
attach captured the GEMM while the server kept serving, and the leftover-ncu cleanup found nothing to stop.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from perfreport.bundle.receipt import load_receipt
from perfreport.capture.k8s.model import K8sOptions
from perfreport.capture.k8s.plan import k8s_plan
from perfreport.capture.plan.spec import CaptureSpec
from perfreport.files import sha256_file
from perfreport.ncu.importer import import_ncu

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "tests" / "data" / "h200_capture" / "k8s_local"
K8S = ROOT / "tests" / "data" / "k8s"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def calls(run: str) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in (RUNS / run / "calls.jsonl").read_text().splitlines()]


def step_names(run: str) -> list[str]:
    return [s["step"] for s in load_receipt(RUNS / run / "ncu-profiles" / f"{run}-cleanup.receipt.json")["steps"]]


def test_the_plan_made_today_is_the_one_that_ran(tmp_path: Path) -> None:
    ran = json.loads((RUNS / "tp2" / "k8s-plan.json").read_text())
    spec = CaptureSpec(kernel_patterns=("regex:nvjet",), section_set="full")
    opts = K8sOptions(container="vllm", capture_id="tp2", ncu_image="local/ncu:2025.3.1", namespace="inference",
                      ncu_home="/opt/nvidia/nsight-compute/2025.3.1")
    plan = k8s_plan("sister", spec, opts, tmp_path / "plan", deployment=json.loads((K8S / "tp_deployment.json")
                    .read_text()), services=json.loads((K8S / "tp_services.json").read_text())["items"])
    assert plan.workers == 2 and plan.verdict == "ok"
    now = json.loads((tmp_path / "plan" / "k8s-plan.json").read_text())
    here = str((tmp_path / "plan").resolve())
    now = json.loads(json.dumps(now).replace(here, "/tmp/k8sl/tp2/plan"))
    # the findings' wording may gain measurements since that run; their codes and levels, argv and manifests may not
    assert [(f["code"], f["level"]) for f in now.pop("findings")] == [(f["code"], f["level"]) for f in ran["findings"]]
    assert now == {k: v for k, v in ran.items() if k != "findings"}
    assert ran["workers"] == 2
    assert (tmp_path / "plan" / "sister.yaml").read_text() == (RUNS / "tp2" / "sister.yaml").read_text()


def test_each_worker_port_was_released_exactly_then_the_server_became_ready() -> None:
    names = step_names("tp2")
    distinct = [n for i, n in enumerate(names) if n not in names[:i]]  # release retries collapsed
    assert distinct == ["check-deployment", "create", "wait-pod", "ncu-version", "release-49152",
                        "release-49152-interrupt", "release-49153", "release-49153-interrupt", "wait-ready", "attach",
                        "interrupt", "cp", "export-raw", "export-sol", "delete-sister"]
    logs = {p: (RUNS / "tp2" / "ncu-profiles" / f"tp2-release-{p}.ncu-output.txt").read_text() for p in (49152, 49153)}
    pids = {}
    for port, text in logs.items():
        m = re.search(r"Attaching to process '[^']+' \((\d+)\) on port (\d+)\.", text)
        assert m and int(m.group(2)) == port
        pids[port] = m.group(1)
        assert f"Connected to process {m.group(1)}" in text and "No kernels were profiled" in text
    assert pids[49152] != pids[49153]  # two worker processes, one per port
    # the tries before the workers reached CUDA found nothing on 49152-49153 (--max-connections 2), then one attached
    assert logs[49152].count("No attachable process found") == names.count("release-49152") - 1 >= 1
    assert "(ports 49152-49153)" in logs[49152] and names.count("release-49153") == 1
    order = [a[0] if a[0] != "exec" else ("release" if "--max-connections" in a else a[8]) for a in calls("tp2")]
    assert order.index("wait") > max(i for i, o in enumerate(order) if o == "release")
    assert order[-1] == "delete"
    # both workers ran (iterations per worker when the sister was deleted)
    iters = json.loads(re.search(r"iterations (\[.*\])", (RUNS / "tp2" / "pod.log").read_text()).group(1))
    assert len(iters) == 2 and min(iters) > 0


def test_the_capture_receipt_names_the_files_it_made() -> None:
    profiles = RUNS / "tp2" / "ncu-profiles"
    r = load_receipt(profiles / "capture.receipt.json")
    assert (r["capture_kind"], r["exit_status"], r["cleanup_done"]) == ("k8s-sister", 0, True)
    assert r["kernel_names"] == [GEMM] and r["ncu_version"] == "2025.3.1.0" and r["section_set"] == "full"
    assert r["target"] == {"namespace": "inference", "pod": "tp-server-ncu-sister-5d8c7b6f9-n0d3l",
                           "deployment": "tp-server", "container": "vllm"}
    digests = {o["path"].rsplit("/", 1)[1]: o["sha256"] for o in r["outputs"]}
    for name in ("capture-raw.csv", "capture-sol.csv", "capture.ncu-output.txt"):
        assert digests[name] == sha256_file(profiles / name)
    rep = gzip.decompress((profiles / "capture.ncu-rep.gz").read_bytes())  # gzipped after the run, to commit it
    assert digests["capture.ncu-rep"] == hashlib.sha256(rep).hexdigest()
    assert "k8s-sister-workers" in [f["code"] for f in r["plan_findings"]]


@pytest.mark.parametrize("name", ["capture.ncu-rep.gz", "capture-raw.csv"])
def test_the_captured_gemm_imports_with_2mnk_tensor_flops(campaign: Path, name: str) -> None:
    (k,) = import_ncu(campaign, "c1", RUNS / "tp2" / "ncu-profiles" / name).kernels
    assert k["function"] == GEMM and k["family"] == "gemm"
    assert k["flops"]["tensor"] / (2 * 2048**3) == pytest.approx(1.0, abs=0.02)  # 256x128 tiles divide 2048
    assert k["ai_measured"] is True and k["flops"]["fp32"] == pytest.approx(0, abs=1e8)


def test_one_release_for_two_workers_fails_at_wait_ready_and_cleans_up() -> None:
    run = "tp2-one-release"
    r: dict[str, Any] = load_receipt(RUNS / run / "ncu-profiles" / f"{run}-cleanup.receipt.json")
    assert step_names(run)[-3:] == ["release-interrupt", "wait-ready", "delete-sister"]
    assert not [n for n in step_names(run) if n.startswith("release-4915")]
    assert r["cleanup_done"] is True and r["kernels_profiled"] == 0
    assert r["diagnosis"][0]["code"] == "k8s-step-failed" and "wait-ready" in r["diagnosis"][0]["message"]
    assert "--workers N" in r["diagnosis"][0]["message"]
    assert calls(run)[-1][:3] == ["delete", "deployment", "tp-server-ncu-sister"]
    iters = json.loads(re.search(r"iterations (\[.*\])", (RUNS / run / "pod.log").read_text()).group(1))
    assert sorted(iters)[0] == 0 and sorted(iters)[1] > 0  # one worker never got past its first CUDA call


def test_debug_method_captured_a_serving_pod_and_left_it_serving(tmp_path: Path, campaign: Path) -> None:
    run = RUNS / "dbg1"
    names = [s["step"] for s in load_receipt(run / "ncu-profiles" / "dbg1-cleanup.receipt.json")["steps"]]
    assert names == ["check-pod", "debug", "wait-debug-container", "ncu-version", "attach", "interrupt", "cp",
                     "export-raw", "export-sol", "interrupt-leftover-ncu"]
    r = load_receipt(run / "ncu-profiles" / "capture.receipt.json")
    assert (r["capture_kind"], r["kernel_names"], r["exit_status"], r["section_set"]) == (
        "k8s-debug", [GEMM], 0, "basic")
    assert r["target"]["deployment"] == "tp-server"  # from the pod's ReplicaSet owner
    assert r["argv"][:3] == ["/opt/nvidia/nsight-compute/2025.3.1/ncu", "--mode", "attach"]
    # pkill found no ncu of ours left (rc 1 in the step); this run's cleanup entry still wrote the synthesized rc 0
    # that cleanup_entry gave every ok action then (it now records the command's own rc)
    steps = load_receipt(run / "ncu-profiles" / "dbg1-cleanup.receipt.json")["steps"]
    assert [s["rc"] for s in steps if s["step"] == "interrupt-leftover-ncu"] == [1]
    assert [(c["step"], c["ok"]) for c in r["cleanup"]] == [("interrupt-leftover-ncu", True)]
    # the production server was released per port before (two workers, two pids) and served on after the capture
    pids = {re.search(r"Connected to process (\d+)", (run / f"prod-release.port{p}.txt").read_text()).group(1)
            for p in (49152, 49153)}
    assert len(pids) == 2
    stats = re.search(r"after the capture /stats: (\{.*\})", (run / "k8s_local_debug.log").read_text())
    assert stats and min(json.loads(stats.group(1))["iterations"]) > 0
    # the plan made today from the same pod is the one that ran
    spec = CaptureSpec(kernel_patterns=("regex:nvjet",), section_set="basic")
    opts = K8sOptions(container="vllm", capture_id="dbg1", ncu_image="local/ncu:2025.3.1", namespace="inference",
                      debug_ncu="/opt/nvidia/nsight-compute/2025.3.1/ncu")
    plan = k8s_plan("debug", spec, opts, tmp_path / "plan", pod=json.loads((K8S / "tp_pod.json").read_text()))
    ran = [["kubectl", *c] for c in calls("dbg1")]
    assert [list(s.argv) for s in [*plan.steps, *plan.cleanup]] == ran
    (k,) = import_ncu(campaign, "c1", run / "ncu-profiles" / "capture.ncu-rep.gz").kernels
    assert k["function"] == GEMM and k["arithmetic_intensity"] is None and k["ai_measured"] is False  # basic set
