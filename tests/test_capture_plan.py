"""capture plan: spec loading, every safety rule firing and explaining itself, exact argv and quoting."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from conftest import run_cli

from perfreport.capture.plan.build import build_plan, plan_text, shell_preview
from perfreport.capture.plan.policy import check_policy
from perfreport.capture.plan.spec import CaptureSpec, load_spec, spec_from_mapping
from perfreport.errors import ConfigError, InputError

HOSTILE = "a'; rm -rf / #"
VLLM = ("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m")


def codes(spec: CaptureSpec) -> dict[str, str]:
    """code -> level of every rule that fires."""
    return {f.code: f.level for f in check_policy(spec)}


def test_default_scoped_spec_warns_of_the_launch_cost_and_explains_clock_control() -> None:
    plan = build_plan(CaptureSpec(kernel_patterns=("regex:nvjet",), command=VLLM))
    # a single-replica server under ncu serves slower for its whole life (measured, policy.LAUNCH_COST)
    assert plan.verdict == "warn"
    assert codes(plan.spec) == {"clock-control-none": "info", "ncu-launch-cost": "warn", "launch-skip-warmup": "warn"}
    message = {f.code: f.message for f in plan.findings}
    assert "locks the SM clock to base" in message["clock-control-none"]
    cost = message["ncu-launch-cost"]
    assert "~70-100 us per eager launch" in cost and "~55-60 us per CUDA-graph-replayed kernel" in cost
    assert "0.18x" in cost and "sister deployment" in cost


@pytest.mark.parametrize(("spec", "level", "phrase"), [
    (CaptureSpec(kernel_patterns=("a",)), "warn", "every user's serving"),  # attach to a server: no command
    (CaptureSpec(kernel_patterns=("a",), command=("python3", "oracle.py")), "info", "only slows the script"),
    (CaptureSpec(kernel_patterns=("a",), replicas=2, command=VLLM), "info", "taken out of the Service"),
    (CaptureSpec(kernel_patterns=("a",), graph_profiling="graph"), "warn", "not profiled one by one"),
])
def test_launch_cost_level_follows_who_pays(spec: CaptureSpec, level: str, phrase: str) -> None:
    found = next(f for f in check_policy(spec) if f.code == "ncu-launch-cost")
    assert found.level == level and phrase in found.message


@pytest.mark.parametrize(("spec", "code", "level", "phrase"), [
    (CaptureSpec(), "unscoped", "refuse", "slowing serving 10-100x"),
    (CaptureSpec(allow_unscoped=True), "unscoped-allowed", "warn", "every kernel launch is replayed"),
    (CaptureSpec(kernel_patterns=("a", "b")), "one-kernel-per-capture", "refuse", "one kernel per attach"),
    (CaptureSpec(kernel_patterns=("a",), launch_count=4), "launch-count", "refuse", "at most 3"),
    (CaptureSpec(kernel_patterns=("a",), launch_count=6, replicas=2, section_set="full"), "launch-count",
     "refuse", "at most 5"),
    (CaptureSpec(kernel_patterns=("a",), section_set="full"), "basic-before-full", "refuse", "--after-basic"),
    (CaptureSpec(kernel_patterns=("a",), gpu_memory_utilization=0.9), "gpu-memory-utilization", "warn",
     "saves and restores"),
    (CaptureSpec(kernel_patterns=("a",), replay_mode="application"), "application-replay", "refuse",
     "--acknowledge-application-replay"),
    (CaptureSpec(kernel_patterns=("a",), replay_mode="app-range", acknowledge_application_replay=True),
     "application-replay", "warn", "Unexpected number of profiled kernels"),
    (CaptureSpec(kernel_patterns=("a",), command=("env", "FOO=1", "python3", "x.py")), "env-wrapper", "refuse",
     "ncu's own process"),
    (CaptureSpec(kernel_patterns=("a",), env=(("FOO", "1"),)), "env-on-ncu", "info", "FOO"),
    (CaptureSpec(kernel_patterns=("a",), profile_from_start=False), "profile-from-start-off", "warn",
     "cudaProfilerStart"),
    (CaptureSpec(kernel_patterns=("a",), clock_control="base"), "clock-control", "warn", "differ from serving"),
    (CaptureSpec(kernel_patterns=("a",), target_processes="application-only", command=VLLM), "target-processes",
     "refuse", "forked worker processes"),
    (CaptureSpec(kernel_patterns=("a",), target_processes="application-only", command=("./bench",)),
     "target-processes", "warn", "child processes"),
    (CaptureSpec(kernel_patterns=("regex:(unclosed",)), "bad-kernel-regex", "refuse", "not a valid regular"),
    (CaptureSpec(kernel_patterns=("nvjet|gemm",)), "pattern-not-regex", "warn", "regex:nvjet|gemm"),
    (CaptureSpec(nvtx_include=("decode_step",)), "nvtx-push-pop", "warn", "decode_step/"),
    (CaptureSpec(kernel_patterns=("a",), section_set=None), "nothing-collected", "refuse", "--set basic"),
])
def test_each_rule_fires_and_explains(spec: CaptureSpec, code: str, level: str, phrase: str) -> None:
    found = [f for f in check_policy(spec) if f.code == code]
    assert [f.level for f in found] == [level]
    assert phrase in found[0].message
    assert build_plan(spec).verdict == {"refuse": "refuse", "warn": "warn", "info": "ok"}[level] or level == "info"


def test_several_replicas_allow_full_and_five_launches() -> None:
    spec = CaptureSpec(kernel_patterns=("regex:flash",), section_set="full", launch_count=5, replicas=3)
    assert build_plan(spec).verdict == "ok"


def test_argv_shapes_match_what_ncu_2025_3_1_accepted() -> None:
    spec = CaptureSpec(kernel_patterns=("regex:nvjet",), launch_skip=3, launch_count=2, section_set="full",
                       after_basic=True, command=VLLM, output="gemm", port=49200, kernel_name_base="demangled",
                       nvtx_include=("decode/",), metrics=("dram__bytes.sum",))
    plan = build_plan(spec)
    assert plan.launch_argv("/ncu") == ["/ncu", "--mode", "launch", "--target-processes", "all", "--port", "49200",
                                        "--", *VLLM]
    assert "--clock-control" not in plan.launch_argv()  # `--mode launch` rejects it (launch_clock_control.log)
    assert plan.attach_argv("/ncu") == [
        "/ncu", "--mode", "attach", "--hostname", "127.0.0.1", "--port", "49200", "--clock-control", "none",
        "--kernel-name-base", "demangled", "--kernel-name", "regex:nvjet", "--launch-skip", "3", "--launch-count",
        "2", "--nvtx", "--nvtx-include", "decode/", "--set", "full", "--metrics", "dram__bytes.sum", "-o", "gemm"]
    laa = plan.launch_and_attach_argv("ncu")
    assert laa[:5] == ["ncu", "--clock-control", "none", "--target-processes", "all"]
    assert laa[laa.index("--"):] == ["--", *VLLM] and laa[laa.index("-o") + 1] == "gemm"
    assert plan.import_argvs("gemm.ncu-rep") == [
        ["ncu", "--import", "gemm.ncu-rep", "--csv", "--page", "raw"],
        ["ncu", "--import", "gemm.ncu-rep", "--csv", "--page", "details", "--section", "SpeedOfLight"]]


def test_hostile_pattern_stays_one_argv_element_and_is_quoted_for_display() -> None:
    plan = build_plan(CaptureSpec(kernel_patterns=(HOSTILE,), command=("python3", "x.py")))
    argv = plan.attach_argv()
    assert argv[argv.index("--kernel-name") + 1] == HOSTILE
    shown = shell_preview(argv)
    assert shlex.split(shown) == argv  # the display round-trips to the same argv
    assert "'a'\"'\"'; rm -rf / #'" in shown


def test_per_kernel_splits_patterns_and_each_passes_the_policy() -> None:
    plan = build_plan(CaptureSpec(kernel_patterns=("regex:nvjet", "regex:flash"), output="layer"))
    assert plan.verdict == "refuse"
    parts = plan.per_kernel()
    assert [(p.spec.kernel_patterns, p.spec.output, p.verdict) for p in parts] == [
        (("regex:nvjet",), "layer-1", "warn"), (("regex:flash",), "layer-2", "warn")]  # warn: ncu-launch-cost
    with pytest.raises(ValueError, match="per_kernel"):
        plan.attach_argv()


def test_env_goes_on_ncu_not_after_the_separator() -> None:
    plan = build_plan(CaptureSpec(kernel_patterns=("a",), env=(("VLLM_USE_V1", "1"),), command=("python3", "s.py")))
    argv = plan.launch_argv()
    assert "env" not in argv and "VLLM_USE_V1=1" not in argv
    assert plan.env == {"VLLM_USE_V1": "1"}
    text = plan_text(plan)
    assert "launch: VLLM_USE_V1=1 ncu --mode launch" in text and "attach: ncu --mode attach" in text


def test_spec_yaml_lists_every_problem_with_its_key(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("kernel_name: [regex:nvjet]\nset: huge\nlaunch_count: 0\nreplicas: two\n"
                 "gpu_memory_utilization: 1.5\nenv: {'9BAD': 1}\nbogus: 1\n")
    with pytest.raises(ConfigError) as exc:
        load_spec(f)
    msg = exc.value.message
    for needle in ("section_set: expected one of basic, roofline, full, got 'huge'",
                   "launch_count: expected an integer >= 1, got 0", "replicas: expected an integer >= 1, got 'two'",
                   "gpu_memory_utilization: expected a fraction in (0, 1]", "env.9BAD: expected an environment"):
        assert needle in msg
    assert "5 problem(s)" in msg  # the unknown key only warns without strict
    with pytest.raises(ConfigError, match="bogus: unknown key"):
        spec_from_mapping({"bogus": 1}, "x", strict=True)


def test_spec_yaml_good_and_flags_override(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_text("kernel_patterns: ['regex:flash']\nsection_set: basic\nlaunch_skip: 5\ncommand: [python3, b.py]\n"
                 "env: {A: 1}\n")
    spec = load_spec(f, {"launch_skip": 7})
    assert (spec.kernel_patterns, spec.launch_skip, spec.command, spec.env) == (
        ("regex:flash",), 7, ("python3", "b.py"), (("A", "1"),))


@pytest.mark.parametrize(("text", "phrase"), [("", None), ("[1, 2]\n", "expected a mapping"),
                                               ("a: [\n", "cannot read it as YAML")])
def test_spec_file_loads_or_names_the_problem(tmp_path: Path, text: str, phrase: str | None) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    if phrase is None:
        assert load_spec(f) == CaptureSpec()
        return
    with pytest.raises(InputError, match=phrase):
        load_spec(f)
    with pytest.raises(InputError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")


def test_cli_plan_prints_argv_and_exits_3_on_refusal() -> None:
    ok = run_cli("capture", "plan", "--kernel-name", HOSTILE, "--env", "A=1", "--", "python3", "-u", "srv.py",
                 "--port", "8000", ok=True)
    assert "verdict: OK" in ok.output and "-- python3 -u srv.py --port 8000" in ok.output
    refused = run_cli("capture", "plan", "--set", "full", "--", "python3", "srv.py")
    assert refused.exit_code == 3
    assert "verdict: REFUSE" in refused.output and "[refuse] unscoped" in refused.output
    assert "[refuse] basic-before-full" in refused.output
    js = run_cli("capture", "plan", "--json", "--kernel-name", "regex:nvjet", "--output", "g")
    doc = json.loads(js.output)
    assert doc["verdict"] == "warn" and doc["captures"]["g"]["attach"][-2:] == ["-o", "g"]  # ncu-launch-cost
    bad = run_cli("capture", "plan", "--env", "NOEQUALS")
    assert bad.exit_code == 2 and "expected NAME=VALUE" in bad.output


def test_graph_profiling_goes_on_the_attach_never_on_the_launch() -> None:
    """`--mode launch` rejects --graph-profiling (tests/data/h200_capture/launch_cost/launch_cost_graph2.log)."""
    plan = build_plan(CaptureSpec(kernel_patterns=("regex:nvjet",), graph_profiling="graph",
                                  command=("python3", "s.py")))
    assert plan.attach_argv()[plan.attach_argv().index("--graph-profiling") + 1] == "graph"
    assert "--graph-profiling" in plan.launch_and_attach_argv()
    assert "--graph-profiling" not in plan.launch_argv()
    assert "--graph-profiling" not in build_plan(CaptureSpec(kernel_patterns=("a",))).attach_argv()  # node: default
    log = (Path(__file__).parent / "data" / "h200_capture" / "launch_cost" / "launch_cost_graph2.log").read_text()
    assert "Invalid option --graph-profiling specified for --mode launch" in log


def test_gpu_memory_check_reads_the_servers_own_value_at_any_replica_count() -> None:
    """The memory rule is the same on one replica, several or a sister: replay's memory need does not change."""
    for replicas in (1, 2, 4):
        spec = CaptureSpec(kernel_patterns=("a",), replicas=replicas,
                           command=(*VLLM, "--gpu-memory-utilization", "0.92"))
        found = [f for f in check_policy(spec) if f.code == "gpu-memory-utilization"]
        assert [f.level for f in found] == ["warn"], replicas
        assert "the server's own --gpu-memory-utilization 0.92 >= 0.85" in found[0].message
    # the server's own argument (last one, `=` spelling too) is what it runs with: it wins over the spec's value
    told = CaptureSpec(kernel_patterns=("a",), replicas=2, gpu_memory_utilization=0.5,
                       command=(*VLLM, "--gpu-memory-utilization", "0.5", "--gpu-memory-utilization=0.92"))
    assert codes(told)["gpu-memory-utilization"] == "warn"
    assert codes(CaptureSpec(kernel_patterns=("a",), replicas=3, gpu_memory_utilization=0.9))[
        "gpu-memory-utilization"] == "warn"  # the spec's value where the command is not known
    low = CaptureSpec(kernel_patterns=("a",), replicas=2, command=(*VLLM, "--gpu-memory-utilization", "0.80"))
    assert "gpu-memory-utilization" not in codes(low)


