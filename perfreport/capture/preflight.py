"""capture preflight: can this host capture right now? Checks ncu, the driver and GPUs, counter permission, the
CUDA injection slot, free GPU memory and the plan's ncu options, each with a message that says how to fix it.

Everything a check reads is injectable (binaries, /proc root, driver params file, euid, environment), so the tests
run the real parsing on recorded H200 output (tests/data/fake_ncu). Stdlib only: it runs on a bare GPU host.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATUSES = ("ok", "warn", "fail")
INJECTION_ENV = "CUDA_INJECTION64_PATH"
# ncu's own injection library (target/linux-desktop-*/). ASSUMED, not yet seen: that a target started under
# `ncu --mode launch` carries it in CUDA_INJECTION64_PATH (preflight_device.sh records ncu_launch_env.txt).
NCU_INJECTION_LIB = "libcuda-injection.so"
CAP_SYS_ADMIN = 21
GPU_QUERY = "name,driver_version,memory.total,memory.used,memory.free"
_NA = {"", "n/a", "[n/a]", "[not supported]", "[unknown error]"}
# options that old ncu (or old docs) had and 2025.x lacks, with what replaces them
OPTION_HINTS = {
    "--attach": "ncu >= 2023 removed --attach; use --mode attach --hostname HOST [--port PORT]",
    "--units": "renamed --print-units",
    "--fp": "renamed --print-fp",
    "--kernel-regex": "use --kernel-name regex:<expr>",
    "--kernel-regex-base": "renamed --kernel-name-base",
    "--process-id": "new in ncu 2026.2.1 (with --mode attach); older ncu attaches by --hostname/--port",
}


@dataclass(frozen=True)
class Check:
    """One preflight check: status ok | warn | fail, a message that says what was found and the fix, details."""

    name: str
    status: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON form: {name, status, message, details}."""
        return {"name": self.name, "status": self.status, "message": self.message, "details": dict(self.details)}


