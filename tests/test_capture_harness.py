"""capture harness: shape parsing, formula FLOP/bytes, the printed ncu argv, and CPU runs with numpy arguments.

No torch and no GPU here: built-in ops are checked for their no-torch error; the real runs (gemm, fp8-gemm, sdpa,
rmsnorm, and ncu on gemm/sdpa) are device/h200_capture/harness_device.sh on the H200.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfreport.capture.harness.runner import (
    NcuOptions,
    build_op,
    capture_harness,
    main,
    ncu_command,
    run_harness,
)
from perfreport.capture.harness.spec import (
    GEMM_RE,
    SDPA_RE,
    HarnessSpec,
    TensorShape,
    op_cost,
    parse_shape,
    spec_argv,
)
from perfreport.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "a'; rm -rf / #"
CALLS: list[tuple[Any, ...]] = []
HARNESS = ["python3", "-m", "perfreport.capture.harness.runner"]


def counting_op(*args: Any) -> int:
    """Record every call and its arguments (the harness must call it exactly warmup + iters times)."""
    CALLS.append(args)
    return len(CALLS)


COUNTING = f"{counting_op.__module__}:counting_op"


def test_parse_shape_named_ints_and_tensor_shapes() -> None:
    assert parse_shape("m=16,n=4096,k=4096", "gemm") == {"m": 16, "n": 4096, "k": 4096}
    assert parse_shape(" b=8, h=32 ,s=1024,d=128,causal=1 ", "sdpa") == {"b": 8, "h": 32, "s": 1024, "d": 128,
                                                                        "causal": 1}
    assert parse_shape("b=1,h=1,s=4,d=8,causal=0", "sdpa")["causal"] == 0
    assert parse_shape("z=4096x4096,a=16x4096,c=7", "numpy:matmul") == [
        TensorShape("z", (4096, 4096)), TensorShape("a", (16, 4096)), TensorShape("c", (7,))]
    assert parse_shape("a=2x3") == [TensorShape("a", (2, 3))]
    assert parse_shape("t=8,h=4") == {"t": 8, "h": 4}


@pytest.mark.parametrize(("text", "op", "message"), [
    ("m=16,n=x", "gemm", "--shape 'm=16,n=x': n: expected a positive integer, got 'x'."),
    ("m=16,n=0,k=4", "gemm", "--shape 'm=16,n=0,k=4': n: expected a positive integer, got '0'."),
    ("m=16,n=-4,k=4", "gemm", "--shape 'm=16,n=-4,k=4': n: expected a positive integer, got '-4'."),
    ("m=16,n=", "gemm", "--shape 'm=16,n=': n: expected a positive integer, got ''."),
    ("", "gemm", "--shape '': expected NAME=VALUE pairs such as m=16,n=4096,k=4096 or a=16x4096, got nothing."),
    (" , ", None, "--shape ' , ': expected NAME=VALUE pairs such as m=16,n=4096,k=4096 or a=16x4096, got nothing."),
    ("m16,n=4", "gemm", "--shape 'm16,n=4': 'm16': expected NAME=VALUE, got no '='. Write it as e.g. m=16."),
    ("1m=16", "gemm", "--shape '1m=16': name '1m': expected a letter or _ then letters, digits or _."),
    ("=16", "gemm", "--shape '=16': name '': expected a letter or _ then letters, digits or _."),
    ("m=16,m=32,n=1,k=1", "gemm", "--shape 'm=16,m=32,n=1,k=1': m: given twice ('16' and '32'); give each name once."),
    ("m=16,n=4", "gemm", "--shape 'm=16,n=4': gemm needs m, n, k; missing k. Example: --shape m=16,n=4096,k=4096"),
    ("t=1,h=2,q=3", "rmsnorm", "--shape 't=1,h=2,q=3': rmsnorm needs t, h; unknown q. Example: --shape t=8192,h=4096"),
    ("b=1,h=1,s=4", "sdpa", "--shape 'b=1,h=1,s=4': sdpa needs b, h, s, d (optional causal); missing d. "
                            "Example: --shape b=8,h=32,s=1024,d=128,causal=1"),
    ("b=1,h=1,s=4,d=8,causal=2", "sdpa", "--shape 'b=1,h=1,s=4,d=8,causal=2': causal: expected 0 or 1, got '2'."),
    ("a=16xq", "numpy:matmul", "--shape 'a=16xq': a: expected dimensions such as 16x4096 (positive integers joined "
                               "by x), got '16xq'."),
    ("a=16x0", "numpy:matmul", "--shape 'a=16x0': a: expected dimensions such as 16x4096 (positive integers joined "
                               "by x), got '16x0'."),
])
def test_bad_shape_text_is_refused_with_the_exact_message(text: str, op: str | None, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_shape(text, op)
    assert err.value.format_message() == message


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"op": "matmul", "shape": "a=1"}, "harness op 'matmul': expected one of gemm, fp8-gemm, sdpa, rmsnorm or "
                                       "module:function (e.g. numpy:matmul or mypkg.ops:fused)."),
    ({"op": "gemm", "shape": "m=1,n=1,k=1", "dtype": "fp32"}, "harness op 'gemm': --dtype: expected one of bf16, "
                                                              "fp16, got 'fp32'."),
    ({"op": "gemm", "shape": "m=1,n=1,k=1", "warmup": -1}, "harness --warmup: expected an integer >= 0, got -1."),
    ({"op": "gemm", "shape": "m=1,n=1,k=1", "iters": 0}, "harness --iters: expected an integer >= 1, got 0."),
    ({"op": "gemm", "shape": [TensorShape("a", (1,))]}, "harness op 'gemm': shape: expected NAME=INT pairs, got "
                                                        "tensor shapes."),
    ({"op": "numpy:matmul", "shape": {"m": 1}}, "harness op 'numpy:matmul': shape: expected one or more tensor "
                                                "shapes such as a=16x4096, got {'m': 1}."),
    ({"op": "gemm", "shape": {"m": 1, "n": 2}}, "shape: gemm needs m, n, k; missing k. Example: --shape "
                                                "m=16,n=4096,k=4096"),
    ({"op": "gemm", "shape": "m=1,n=1,k=1", "nvtx": " "}, "harness --nvtx: expected a range name, got an empty "
                                                          "string."),
    ({"op": "gemm", "shape": "m=1,n=1,k=1", "arrays": "jax"}, "harness --arrays: expected one of auto, numpy, "
                                                              "torch, got 'jax'."),
])
def test_bad_harness_spec_is_refused_with_the_exact_message(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as err:
        HarnessSpec(**kwargs)
    assert err.value.format_message() == message


def test_spec_defaults_and_argv_round_trip() -> None:
    spec = HarnessSpec("fp8-gemm", "m=8192,n=8192,k=8192", warmup=3, iters=7, seed=5, nvtx="loop")
    assert spec.dtype == "e4m3" and spec.device == "cuda"
    assert HarnessSpec("numpy:matmul", "a=2x3").dtype == "fp32"
    assert spec_argv(spec) == ["fp8-gemm", "--shape", "m=8192,n=8192,k=8192", "--dtype", "e4m3", "--warmup", "3",
                               "--iters", "7", "--device", "cuda", "--seed", "5", "--nvtx", "loop"]
    callable_spec = HarnessSpec("numpy:matmul", "b=4096x4096,a=16x4096", arrays="numpy", device="cpu")
    again = spec_argv(callable_spec)
    assert again[:3] == ["numpy:matmul", "--shape", "b=4096x4096,a=16x4096"] and again[-2:] == ["--arrays", "numpy"]


@pytest.mark.parametrize(("op", "shape", "dtype", "flop", "nbytes"), [
    ("gemm", "m=16,n=4096,k=4096", "bf16", 536870912, (16 * 4096 + 4096 * 4096 + 16 * 4096) * 2),
    ("gemm", "m=2,n=3,k=5", "fp16", 60, (10 + 15 + 6) * 2),
    ("fp8-gemm", "m=8192,n=8192,k=8192", None, 1099511627776, 268435456),
    ("sdpa", "b=8,h=32,s=1024,d=128", "bf16", 137438953472, 268435456),
    ("sdpa", "b=8,h=32,s=1024,d=128,causal=1", "bf16", 68719476736, 268435456),
    ("sdpa", "b=1,h=2,s=3,d=4,causal=0", "fp16", 288, 4 * 1 * 2 * 3 * 4 * 2),
    ("rmsnorm", "t=8192,h=4096", "bf16", 134217728, 134225920),
    ("rmsnorm", "t=2,h=3", "fp32", 24, (12 + 3) * 4),
    ("numpy:matmul", "a=2x3,b=3x4", None, None, None),
])
def test_op_cost_gives_the_flop_and_byte_counts_of_its_formula(op: str, shape: str, dtype: str | None, flop: int | None,
                                                                nbytes: int | None) -> None:
    assert op_cost(HarnessSpec(op, shape, dtype)) == (flop, nbytes)


def test_ncu_command_exact_argv() -> None:
    spec = HarnessSpec("gemm", "m=16,n=4096,k=4096", "bf16", warmup=10, iters=100)
    args = spec_argv(spec)
    assert ncu_command(spec, args) == [
        "ncu", "--clock-control", "none", "--target-processes", "all", "--kernel-name", GEMM_RE,
        "--launch-skip", "10", "--launch-count", "1", "--set", "full", "-o", "harness_gemm", "--", *HARNESS, *args]
    opts = NcuOptions(ncu="/usr/local/cuda/bin/ncu", section_set="basic", output="/o/g", python="py",
                      kernels_per_call=3)
    assert ncu_command(spec, ["x"], "sm90_xmma", opts) == [
        "/usr/local/cuda/bin/ncu", "--clock-control", "none", "--target-processes", "all", "--kernel-name",
        "regex:sm90_xmma", "--launch-skip", "30", "--launch-count", "1", "--set", "basic", "-o", "/o/g", "--",
        "py", "-m", "perfreport.capture.harness.runner", "x"]


def test_ncu_command_nvtx_and_callable() -> None:
    sdpa = HarnessSpec("sdpa", "b=8,h=32,s=1024,d=128,causal=1", warmup=5, nvtx="timed")
    argv = ncu_command(sdpa, spec_argv(sdpa))
    assert argv[:15] == ["ncu", "--clock-control", "none", "--target-processes", "all", "--kernel-name", SDPA_RE,
                         "--launch-skip", "0", "--launch-count", "1", "--nvtx", "--nvtx-include", "timed/", "--set"]
    fn = HarnessSpec("mypkg.ops:fused", "a=4x4", warmup=2)
    argv = ncu_command(fn, ["mypkg.ops:fused"])
    assert "--kernel-name" not in argv and argv[argv.index("-o") + 1] == "harness_mypkg.ops_fused"
    assert argv[argv.index("--launch-skip") + 1] == "2"


def test_ncu_command_keeps_a_hostile_arg_whole() -> None:
    spec = HarnessSpec("gemm", "m=1,n=16,k=16", warmup=1, nvtx=HOSTILE)
    argv = ncu_command(spec, spec_argv(spec))
    assert argv.count(HOSTILE) == 1 and argv[argv.index("--nvtx-include") + 1] == HOSTILE + "/"
    line = shlex.join(argv)
    assert "'a'\"'\"'; rm -rf / #'" in line
    assert shlex.split(line) == argv


def test_run_harness_numpy_matmul_on_cpu() -> None:
    lines: list[str] = []
    result = run_harness(HarnessSpec("numpy:matmul", "a=16x64,b=64x32", warmup=2, iters=5, device="cpu"),
                         out=lines.append)
    assert result.iterations == 5 and len(result.times_ms) == 5 and result.timer == "perf_counter"
    assert result.flop is None and result.op_bytes is None
    assert 0 < result.min_ms <= result.median_ms and result.min_ms <= result.mean_ms
    assert lines == [result.summary()]
    assert lines[0].startswith("numpy:matmul(a[16x64], b[64x32]) numpy fp32 on cpu: 5 iterations after 2 warm-ups")
    assert json.loads(json.dumps(result.as_dict()))["iterations"] == 5


def test_run_harness_calls_exactly_warmup_plus_iters_with_seeded_args() -> None:
    CALLS.clear()
    spec = HarnessSpec(COUNTING, "x=3x4,w=5", "fp64", warmup=4, iters=9, device="cpu", seed=7)
    run_harness(spec, out=lambda _: None)
    assert len(CALLS) == 13
    x, w = CALLS[0]
    assert x.shape == (3, 4) and w.shape == (5,) and x.dtype == np.float64
    assert all(c[0] is x for c in CALLS)
    fn, _ = build_op(spec)
    assert np.array_equal(fn.args[0], x)
    other, _ = build_op(HarnessSpec(COUNTING, "x=3x4,w=5", "fp64", device="cpu", seed=8))
    assert not np.array_equal(other.args[0], x)


def test_capture_harness_prints_the_command_before_running() -> None:
    CALLS.clear()
    lines: list[str] = []
    spec = HarnessSpec(COUNTING, "a=2", warmup=1, iters=2, device="cpu")
    opts = NcuOptions(kernels_per_call=2)

    def out(line: str) -> None:
        lines.append(f"{len(CALLS)}:{line}")

    capture_harness(spec, opts, kernel_regex="my_kernel", out=out)
    assert lines[0] == "0:ncu command (profiles the first timed call):"
    assert lines[1] == "0:" + shlex.join(ncu_command(spec, spec_argv(spec), "my_kernel", opts))
    assert "--launch-skip 2 " in lines[1] and "1 warm-ups x 2 matching kernel(s) per call = 2" in lines[2]
    assert lines[3].startswith("3:") and len(CALLS) == 3
    printed: list[str] = []
    assert capture_harness(spec, out=printed.append, print_only=True) is None
    assert printed == [shlex.join(ncu_command(spec, spec_argv(spec)))] and len(CALLS) == 3


@pytest.mark.parametrize(("spec", "message"), [
    (HarnessSpec("no_such_mod_xyz:f", "a=1", device="cpu"), "harness op 'no_such_mod_xyz:f': cannot import module "
     "'no_such_mod_xyz' (No module named 'no_such_mod_xyz'). Install it or run from the folder that holds it "
     "(the current directory is on sys.path)."),
    (HarnessSpec("numpy:no_such_fn", "a=1", device="cpu"), "harness op 'numpy:no_such_fn': module 'numpy' has no "
     "attribute 'no_such_fn'."),
    (HarnessSpec("numpy:pi", "a=1", device="cpu"), "harness op 'numpy:pi': expected a callable, got float."),
    (HarnessSpec("numpy:matmul", "a=1"), "harness op 'numpy:matmul': numpy arrays live in host memory, got --device "
     "'cuda'. Pass --device cpu, or --arrays torch to pass torch tensors on the device."),
    (HarnessSpec("numpy:matmul", "a=1", "bf16", device="cpu"), "harness op 'numpy:matmul': --dtype bf16: numpy has "
     "no bfloat16. Use fp32, fp16 or fp64, or --arrays torch."),
])
def test_bad_callable_op_is_refused_with_the_exact_message(spec: HarnessSpec, message: str) -> None:
    with pytest.raises(InputError) as err:
        build_op(spec)
    assert err.value.format_message() == message


def test_a_failing_op_names_the_op_and_its_inputs() -> None:
    spec = HarnessSpec("numpy:matmul", "a=2x3,b=4x5", device="cpu", warmup=1, iters=1)
    with pytest.raises(InputError, match=r"harness op 'numpy:matmul' failed \(numpy:matmul\(a\[2x3\], b\[4x5\]\) "
                                         r"numpy fp32 on cpu\): ValueError: .*Check the shape, dtype and device"):
        run_harness(spec, out=lambda _: None)


@pytest.mark.parametrize("op,shape", [("gemm", "m=16,n=4096,k=4096"), ("fp8-gemm", "m=16,n=16,k=16"),
                                      ("sdpa", "b=1,h=1,s=8,d=8"), ("rmsnorm", "t=2,h=8")])
def test_torch_ops_without_torch_are_refused_with_the_install_hint(op: str, shape: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=rf"^harness op '{op}' needs torch \(pip install '\.\[gpu\]' on the GPU "
                                         r"host\); it cannot be imported here"):
        run_harness(HarnessSpec(op, shape), out=lambda _: None)
    with pytest.raises(InputError, match="needs torch"):
        run_harness(HarnessSpec(COUNTING, "a=2", device="cpu", arrays="torch"), out=lambda _: None)


def test_main_reports_errors_on_stderr(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["gemm", "--shape", "m=16,n=4096,k=4096"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: harness op 'gemm' needs torch (pip install '.[gpu]' on the GPU host)")
    assert out.splitlines()[1].startswith("ncu --clock-control none")
    assert main(["gemm", "--shape", "m=16,n=x"]) == 2
    assert capsys.readouterr().err == "error: --shape 'm=16,n=x': n: expected a positive integer, got 'x'.\n"
    assert main(["gemm", "--shape", "m=1,n=1,k=1", "--kernels-per-call", "0"]) == 2
    assert "--kernels-per-call: expected an integer >= 1, got 0" in capsys.readouterr().err


def test_module_entry_point_prints_ncu_command_then_timings() -> None:
    args = ["numpy:matmul", "--shape", "a=16x64,b=64x32", "--device", "cpu", "--warmup", "3", "--iters", "4",
            "--seed", "1", "--ncu-output", HOSTILE, "--json"]
    proc = subprocess.run([sys.executable, "-m", "perfreport.capture.harness.runner", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    spec = HarnessSpec("numpy:matmul", "a=16x64,b=64x32", device="cpu", warmup=3, iters=4, seed=1)
    expected = ncu_command(spec, spec_argv(spec), options=NcuOptions(output=HOSTILE))
    assert lines[0] == "ncu command (profiles the first timed call):"
    assert shlex.split(lines[1]) == expected and lines[1] == shlex.join(expected)
    assert lines[2].startswith("note: no --kernel-name, so --launch-skip 3 counts EVERY kernel launch")
    assert lines[3].startswith("numpy:matmul(a[16x64], b[64x32]) numpy fp32 on cpu: 4 iterations after 3 warm-ups")
    result = json.loads(lines[4])
    assert result["iterations"] == 4 and len(result["times_ms"]) == 4 and result["flop"] is None
    printed = subprocess.run([sys.executable, "-m", "perfreport.capture.harness.runner", *args[:-1], "--print-ncu"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert printed.returncode == 0 and printed.stdout == lines[1] + "\n"
