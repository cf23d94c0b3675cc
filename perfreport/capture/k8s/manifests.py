"""Kubernetes documents for `capture k8s`: read Deployment/Service/Pod JSON or YAML (from files, or from the
cluster with `kubectl get -o json`: fetch_docs), derive the sister Deployment.

The sister is the production Deployment with the changes that make it safe to profile and nothing else:
one replica, labels no production Service or Deployment selects, the continuous profiler's injection
variable removed (ncu needs the CUDA injection slot), the server command wrapped by
`ncu --mode launch`, ncu copied by an initContainer into an emptyDir, and the probes that would kill
the container while it waits for its first attach (startup, liveness) removed. docs/capture.md, section
"Kubernetes", explains each choice.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from perfreport.errors import InputError

INJECTION_ENV = "CUDA_INJECTION64_PATH"
LABEL_CAPTURE = "perfreport.dev/capture"
LABEL_ROLE = "perfreport.dev/role"
ROLE_SISTER = "ncu-sister"
ANN_SOURCE = "perfreport.dev/source-deployment"
ANN_REVISION = "perfreport.dev/source-revision"
ANN_SOURCE_LABELS = "perfreport.dev/source-labels"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
SISTER_SUFFIX = "-ncu-sister"
NCU_VOLUME = "perfreport-ncu"
OUT_VOLUME = "perfreport-ncu-out"
NCU_MOUNT = "/ncu"
OUT_MOUNT = "/ncu-out"
SISTER_NCU = f"{NCU_MOUNT}/ncu"
INIT_NAME = "perfreport-ncu-install"
# metadata the API server owns: never copied into a manifest we create
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                    "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class SisterOptions:
    """What the sister derivation needs besides the production Deployment."""

    container: str
    capture_id: str
    ncu_image: str
    ncu_home: str = "/opt/nvidia/nsight-compute"
    drop_env: tuple[str, ...] = ()
    keep_labels: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    counters_cap: bool = True


def load_doc(path: Path, kind: str) -> dict[str, Any]:
    """Read one Kubernetes object (JSON or YAML, as `kubectl get -o json|yaml` writes it) and check its kind."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot be read as JSON or YAML: {exc}. Pass the output of "
                         f"`kubectl get {kind.lower()} NAME -o json`.") from exc
    return parse_doc(doc, kind, str(path))


def parse_doc(doc: Any, kind: str, where: str) -> dict[str, Any]:
    """Check that doc is one object of kind (a `kind: List` of one such object is unwrapped)."""
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        items = [i for i in doc["items"] if isinstance(i, dict) and i.get("kind") == kind]
        if len(items) == 1:
            doc = items[0]
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        got = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{where}: expected a Kubernetes {kind}, got {got!r}. Pass the output of "
                         f"`kubectl get {kind.lower()} NAME -o json`.")
    return doc


def parse_json(text: str, kind: str, where: str) -> dict[str, Any]:
    """Parse kubectl's JSON output for one object of kind."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: kubectl printed no JSON ({exc.msg} at line {exc.lineno}); expected "
                         f"one {kind}. Check the name and namespace.") from exc
    return parse_doc(doc, kind, where)


def service_list(doc: Any, where: str) -> list[dict[str, Any]]:
    """Return the Services in a `kubectl get services -o json` List (or a single Service)."""
    if isinstance(doc, dict) and doc.get("kind") == "Service":
        return [doc]
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return [i for i in doc["items"] if isinstance(i, dict) and i.get("kind", "Service") == "Service"]
    raise InputError(f"{where}: expected a Service or a List of Services (`kubectl get services -o json`).")


def find_container(pod_spec: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    """Return the container called name, or raise listing the containers there are."""
    containers = pod_spec.get("containers") or []
    for c in containers:
        if c.get("name") == name:
            return c
    have = ", ".join(repr(c.get("name")) for c in containers) or "none"
    raise InputError(f"{where}: no container {name!r}; the pod has {have}. Pass --container with one of them.")


def selects(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Return True when a Service-style equality selector selects a pod with labels (empty selects none)."""
    return bool(selector) and all(labels.get(k) == v for k, v in (selector or {}).items())


