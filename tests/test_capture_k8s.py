"""capture k8s: the debug sidecar and sister-Deployment plans (exact kubectl argv), their manifests validated against
the real Kubernetes 1.30 OpenAPI schemas (kubernetes-validate), and run_plan against tests/data/fake_kubectl/kubectl,
which answers from tests/data/k8s and replays REAL ncu 2025.3.1 attach output recorded on the H200.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from conftest import CliRun, run_cli
from referencing import Registry, Resource

from perfreport.bundle.receipt import load_receipt
from perfreport.capture.k8s.argv import ere_escape, interrupt_pattern
from perfreport.capture.k8s.model import K8sOptions
from perfreport.capture.k8s.plan import k8s_plan
from perfreport.capture.k8s.steps import run_plan
from perfreport.capture.plan.spec import CaptureSpec
from perfreport.errors import PerfReportError

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "tests" / "data" / "k8s"
SHARED = ROOT / "tests" / "data" / "h200_shared"
KUBECTL = str(ROOT / "tests" / "data" / "fake_kubectl" / "kubectl")
K8S_VERSION = "1.30"
IMAGE = "nvcr.io/nvidia/cuda:13.0.1-devel-ubuntu24.04"
HOSTILE = "a'; rm -rf / #"
PROD_POD = "vllm-llama-8b-6c9f8d7b54-k7m2x"
SISTER_POD = "vllm-llama-8b-ncu-sister-6d5f7c9b8-q7x2k"
FAST = {"poll_s": 0.01, "release_retry_s": 0.01, "hold_s": 0.05, "release_attempts": 5, "pod_timeout_s": 20.0}
REPORT = gzip.decompress((SHARED / "attach_interrupt_1.ncu-rep.gz").read_bytes())


def load(name: str) -> Any:
    return json.loads((K8S / name).read_text())


def services() -> list[dict[str, Any]]:
    return list(load("services.json")["items"])


def launched_pod() -> dict[str, Any]:
    """pod.json with its server started under `ncu --mode launch` (what the debug method needs)."""
    pod = load("pod.json")
    c = pod["spec"]["containers"][0]
    c["command"] = ["/opt/nvidia/nsight-compute/2025.3.1/ncu", "--mode", "launch", "--target-processes", "all",
                    "--", "vllm", "serve"]
    c["env"] = [e for e in c["env"] if e["name"] != "CUDA_INJECTION64_PATH"]
    return pod


def opts(**kw: Any) -> K8sOptions:
    return K8sOptions(**{"container": "vllm", "capture_id": "cap1", "ncu_image": IMAGE, **kw})


def spec(*patterns: str, **kw: Any) -> CaptureSpec:
    return CaptureSpec(kernel_patterns=patterns or ("regex:nvjet",), **kw)


def sister_plan(tmp_path: Path, s: CaptureSpec | None = None, **kw: Any) -> Any:
    return k8s_plan("sister", s or spec(), opts(**kw), tmp_path / "plan", deployment=load("deployment.json"),
                    services=services())


def debug_plan(tmp_path: Path, s: CaptureSpec | None = None, pod: dict[str, Any] | None = None) -> Any:
    return k8s_plan("debug", s or spec(), opts(), tmp_path / "plan", pod=pod or launched_pod())


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every fake-kubectl call recorded as a JSON line; state in tmp; the pod JSON of a launched server."""
    record = tmp_path / "kubectl.jsonl"
    pod_file = tmp_path / "launched_pod.json"
    pod_file.write_text(json.dumps(launched_pod()))
    for name, value in {"FAKE_KUBECTL_RECORD": str(record), "FAKE_KUBECTL_STATE": str(tmp_path / "state"),
                        "FAKE_KUBECTL_PYTHON": sys.executable, "FAKE_KUBECTL_MAX_S": "20",
                        "FAKE_KUBECTL_POD": str(pod_file)}.items():
        monkeypatch.setenv(name, value)
    for name in ("FAKE_KUBECTL_FAIL", "FAKE_KUBECTL_FAIL_MATCH", "FAKE_KUBECTL_INJECT", "FAKE_KUBECTL_RELEASE_FAILS",
                 "FAKE_KUBECTL_PENDING_POLLS", "FAKE_KUBECTL_DEPLOYMENT", "FAKE_KUBECTL_ANY_PORT",
                 "FAKE_KUBECTL_EXITS_AFTER_POLLS"):
        monkeypatch.delenv(name, raising=False)
    return record