@dataclass(frozen=True)
class PreflightResult:
    """All checks, in a fixed order; ok when none failed (warnings are ok unless the caller is strict)."""

    checks: list[Check]

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return all(c.status != "fail" for c in self.checks)

    def check(self, name: str) -> Check:
        """The check with this name (KeyError when there is none)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        """JSON form for `--json`: {schema_version, kind: capture_preflight, ok, checks}."""
        return {"schema_version": SCHEMA_VERSION, "kind": "capture_preflight", "ok": self.ok,
                "checks": [c.as_dict() for c in self.checks]}


@dataclass(frozen=True)
class Gpu:
    """One row of `nvidia-smi --query-gpu` (MiB; None where nvidia-smi said [N/A])."""

    index: int
    name: str
    driver_version: str | None
    total_mib: float | None
    used_mib: float | None
    free_mib: float | None


@dataclass(frozen=True)
class _Ran:
    rc: int | None
    stdout: str
    stderr: str
    error: str | None = None

    def why(self) -> str:
        """Why it failed, in one line: the OS error, or rc and the last output line."""
        if self.error:
            return self.error
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return f"rc={self.rc}" + (f": {tail[-1].strip()}" if tail else "")


def _run(argv: Sequence[str], timeout_s: float) -> _Ran:
    try:
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return _Ran(None, "", "", f"timed out after {timeout_s:g} s")
    except OSError as exc:
        return _Ran(None, "", "", f"{type(exc).__name__}: {exc}")
    return _Ran(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def check_ncu(ncu: str, timeout_s: float = 30.0) -> tuple[Check, str | None]:
    """Find ncu and parse `ncu --version`; return the check and the resolved path (None when unusable)."""
    path = shutil.which(ncu)
    if path is None:
        return Check("ncu", "fail", f"ncu {ncu!r} not found (not an executable path, not on PATH). Expected Nsight "
                     f"Compute's CLI. Fix: pass --ncu /usr/local/cuda/bin/ncu (it ships with the CUDA toolkit) "
                     f"or put its folder on PATH.", {"ncu": ncu}), None
    ran = _run([path, "--version"], timeout_s)
    if ran.rc != 0:
        return Check("ncu", "fail", f"`{path} --version` failed ({ran.why()}); expected rc 0 and a 'Version "
                     f"2025.x' line. Fix: check the Nsight Compute install (run it by hand), or pass another "
                     f"--ncu.", {"path": path, "rc": ran.rc}), None
    m = re.search(r"Version\s+(\d+(?:\.\d+)+)(?:\s+\(build\s+(\d+)\))?", ran.stdout)
    if m is None:
        return Check("ncu", "warn", f"`{path} --version` printed no 'Version X.Y.Z' line; the receipt will say "
                     f"ncu_version null. Check that {path} is Nsight Compute's ncu.", {"path": path}), path
    build = f" (build {m.group(2)})" if m.group(2) else ""
    return Check("ncu", "ok", f"ncu {m.group(1)}{build} at {path}",
                 {"path": path, "version": m.group(1), "build": m.group(2)}), path


def parse_gpu_rows(text: str) -> list[Gpu]:
    """Rows of `--query-gpu=name,driver_version,memory.total,memory.used,memory.free` (units or nounits)."""
    out: list[Gpu] = []
    for line in (x for x in text.splitlines() if x.strip() and "," in x):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        name = ", ".join(parts[:-4])  # a GPU name with a comma stays whole
        driver, total, used, free = parts[-4:]
        out.append(Gpu(len(out), name, None if driver.lower() in _NA else driver, _mib(total), _mib(used),
                       _mib(free)))
    return out


def _mib(value: str) -> float | None:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*(MiB)?", value.strip())
    return float(m.group(1)) if m else None


def query_gpus(nvidia_smi: str, timeout_s: float = 30.0) -> tuple[list[Gpu] | None, str | None, str]:
    """Run the GPU query and the plain header; return (rows or None, CUDA version, why rows is None)."""
    path = shutil.which(nvidia_smi)
    if path is None:
        return None, None, (f"nvidia-smi {nvidia_smi!r} not found: no NVIDIA driver is visible here. Fix: run on "
                            f"a GPU node with the GPU exposed to the container (--gpus all, or a nvidia.com/gpu "
                            f"resource in Kubernetes).")
    ran = _run([path, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"], timeout_s)
    if ran.rc != 0:
        return None, None, (f"`nvidia-smi --query-gpu` failed ({ran.why()}). Fix: check that the NVIDIA driver "
                            f"is loaded (`nvidia-smi` by hand, `lsmod | grep nvidia`) and the GPU is exposed.")
    header = _run([path], timeout_s)
    m = re.search(r"CUDA Version\s*:\s*([0-9][0-9.]*)", header.stdout)
    return parse_gpu_rows(ran.stdout), (m.group(1) if m else None), ""


def check_driver(gpus: list[Gpu] | None, cuda: str | None, why: str) -> Check:
    """The driver version (from the GPU rows) and the CUDA version it supports (nvidia-smi header)."""
    if gpus is None:
        return Check("driver", "fail", why)
    drivers = sorted({g.driver_version for g in gpus if g.driver_version})
    if not drivers:
        return Check("driver", "fail", "nvidia-smi reported no driver version (no GPU rows). Fix: check the "
                     "driver with `nvidia-smi` by hand.", {"cuda_version": cuda})
    details = {"driver_version": drivers[0], "cuda_version": cuda}
    if cuda is None:
        return Check("driver", "warn", f"driver {drivers[0]}; no 'CUDA Version' in the nvidia-smi header, so the "
                     f"receipt will say cuda_version null.", details)
    return Check("driver", "ok", f"driver {drivers[0]}, CUDA {cuda}", details)


def check_gpus(gpus: list[Gpu] | None) -> Check:
    """At least one GPU is visible."""
    if gpus is None:
        return Check("gpu", "fail", "no GPU list: nvidia-smi is not usable (see the driver check).")
    if not gpus:
        return Check("gpu", "fail", "nvidia-smi lists no GPU. Expected at least one. Fix: run on a GPU node and "
                     "expose the GPU to the container (--gpus all, nvidia.com/gpu: 1).", {"gpus": []})
    listed = "; ".join(f"{g.index}: {g.name}" + (f" ({g.total_mib:.0f} MiB)" if g.total_mib else "") for g in gpus)
    return Check("gpu", "ok", f"{len(gpus)} GPU(s): {listed}", {"gpus": [_gpu_dict(g) for g in gpus]})


def _gpu_dict(g: Gpu) -> dict[str, Any]:
    return {"index": g.index, "name": g.name, "memory_total_mib": g.total_mib, "memory_used_mib": g.used_mib,
            "memory_free_mib": g.free_mib}


def check_counter_permission(params_path: Path, euid: int, status_path: Path | None = None) -> Check:
    """RmProfilingAdminOnly in the driver params vs who we are: the ERR_NVGPUCTRPERM trap, before ncu hits it."""
    fix = ("run the capture as root (in a container: root plus --cap-add SYS_ADMIN; in Kubernetes "
           "securityContext.capabilities.add: [SYS_ADMIN]), or have the node admin load the driver with "
           "NVreg_RestrictProfilingToAdminUsers=0 (options nvidia in /etc/modprobe.d, then reload).")
    try:
        text = params_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Check("counter-permission", "warn", f"cannot tell whether GPU counters are restricted to admins: "
                     f"{params_path} is not readable here. If ncu then fails with ERR_NVGPUCTRPERM, {fix}",
                     {"params": str(params_path), "euid": euid})
    m = re.search(r"^RmProfilingAdminOnly:\s*(\d+)", text, re.MULTILINE)
    details: dict[str, Any] = {"params": str(params_path), "euid": euid,
                               "admin_only": None if m is None else m.group(1) == "1"}
    if m is None:
        return Check("counter-permission", "warn", f"cannot tell: {params_path} has no RmProfilingAdminOnly line. "
                     f"If ncu then fails with ERR_NVGPUCTRPERM, {fix}", details)
    if m.group(1) != "1":
        return Check("counter-permission", "ok", "GPU performance counters are open to all users "
                     "(RmProfilingAdminOnly: 0)", details)
    if euid != 0:
        return Check("counter-permission", "fail", f"GPU performance counters are restricted to admins "
                     f"(RmProfilingAdminOnly: 1 in {params_path}) and this process runs as uid {euid}, not root: "
                     f"ncu would fail with ERR_NVGPUCTRPERM. Fix: {fix}", details)
    sys_admin = _has_sys_admin(status_path)
    details["cap_sys_admin"] = sys_admin
    if sys_admin is False:
        return Check("counter-permission", "warn", "counters are restricted to admins (RmProfilingAdminOnly: 1); "
                     "running as root but without CAP_SYS_ADMIN (a container's root is not an admin to the "
                     "driver). If ncu fails with ERR_NVGPUCTRPERM, add --cap-add SYS_ADMIN.", details)
    return Check("counter-permission", "ok", "counters are restricted to admins (RmProfilingAdminOnly: 1) and "
                 "this process runs as root", details)


def _has_sys_admin(status_path: Path | None) -> bool | None:
    if status_path is None:
        return None
    try:
        m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status_path.read_text(encoding="utf-8"), re.MULTILINE)
    except OSError:
        return None
    return None if m is None else bool(int(m.group(1), 16) >> CAP_SYS_ADMIN & 1)


def check_injection(env: Mapping[str, str], target_pid: int | None, proc_root: Path) -> Check:
    """CUDA_INJECTION64_PATH in the capture env or the target's environ: the driver loads one injection library."""
    why = ("the CUDA driver honours one injection library per process, and ncu needs that slot (a continuous "
           "profiler such as zymtrace may hold it)")
    value = env.get(INJECTION_ENV)
    if value:
        return Check("injection-slot", "fail", f"{INJECTION_ENV}={value} is set in the capture environment: {why}; "
                     f"ncu refuses to launch ('Another tool/injection might be loaded'). Fix: remove it for the "
                     f"capture (env -u {INJECTION_ENV} ...).", {"env": value})
    if target_pid is None:
        return Check("injection-slot", "ok", f"{INJECTION_ENV} is not set in the capture environment")
    environ = proc_root / str(target_pid) / "environ"
    if not environ.parent.is_dir():
        return Check("injection-slot", "fail", f"target process {target_pid} not found ({environ.parent} is "
                     f"missing). Expected a running process to attach to; check the pid.", {"pid": target_pid})
    try:
        entries = environ.read_bytes().split(b"\0")
    except OSError as exc:
        return Check("injection-slot", "warn", f"cannot tell: {environ} is not readable ({exc}). Run the "
                     f"preflight as the target's user or root to check its {INJECTION_ENV}.", {"pid": target_pid})
    found = next((e.split(b"=", 1)[1].decode("utf-8", "replace") for e in entries
                  if e.startswith(INJECTION_ENV.encode() + b"=")), None)
    details: dict[str, Any] = {"pid": target_pid, "target_env": found}
    if not found:
        return Check("injection-slot", "ok", f"target process {target_pid} has no {INJECTION_ENV}", details)
    if Path(found).name == NCU_INJECTION_LIB:
        return Check("injection-slot", "ok", f"target process {target_pid} holds Nsight Compute's own injection "
                     f"library ({found}: started under `ncu --mode launch`), so it can be attached", details)
    return Check("injection-slot", "fail", f"target process {target_pid} was started with {INJECTION_ENV}={found}: "
                 f"{why}, so ncu cannot profile it. Fix: restart the target without it for the capture (drop it "
                 f"from the deployment's env, or pause the continuous profiler's injection).", details)


