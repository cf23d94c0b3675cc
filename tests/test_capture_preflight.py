"""capture preflight: every check's ok / warn / fail path, on the fakes that replay recorded H200 output.

tests/data/fake_ncu/ncu prints the real `ncu --version` of ncu 2025.3.1; its `--help` is RECONSTRUCTED (no real
recording yet: device/h200_capture/preflight_device.sh records one, and the fake then prints it).
tests/data/fake_ncu/nvidia-smi prints the H200's recorded name, driver and memory. Failures no recording shows
(a broken ncu, a failing nvidia-smi) are tiny shell stubs written into tmp_path, named as such below.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfreport.capture.preflight import (
    Gpu,
    check_counter_permission,
    check_gpu_memory,
    check_injection,
    check_ncu,
    check_ncu_options,
    help_options,
    parse_gpu_rows,
    plan_options,
    preflight,
    preflight_summary,
    query_gpus,
)

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "data" / "fake_ncu"
NCU, SMI = str(FAKE / "ncu"), str(FAKE / "nvidia-smi")
CAPTURE = ROOT / "tests" / "data" / "h200_capture"
ATTACH_PLAN = [NCU, "--mode", "attach", "--hostname", "127.0.0.1", "--clock-control", "none", "--kernel-name",
               "regex:nvjet", "--kernel-name-base", "function", "--launch-skip", "0", "--launch-count", "1", "--set",
               "basic", "--replay-mode", "kernel", "--target-processes", "all", "-o", "/tmp/x"]
ORDER = ["ncu", "driver", "gpu", "counter-permission", "injection-slot", "gpu-memory", "ncu-options"]


def stub(tmp_path: Path, name: str, body: str) -> str:
    """A synthetic executable (not a recording) for a failure no capture shows."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def proc_root(tmp_path: Path, params: str | None = None, environ: dict[int, bytes] | None = None) -> Path:
    """A fake /proc: driver/nvidia/params and <pid>/environ (NUL-separated) as given."""
    root = tmp_path / "proc"
    root.mkdir()
    if params is not None:
        (root / "driver" / "nvidia").mkdir(parents=True)
        (root / "driver" / "nvidia" / "params").write_text(params)
    for pid, data in (environ or {}).items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "environ").write_bytes(data)
    return root


PARAMS_OPEN = "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nRmProfilingAdminOnly: 0\nEnableMSI: 1\n"
PARAMS_ADMIN = PARAMS_OPEN.replace("RmProfilingAdminOnly: 0", "RmProfilingAdminOnly: 1")


# -- 1. ncu ---------------------------------------------------------------------------------------------------------
def test_ncu_ok_parses_the_real_version() -> None:
    check, path = check_ncu(NCU)
    assert (check.status, path) == ("ok", NCU)
    assert check.details == {"path": NCU, "version": "2025.3.1.0", "build": "36398880"}
    assert check.message == f"ncu 2025.3.1.0 (build 36398880) at {NCU}"
    assert (CAPTURE / "ncu-version.txt").read_text().splitlines()[2].startswith("Version 2025.3.1.0 (build 36398880)")


def test_missing_ncu_fails_with_the_path_to_pass(tmp_path: Path) -> None:
    check, path = check_ncu(str(tmp_path / "no-ncu"))
    assert (check.status, path) == ("fail", None)
    assert "not found" in check.message and "--ncu /usr/local/cuda/bin/ncu" in check.message
    check, _ = check_ncu("ncu-not-on-path-anywhere")
    assert check.status == "fail" and "not on PATH" in check.message


def test_ncu_version_failure_fails_with_its_rc_and_stderr(tmp_path: Path) -> None:
    broken = stub(tmp_path, "ncu", "echo 'libnvperf_host.so: cannot open shared object file' >&2; exit 127")
    check, path = check_ncu(broken)
    assert (check.status, path) == ("fail", None)
    assert "rc=127: libnvperf_host.so: cannot open shared object file" in check.message
    assert "expected rc 0" in check.message and check.details["rc"] == 127


def test_ncu_version_unparseable_warns(tmp_path: Path) -> None:
    check, path = check_ncu(stub(tmp_path, "ncu", "echo 'some other tool 1'"))
    assert check.status == "warn" and path is not None and "no 'Version X.Y.Z' line" in check.message


# -- 2. driver + gpu ------------------------------------------------------------------------------------------------
def test_driver_and_gpu_from_recorded_h200_output() -> None:
    result = preflight(NCU, SMI, env={}, euid=0, proc_root=Path("/nonexistent"))
    driver, gpu = result.check("driver"), result.check("gpu")
    assert (driver.status, driver.message) == ("ok", "driver 580.159.04, CUDA 13.0")
    assert driver.details == {"driver_version": "580.159.04", "cuda_version": "13.0"}
    assert (gpu.status, gpu.message) == ("ok", "1 GPU(s): 0: NVIDIA H200 (143771 MiB)")
    assert gpu.details["gpus"] == [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771.0,
                                    "memory_used_mib": 615.0, "memory_free_mib": 143156.0}]