def events(record: Path, kind: str = "argv") -> list[dict[str, Any]]:
    lines = record.read_text().splitlines() if record.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def argvs(record: Path) -> list[list[str]]:
    return [e["argv"] for e in events(record)]


def validate_ephemeral(doc: dict[str, Any]) -> None:
    """Validate against io.k8s.api.core.v1.EphemeralContainer (strict) from kubernetes-validate's 1.30 schemas."""
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSION}.0-local-strict"
    schema = json.loads((base / "ephemeralcontainer-v1.json").read_text())
    defs = json.loads((base / "_definitions.json").read_text())
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    jsonschema.Draft202012Validator(schema, registry=registry).validate(doc)


def sister_expected(plan: Any, pod: str = "<pod>", name: str = "capture", pattern: str = "regex:nvjet") -> list:
    ns, ex = "inference", ["kubectl", "exec", "-n", "inference", pod, "-c", "vllm", "--"]
    manifest = (plan.out_dir.resolve() / "sister.yaml").as_posix()
    release = [
        [*ex, "timeout", "-s", "INT", "-k", "120", "120", "/ncu/ncu", "--mode", "attach", "--hostname", "127.0.0.1",
         "--kernel-name", "regex:^perfreport_release_matches_no_kernel$", "--launch-count", "1"],
        [*ex, "pkill", "-INT", "-f",
         r"^[^ ]*ncu .* --kernel-name regex:\^perfreport_release_matches_no_kernel\$ --launch-count 1$"]]
    return [
        ["kubectl", "get", "deployment", "vllm-llama-8b", "-n", ns, "-o", "json"],
        ["kubectl", "create", "-n", ns, "-f", manifest],
        ["kubectl", "get", "pods", "-n", ns, "-l", "perfreport.dev/capture=cap1,perfreport.dev/role=ncu-sister",
         "-o", "json"],
        [*ex, "/ncu/ncu", "--version"],
        *release,
        ["kubectl", "wait", "-n", ns, "--for=condition=Ready", f"pod/{pod}", "--timeout=900s"],
        [*ex, "timeout", "-s", "INT", "-k", "120", "600", "/ncu/ncu", "--mode", "attach", "--hostname", "127.0.0.1",
         "--clock-control", "none", "--kernel-name", pattern, "--launch-count", "1", "--set", "basic",
         "-o", f"/ncu-out/{name}"],
        [*ex, "pkill", "-INT", "-f", f"^[^ ]*ncu .* -o /ncu-out/{name}$"],
        ["kubectl", "cp", f"inference/{pod}:/ncu-out/{name}.ncu-rep", f"{name}.ncu-rep", "-c", "vllm"],
        [*ex, "/ncu/ncu", "--import", f"/ncu-out/{name}.ncu-rep", "--csv", "--page", "raw"],
        [*ex, "/ncu/ncu", "--import", f"/ncu-out/{name}.ncu-rep", "--csv", "--page", "details", "--section",
         "SpeedOfLight"],
        ["kubectl", "delete", "deployment", "vllm-llama-8b-ncu-sister", "-n", ns, "--wait=false"],
    ]


# -- plans ---------------------------------------------------------------------------------------------------------
def test_sister_plan_lists_the_exact_kubectl_argv_in_order(tmp_path: Path) -> None:
    plan = sister_plan(tmp_path)
    # warn: the Deployment's own --gpu-memory-utilization 0.90 (the memory rule reads it for the sister too)
    assert [f.code for f in plan.findings if f.level != "info"] == ["gpu-memory-utilization"]
    assert plan.verdict == "warn" and plan.argvs() == sister_expected(plan)
    assert [s.name for s in plan.steps][:7] == ["check-deployment", "create", "wait-pod", "ncu-version", "release",
                                                "release-interrupt", "wait-ready"]
    assert "<pod>: the sister's pod" in plan.text()
    saved = json.loads((tmp_path / "plan" / "k8s-plan.json").read_text())
    assert [s["argv"] for s in saved["steps"] + saved["cleanup"]] == plan.argvs()