def check_gpu_memory(gpus: list[Gpu] | None, min_free_gib: float) -> Check:
    """Free memory per GPU: kernel replay saves and restores what a kernel writes, so a full GPU fails replay."""
    if not gpus:
        return Check("gpu-memory", "warn", "cannot tell: no GPU memory figures (see the driver and gpu checks).")
    unknown = [g for g in gpus if g.free_mib is None]
    low = [g for g in gpus if g.free_mib is not None and g.free_mib / 1024 < min_free_gib]
    details = {"min_free_gib": min_free_gib, "gpus": [_gpu_dict(g) for g in gpus]}
    if low:
        listed = "; ".join(f"GPU {g.index} ({g.name}): {_gib(g.free_mib)} free of {_gib(g.total_mib)}" for g in low)
        return Check("gpu-memory", "warn", f"{listed}, under the {min_free_gib:g} GiB minimum: kernel replay saves "
                     f"and restores the memory each profiled kernel writes, and on a nearly full GPU `--set full` "
                     f"replay fails ('==ERROR== Failed to profile', the target is shut down). Fix: capture where "
                     f"there is headroom (a lower vLLM --gpu-memory-utilization on the capture replica, or a less "
                     f"busy GPU).", details)
    if unknown:
        return Check("gpu-memory", "warn", f"cannot tell: nvidia-smi gave no free memory for GPU(s) "
                     f"{', '.join(str(g.index) for g in unknown)}.", details)
    listed = "; ".join(f"GPU {g.index}: {_gib(g.free_mib)} free of {_gib(g.total_mib)}" for g in gpus)
    return Check("gpu-memory", "ok", listed, details)


