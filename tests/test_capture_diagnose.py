"""capture diagnose: every real ncu log names its cause and fix; reports are read through ncu_report.

Real logs: tests/data/h200_capture, h200_shared, h200_oracle (ncu 2025.3.1 on the H200; their README tables say what
each shows). Wording we could not produce on the H200 (counter permission, driver/CUPTI skew, application replay's
kernel-count error) is public text in tests/data/capture_logs, each file's source URL in its README.md.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfreport.capture.diagnose.log import CODES, Diagnosis, diagnose_text
from perfreport.capture.diagnose.path import diagnose_path
from perfreport.errors import InputError

DATA = Path(__file__).resolve().parent / "data"
CAPTURE, SHARED, ORACLE, PUBLIC = (DATA / d for d in ("h200_capture", "h200_shared", "h200_oracle", "capture_logs"))
REPORT_GZ = SHARED / "attach_basic.ncu-rep.gz"

REAL_LOGS = {
    "h200_capture/app_replay_nondet.log": ["ok"],  # README: ncu 2025.3.1 did NOT detect the varying count
    "h200_capture/attach_option.log": ["attach-option-removed"],
    "h200_capture/empty_pattern.log": ["no-kernels-profiled"],
    "h200_capture/env_wrapper.log": ["ok"],  # README: default --target-processes all profiles through `env`
    "h200_capture/gpu_full_replay.log": ["oom"],
    "h200_capture/injection_env.log": ["injection-slot-taken"],
    "h200_capture/launch_clock_control.log": ["launch-mode-option"],
    "h200_capture/llama_probe.log": ["no-ncu-output"],  # python3 llama_probe.py, no ncu involved
    "h200_capture/trace_check.log": ["no-ncu-output"],  # trace.py, no ncu involved
    # 12-03: empty attaches print the child-process warning too (it is no env-wrapper there: _child_warning...)
    "h200_capture/launch_cost/graph_attach_probe_graph_first.log": ["no-kernels-profiled", "unknown-error"],
    "h200_capture/launch_cost/graph_attach_probe_graph_then_node.log": ["no-kernels-profiled"],
    "h200_capture/launch_cost/graph_attach_probe_node_first.log": ["no-attachable-process", "no-kernels-profiled"],
    "h200_capture/launch_cost/launch_cost.log": ["no-kernels-profiled"],
    "h200_capture/launch_cost/launch_cost_detached.log": ["capture-incomplete"],  # the script's own lines only
    "h200_capture/launch_cost/launch_cost_graph.log": ["no-kernels-profiled"],  # application-only, names listed
    "h200_capture/launch_cost/launch_cost_graph2.log": ["launch-mode-option", "no-attachable-process"],
    "h200_capture/overhead2/release_probe.log": ["no-kernels-profiled"],  # 3 release attaches, 2 workers
    # --port P --max-connections 1 found no process (ncu 2025.3.1); the releases with 2 profiled nothing, by design
    "h200_capture/ports_probe.log": ["no-attachable-process", "no-kernels-profiled"],
    "h200_capture/release_ports.log": ["no-kernels-profiled"],  # `capture release --workers 2`: both released
    "h200_shared/attach_twice.log": ["ok"],
    "h200_shared/empty.log": ["no-kernels-profiled"],
    "h200_shared/trap_env.log": ["env-wrapper"],
    "h200_shared/trap_noenv.log": ["ok"],
    "h200_oracle/empty.log": ["no-kernels-profiled"],
    "h200_oracle/oracle_add_basic-printed-raw.log": ["ok"],  # --csv --page raw printed: CSV rows, no Profiling lines
    "h200_oracle/oracle_basic.log": ["ok"],
    "h200_oracle/oracle_full.log": ["ok"],
}
PUBLIC_LOGS = {
    "app_replay_unexpected_count.log": ["nondeterministic-replay"],
    "counter_permission_deepgemm.log": ["counter-permission"],
    "counter_permission_hf_jobs.log": ["counter-permission"],
    "dcgm_profiling_conflict.log": ["dcgm-profiling-conflict"],  # its `Failed to profile` line is no oom here
    "cupti_invalid_device_kineto.log": ["cupti-version-skew"],  # its kineto INFO line names INSUFFICIENT_PRIVILEGES
    "driver_incompatible_tritonbench.log": ["cupti-version-skew"],
    "rm_profiling_admin_only.txt": ["counter-permission"],
}


def codes(found: list[Diagnosis]) -> list[str]:
    return [d.code for d in found]


def only(path: Path, **kw: str) -> Diagnosis:
    found = diagnose_path(path, **kw)
    assert len(found) == 1, codes(found)
    return found[0]


def test_every_real_log_has_an_expected_code_list() -> None:
    on_disk = {p.relative_to(DATA).as_posix() for d in (CAPTURE, SHARED, ORACLE, CAPTURE / "launch_cost")
               for p in d.glob("*.log")} | {"h200_capture/overhead2/release_probe.log"}
    assert on_disk == set(REAL_LOGS)
    assert {p.name for p in PUBLIC.iterdir() if p.name != "README.md"} == set(PUBLIC_LOGS)
    readme = (PUBLIC / "README.md").read_text(encoding="utf-8")
    for name in PUBLIC_LOGS:  # every public fixture is cited with a source URL in its README row
        row = next(line for line in readme.splitlines() if line.startswith(f"| {name} |"))
        assert "https://github.com/" in row


@pytest.mark.parametrize(("rel", "expected"), sorted(REAL_LOGS.items()))
def test_real_log_codes(rel: str, expected: list[str]) -> None:
    assert codes(diagnose_path(DATA / rel)) == expected


@pytest.mark.parametrize(("name", "expected"), sorted(PUBLIC_LOGS.items()))
def test_public_wording_codes(name: str, expected: list[str]) -> None:
    assert codes(diagnose_path(PUBLIC / name)) == expected


FIXES = [  # (file, exact ncu line that proves it, words of the fix the message must carry)
    (CAPTURE / "attach_option.log", "==ERROR== unrecognised option '--attach'. Use --help for further details.",
     ["ncu --mode launch", "ncu --mode attach --hostname 127.0.0.1"]),
    (CAPTURE / "launch_clock_control.log", "==ERROR== Invalid option --clock-control specified for --mode launch",
     ["Remove --clock-control from the `ncu --mode launch` command",
      "`ncu --mode attach --hostname 127.0.0.1 --clock-control ...`"]),
    (CAPTURE / "injection_env.log",
     "==ERROR== Another tool/injection might be loaded since CUDA_INJECTION64_PATH is set to "
     "/tmp/explore/fake_injection.so. To run Nsight Compute unset CUDA_INJECTION64_PATH environment variable.",
     ["one injection library per process", "Unset CUDA_INJECTION64_PATH for the capture"]),
    (CAPTURE / "gpu_full_replay.log", '==ERROR== Failed to profile "vectorized_elementwise_kernel" in process 1027',
     ["ncu shut the target down", "`--set basic` first", "--gpu-memory-utilization", "headroom",
      "`--replay-mode application`", "acknowledgement"]),
    (SHARED / "trap_env.log",
     "==WARNING== Profiling kernels launched by child processes requires the --target-processes all option.",
     ["`env VAR=1 python3 ...`", "`VAR=1 ncu ... -- python3 ...`", "`--target-processes all`"]),
    (CAPTURE / "empty_pattern.log", "==WARNING== No kernels were profiled.",
     ["reduce_kernel, vectorized_elementwise_kernel", "`capture diagnose LOG --kernel-name PATTERN`"]),
    (PUBLIC / "dcgm_profiling_conflict.log",
     "==ERROR== Profiling failed because a driver resource was unavailable. Ensure that no other tool (like DCGM) is "
     "concurrently collecting profiling data. See https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#faq "
     "for more details.",
     ["must not run while DCGM collects profiling counters", "`dcgmi profile --pause`", "`dcgmi profile --resume`",
      "DCGM_FI_PROF_*", "nvidia.com/gpu.deploy.dcgm-exporter=false"]),
    (PUBLIC / "counter_permission_hf_jobs.log",
     "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on "
     "the target device 0.",
     ["as root", "--cap-add SYS_ADMIN", "options nvidia NVreg_RestrictProfilingToAdminUsers=0"]),
    (PUBLIC / "rm_profiling_admin_only.txt", "RmProfilingAdminOnly: 1", ["NVreg_RestrictProfilingToAdminUsers=0"]),
    (PUBLIC / "driver_incompatible_tritonbench.log", "==ERROR== Cuda driver is not compatible with Nsight Compute.",
     ["ncu whose CUDA major matches the driver's", "upgrade the driver"]),
    (PUBLIC / "cupti_invalid_device_kineto.log",
     "INFO:2026-05-29 10:00:00 4242:4242 CuptiActivityProfiler.cpp:167] CUDA versions. CUPTI: 26; Runtime: 12090; "
     "Driver: 13000", ["CUDA 12.x toolkit", "13.x driver", "CUDA-13 image"]),
    (PUBLIC / "app_replay_unexpected_count.log", "==ERROR== Unexpected number of profiled kernels",
     ["`--replay-mode kernel`", "`perftunereport harness ...`"]),
]


@pytest.mark.parametrize(("path", "line", "fix"), FIXES, ids=[p.name for p, _, _ in FIXES])
def test_message_quotes_the_line_and_says_the_fix(path: Path, line: str, fix: list[str]) -> None:
    d = only(path)
    assert line in path.read_text(encoding="utf-8").splitlines()  # the quoted line is ncu's, not ours
    assert line in d.evidence
    assert f"`{line}`" in d.message
    for words in fix:
        assert words in d.message
    assert 1 <= len(d.evidence) <= 5


@pytest.mark.parametrize("path", [SHARED / "empty.log", CAPTURE / "empty_pattern.log", ORACLE / "empty.log"],
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_available_kernels_are_the_names_ncu_listed(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    listed = re.findall(r"^\d+\. (\S+)$", text.split("Available Kernels:\n")[1], flags=re.M)
    d = only(path)
    assert d.details["available_kernels"] == listed
    assert len(listed) >= 2
    assert ", ".join(listed) in d.message


def test_available_kernels_values() -> None:
    names = ["reduce_kernel", "vectorized_elementwise_kernel"]
    assert only(SHARED / "empty.log").details["available_kernels"] == names
    assert only(CAPTURE / "empty_pattern.log").details["available_kernels"] == names
    assert only(ORACLE / "empty.log").details["available_kernels"] == [
        "distribution_elementwise_grid_stride_kernel", "elementwise_kernel", "vectorized_elementwise_kernel"]


def test_suggestion_is_the_closest_name_to_the_pattern_used() -> None:
    text = (CAPTURE / "empty_pattern.log").read_text(encoding="utf-8")
    d = diagnose_text(text, kernel_pattern="regex:vectorized_elementwse")[0]
    assert d.details["suggested_pattern"] == "regex:vectorized_elementwise_kernel"
    assert "--kernel-name regex:vectorized_elementwse" in d.message
    assert "`--kernel-name regex:vectorized_elementwise_kernel`" in d.message
    assert diagnose_text(text, kernel_pattern="reduce")[0].details["suggested_pattern"] == "regex:reduce_kernel"


def test_pattern_is_read_from_an_echoed_ncu_command_line() -> None:
    # The exact command explore.sh ran for empty_pattern.log, echoed above ncu's output.
    cmd = "$NCU --clock-control none --set basic -k regex:no_such_kernel -c 1 -f -o $W/empty python3 $D/tiny.py"
    text = cmd + "\n" + (CAPTURE / "empty_pattern.log").read_text(encoding="utf-8")
    d = diagnose_text(text)[0]
    assert d.details["pattern_used"] == "regex:no_such_kernel"
    assert d.details["suggested_pattern"] is None  # neither listed name is close to 'no_such_kernel'
    assert "None of the 2 kernel name(s) the process launched" in d.message and "'no_such_kernel'" in d.message
    assert only(CAPTURE / "empty_pattern.log").details["pattern_used"] is None


def test_ok_details() -> None:
    basic = only(ORACLE / "oracle_basic.log")
    assert basic.details["kernels_profiled"] == 6
    assert basic.details["report"] == "/tmp/cap/oracle/oracle_basic.ncu-rep"
    assert basic.details["kernels"][-1] == "rmsnorm_kernel"
    assert "==PROF== Report: /tmp/cap/oracle/oracle_basic.ncu-rep" in basic.evidence
    assert only(ORACLE / "oracle_add_basic-printed-raw.log").details["kernels_profiled"] == 1
    assert only(SHARED / "trap_noenv.log").details["kernels"] == ["vectorized_elementwise_kernel", "reduce_kernel"]


def test_real_application_replay_log_is_not_called_nondeterministic() -> None:
    d = only(CAPTURE / "app_replay_nondet.log")
    assert d.code == "ok"
    assert d.details["kernels_profiled"] == 2  # two kernels per pass, ten passes
    assert d.details["report"] == "/tmp/explore/nondet.ncu-rep"
    assert "Unexpected number of profiled kernels" not in (CAPTURE / "app_replay_nondet.log").read_text()


def test_exit_status_comes_from_the_trailing_rc_line() -> None:
    oom = only(CAPTURE / "gpu_full_replay.log")
    assert oom.details["exit_status"] == 9
    assert oom.details["application_exit_code"] == 9
    assert oom.details["kernel"] == "vectorized_elementwise_kernel"
    assert oom.details["target_shutdown"] is True
    assert only(CAPTURE / "attach_option.log").details["exit_status"] == 1
    assert only(CAPTURE / "empty_pattern.log").details["exit_status"] == 0
    assert "exit_status" not in only(SHARED / "attach_twice.log").details  # 'attach1 exited rc=130' is not the rc line
    assert only(CAPTURE / "launch_clock_control.log").details["option"] == "--clock-control"
    assert only(CAPTURE / "injection_env.log").details["injection_path"] == "/tmp/explore/fake_injection.so"


def test_cuda_versions_line_counts_only_when_the_majors_differ() -> None:
    skew = only(PUBLIC / "cupti_invalid_device_kineto.log")
    assert (skew.details["runtime"], skew.details["driver"]) == (12090, 13000)
    # kineto's version line (format of libkineto/src/VersionLogger.cpp) with matching majors is no skew.
    line = "INFO:2023-02-11 23:47:52 255731:255731 CuptiActivityProfiler.cpp:167] CUDA versions. CUPTI: 14; " \
           "Runtime: 11040; Driver: 11040"
    assert codes(diagnose_text(line + "\n" + (SHARED / "trap_noenv.log").read_text())) == ["ok"]


def test_unrestricted_counters_are_no_permission_problem() -> None:
    # `RmProfilingAdminOnly: 0` (the driver param with counters open to all users, pynvml#19's file) is fine.
    text = "RmProfilingAdminOnly: 0\n" + (SHARED / "trap_noenv.log").read_text(encoding="utf-8")
    assert codes(diagnose_text(text)) == ["ok"]
    assert codes(diagnose_text(text.replace(": 0", ": 1", 1))) == ["counter-permission"]


def test_an_error_line_no_rule_knows_is_quoted() -> None:
    # H200: an export onto an existing file without -f (ncu's own error; nothing else went wrong in that session)
    d = diagnose_path(CAPTURE / "launch_cost" / "graph_attach_probe_graph_first.log")
    unknown = next(x for x in d if x.code == "unknown-error")
    assert unknown.evidence == ("==ERROR== File gp1.ncu-rep already exists. Use '-f' for overwriting the file.",)
    assert "`==ERROR== File gp1.ncu-rep already exists. Use '-f' for overwriting the file.`" in unknown.message
    # ...while next to a known cause the exit-code line is only its echo.
    assert codes(diagnose_path(CAPTURE / "injection_env.log")) == ["injection-slot-taken"]


def _without(path: Path, *drop: str) -> str:
    """A real log less the lines holding any of `drop` (the rest of ncu's wording untouched)."""
    return "\n".join(x for x in path.read_text(encoding="utf-8").splitlines() if not any(d in x for d in drop))


def test_the_applications_exit_code_alone_is_the_targets_own_failure() -> None:
    # gpu_full_replay.log (H200) less ncu's failure and shutdown lines: only the target's exit status is left.
    d = diagnose_text(_without(CAPTURE / "gpu_full_replay.log", "Failed to profile", "Trying to shutdown"))
    assert codes(d) == ["target-exit-code"]
    assert d[0].evidence == ("==ERROR== The application returned an error code (9).",)
    assert d[0].details["application_exit_code"] == 9
    for words in ("`==ERROR== The application returned an error code (9).`", "the profiled application itself failed",
                  "exit code 9", "ncu's options are not the cause", "137 (128+9)", "its stderr"):
        assert words in d[0].message
    assert "may have ended the target" not in d[0].message
    # with ncu's shutdown line before it, the message says ncu may have ended the target itself
    kept = diagnose_text(_without(CAPTURE / "gpu_full_replay.log", "Failed to profile"))
    assert codes(kept) == ["target-exit-code"] and "`Trying to shutdown target application`" in kept[0].message
    # 128+N from a shell names the signal
    killed = diagnose_text(_without(CAPTURE / "gpu_full_replay.log", "Failed to profile", "Trying to shutdown")
                           .replace("error code (9)", "error code (137)"))
    assert "137 is 128+9: the process was killed by SIGKILL" in killed[0].message


def test_dcgm_conflict_is_its_own_code_not_oom() -> None:
    path = PUBLIC / "dcgm_profiling_conflict.log"
    d = only(path)
    assert d.code == "dcgm-profiling-conflict" and d.details["kernel"] == "vectorized_elementwise_kernel"
    assert d.evidence[1] == '==ERROR== Failed to profile "vectorized_elementwise_kernel" in process 1027'
    assert "out of GPU memory" not in d.message
    # the same log without ncu's two DCGM lines is the H200's real replay failure: oom
    assert codes(diagnose_text(_without(path, "driver"))) == ["oom"]


def test_finished_passes_without_a_report_line_are_report_not_written() -> None:
    # oracle_basic.log (H200, 6 kernels profiled) less its `==PROF== Report:` line
    text = _without(ORACLE / "oracle_basic.log", "==PROF== Report:")
    d = diagnose_text(text)
    assert codes(d) == ["report-not-written"]
    last = '==PROF== Profiling "rmsnorm_kernel" - 5: 0%....50%....100% - 10 passes'
    assert d[0].evidence == (last,) and f"`{last}`" in d[0].message
    assert d[0].details["kernels_profiled"] == 6 and d[0].details["report"] is None
    for words in ("never printed `==PROF== Report: <path>`", "the report was never written", "killed",
                  "not writable", "Stop ncu with SIGINT", "keep the target alive"):
        assert words in d[0].message
    assert "(ncu itself died of SIGKILL)" in diagnose_text(text + "\nrc=137\n")[0].message
    # results printed to the console (no -o) are a capture without a report file: ok (launch_cost.log, H200)
    lines = (CAPTURE / "launch_cost" / "launch_cost.log").read_text(encoding="utf-8").splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("--- launch-and-attach session, the first"))
    assert codes(diagnose_text("\n".join(lines[start:start + 30]))) == ["ok"]