def sister_name(deployment_name: str) -> str:
    """The sister's name: NAME-ncu-sister, cut to a 63-character DNS label (pod hostnames use it)."""
    base = deployment_name[: 63 - len(SISTER_SUFFIX)].rstrip("-.")
    return base + SISTER_SUFFIX


def check_capture_id(capture_id: str) -> str:
    """Return capture_id if it can be a label value and part of a file name, else raise saying why."""
    if len(capture_id) > 40 or not _LABEL_VALUE_RE.fullmatch(capture_id) or not capture_id:
        raise InputError(f"capture id {capture_id!r}: expected 1-40 characters [A-Za-z0-9._-], starting and "
                         f"ending with a letter or digit (it becomes a label value and a file name).")
    return capture_id


def sister_selector(capture_id: str) -> dict[str, str]:
    """The labels that select the sister's pods, and only them."""
    return {LABEL_CAPTURE: capture_id, LABEL_ROLE: ROLE_SISTER}


def label_selector(labels: Mapping[str, str]) -> str:
    """`-l` argument for labels (keys and values are label-syntax, so no quoting is involved)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def server_command(container: Mapping[str, Any], entrypoint: Sequence[str], where: str) -> list[str]:
    """The production server's full argv: command + args (the image ENTRYPOINT must be given when absent)."""
    command = list(container.get("command") or entrypoint)
    if not command:
        raise InputError(f"{where}: container {container.get('name')!r} has no `command`, so the server starts "
                         f"from the image ENTRYPOINT, which the manifest does not show. Pass it with --entrypoint "
                         f"(repeat per word), e.g. --entrypoint vllm --entrypoint serve.")
    return command + [str(a) for a in container.get("args") or []]


def is_ncu_launch(argv: Sequence[str]) -> bool:
    """Return True when argv runs its program under `ncu --mode launch` (what an attach needs)."""
    if not argv or not Path(str(argv[0])).name.startswith("ncu"):
        return False
    head = list(argv[: argv.index("--")] if "--" in argv else argv)
    return any(a == "--mode" and nxt == "launch" for a, nxt in zip(head, head[1:], strict=False)) or \
        "--mode=launch" in head