def test_sister_manifest_passes_kubernetes_validate_and_stays_out_of_production(tmp_path: Path) -> None:
    plan = sister_plan(tmp_path, spec(env=(("VLLM_LOGGING_LEVEL", "DEBUG"),)))
    doc = yaml.safe_load((tmp_path / "plan" / "sister.yaml").read_text())
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION
    assert doc["spec"]["replicas"] == 1 and "CUDA_INJECTION64_PATH" not in json.dumps(doc)
    labels = doc["spec"]["template"]["metadata"]["labels"]
    for svc in services():
        selector = svc["spec"]["selector"]
        assert not all(labels.get(k) == v for k, v in selector.items()), svc["metadata"]["name"]
    pod = doc["spec"]["template"]["spec"]
    init = pod["initContainers"][0]
    assert init["image"] == IMAGE and init["command"] == ["cp", "-a", "/opt/nvidia/nsight-compute/.", "/ncu/"]
    assert {"name": "perfreport-ncu", "emptyDir": {}} in pod["volumes"]
    server = pod["containers"][0]
    assert server["command"] == plan.plan.launch_argv("/ncu/ncu") == [
        "/ncu/ncu", "--mode", "launch", "--target-processes", "all", "--", "vllm", "serve",
        "meta-llama/Llama-3.1-8B-Instruct", "--host", "0.0.0.0", "--port", "8000", "--gpu-memory-utilization",
        "0.90", "--max-model-len", "8192", "--served-model-name", "llama-3.1-8b"]
    assert [e for e in server["env"] if e["name"] == "VLLM_LOGGING_LEVEL"] == [
        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]  # the spec's env is ncu's own, i.e. the container's
    # readiness passes only after the release attach; startup/liveness would kill the container while it waits
    assert "readinessProbe" in server and "livenessProbe" not in server and "startupProbe" not in server


def test_sister_is_judged_as_a_second_replica(tmp_path: Path) -> None:
    heavy = spec(section_set="full", launch_count=4)
    sister = sister_plan(tmp_path / "s", heavy)  # replicas >= 2: full set and 4 launches allowed
    assert [f.code for f in sister.findings if f.level != "info"] == ["gpu-memory-utilization"]
    on_prod = debug_plan(tmp_path / "d", heavy)
    assert on_prod.verdict == "refuse"
    assert {"basic-before-full", "launch-count"} <= {f.code for f in on_prod.findings if f.level == "refuse"}
    gpu = [f for f in debug_plan(tmp_path / "g").findings if f.code == "gpu-memory-utilization"]
    assert gpu and "0.9" in gpu[0].message  # read from the pod's own --gpu-memory-utilization 0.90


def test_refused_sister_writes_nothing_and_runs_nothing(tmp_path: Path, fake: Path) -> None:
    plan = sister_plan(tmp_path, keep_labels=("app", "model"))  # the production Service selects app+model
    codes = {f.code for f in plan.findings if f.level == "refuse"}
    assert codes == {"k8s-selector-overlap", "k8s-service-match"} and plan.verdict == "refuse"
    assert not (tmp_path / "plan").exists() and plan.written == []
    with pytest.raises(PerfReportError, match="refused; nothing was run"):
        run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL)
    assert argvs(fake) == [] and not (tmp_path / "bundle").exists()


