"""Step budget (page 3) from the H200 PyTorch-profiler traces of the example campaign (torch 2.11, CUPTI)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli

from perfreport.bundle.layout import bundle_init
from perfreport.errors import InputError
from perfreport.files import sha256_file
from perfreport.timeshare.step_budget import GPU_CATS, step_budget
from perfreport.warehouse.gather import _bundle_rows

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "campaigns" / "h200-decoder-layer" / "captures"
DECODE, PREFILL = CAPTURES / "decode" / "torch_trace.json.gz", CAPTURES / "prefill" / "torch_trace.json.gz"


def gpu_events(path: Path) -> list[dict]:  # type: ignore[type-arg]
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [e for e in events if e.get("cat") in GPU_CATS and e.get("ph") == "X"]


def test_decode_layer_is_host_bound_and_prefill_is_not() -> None:
    decode, prefill = step_budget(DECODE), step_budget(PREFILL)
    assert "cuda*Synchronize" in decode.method
    for budget, path in ((decode, DECODE), (prefill, PREFILL)):
        gpu = gpu_events(path)
        assert sum(s["gpu_events"] for s in budget.steps) == len(gpu)  # every GPU event falls in one step
        first = budget.steps[0]
        durs = [e["dur"] / 1e3 for e in gpu]
        assert max(durs) <= first["gpu_busy_ms"] <= sum(durs) + 1e-4  # a union (ts are large floats: ~ns slack)
        for s in budget.steps:
            assert s["host_gap_ms"] == pytest.approx(s["wall_ms"] - s["gpu_busy_ms"], abs=1e-9)
    host = sum(s["host_gap_ms"] for s in decode.steps) / sum(s["wall_ms"] for s in decode.steps)
    assert host > 0.5  # 5 eager decode layers at M=16: launch-bound (GPU idle most of the wall time)
    host = sum(s["host_gap_ms"] for s in prefill.steps) / sum(s["wall_ms"] for s in prefill.steps)
    assert host < 0.2  # prefill GEMMs keep the GPU busy


def test_cli_writes_step_budget_into_the_bundle_and_page_3_reads_it(tmp_path: Path) -> None:
    bundle = bundle_init(tmp_path, "h200-decode-steps")
    before = json.loads((bundle / "inference_perfbench_v1.json").read_text())
    run = run_cli("import_step_budget", "--bundle", str(bundle), str(DECODE), ok=True)
    # the trace's two sync windows: one (29 us) started no GPU work and is no step
    assert run.stdout.startswith("1 step(s) (up to each synchronizing CUDA runtime call")
    assert "1 window(s) without GPU work left out" in run.stdout and "% host, time-weighted)" in run.stdout
    assert run.stderr.startswith("warning: only 1 step(s) with GPU work (fewer than 5)")
    doc = json.loads((bundle / "inference_perfbench_v1.json").read_text())
    assert {k: v for k, v in doc.items() if k not in ("step_budget", "step_budget_source")} == before
    assert doc["step_budget_source"]["sha256"] == sha256_file(DECODE)
    serving, steps = _bundle_rows("decode-b16-kv2048", [bundle / "inference_perfbench_v1.json"])
    assert serving == [] and [s["step"] for s in steps] == ["sync-1"]
    assert all(s["gpu_events"] > 0 for s in doc["step_budget"])
    assert steps[0]["host_share_pct"] == pytest.approx(
        100 * doc["step_budget"][0]["host_gap_ms"] / doc["step_budget"][0]["wall_ms"])
    # page 3's headline is the CLI's number: the same time-weighted share, to the same digit
    import re

    from perfreport.frontier.candidates import host_verdict

    cli_pct = re.search(r"\(([0-9.]+)% host, time-weighted\)", run.stdout)
    assert cli_pct is not None and f" {cli_pct.group(1)}% of the steps' time" in str(host_verdict(steps))


def test_no_steps_and_bad_regex_are_clear_errors(tmp_path: Path) -> None:
    events = json.loads(gzip.decompress(DECODE.read_bytes()))
    events["traceEvents"] = [e for e in events["traceEvents"] if "Synchronize" not in str(e.get("name"))]
    bare = tmp_path / "no_sync.json"
    bare.write_text(json.dumps(events))
    with pytest.raises(InputError, match="no steps found.*prof.step"):
        step_budget(bare)
    with pytest.raises(InputError, match="not a regular expression"):
        step_budget(DECODE, "(")
    bundle = bundle_init(tmp_path, "b")
    code, out = run_cli("import_step_budget", "--bundle", str(bundle), str(bare))
    assert code == 2 and "no steps found" in out
    assert "step_budget" not in json.loads((bundle / "inference_perfbench_v1.json").read_text())


STEPS = Path(__file__).parent / "data" / "torch"


@pytest.mark.parametrize(("mode", "kernels_per_step", "host_share"), [("decode", 14, (0.4, 0.8)),
                                                                      ("prefill", 12, (0.0, 0.05))])  # + 6 memsets
def test_profiler_step_annotations_are_the_steps(mode: str, kernels_per_step: int,
                                                 host_share: tuple[float, float]) -> None:
    """Real H200 traces made with a torch.profiler schedule and prof.step() per layer (trace.py --profiler-steps)."""
    path = STEPS / f"{mode}_steps_torch_trace.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    marks = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    budget = step_budget(path)
    assert "user_annotation" in budget.method
    assert [s["step"] for s in budget.steps] == [m["name"] for m in marks] == [f"ProfilerStep#{i}" for i in
                                                                                range(1, 7)]
    for s, m in zip(budget.steps, marks, strict=True):
        assert s["wall_ms"] == pytest.approx(m["dur"] / 1e3)
        inside = [e for e in gpu_events(path) if m["ts"] <= e["ts"] < m["ts"] + m["dur"]]
        assert s["gpu_events"] == len(inside) and sum(1 for e in inside if e["cat"] == "kernel") == kernels_per_step
    share = sum(s["host_gap_ms"] for s in budget.steps) / sum(s["wall_ms"] for s in budget.steps)
    assert host_share[0] < share < host_share[1]


def test_the_host_share_is_weighted_by_step_time_not_a_mean_of_steps() -> None:
    from perfreport.timeshare.step_budget import host_share_pct

    steps = [{"wall_ms": 0.029, "host_gap_ms": 0.029}, {"wall_ms": 10.0, "host_gap_ms": 2.0}]
    assert host_share_pct(steps) == pytest.approx(100 * 2.029 / 10.029)  # 20.2%, not the per-step mean of 60%
    assert host_share_pct([]) is None