def _gib(mib: float | None) -> str:
    return "? GiB" if mib is None else f"{mib / 1024:.1f} GiB"


def help_options(text: str) -> set[str]:
    """Long options defined in `ncu --help` ('  -k [ --kernel-name ] arg', '  --mode arg (=...)', '  -o, --export')."""
    pattern = re.compile(r"^ {0,8}(?:-[A-Za-z0-9](?:\s*\[\s*|,\s*))?(--[A-Za-z0-9][A-Za-z0-9-]*)")
    return {m.group(1) for line in text.splitlines() if (m := pattern.match(line))}


def plan_options(argv: Sequence[str]) -> list[str]:
    """The long options of an ncu argv before `--` (what follows belongs to the target), `--x=v` as `--x`."""
    end = list(argv).index("--") if "--" in argv else len(argv)
    found = [a.split("=", 1)[0] for a in argv[:end] if a.startswith("--") and len(a) > 2]
    return list(dict.fromkeys(found))


def check_ncu_options(ncu_path: str | None, plan_argv: Sequence[str] | None, timeout_s: float = 30.0) -> Check:
    """Every `--option` of the plan appears in this ncu's `--help`; a missing one fails with what replaces it."""
    if plan_argv is None:
        return Check("ncu-options", "ok", "no plan argv given: nothing to check", {"checked": []})
    wanted = plan_options(plan_argv)
    if ncu_path is None:
        return Check("ncu-options", "warn", "cannot check the plan's options: ncu is not usable (see the ncu "
                     "check).", {"checked": wanted})
    ran = _run([ncu_path, "--help"], timeout_s)
    known = help_options(ran.stdout) if ran.rc == 0 else set()
    if len(known) < 10:
        return Check("ncu-options", "warn", f"cannot tell: `{ncu_path} --help` gave no option list "
                     f"({ran.why() if ran.rc != 0 else f'{len(known)} option(s) found'}).", {"checked": wanted})
    missing = [o for o in wanted if o not in known]
    details = {"checked": wanted, "missing": missing, "help_options": len(known)}
    if missing:
        hints = "; ".join(f"{o}: {OPTION_HINTS[o]}" for o in missing if o in OPTION_HINTS)
        return Check("ncu-options", "fail", f"this ncu does not know {', '.join(missing)} (not in `ncu --help`); it "
                     f"would stop with '==ERROR== unrecognised option'. " + (f"{hints}. " if hints else "")
                     + "Fix the capture plan or use an ncu that has these options.", details)
    return Check("ncu-options", "ok", f"all {len(wanted)} option(s) of the plan are in `ncu --help`", details)