def test_no_kernels_suggests_only_the_few_names_close_to_the_pattern() -> None:
    # release_node.txt (H200): ncu listed 37 kernel names after an attach that profiled none
    text = (CAPTURE / "graph_server_probe" / "release_node.txt").read_text(encoding="utf-8")
    every = only(CAPTURE / "graph_server_probe" / "release_node.txt").details["available_kernels"]
    assert len(every) == 37
    near = diagnose_text(text, kernel_pattern="regex:^splitK_reduce$")[0]
    assert near.details["suggested_patterns"] == ["regex:splitKreduce_kernel"]
    assert "`--kernel-name regex:splitKreduce_kernel`" in near.message
    assert "vectorized_layer_norm_kernel" not in near.message and "nvjet_sm90" not in near.message
    many = diagnose_text(text, kernel_pattern="regex:nvjet")[0]  # 24 names hold 'nvjet': a few are offered
    assert len(many.details["suggested_patterns"]) == 3 and many.details["available_kernels"] == every
    none = diagnose_text(text, kernel_pattern="regex:rmsnorm_kernel")[0]
    assert none.details["suggested_patterns"] == [] and none.details["suggested_pattern"] is None
    assert "None of the 37 kernel name(s) the process launched" in none.message and "'rmsnorm_kernel'" in none.message
    assert "reduce_kernel" not in none.message