def test_missing_nvidia_smi_fails_driver_and_gpu_checks(tmp_path: Path) -> None:
    result = preflight(NCU, str(tmp_path / "no-smi"), env={}, euid=0, proc_root=tmp_path)
    assert [result.check(n).status for n in ("driver", "gpu", "gpu-memory")] == ["fail", "fail", "warn"]
    assert "not found: no NVIDIA driver is visible" in result.check("driver").message
    assert "--gpus all" in result.check("driver").message
    assert "cannot tell" in result.check("gpu-memory").message


def test_failing_nvidia_smi_reports_its_rc_and_the_lsmod_hint(tmp_path: Path) -> None:
    smi = stub(tmp_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it couldn''t communicate with the "
                                       "NVIDIA driver.'; exit 9")
    gpus, cuda, why = query_gpus(smi)
    assert gpus is None and cuda is None
    assert "rc=9: NVIDIA-SMI has failed" in why and "lsmod | grep nvidia" in why


def test_no_gpu_listed_and_no_cuda_header(tmp_path: Path) -> None:
    smi = stub(tmp_path, "nvidia-smi", 'case "$1" in --query-gpu=*) exit 0;; esac; echo "| NVIDIA-SMI |"')
    result = preflight(NCU, smi, env={}, euid=0, proc_root=tmp_path)
    assert result.check("gpu").status == "fail" and "lists no GPU" in result.check("gpu").message
    assert result.check("driver").status == "fail"


def test_driver_warns_without_cuda_version(tmp_path: Path) -> None:
    row = "NVIDIA H200, 580.159.04, 143771, 615, 143156"
    smi = stub(tmp_path, "nvidia-smi", f'case "$1" in --query-gpu=*) echo "{row}";; *) echo "| NVIDIA-SMI |";; esac')
    check = preflight(NCU, smi, env={}, euid=0, proc_root=tmp_path).check("driver")
    assert check.status == "warn" and "no 'CUDA Version'" in check.message


def test_parse_gpu_rows_units_na_and_several_gpus() -> None:
    text = ("NVIDIA H200, 580.159.04, 143771 MiB, 615 MiB, 143156 MiB\n"
            "NVIDIA H200, 580.159.04, 143771, [N/A], [N/A]\n\n")
    rows = parse_gpu_rows(text)
    assert rows == [Gpu(0, "NVIDIA H200", "580.159.04", 143771.0, 615.0, 143156.0),
                    Gpu(1, "NVIDIA H200", "580.159.04", 143771.0, None, None)]
    assert parse_gpu_rows("No devices were found\n") == []
    assert parse_gpu_rows("Odd, Name GPU, 580.1, 10, 1, 9")[0].name == "Odd, Name GPU"


# -- 3. counter permission --------------------------------------------------------------------------------------------
def test_counters_admin_only_non_root_fails(tmp_path: Path) -> None:
    root = proc_root(tmp_path, PARAMS_ADMIN)
    check = check_counter_permission(root / "driver" / "nvidia" / "params", 1000)
    assert check.status == "fail"
    for part in ("RmProfilingAdminOnly: 1", "uid 1000, not root", "ERR_NVGPUCTRPERM", "run the capture as root",
                 "--cap-add SYS_ADMIN", "NVreg_RestrictProfilingToAdminUsers=0"):
        assert part in check.message
    assert check.details["admin_only"] is True


def test_counters_admin_only_root_ok_and_cap_check(tmp_path: Path) -> None:
    root = proc_root(tmp_path, PARAMS_ADMIN)
    params = root / "driver" / "nvidia" / "params"
    check = check_counter_permission(params, 0)
    assert check.status == "ok" and "runs as root" in check.message
    (root / "self").mkdir()
    (root / "self" / "status").write_text("Name:\tpython3\nCapEff:\t00000000a80425fb\n")  # docker's default caps
    check = check_counter_permission(params, 0, root / "self" / "status")
    assert check.status == "warn" and "without CAP_SYS_ADMIN" in check.message
    assert "--cap-add SYS_ADMIN" in check.message
    (root / "self" / "status").write_text("CapEff:\t000001ffffffffff\n")
    assert check_counter_permission(params, 0, root / "self" / "status").status == "ok"


def test_counters_open_to_all_users_pass(tmp_path: Path) -> None:
    root = proc_root(tmp_path, PARAMS_OPEN)
    check = check_counter_permission(root / "driver" / "nvidia" / "params", 1000)
    assert check.status == "ok" and "open to all users" in check.message


