"""`ceilings measure`, the measured half: the raw record of each GPU measured on a device machine
(tests/data/ceilings/<gpu>/, device/issue19/run.sh) gives the committed override, which validates and equals what
sol-ceilings.yaml holds, for the H200 and the H100 (device/issue19/run.sh, device/h100/run.sh)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from perfreport.capture.ceilings import smi
from perfreport.capture.ceilings.override import override_from_raw, override_text
from perfreport.config.ceilings import load_ceilings

DATA = Path(__file__).parent / "data" / "ceilings"
GPUS = {"h200": ("h200_sm90", "NVIDIA H200"), "h100": ("h100_sm90", "NVIDIA H100 80GB HBM3")}
DTYPES = ("bf16", "fp16", "tf32", "fp8")


def raw_of(gpu: str) -> dict[str, Any]:
    path = DATA / gpu / "ceilings_raw.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `perftunereport ceilings measure --out DIR` on the {gpu} device machine "
                    "and commit DIR's ceilings_raw.json, ceilings_override.yaml and nvidia-smi.csv there "
                    "(docs/ceilings.md)")
    return json.loads(path.read_text(encoding="utf-8"))


def empirical_of(gpu: str) -> dict[str, dict[str, Any]]:
    raw_of(gpu)
    doc = yaml.safe_load((DATA / gpu / "ceilings_override.yaml").read_text(encoding="utf-8"))
    return doc["hardware"][GPUS[gpu][0]]["empirical"]


# --- the committed measurements ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_raw_record_gives_the_committed_override(gpu: str) -> None:
    raw = raw_of(gpu)
    assert raw["hardware"] == GPUS[gpu][0] and raw["machine"]["gpu"] == GPUS[gpu][1]
    assert override_text(override_from_raw(raw)) == (DATA / gpu / "ceilings_override.yaml").read_text("utf-8")


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_override_validates_and_sol_ceilings_holds_the_same_entries(gpu: str) -> None:
    hw = GPUS[gpu][0]
    merged = load_ceilings(DATA / gpu / "ceilings_override.yaml", strict=True)
    packaged = load_ceilings()
    empirical = empirical_of(gpu)
    assert {f"{n}_gemm_tflops" for n in DTYPES} | {f"{n}_gemm_burst_tflops" for n in DTYPES} | {
        "device_copy_tbps", "l2_copy_tbps"} <= set(empirical)
    for name, entry in empirical.items():
        key = f"{hw}.empirical.{name}"
        assert packaged.entry(key) == entry == merged.entry(key)
        assert entry["method"].startswith("perftunereport ceilings measure: ")
        assert entry["measured"] == raw_of(gpu)["measured"]
        assert "power limit" in entry["where"] and "driver 580." in entry["where"]


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_values_are_the_medians_and_bests_of_the_samples(gpu: str) -> None:
    raw, empirical = raw_of(gpu), empirical_of(gpu)
    for record in raw["benchmarks"]:
        rates = sorted(record["sustained"]["rates"])
        mid = len(rates) // 2
        median = rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2
        assert empirical[f"{record['name']}_{record['unit']}"]["value"] == pytest.approx(median, abs=0.051)
        assert len(rates) == round(raw["settings"]["seconds"] / raw["settings"]["slice_s"])
        if record["burst"]:
            burst = empirical[f"{record['name']}_burst_{record['unit']}"]["value"]
            assert burst == pytest.approx(max(record["burst"]["rates"]), abs=0.051)


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_burst_is_at_least_sustained_for_every_gemm_dtype(gpu: str) -> None:
    empirical = empirical_of(gpu)
    for dtype in DTYPES:
        assert empirical[f"{dtype}_gemm_burst_tflops"]["value"] >= empirical[f"{dtype}_gemm_tflops"]["value"], dtype


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_smi_summaries_come_from_the_committed_samples(gpu: str) -> None:
    raw = raw_of(gpu)
    samples = smi.parse_samples((DATA / gpu / "nvidia-smi.csv").read_text("utf-8"), raw["machine"]["utc_offset_s"])
    assert len(samples) > 10 * sum(len(r["sustained"]["rates"]) * raw["settings"]["slice_s"]
                                   for r in raw["benchmarks"])
    for record in raw["benchmarks"]:
        sustained = record["sustained"]
        assert record["smi_sustained"] == smi.summarize(samples, sustained["t0"], sustained["t1"])
        assert record["smi_sustained"]["samples"] >= 0.8 * (sustained["t1"] - sustained["t0"]) * 10
        if record["burst"]:
            burst = record["burst"]
            assert record["smi_burst"] == smi.summarize(samples, burst["t0"], burst["t1"], margin_s=0.25)


@pytest.mark.parametrize(("gpu", "datasheet_hbm"), [("h200", 4.8), ("h100", 3.35)])
def test_the_measured_gpu_sits_where_hopper_should(gpu: str, datasheet_hbm: float) -> None:
    empirical = empirical_of(gpu)
    assert 0.6 * datasheet_hbm < empirical["device_copy_tbps"]["value"] < datasheet_hbm
    assert empirical["l2_copy_tbps"]["value"] > empirical["device_copy_tbps"]["value"]
    assert 500 < empirical["bf16_gemm_tflops"]["value"] < empirical["bf16_gemm_burst_tflops"]["value"] < 989.5
    assert empirical["fp8_gemm_tflops"]["value"] > empirical["bf16_gemm_tflops"]["value"]
    assert empirical["tf32_gemm_tflops"]["value"] < empirical["bf16_gemm_tflops"]["value"]


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_the_launch_floor_is_the_measured_median(gpu: str) -> None:
    raw = json.loads((DATA / gpu / "launch_floor.json").read_text())
    hw = GPUS[gpu][0]
    assert raw["gpu"] == GPUS[gpu][1]
    assert raw["launches"] == 500 and raw["min_us"] <= raw["median_us"] <= raw["p90_us"] < 2.0
    assert load_ceilings().launch_floor(hw) == (round(raw["median_us"], 3), f"{hw}.launch_floor_us")


# --- pure parts ---------------------------------------------------------------------------------------------------