def test_several_causes_come_in_a_stable_order() -> None:
    a = (CAPTURE / "injection_env.log").read_text(encoding="utf-8")
    b = (CAPTURE / "attach_option.log").read_text(encoding="utf-8")
    expected = ["attach-option-removed", "injection-slot-taken"]
    assert codes(diagnose_text(a + b)) == codes(diagnose_text(b + a)) == expected
    assert list(CODES).index("ok") == len(CODES) - 1


def test_a_started_capture_that_never_profiled_is_incomplete() -> None:
    # attach_twice.log's first ncu lines (connected, no kernel finished, no report, no error)
    lines = (SHARED / "attach_twice.log").read_text(encoding="utf-8").splitlines()[1:4]
    d = diagnose_text("\n".join(lines) + "\nrc=1\n")
    assert codes(d) == ["capture-incomplete"]
    assert d[0].evidence == ("==PROF== Finding attachable processes on host 127.0.0.1.",)
    assert codes(diagnose_text("")) == ["no-ncu-output"]


def test_gzipped_log(tmp_path: Path) -> None:
    gz = tmp_path / "empty_pattern.log.gz"
    gz.write_bytes(gzip.compress((CAPTURE / "empty_pattern.log").read_bytes()))
    assert only(gz).details["available_kernels"] == ["reduce_kernel", "vectorized_elementwise_kernel"]