def test_unreadable_counter_permission_warns_cannot_tell(tmp_path: Path) -> None:
    check = check_counter_permission(tmp_path / "absent" / "params", 1000)
    assert check.status == "warn" and "cannot tell" in check.message and "ERR_NVGPUCTRPERM" in check.message
    root = proc_root(tmp_path, "RmLogonRC: 1\n")
    check = check_counter_permission(root / "driver" / "nvidia" / "params", 1000)
    assert check.status == "warn" and "no RmProfilingAdminOnly line" in check.message


def test_preflight_reads_params_under_proc_root(tmp_path: Path) -> None:
    root = proc_root(tmp_path, PARAMS_ADMIN)
    result = preflight(NCU, SMI, env={}, euid=1000, proc_root=root)
    assert result.check("counter-permission").status == "fail" and not result.ok


# -- 4. injection slot ------------------------------------------------------------------------------------------------
def test_injection_in_env_fails(tmp_path: Path) -> None:
    value = "/tmp/explore/fake_injection.so"  # the value of the recorded refusal (h200_capture/injection_env.log)
    assert value in (CAPTURE / "injection_env.log").read_text()
    check = check_injection({"CUDA_INJECTION64_PATH": value, "PATH": "/usr/bin"}, None, tmp_path)
    assert check.status == "fail"
    for part in (f"CUDA_INJECTION64_PATH={value}", "one injection library per process", "zymtrace",
                 "env -u CUDA_INJECTION64_PATH"):
        assert part in check.message
    assert check_injection({"PATH": "/usr/bin"}, None, tmp_path).status == "ok"


def test_injection_in_target_environ(tmp_path: Path) -> None:
    root = proc_root(tmp_path, environ={
        4242: b"PATH=/usr/bin\0CUDA_INJECTION64_PATH=/opt/zymtrace/libzymtrace_cuda.so\0HOME=/root\0",
        4243: b"PATH=/usr/bin\0HOME=/root\0",
        4244: b"CUDA_INJECTION64_PATH=/usr/local/cuda/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/"
              b"libcuda-injection.so\0",
    })
    check = check_injection({}, 4242, root)
    assert check.status == "fail" and "target process 4242" in check.message
    assert "libzymtrace_cuda.so" in check.message and "restart the target without it" in check.message
    assert check.details["target_env"] == "/opt/zymtrace/libzymtrace_cuda.so"
    assert check_injection({}, 4243, root).status == "ok"
    own = check_injection({}, 4244, root)
    assert own.status == "ok" and "Nsight Compute's own injection library" in own.message


def test_injection_target_missing_or_unreadable(tmp_path: Path) -> None:
    root = proc_root(tmp_path)
    check = check_injection({}, 99999, root)
    assert check.status == "fail" and "target process 99999 not found" in check.message
    (root / "777" / "environ").mkdir(parents=True)  # reading it fails like a permission error would
    check = check_injection({}, 777, root)
    assert check.status == "warn" and "cannot tell" in check.message and "not readable" in check.message


def test_preflight_injection_from_env_and_target(tmp_path: Path) -> None:
    root = proc_root(tmp_path, environ={5: b"CUDA_INJECTION64_PATH=/x.so\0"})
    assert preflight(NCU, SMI, env={"CUDA_INJECTION64_PATH": "/y.so"}, euid=0,
                     proc_root=root).check("injection-slot").details == {"env": "/y.so"}
    assert preflight(NCU, SMI, target_pid=5, env={}, euid=0,
                     proc_root=root).check("injection-slot").status == "fail"


# -- 5. GPU memory ----------------------------------------------------------------------------------------------------
def test_gpu_memory_ok_on_the_idle_h200() -> None:
    check = preflight(NCU, SMI, env={}, euid=0, proc_root=Path("/nonexistent")).check("gpu-memory")
    assert (check.status, check.message) == ("ok", "GPU 0: 139.8 GiB free of 140.4 GiB")


def test_gpu_memory_low_warns() -> None:
    check = preflight(NCU, SMI, env={}, euid=0, min_free_gib=200, proc_root=Path("/nonexistent")).check("gpu-memory")
    assert check.status == "warn"
    assert "GPU 0 (NVIDIA H200): 139.8 GiB free of 140.4 GiB, under the 200 GiB minimum" in check.message
    # a GPU 97% full, as in the recorded failed --set full replay (h200_capture/gpu_full_replay.log)
    assert "Failed to profile" in (CAPTURE / "gpu_full_replay.log").read_text()
    full = Gpu(0, "NVIDIA H200", "580.159.04", 143771.0, 142235.0, 1536.0)
    check = check_gpu_memory([full, Gpu(1, "NVIDIA H200", "580.159.04", 143771.0, 615.0, 143156.0)], 2.0)
    assert check.status == "warn" and "GPU 0 (NVIDIA H200): 1.5 GiB free" in check.message
    assert "GPU 1" not in check.message and "--set full" in check.message and "gpu-memory-utilization" in check.message