def derive_sister(deployment: Mapping[str, Any], opts: SisterOptions, ncu_argv: Sequence[str],
                  server_port: int | None = None) -> dict[str, Any]:
    """Build the sister Deployment from the production one; ncu_argv is the wrapped server command."""
    meta = deployment.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace")
    template = copy.deepcopy((deployment.get("spec") or {}).get("template") or {})
    pod_spec = template.setdefault("spec", {})
    target = find_container(pod_spec, opts.container, f"deployment {name!r}")
    drop = {INJECTION_ENV, *opts.drop_env}
    for c in [*pod_spec.get("containers", []), *pod_spec.get("initContainers", [])]:
        if c.get("env"):
            c["env"] = [e for e in c["env"] if e.get("name") not in drop]
            if not c["env"]:
                del c["env"]
    target["command"] = list(ncu_argv)
    target.pop("args", None)
    target.pop("livenessProbe", None)
    target.pop("startupProbe", None)
    target["volumeMounts"] = [*target.get("volumeMounts", []), {"name": NCU_VOLUME, "mountPath": NCU_MOUNT},
                              {"name": OUT_VOLUME, "mountPath": OUT_MOUNT}]
    if opts.counters_cap:
        caps = target.setdefault("securityContext", {}).setdefault("capabilities", {})
        caps["add"] = sorted({*caps.get("add", []), "SYS_ADMIN"})
    pod_spec["initContainers"] = [_install_container(opts), *pod_spec.get("initContainers", [])]
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), {"name": NCU_VOLUME, "emptyDir": {}},
                           {"name": OUT_VOLUME, "emptyDir": {"sizeLimit": "4Gi"}}]
    source_labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = {ANN_SOURCE: f"{namespace}/{name}" if namespace else name,
                   ANN_REVISION: str((meta.get("annotations") or {}).get(REVISION_ANNOTATION, "unknown")),
                   ANN_SOURCE_LABELS: json.dumps(source_labels, sort_keys=True)}
    labels = {k: v for k, v in source_labels.items() if k in opts.keep_labels}
    labels.update(sister_selector(opts.capture_id))
    tmeta = template.setdefault("metadata", {})
    tmeta.pop("creationTimestamp", None)
    tmeta["labels"] = labels
    tmeta["annotations"] = {**{k: v for k, v in (tmeta.get("annotations") or {}).items()
                               if not k.startswith("kubectl.kubernetes.io/")}, **annotations}
    spec = {k: copy.deepcopy(v) for k, v in (deployment.get("spec") or {}).items()
            if k in ("minReadySeconds", "progressDeadlineSeconds")}
    spec.update({"replicas": 1, "revisionHistoryLimit": 0, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": sister_selector(opts.capture_id)}, "template": template})
    out_meta: dict[str, Any] = {"name": sister_name(name), "labels": sister_selector(opts.capture_id),
                                "annotations": annotations}
    if namespace:
        out_meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": out_meta, "spec": spec}


def _install_container(opts: SisterOptions) -> dict[str, Any]:
    # `cp -a DIR/. /ncu/` as an argv: the ncu image needs cp, never a shell
    return {"name": INIT_NAME, "image": opts.ncu_image, "imagePullPolicy": "IfNotPresent",
            "command": ["cp", "-a", f"{opts.ncu_home.rstrip('/')}/.", f"{NCU_MOUNT}/"],
            "volumeMounts": [{"name": NCU_VOLUME, "mountPath": NCU_MOUNT}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "1", "memory": "512Mi"}}}


def sister_problems(deployment: Mapping[str, Any], sister: Mapping[str, Any],
                    services: Iterable[Mapping[str, Any]], opts: SisterOptions) -> list[tuple[str, str, str]]:
    """Return (code, level, message) for every way the sister could touch production; empty when none."""
    out: list[tuple[str, str, str]] = []
    labels = sister["spec"]["template"]["metadata"]["labels"]
    dname = (deployment.get("metadata") or {}).get("name")
    prod_sel = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if selects(prod_sel, labels):
        out.append(("k8s-selector-overlap", "refuse", f"deployment {dname!r} selector {prod_sel} selects the "
                    f"sister's pod labels {labels}; drop --keep-label for those keys."))
    checked = 0
    for svc in services:
        checked += 1
        sel = (svc.get("spec") or {}).get("selector") or {}
        sname = (svc.get("metadata") or {}).get("name")
        if selects(sel, labels):
            out.append(("k8s-service-match", "refuse", f"service {sname!r} selector {sel} selects the sister's "
                        f"pod labels {labels}: it would send production traffic to a pod under ncu. Drop "
                        f"--keep-label {', '.join(sorted(set(sel) & set(labels)))}."))
    if opts.keep_labels and not checked:
        out.append(("k8s-services-unchecked", "warn", f"labels kept ({', '.join(opts.keep_labels)}) were not "
                    f"checked against any Service; let plan read the namespace's Services (no --from-json), or "
                    f"save them as services.json in the --from-json folder."))
    spec = sister["spec"]["template"]["spec"]
    target = find_container(spec, opts.container, "sister")
    if any(p.get("hostPort") for c in spec.get("containers", []) for p in c.get("ports") or []) \
            or spec.get("hostNetwork"):
        out.append(("k8s-host-port", "warn", "the pod uses hostPort/hostNetwork: the sister cannot share a node "
                    "with a production replica and needs a free GPU node of its own."))
    if any("envFrom" in c for c in spec.get("containers", [])):
        out.append(("k8s-envfrom", "warn", f"container envFrom may set {INJECTION_ENV} (the continuous profiler's "
                    f"slot); run checks the pod's environment before attaching."))
    if not target.get("readinessProbe"):
        out.append(("k8s-no-readiness", "warn", "no readinessProbe: run cannot tell when the model is loaded and "
                    "relies on the load driver retrying until the server answers."))
    if opts.counters_cap:
        out.append(("k8s-sys-admin", "info", "the sister's server container gets CAP_SYS_ADMIN (GPU performance "
                    "counters under the default driver setting); a namespace enforcing Pod Security 'baseline' "
                    "refuses it: use --no-counters-cap on nodes with NVreg_RestrictProfilingToAdminUsers=0."))
    return out


def sidecar_problems(pod: Mapping[str, Any], container: str) -> list[tuple[str, str, str]]:
    """Return (code, level, message) for why an ephemeral-container attach to this pod cannot work."""
    name = (pod.get("metadata") or {}).get("name")
    target = find_container(pod.get("spec") or {}, container, f"pod {name!r}")
    argv = [*(target.get("command") or []), *(target.get("args") or [])]
    out: list[tuple[str, str, str]] = []
    if not is_ncu_launch(argv):
        out.append(("k8s-not-launched", "refuse", f"pod {name!r} container {container!r} runs {argv[:3]}..., not "
                    f"under `ncu --mode launch`: nothing listens for an attach (ports 49152-49215), so an "
                    f"ephemeral ncu container cannot profile it. Use --method sister, which starts a copy under ncu."))
    if any(e.get("name") == INJECTION_ENV for e in target.get("env") or []):
        out.append(("k8s-injection-env", "warn", f"container {container!r} sets {INJECTION_ENV} (a continuous "
                    f"profiler): it competes with ncu for the CUDA injection slot."))
    phase = (pod.get("status") or {}).get("phase")
    if phase and phase != "Running":
        out.append(("k8s-pod-phase", "refuse", f"pod {name!r} is {phase}, expected Running."))
    return out


def pod_env_names(pod: Mapping[str, Any], container: str) -> list[str]:
    """Names of the env entries a created pod's container carries (after admission webhooks ran)."""
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or []:
        if c.get("name") == container:
            return [str(e.get("name")) for e in c.get("env") or []]
    return []


def dump_yaml(doc: Mapping[str, Any]) -> str:
    """YAML for a manifest: block style, key order kept (kubectl reads it as written)."""
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=1000)