def preflight(
    ncu: str = "ncu", nvidia_smi: str = "nvidia-smi", plan_argv: list[str] | None = None,
    target_pid: int | None = None, env: Mapping[str, str] | None = None, min_free_gib: float = 2.0, *,
    proc_root: Path = Path("/proc"), params_path: Path | None = None, euid: int | None = None,
    timeout_s: float = 30.0,
) -> PreflightResult:
    """Run every check (none raises); params_path defaults to <proc_root>/driver/nvidia/params, euid to ours."""
    ncu_check, ncu_path = check_ncu(ncu, timeout_s)
    gpus, cuda, why = query_gpus(nvidia_smi, timeout_s)
    return PreflightResult([
        ncu_check,
        check_driver(gpus, cuda, why),
        check_gpus(gpus),
        check_counter_permission(params_path or proc_root / "driver" / "nvidia" / "params",
                                 os.geteuid() if euid is None else euid, proc_root / "self" / "status"),
        check_injection(os.environ if env is None else env, target_pid, proc_root),
        check_gpu_memory(gpus, min_free_gib),
        check_ncu_options(ncu_path, plan_argv, timeout_s),
    ])


def preflight_summary(result: PreflightResult) -> str:
    """One line per check: status, name, message."""
    width = max((len(c.name) for c in result.checks), default=0)
    return "\n".join(f"{c.status:<4} {c.name:<{width}}  {c.message}" for c in result.checks)