def test_debug_plan_argv_and_ephemeral_container_schema(tmp_path: Path) -> None:
    plan = debug_plan(tmp_path)
    ex = ["kubectl", "exec", "-n", "inference", PROD_POD, "-c", "perfreport-ncu-cap1", "--"]
    get = ["kubectl", "get", "pod", PROD_POD, "-n", "inference", "-o", "json"]
    assert plan.argvs() == [
        get,
        ["kubectl", "debug", "-n", "inference", PROD_POD, "--image", IMAGE, "--target", "vllm", "--profile",
         "sysadmin", "-c", "perfreport-ncu-cap1", "--", "sleep", "3600"],
        get,
        [*ex, "ncu", "--version"],
        [*ex, "timeout", "-s", "INT", "-k", "120", "600", "ncu", "--mode", "attach", "--hostname", "127.0.0.1",
         "--clock-control", "none", "--kernel-name", "regex:nvjet", "--launch-count", "1", "--set", "basic",
         "-o", "/tmp/capture"],
        [*ex, "pkill", "-INT", "-f", "^[^ ]*ncu .* -o /tmp/capture$"],
        ["kubectl", "cp", f"inference/{PROD_POD}:/tmp/capture.ncu-rep", "capture.ncu-rep", "-c",
         "perfreport-ncu-cap1"],
        [*ex, "ncu", "--import", "/tmp/capture.ncu-rep", "--csv", "--page", "raw"],
        [*ex, "ncu", "--import", "/tmp/capture.ncu-rep", "--csv", "--page", "details", "--section", "SpeedOfLight"],
        [*ex, "pkill", "-INT", "-f", "^[^ ]*ncu .* -o /tmp/(capture)$"],
    ]
    assert plan.deployment == "vllm-llama-8b"  # from the ReplicaSet owner less its pod-template-hash
    validate_ephemeral(yaml.safe_load((tmp_path / "plan" / "ephemeral-container.yaml").read_text()))
    with pytest.raises(jsonschema.ValidationError):  # the validator does reject a wrong container
        validate_ephemeral({**plan.manifests["ephemeral-container.yaml"], "securityContext": {"privileged": "yes"}})


def test_debug_refuses_a_server_not_started_under_ncu(tmp_path: Path, fake: Path) -> None:
    plan = debug_plan(tmp_path, pod=load("pod.json"))  # production pod runs `vllm serve` directly
    refused = [f for f in plan.findings if f.level == "refuse"]
    assert [f.code for f in refused] == ["k8s-not-launched"]
    assert "ncu --mode launch" in refused[0].message and "--method sister" in refused[0].message
    assert not (tmp_path / "plan").exists()
    with pytest.raises(PerfReportError):
        run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL)
    assert argvs(fake) == []


def test_interrupt_pattern_hits_the_ncu_binary_only() -> None:
    """Process command lines seen with `ps` on the H200 (ncu 2025.3.1) while an attach ran under timeout."""
    pattern = re.compile(interrupt_pattern(["-o", "/tmp/b"]))
    args = "--mode attach --hostname 127.0.0.1 --clock-control none --kernel-name regex:nvjet --launch-count 1 " \
           "--set basic -o /tmp/b"
    assert pattern.search(f"/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/ncu {args}")
    assert not pattern.search(f"/bin/sh /opt/nvidia/nsight-compute/2025.3.1/ncu {args}")  # the wrapper: no exec
    assert not pattern.search(f"timeout -s INT -k 60 120 /usr/local/cuda/bin/ncu {args}")
    assert not pattern.search(f"/opt/.../ncu {args}-2")  # another capture's output
    assert ere_escape("a.b$^(x)|[y]*+?{z}\\") == "a\\.b\\$\\^\\(x\\)\\|\\[y\\]\\*\\+\\?\\{z\\}\\\\"


# -- runs ----------------------------------------------------------------------------------------------------------
def test_dry_run_prints_the_steps_and_runs_nothing(tmp_path: Path, fake: Path) -> None:
    plan = sister_plan(tmp_path)
    said: list[str] = []
    result = run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, dry_run=True, progress=said.append)
    assert not result.ran and argvs(fake) == [] and not (tmp_path / "bundle").exists()
    assert len(said) == len(plan.argvs()) and "kubectl create -n inference -f" in said[1]