def test_report_gz_is_ok_with_its_kernel_count(tmp_path: Path) -> None:
    d = only(REPORT_GZ)
    assert d.code == "ok"
    assert d.details["kernels_profiled"] == 2
    assert d.details["kernels"] == ["nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN",
                                    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    plain = tmp_path / "attach_basic.ncu-rep"
    plain.write_bytes(gzip.decompress(REPORT_GZ.read_bytes()))
    assert only(plain).details["kernels_profiled"] == 2


def test_truncated_report_is_unreadable(tmp_path: Path) -> None:
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(gzip.decompress(REPORT_GZ.read_bytes())[:10_240])
    d = only(cut)
    assert d.code == "report-unreadable"
    assert "ends inside a record (10,240 bytes)" in d.message
    assert "copy it again after ncu printed `==PROF== Report:`" in d.message
    assert d.details["kernels_readable"] == 0


def test_the_block_walk_tells_a_cut_report_from_a_whole_one() -> None:
    """attach_basic's blocks start at bytes 10, 145, ..., 114926 and 138399 (its last, one kernel): a cut between
    blocks leaves a whole (if shorter) report, a cut inside a size, header or payload a truncated one, and a block
    header that is not protobuf an unknown one."""
    from perfreport.capture.diagnose.report import _structure

    data = gzip.decompress(REPORT_GZ.read_bytes())
    assert [_structure(data[:n]) for n in (len(data), 145, 114_926, 138_399)] == ["complete"] * 4
    assert [_structure(data[:n]) for n in (6, 9, 138_401, 138_420, len(data) - 1)] == ["truncated"] * 5
    damaged = bytearray(data)
    damaged[14] = 1 << 3 | 7  # the first block header's first key, given wire type 7
    assert _structure(bytes(damaged)) == "unknown"


def test_cut_gzip_and_foreign_file_are_unreadable_reports(tmp_path: Path) -> None:
    cut_gz = tmp_path / "cut.ncu-rep.gz"
    cut_gz.write_bytes(REPORT_GZ.read_bytes()[:10_240])
    d = only(cut_gz)
    assert (d.code, "cannot gunzip it" in d.message) == ("report-unreadable", True)
    text = tmp_path / "notes.ncu-rep"
    text.write_text("not a report\n")
    d = only(text)
    assert d.code == "report-unreadable"
    assert "not an Nsight Compute report (first bytes b'not ', expected b'NVR\\x00')" in d.message


def test_complete_report_without_kernels_is_no_kernels_profiled(tmp_path: Path) -> None:
    # The real report up to the end of its first block (file header + session block, no result block): every
    # length in it is consistent, and ncu_report finds 0 kernels in it.
    data = gzip.decompress(REPORT_GZ.read_bytes())
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(data[:145])
    d = only(empty)
    assert d.code == "no-kernels-profiled"
    assert d.details["kernels_profiled"] == 0
    assert "holds 0 profiled kernels" in d.message


def test_bad_inputs_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"'.*nope\.log' does not exist\. Expected an ncu capture log"):
        diagnose_path(tmp_path / "nope.log")
    (tmp_path / "empty.log").write_text("")
    with pytest.raises(InputError, match=r"is empty \(0 bytes\): there is no ncu output to diagnose.*2>&1"):
        diagnose_path(tmp_path / "empty.log")
    folder = tmp_path / "ncu-profiles"
    folder.mkdir()
    (folder / "k.ncu-output.txt").write_text("x")
    with pytest.raises(InputError, match=r"is a directory\..*pass one file inside it\. Candidates inside: "
                                         r"k\.ncu-output\.txt\."):
        diagnose_path(folder)
    (tmp_path / "bad.log.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match=r"cannot gunzip it .*Expected a gzip-compressed log"):
        diagnose_path(tmp_path / "bad.log.gz")
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(InputError, match=r"holds no text"):
        diagnose_path(tmp_path / "blank.txt")


def test_imports_without_heavy_dependencies() -> None:
    code = ("import sys, perfreport.capture.diagnose.log; "
            "print(sorted(m for m in ('pandas', 'duckdb', 'pydantic', 'numpy', 'ncu_report') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


REAL_RUNS = Path(__file__).resolve().parents[1] / "tests" / "data" / "h200_capture"


@pytest.mark.parametrize("name", ["overhead_b1_basic", "overhead_b2_full", "overhead_b3_unscoped"])
def test_attach_to_a_target_held_by_an_orphaned_ncu_is_no_attachable_process(name: str) -> None:
    """H200: after a SIGTERM to the ncu wrapper the real ncu stayed attached; later attaches found no process."""
    text = (REAL_RUNS / "overhead" / "bundle" / "ncu-profiles" / f"{name}.ncu-output.txt").read_text()
    found = diagnose_text(text)
    assert [d.code for d in found] == ["no-attachable-process"]
    assert "another ncu is still attached" in found[0].message
    assert found[0].evidence == ("==ERROR== No attachable process found.",)


@pytest.mark.parametrize(("name", "code"), [("gemm_bf16_basic", "ok"), ("gemm_bf16_full", "ok"), ("sdpa_full", "ok"),
                                            ("triton_rmsnorm_full", "ok"), ("empty_pattern", "no-kernels-profiled")])
def test_capture_run_outputs_from_the_h200(name: str, code: str) -> None:
    text = (REAL_RUNS / "run1" / "bundle" / "ncu-profiles" / f"{name}.ncu-output.txt").read_text()
    assert [d.code for d in diagnose_text(text, "regex:no_such_kernel")] == [code]
