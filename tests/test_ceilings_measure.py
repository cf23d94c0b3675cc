"""`ceilings measure`: the raw records measured on the H200 and H100 device machines (tests/data/ceilings/<gpu>/)
give the committed override, which validates and equals what sol-ceilings.yaml holds; without torch or CUDA the CLI
fails with one clear message. The GPU path itself ran on the device machines (docs/ceilings.md)."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfreport.capture.ceilings import bench, smi
from perfreport.capture.ceilings.bench import GpuHostError, hardware_key
from perfreport.cli.main import cli
from perfreport.config.ceilings import load_ceilings

DATA = Path(__file__).parent / "data" / "ceilings"
GPUS = {"h200": ("h200_sm90", "NVIDIA H200"), "h100": ("h100_sm90", "NVIDIA H100 80GB HBM3")}
DTYPES = ("bf16", "fp16", "tf32", "fp8")


def test_hardware_key_from_the_gpu_name() -> None:
    known = load_ceilings()
    assert hardware_key("NVIDIA H200", (9, 0), known) == "h200_sm90"
    assert hardware_key("NVIDIA H100 80GB HBM3", (9, 0), known) == "h100_sm90"
    assert hardware_key("NVIDIA A100-SXM4-80GB", (8, 0), known) == "a100_sm80"
    assert hardware_key("NVIDIA A100-PCIE-40GB", (8, 0), known) == "a100_pcie_40gb_sm80"  # not the SXM board's HBM
    assert hardware_key("NVIDIA H100 PCIe", (9, 0), known) == "h100_pcie_sm90"
    with pytest.raises(GpuHostError) as err:
        hardware_key("NVIDIA L20", (8, 9), known)
    assert "'NVIDIA L20'" in err.value.message and "--hardware" in err.value.message


def test_throttle_reasons_are_named() -> None:
    assert smi.reason_names("0x0000000000000004") == "0x4 (SW power cap)"
    assert smi.reason_names("0x0000000000000000") == "0x0 (none)"
    assert smi.reason_names("0x0000000000000005") == "0x5 (GPU idle, SW power cap)"


def test_samples_parse_with_the_recorded_utc_offset() -> None:
    text = "2026/12/04 18:32:35.210, 1980, 3201, 81.21, 700.00, 33, 0x0000000000000000, 12\nnot a sample\n"
    (utc,) = smi.parse_samples(text, 0)
    (plus_one,) = smi.parse_samples(text, 3600)
    assert utc.t - plus_one.t == 3600 and utc.sm_mhz == 1980 and utc.power_limit_w == 700 and utc.util_pct == 12
    assert smi.parse_samples("2026/12/04 18:32:35.210, [N/A], 3201, 81.21, 700.00, 33, [N/A], 0", 0)[0].reasons is None


# --- the CLI without a GPU ----------------------------------------------------------------------------------------


def test_without_torch_the_cli_says_so_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    result = CliRunner().invoke(cli, ["ceilings", "measure", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "Error: ceilings measure needs torch with CUDA on the GPU host; `import torch` failed" in result.output
    assert "Traceback" not in result.output and result.output.count("Error:") == 1
    assert not (tmp_path / "out").exists()


def test_without_a_cuda_device_the_cli_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = types.SimpleNamespace(__version__="2.11.0+cpu", cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake)
    result = CliRunner().invoke(cli, ["ceilings", "measure", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "torch.cuda.is_available() is False on this host (torch 2.11.0+cpu)" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "says"), [
    (["--dtypes", "bf16,fp4"], "--dtypes: expected a comma-separated subset of bf16,fp16,tf32,fp8,int8, got bf16,fp4"),
    (["--hardware", "l20_sm89"], "--hardware 'l20_sm89': not a hardware key of sol-ceilings.yaml"),
    (["--seconds", "0"], "--seconds: expected a sustained length > 0 s, got 0.0"),
])
def test_bad_options_fail_before_any_gpu_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str],
                                              says: str) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # checked before torch is needed
    result = CliRunner().invoke(cli, ["ceilings", "measure", "--out", str(tmp_path), *args])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


# --- the orchestration, on a stand-in for torch -------------------------------------------------------------------


LAUNCHES = [0]  # launches so far on the stand-in GPU: each takes 2 ms


def _launch(*_: object, **__: object) -> _Tensor:
    LAUNCHES[0] += 1
    return _Tensor()


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0

    def record(self) -> None:
        self.at = LAUNCHES[0]

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: _Event) -> float:
        return 2.0 * (other.at - self.at)


class _Tensor:
    def __init__(self, n: int = 1) -> None:
        self.n = n

    def numel(self) -> int:
        return self.n

    def t(self) -> _Tensor:
        return self

    def contiguous(self) -> _Tensor:
        return self

    def to(self, *_: object) -> _Tensor:
        return self

    def copy_(self, other: _Tensor) -> _Tensor:
        return _launch()


def _stand_in_torch() -> types.SimpleNamespace:
    props = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                                  L2_cache_size=50 * 2**20, total_memory=80 * 2**30)

    class _Graph:
        def replay(self) -> None:
            LAUNCHES[0] += 1  # the 100 captured copies replay as one 2 ms step

    class _Capture:
        def __init__(self, graph: _Graph) -> None:
            pass

        def __enter__(self) -> None:
            pass

        def __exit__(self, *exc: object) -> None:
            pass

    def int_mm(a: _Tensor, b: _Tensor) -> _Tensor:
        raise RuntimeError("_int_mm_out_cuda not compiled for this CUDA arch\nsecond line")

    cuda = types.SimpleNamespace(
        is_available=lambda: True, get_device_properties=lambda i: props, Event=_Event, synchronize=lambda: None,
        empty_cache=lambda: None, CUDAGraph=_Graph, graph=_Capture)
    return types.SimpleNamespace(
        __version__="2.11.0+stand-in", version=types.SimpleNamespace(cuda="13.0"), cuda=cuda,
        backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False))),
        Generator=lambda device: types.SimpleNamespace(manual_seed=lambda s: None),
        randn=lambda *shape, **kw: _Tensor(math.prod(shape)), randint=lambda lo, hi, shape, **kw: _Tensor(),
        empty_like=lambda t: _Tensor(t.n), tensor=lambda *a, **kw: _Tensor(), mm=_launch, _scaled_mm=_launch,
        _int_mm=int_mm, bfloat16="bf16", float16="fp16", float32="fp32", float8_e4m3fn="e4m3", int8="int8")


def test_measure_writes_a_validated_override_and_records_what_it_skipped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    torch = _stand_in_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(bench, "IDLE_S", 0.0)
    monkeypatch.setattr(smi, "smi_path", lambda: None)  # no nvidia-smi here: no samples, said in the method
    result = CliRunner().invoke(cli, ["ceilings", "measure", "--out", str(tmp_path), "--seconds", "1",
                                      "--dtypes", "bf16,int8"])
    assert result.exit_code == 0, result.output
    assert "skipped int8_gemm: _int_mm_out_cuda not compiled for this CUDA arch\n" in result.output
    # 2 ms per launch: 2*8192^3 FLOP -> 549.8 TFLOP/s; 2 GiB per copy launch -> 1.074 TB/s
    assert "h100_sm90.empirical.bf16_gemm_tflops: 549.8\n" in result.output
    assert "h100_sm90.empirical.bf16_gemm_burst_tflops: 549.8\n" in result.output
    assert "h100_sm90.empirical.device_copy_tbps: 1.074\n" in result.output
    raw = json.loads((tmp_path / "ceilings_raw.json").read_text("utf-8"))
    assert raw["skipped"][0]["name"] == "int8_gemm" and raw["hardware"] == "h100_sm90"
    assert [r["name"] for r in raw["benchmarks"]] == ["bf16_gemm", "device_copy", "l2_copy"]
    assert torch.backends.cuda.matmul.allow_tf32 is False  # put back as found
    override = tmp_path / "ceilings_override.yaml"
    entry = load_ceilings(override).entry("h100_sm90.empirical.l2_copy_tbps")
    assert entry["value"] == pytest.approx(2 * 12 * 2**20 * 100 / 2e-3 / 1e12, abs=1e-3)
    assert "no nvidia-smi samples in the window" in entry["method"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ceilings_override.yaml", "ceilings_raw.json"]