def test_sister_run_captures_the_report_and_writes_receipts_then_deletes_the_sister(tmp_path: Path, fake: Path) -> None:
    plan = sister_plan(tmp_path, spec(campaign="h200", cell_id="decode"))
    result = run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert result.ok and result.pod == SISTER_POD
    assert argvs(fake) == [a[1:] for a in sister_expected(plan, SISTER_POD)]
    profiles = tmp_path / "bundle" / "ncu-profiles"
    assert (profiles / "capture.ncu-rep").read_bytes() == REPORT
    assert (profiles / "capture-raw.csv").read_text() == (SHARED / "gemm_full-raw.csv").read_text()
    assert (profiles / "capture-sol.csv").read_text() == (SHARED / "gemm_full-sol.csv").read_text()
    assert "Connected to process 692" in (profiles / "cap1-release.ncu-output.txt").read_text()
    kernel = load_receipt(profiles / "capture.receipt.json")
    assert kernel["capture_kind"] == "k8s-sister" and kernel["deployment_revision"] == "7"
    assert kernel["target"] == {"namespace": "inference", "pod": SISTER_POD, "deployment": "vllm-llama-8b",
                                "container": "vllm"}
    assert kernel["kernel_names"] == ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    assert kernel["argv"] == sister_expected(plan)[7][14:] and kernel["ncu_version"] == "2025.3.1.0"
    assert kernel["cleanup"] == [{"step": "delete-sister", "argv": [KUBECTL, *sister_expected(plan)[-1][1:]],
                                  "rc": 0, "ok": True}] and kernel["cleanup_done"]
    assert {o["path"] for o in kernel["outputs"]} == {f"ncu-profiles/capture{s}" for s in
                                                       (".ncu-rep", "-raw.csv", "-sol.csv", ".ncu-output.txt")}
    session = load_receipt(profiles / "cap1-cleanup.receipt.json")
    assert session["mode"] == "cleanup" and len(session["steps"]) == len(plan.argvs())
    kills = events(fake, "pkill")
    assert [len(k["matched"]) for k in kills] == [1, 1]  # release, then the capture: one ncu each
    assert not any(seen["timeout"] for k in kills for seen in k["looked"])  # never the `timeout` backstop


def test_hostile_kernel_pattern_stays_one_argv_element_without_a_shell(tmp_path: Path, fake: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, Any]] = []
    for name in ("run", "Popen"):
        real = getattr(subprocess, name)

        def spy(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen.append((args[0], kwargs.get("shell", False)))
            return _real(*args, **kwargs)

        monkeypatch.setattr(subprocess, name, spy)
    plan = sister_plan(tmp_path, spec(HOSTILE))
    assert shlex.quote(HOSTILE) in plan.text()  # shown quoted, run unquoted
    run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert seen and all(isinstance(a, list) and shell is False for a, shell in seen)
    attach = [a for a in argvs(fake) if "--set" in a]
    assert len(attach) == 1 and attach[0].count(HOSTILE) == 1
    assert [x for x in attach[0] if "rm -rf" in x] == [HOSTILE]
    assert argvs(fake) == [a[1:] for a in sister_expected(plan, SISTER_POD, pattern=HOSTILE)]
    assert load_receipt(tmp_path / "bundle" / "ncu-profiles" / "capture.receipt.json")["kernel_patterns"] == [HOSTILE]


def test_failing_exec_still_deletes_the_sister_and_writes_receipts(tmp_path: Path, fake: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "exec")
    monkeypatch.setenv("FAKE_KUBECTL_FAIL_MATCH", "--page raw")
    plan = sister_plan(tmp_path)
    with pytest.raises(PerfReportError) as err:
        run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    msg = err.value.message
    assert "step 'export-raw' failed (rc=1)" in msg and 'container not found ("vllm")' in msg
    assert "Fix: The .ncu-rep was copied" in msg and "Cleanup done" in msg
    assert argvs(fake)[-1] == sister_expected(plan)[-1][1:]  # the delete ran last
    profiles = tmp_path / "bundle" / "ncu-profiles"
    kernel = load_receipt(profiles / "capture.receipt.json")
    assert kernel["diagnosis"][0]["code"] == "k8s-step-failed" and kernel["cleanup_done"] is True
    assert kernel["cleanup"][0]["step"] == "delete-sister"
    assert [s["rc"] for s in kernel["steps"] if s["step"] == "export-raw"] == [1]
    assert (profiles / "capture.ncu-rep").read_bytes() == REPORT  # copied before the exports: evidence kept
    assert load_receipt(profiles / "cap1-cleanup.receipt.json")["cleanup"][0]["ok"] is True
    assert not list(profiles.glob(".k8s-*"))  # staging removed


def test_every_exec_failing_fails_the_release_and_still_cleans_up(tmp_path: Path, fake: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "exec")
    plan = sister_plan(tmp_path)
    with pytest.raises(PerfReportError, match="step 'release' failed"):
        run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, **{**FAST, "release_attempts": 2})
    calls = argvs(fake)
    assert sum(1 for a in calls if "regex:^perfreport_release_matches_no_kernel$" in a) == 2
    assert calls[-1][:2] == ["delete", "deployment"]
    profiles = tmp_path / "bundle" / "ncu-profiles"
    assert load_receipt(profiles / "cap1-cleanup.receipt.json")["cleanup_done"] is True
    assert not (profiles / "capture.receipt.json").exists()  # no kernel was reached