def test_gpu_memory_unknown_warns() -> None:
    check = check_gpu_memory([Gpu(0, "NVIDIA H200", "580.159.04", None, None, None)], 2.0)
    assert check.status == "warn" and "cannot tell" in check.message


# -- 6. ncu options ---------------------------------------------------------------------------------------------------
def test_plan_options_stop_at_the_separator() -> None:
    argv = [NCU, "--mode=attach", "-k", "regex:x", "--set", "basic", "--set", "full", "--", "python3", "--port", "1"]
    assert plan_options(argv) == ["--mode", "--set"]


def test_help_options_parse_the_program_options_layout() -> None:
    text = ("General Options:\n"
            "  -h [ --help ]                         Print this help message.\n"
            "  --mode arg (=launch-and-attach)       Select the mode:\n"
            "                                        --not-an-option mentioned in a description\n"
            "  -c [ --launch-count ] arg             Limit the number of collected profile results.\n"
            "  -o, --export arg                      Output file.\n"
            "  --print-units arg (=auto)\n")
    assert help_options(text) == {"--help", "--mode", "--launch-count", "--export", "--print-units"}


def test_fake_help_lists_the_options_and_not_the_removed_one() -> None:
    import subprocess

    out = subprocess.run([NCU, "--help"], capture_output=True, text=True, check=True).stdout
    known = help_options(out)
    assert set(plan_options(ATTACH_PLAN)) <= known and {"--export", "--import", "--page", "--csv"} <= known
    assert "--attach" not in known


def test_ncu_options_ok_and_nothing_to_check() -> None:
    check = check_ncu_options(NCU, ATTACH_PLAN)
    assert check.status == "ok" and check.message == "all 10 option(s) of the plan are in `ncu --help`"
    assert check_ncu_options(NCU, None).status == "ok"


def test_ncu_options_removed_attach_fails() -> None:
    # what ncu 2025.3.1 printed for it on the H200
    assert "unrecognised option '--attach'" in (CAPTURE / "attach_option.log").read_text()
    check = check_ncu_options(NCU, [NCU, "--attach=12345", "--set", "basic", "--made-up-flag"])
    assert check.status == "fail" and check.details["missing"] == ["--attach", "--made-up-flag"]
    assert "does not know --attach, --made-up-flag" in check.message
    assert "ncu >= 2023 removed --attach; use --mode attach" in check.message


def test_ncu_options_unknown_without_help_warn_cannot_tell(tmp_path: Path) -> None:
    no_help = stub(tmp_path, "ncu", "echo '==ERROR== no help here' >&2; exit 1")
    check = check_ncu_options(no_help, ATTACH_PLAN)
    assert check.status == "warn" and "cannot tell" in check.message and "rc=1" in check.message
    check = check_ncu_options(None, ATTACH_PLAN)
    assert check.status == "warn" and "ncu is not usable" in check.message


# -- the whole preflight -----------------------------------------------------------------------------------------------
def test_preflight_all_ok_summary_and_json(tmp_path: Path) -> None:
    root = proc_root(tmp_path, PARAMS_OPEN, {4243: b"PATH=/usr/bin\0"})
    result = preflight(NCU, SMI, plan_argv=ATTACH_PLAN, target_pid=4243, env={"PATH": "/usr/bin"}, euid=1000,
                       proc_root=root)
    assert [c.name for c in result.checks] == ORDER
    assert all(c.status == "ok" for c in result.checks) and result.ok
    lines = preflight_summary(result).splitlines()
    assert len(lines) == len(ORDER) and lines[0].startswith("ok   ncu ") and "2025.3.1.0" in lines[0]
    doc = json.loads(json.dumps(result.as_dict()))
    assert (doc["schema_version"], doc["kind"], doc["ok"]) == (1, "capture_preflight", True)
    assert [c["name"] for c in doc["checks"]] == ORDER


def test_preflight_missing_ncu_and_removed_option(tmp_path: Path) -> None:
    result = preflight(str(tmp_path / "no-ncu"), SMI, plan_argv=ATTACH_PLAN, env={}, euid=0, proc_root=tmp_path)
    assert not result.ok and result.check("ncu").status == "fail" and result.check("ncu-options").status == "warn"
    result = preflight(NCU, SMI, plan_argv=[NCU, "--attach", "12345"], env={}, euid=0, proc_root=tmp_path)
    assert not result.ok and [c.name for c in result.checks if c.status == "fail"] == ["ncu-options"]
    assert preflight_summary(result).splitlines()[-1].startswith("fail ncu-options")