def test_refused_plan_prints_only_its_refusals_and_no_command() -> None:
    args = ("capture", "plan", "--kernel-name", "regex:nvjet", "--launch-count", "9", "--env", "A=1", "--output",
            "g", "--", "python3", "-m", "vllm.entrypoints.openai.api_server")
    text = run_cli(*args)
    assert text.exit_code == 3
    lines = text.output.strip().splitlines()
    assert lines[0] == "verdict: REFUSE" and lines[1].startswith("  [refuse] launch-count: launch_count 9")
    assert lines[-1] == "no command is shown for a refused plan: fix each refusal above, then plan again."
    assert len(lines) == 3  # no [warn]/[info] findings, no `capture g:` block
    assert "ncu --mode" not in text.output and "vllm.entrypoints" not in text.output
    rows = run_cli(*args[:2], "--format", "csv", *args[2:]).stdout.splitlines()
    assert rows[0] == "kind,name,detail,text" and all(r.startswith("finding,launch-count,refuse,") for r in rows[1:])
    doc = json.loads(run_cli(*args[:2], "--json", *args[2:]).stdout)
    assert doc["verdict"] == "refuse" and doc["captures"] == {}


def test_launch_count_without_skip_on_a_server_warns_of_warm_up() -> None:
    found = {f.code: f for f in check_policy(CaptureSpec(kernel_patterns=("regex:nvjet",), launch_count=2,
                                                         command=VLLM))}
    warm = found["launch-skip-warmup"]
    assert warm.level == "warn"
    for words in ("--launch-count 2 without --launch-skip", "warm-up", "CUDA-graph capture",
                  "not steady-state serving", "--launch-skip 1952", "--range-filter", "--nvtx-include"):
        assert words in warm.message
    # skipping the start-up, or a script rather than a server, is no warm-up problem; an attach gets an info
    assert "launch-skip-warmup" not in codes(CaptureSpec(kernel_patterns=("a",), launch_skip=2000, command=VLLM))
    assert "launch-skip-warmup" not in codes(CaptureSpec(kernel_patterns=("a",), command=("python3", "bench.py")))
    assert codes(CaptureSpec(kernel_patterns=("a",)))["launch-skip-warmup"] == "info"