def test_release_retries_until_the_server_is_attachable(tmp_path: Path, fake: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_RELEASE_FAILS", "2")
    monkeypatch.setenv("FAKE_KUBECTL_PENDING_POLLS", "2")
    result = run_plan(sister_plan(tmp_path), tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert result.ok
    assert sum(1 for a in argvs(fake) if "regex:^perfreport_release_matches_no_kernel$" in a) == 3
    # two Pending polls, then Running; then one check after each failed release attempt (still running)
    assert sum(1 for a in argvs(fake) if a[:2] == ["get", "pods"]) == 3 + 2
    assert [s.step for s in result.steps].count("release") == 3
    log = (tmp_path / "bundle" / "ncu-profiles" / "cap1-release.ncu-output.txt").read_text()
    assert log.count("==ERROR== No attachable process found.") == 2 and "Connected to process 692" in log


def test_injected_profiler_in_the_created_pod_is_refused(tmp_path: Path, fake: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_INJECT", "1")
    with pytest.raises(PerfReportError, match="CUDA_INJECTION64_PATH") as err:
        run_plan(sister_plan(tmp_path), tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert "admission webhook" in err.value.message
    assert argvs(fake)[-1][:2] == ["delete", "deployment"] and not any(a[0] == "exec" for a in argvs(fake))


def test_changed_deployment_is_refused_before_anything_is_created(tmp_path: Path, fake: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    newer = copy.deepcopy(load("deployment.json"))
    newer["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "8"
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    monkeypatch.setenv("FAKE_KUBECTL_DEPLOYMENT", str(tmp_path / "newer.json"))
    with pytest.raises(PerfReportError, match="revision 7 when planned, 8 now"):
        run_plan(sister_plan(tmp_path), tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert [a[0] for a in argvs(fake)] == ["get"]  # nothing created, so nothing deleted
    assert load_receipt(tmp_path / "bundle" / "ncu-profiles" / "cap1-cleanup.receipt.json")["cleanup"] == []


def test_debug_run_captures_from_the_serving_pod_and_finds_no_ncu_left(tmp_path: Path, fake: Path) -> None:
    plan = debug_plan(tmp_path)
    result = run_plan(plan, tmp_path / "bundle", kubectl=KUBECTL, **FAST)
    assert result.ok and argvs(fake) == [a[1:] for a in plan.argvs()]
    profiles = tmp_path / "bundle" / "ncu-profiles"
    assert (profiles / "capture.ncu-rep").read_bytes() == REPORT
    receipt = load_receipt(profiles / "capture.receipt.json")
    assert receipt["capture_kind"] == "k8s-debug" and receipt["kernels_profiled"] == 1
    assert receipt["target"] == {"namespace": "inference", "pod": PROD_POD, "deployment": "vllm-llama-8b",
                                 "container": "vllm"}
    assert receipt["cleanup"][0]["step"] == "interrupt-leftover-ncu" and receipt["cleanup_done"]
    assert (receipt["cleanup"][0]["rc"], receipt["cleanup"][0]["ok"]) == (1, True)  # pkill's own rc: none left
    kills = events(fake, "pkill")
    assert [len(k["matched"]) for k in kills] == [1, 0]  # the capture's ncu; at cleanup none was left


def test_fetch_docs_reads_what_the_plan_needs(fake: Path) -> None:
    from perfreport.capture.k8s.manifests import fetch_docs

    docs = fetch_docs("sister", "vllm-llama-8b", "inference", kubectl=KUBECTL)
    assert docs["deployment"]["metadata"]["name"] == "vllm-llama-8b" and len(docs["services"]) == 2
    assert fetch_docs("debug", PROD_POD, "inference", kubectl=KUBECTL)["pod"]["kind"] == "Pod"
    assert argvs(fake)[0] == ["get", "services", "-n", "inference", "-o", "json"]
    with pytest.raises(PerfReportError, match="NotFound"):
        fetch_docs("sister", "no-such", "inference", kubectl=KUBECTL)


def test_capture_id_must_make_a_dns_label_for_the_debug_container(tmp_path: Path) -> None:
    with pytest.raises(PerfReportError, match="expected a DNS label"):
        k8s_plan("debug", spec(), opts(capture_id="Decode_1"), tmp_path, pod=launched_pod())


# -- the click verbs ---------------------------------------------------------------------------------------------
def _k8s_cli(verb: str, tmp_path: Path, *extra: str, ok: bool | None = None) -> CliRun:
    return run_cli("capture", "k8s", verb, "--method", "sister", "--name", "vllm-llama-8b", "-n", "inference",
                   "--container", "vllm", "--capture-id", "cap1", "--ncu-image", "nvcr.io/nvidia/cuda:13.0.1-devel",
                   "--from-json", str(K8S), "--out", str(tmp_path / "plan"), "--kubectl", KUBECTL, *extra, ok=ok)


def test_cli_k8s_plan_writes_the_manifest_and_prints_the_argv(tmp_path: Path) -> None:
    res = _k8s_cli("plan", tmp_path, "--kernel-name", HOSTILE, ok=True)
    assert "verdict: WARN (sister, namespace inference)" in res.output  # the server's gpu-memory-utilization 0.90
    assert "kubectl create -n inference -f" in res.output and "cleanup delete-sister" in res.output
    doc = json.loads((tmp_path / "plan" / "k8s-plan.json").read_text())
    attach = next(s["argv"] for s in doc["steps"] if s["name"].startswith("attach"))
    assert attach[attach.index("--kernel-name") + 1] == HOSTILE
    refused = _k8s_cli("plan", tmp_path, "--kernel-name", "a", "--launch-count", "9")
    assert refused.exit_code == 3 and "launch-count" in refused.output


def test_cli_k8s_method_defaults_to_the_sister(tmp_path: Path) -> None:
    """Without --method the plan is the sister (production never under ncu); --help says why."""
    res = run_cli("capture", "k8s", "plan", "--name", "vllm-llama-8b", "-n", "inference", "--container", "vllm",
                  "--capture-id", "cap1", "--ncu-image", "img", "--from-json", str(K8S),
                  "--out", str(tmp_path / "plan"), "--kubectl", KUBECTL, "--kernel-name", "regex:nvjet", ok=True)
    assert "verdict: WARN (sister, namespace inference)" in res.output
    assert json.loads((tmp_path / "plan" / "k8s-plan.json").read_text())["method"] == "sister"
    helped = run_cli("capture", "k8s", "plan", "--help", ok=True)
    assert "[default: sister]" in helped.output and "within 2%" in helped.output


def test_cli_k8s_run_dry_run_runs_nothing_and_a_run_captures(fake: Path, tmp_path: Path) -> None:
    dry = _k8s_cli("run", tmp_path, "--kernel-name", "regex:nvjet", "--bundle", str(tmp_path / "b"), "--dry-run",
                   ok=True)
    assert not fake.exists() or argvs(fake) == []
    assert dry.output.count("kubectl create -n inference -f") == 1  # each command printed once
    assert dry.output.startswith("verdict: ") and "cleanup delete-sister (always" in dry.output
    res = _k8s_cli("run", tmp_path, "--kernel-name", "regex:nvjet", "--bundle", str(tmp_path / "b"), ok=True)
    assert "capture: 1 kernel(s)" in res.output and "cleanup receipt" in res.output
    assert argvs(fake)[-1][:3] == ["delete", "deployment", "vllm-llama-8b-ncu-sister"]


def test_sister_memory_rule_reads_the_deployments_own_value(tmp_path: Path) -> None:
    """The sister is judged as a second replica, and the memory rule still reads the server's own argument."""
    deployment = load("deployment.json")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--gpu-memory-utilization") + 1] = "0.92"
    for method, docs in (("sister", {"deployment": deployment, "services": services()}),
                         ("debug", {"pod": launched_pod()})):
        plan = k8s_plan(method, spec(section_set="full", after_basic=True), opts(), tmp_path / method, **docs)
        gpu = [f for f in plan.findings if f.code == "gpu-memory-utilization"]
        assert [f.level for f in gpu] == ["warn"], method
    assert "the server's own --gpu-memory-utilization 0.92 >= 0.85" in [
        f.message for f in k8s_plan("sister", spec(), opts(), tmp_path / "s2", deployment=deployment,
                                    services=services()).findings if f.code == "gpu-memory-utilization"][0]


def test_sister_is_captured_after_ready_so_no_warm_up_warning(tmp_path: Path) -> None:
    codes = {f.code: f.level for f in sister_plan(tmp_path).findings}
    assert "launch-skip-warmup" not in codes and codes["k8s-sister-after-ready"] == "info"
    assert "launch-skip-warmup" not in {f.code for f in sister_plan(tmp_path / "b", spec(launch_skip=5)).findings}


def test_refused_k8s_plan_prints_no_kubectl_command(tmp_path: Path) -> None:
    refused = _k8s_cli("plan", tmp_path, "--kernel-name", "a", "--keep-label", "app", "--keep-label", "model")
    assert refused.exit_code == 3
    assert refused.output.startswith("verdict: REFUSE (sister, namespace inference)")
    assert "kubectl" not in refused.output and "ncu --mode" not in refused.output and "manifest:" not in refused.output
    assert {line.split(":")[0].strip() for line in refused.output.strip().splitlines()[1:-1]} == {
        "[refuse] k8s-selector-overlap", "[refuse] k8s-service-match"}
    assert refused.output.strip().endswith("fix each refusal above, then plan again.")
    doc = json.loads(_k8s_cli("plan", tmp_path, "--json", "--kernel-name", "a", "--keep-label", "app",
                              "--keep-label", "model").stdout)
    assert doc["verdict"] == "refuse" and doc["steps"] == doc["cleanup"] == doc["manifests"] == []


def test_k8s_run_after_basic_needs_the_basic_receipt_in_the_bundle(fake: Path, tmp_path: Path) -> None:
    bundle = str(tmp_path / "b")
    full = ("--kernel-name", "regex:nvjet", "--set", "full", "--after-basic", "--output", "full", "--bundle", bundle)
    refused = _k8s_cli("run", tmp_path, *full)
    assert refused.exit_code != 0 and "after-basic-unproven" in refused.output
    assert "holds no capture receipt" in refused.output and "--set basic --kernel-name regex:nvjet" in refused.output
    assert not fake.exists() or argvs(fake) == []  # refused before any kubectl call
    _k8s_cli("run", tmp_path, "--kernel-name", "regex:nvjet", "--output", "basic", "--bundle", bundle, ok=True)
    _k8s_cli("run", tmp_path, *full, "--capture-id", "cap2", ok=True)  # basic.receipt.json now proves it
    assert load_receipt(tmp_path / "b" / "ncu-profiles" / "full.receipt.json")["section_set"] == "full"