def load_docs(method: str, folder: Path) -> dict[str, Any]:
    """k8s_plan's documents from files saved with `kubectl get -o json`: sister: deployment.json + services.json
    (a List, or one Service); debug: pod.json."""
    folder = Path(folder)
    if method != "sister":
        return {"pod": load_doc(folder / "pod.json", "Pod")}
    path = folder / "services.json"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot be read as JSON or YAML: {exc}. Save it with "
                         f"`kubectl get services -n NS -o json > {path}`.") from exc
    return {"deployment": load_doc(folder / "deployment.json", "Deployment"), "services": service_list(doc, str(path))}


def fetch_docs(method: str, name: str, namespace: str, kubectl: str = "kubectl") -> dict[str, Any]:
    """Read k8s_plan's documents with `kubectl get ... -o json`: sister: deployment + services; debug: pod."""
    def get(*what: str) -> str:
        argv = [kubectl, "get", *what, "-n", namespace, "-o", "json"]
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"`{' '.join(argv)}`: {exc}. Install kubectl or pass --kubectl PATH.") from exc
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()[-500:]
            raise InputError(f"`{' '.join(argv)}` failed (rc={proc.returncode}): {err}. Check the name, the "
                             f"namespace and your credentials.")
        return proc.stdout.decode("utf-8", "replace")

    if method != "sister":
        return {"pod": parse_json(get("pod", name), "Pod", f"pod {name!r}")}
    where = f"services in namespace {namespace!r}"
    try:
        services = service_list(json.loads(get("services")), where)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: kubectl printed no JSON ({exc.msg}); expected a List of Services.") from exc
    return {"deployment": parse_json(get("deployment", name), "Deployment", f"deployment {name!r}"),
            "services": services}
