"""Blackwell datasheet ceilings (issue 20 item 3): the GB200, B300 and GB300 blocks, and the dtype map from every
tensor path of perfreport/ncu/catalog/chips.yaml to the datasheet row that path runs at."""

from __future__ import annotations

import pytest

from perfreport.capture.ceilings.bench import hardware_key
from perfreport.config.ceilings import CeilingRef, Ceilings, load_ceilings
from perfreport.ncu.catalog import chips

BLACKWELL = ["b200_sm100", "gb200_sm100", "b300_sm103", "gb300_sm103"]
HOPPER = ["h100_sm90", "h200_sm90"]
TENSOR_ROWS = ["fp4_dense_tflops", "fp8_dense_tflops", "bf16_dense_tflops", "fp16_dense_tflops", "tf32_dense_tflops",
               "int8_dense_tops", "fp64_tensor_tflops"]


@pytest.fixture(scope="module")
def ceilings() -> Ceilings:
    return load_ceilings(strict=True)


def key_of(ref: CeilingRef | None) -> str | None:
    return None if ref is None else ref.key


def chip_of(hardware: str) -> str:
    """The chips.yaml map of a hardware token: its product among the map's GPUs, its CC among the map's."""
    product, sm = hardware.split("_")
    cc = f"{sm[2:-1]}.{sm[-1]}"
    hits = [k for k, m in chips.load_chip_maps().chips.items() if product.upper() in m.gpus and cc in m.cc]
    assert len(hits) == 1, (hardware, hits)
    return hits[0]


# --- the blocks ------------------------------------------------------------------------------------------------


def test_blackwell_blocks_load_strict_without_warnings(ceilings: Ceilings) -> None:
    assert set(BLACKWELL) <= set(ceilings.hardware_keys())
    assert ceilings.warnings == ()
    assert not ceilings.has_hardware("gb300_sm100")  # renamed: Blackwell Ultra is CC 10.3
    assert "CC 10.0" in ceilings.description("gb200_sm100")
    assert all("CC 10.3" in ceilings.description(hw) for hw in ("b300_sm103", "gb300_sm103"))


@pytest.mark.parametrize("hardware", BLACKWELL)
def test_every_blackwell_ceiling_names_its_nvidia_source(ceilings: Ceilings, hardware: str) -> None:
    paths = ceilings.key_paths(hardware)
    assert {f"{hardware}.{n}" for n in [*TENSOR_ROWS, "fp32_tflops", "fp64_tflops", "hbm_tbps", "nvlink_tbps"]} \
        == set(paths)
    for path in paths:
        source = ceilings.entry(path)["source"]
        assert source.strip() and "NVIDIA" in source and "https://" in source, path
        # a figure NVIDIA prints sparse, or for a superchip, says how it became one GPU's dense peak
        if "PFLOPS" in source.split(";")[0] and "sparse | dense" not in source:
            assert "with sparsity halved" in source, path
    gb200 = ceilings.entry("gb200_sm100.fp8_dense_tflops")["source"]
    assert "divided by 2 GPUs" in gb200 and "gb200-nvl72" in gb200


@pytest.mark.parametrize(("path", "value"), [
    ("gb200_sm100.fp4_dense_tflops", 10000), ("gb200_sm100.fp8_dense_tflops", 5000),
    ("gb200_sm100.int8_dense_tops", 5000), ("gb200_sm100.bf16_dense_tflops", 2500),
    ("gb200_sm100.tf32_dense_tflops", 1250), ("gb200_sm100.fp32_tflops", 80), ("gb200_sm100.fp64_tensor_tflops", 40),
    ("gb200_sm100.hbm_tbps", 8.0), ("gb200_sm100.nvlink_tbps", 1.8),
    ("b300_sm103.fp4_dense_tflops", 14000), ("b300_sm103.fp8_dense_tflops", 4500),
    ("b300_sm103.int8_dense_tops", 153.5), ("b300_sm103.bf16_dense_tflops", 2250),
    ("b300_sm103.tf32_dense_tflops", 1100), ("b300_sm103.fp32_tflops", 75), ("b300_sm103.fp64_tensor_tflops", 1.2),
    ("b300_sm103.hbm_tbps", 7.7), ("b300_sm103.nvlink_tbps", 1.8),
    ("gb300_sm103.fp4_dense_tflops", 15000), ("gb300_sm103.fp8_dense_tflops", 5000),
    ("gb300_sm103.int8_dense_tops", 165), ("gb300_sm103.bf16_dense_tflops", 2500),
    ("gb300_sm103.fp32_tflops", 80), ("gb300_sm103.fp64_tensor_tflops", 1.3), ("gb300_sm103.hbm_tbps", 8.0),
])
def test_blackwell_datasheet_values(ceilings: Ceilings, path: str, value: float) -> None:
    assert ceilings.value(path) == pytest.approx(value)


def test_tensor_rows_rank_as_the_datasheets_print_them(ceilings: Ceilings) -> None:
    for hw in BLACKWELL:
        v = {n: ceilings.value(f"{hw}.{n}") for n in TENSOR_ROWS}
        assert v["fp4_dense_tflops"] > v["fp8_dense_tflops"] > v["bf16_dense_tflops"] > v["tf32_dense_tflops"], hw
        assert v["fp8_dense_tflops"] == 2 * v["bf16_dense_tflops"], hw
    # Blackwell's FP4 is twice its FP8; Blackwell Ultra's dense FP4 is printed higher, at 3x
    assert ceilings.value("gb200_sm100.fp4_dense_tflops") == 2 * ceilings.value("gb200_sm100.fp8_dense_tflops")
    assert ceilings.value("gb300_sm103.fp4_dense_tflops") == 3 * ceilings.value("gb300_sm103.fp8_dense_tflops")
    # Blackwell Ultra cut INT8 (IMMA only) and FP64: more than 10x under its Blackwell sibling
    for ultra, blackwell in (("b300_sm103", "b200_sm100"), ("gb300_sm103", "gb200_sm100")):
        for name in ("int8_dense_tops", "fp64_tensor_tflops"):
            assert ceilings.value(f"{ultra}.{name}") * 10 < ceilings.value(f"{blackwell}.{name}"), (ultra, name)


def test_rack_bin_is_faster_than_the_hgx_bin(ceilings: Ceilings) -> None:
    for rack, hgx in (("gb200_sm100", "b200_sm100"), ("gb300_sm103", "b300_sm103")):
        for name in ("fp4_dense_tflops", "fp8_dense_tflops", "bf16_dense_tflops", "hbm_tbps"):
            assert ceilings.value(f"{rack}.{name}") > ceilings.value(f"{hgx}.{name}"), (rack, name)


@pytest.mark.parametrize(("gpu_name", "cc", "hardware"), [
    ("NVIDIA B200", (10, 0), "b200_sm100"),
    ("NVIDIA GB200", (10, 0), "gb200_sm100"),  # MLPerf system descriptions' accelerator_model_name
    ("NVIDIA B300 SXM6 AC", (10, 3), "b300_sm103"),  # NVIDIA NIM release notes: NVIDIA-B300-SXM6-AC
    ("NVIDIA GB300", (10, 3), "gb300_sm103"),
])
def test_ceilings_measure_derives_the_blackwell_tokens(ceilings: Ceilings, gpu_name: str, cc: tuple[int, int],
                                                       hardware: str) -> None:
    assert hardware_key(gpu_name, cc, ceilings) == hardware


# --- the dtype map ---------------------------------------------------------------------------------------------

# (hardware, path) -> the datasheet row that path runs at; docs/ceilings.md "The dtype map" says why
EXPECTED_ROWS = {
    "bf16": "bf16_dense_tflops", "fp16": "fp16_dense_tflops", "fp16_dst_fp16": "fp16_dense_tflops",
    "fp16_bf16_tf32": "fp16_dense_tflops",
    "tf32": "tf32_dense_tflops", "fp8": "fp8_dense_tflops", "fp8_dst_fp16": "fp8_dense_tflops",
    "fp4_fp6_fp8": "fp8_dense_tflops", "fp4_fp6_fp8_dst_fp16": "fp8_dense_tflops",
    "fp4_fp6": "fp8_dense_tflops", "fp4_fp6_dst_fp16": "fp8_dense_tflops", "fp4": "fp4_dense_tflops",
    "int8": "int8_dense_tops", "fp64": "fp64_tensor_tflops",
}


def test_every_chip_path_has_a_row() -> None:
    """Each tensor path of every chip map is in dtype_ceiling_map (sparse paths are folded into dense ones first)."""
    keys = {k for m in chips.load_chip_maps().chips.values() for k in m.paths if not k.endswith("_sparse")}
    assert keys == set(EXPECTED_ROWS)


@pytest.mark.parametrize("hardware", [*BLACKWELL, *HOPPER])
def test_each_path_of_the_chip_resolves_to_the_row_it_runs_at(ceilings: Ceilings, hardware: str) -> None:
    paths = [k for k in chips.tensor_paths(chip_of(hardware)) if not k.endswith("_sparse")]
    for path in paths:
        ref = ceilings.ceiling_for(hardware, "gemm", path)
        assert key_of(ref) == f"{hardware}.{EXPECTED_ROWS[path]}", (hardware, path)
        assert ref is not None and ref.kind == "compute"
        assert ref.unit == ("tops" if path == "int8" else "tflops")


def test_blackwell_paths_resolve_to_their_instruction_rate(ceilings: Ceilings) -> None:
    # B200: UTCQMMA (FP4/FP6/FP8) at the FP8/FP6 row, UTCOMMA FP4 at twice it
    assert key_of(ceilings.ceiling_for("b200_sm100", "gemm", "fp4_fp6_fp8")) == "b200_sm100.fp8_dense_tflops"
    assert key_of(ceilings.ceiling_for("b200_sm100", "moe_gemm", "fp4")) == "b200_sm100.fp4_dense_tflops"
    # B300: FP8 split off UTCQMMA; the FP4/FP6 remainder stays at the FP8/FP6 row
    ref = ceilings.ceiling_for("b300_sm103", "gemm", "fp4_fp6_dst_fp16")
    assert ref is not None and (ref.key, ref.value) == ("b300_sm103.fp8_dense_tflops", 4500)
    ref = ceilings.ceiling_for("gb300_sm103", "attention", "fp4")
    assert ref is not None and (ref.key, ref.value) == ("gb300_sm103.fp4_dense_tflops", 15000)
    ref = ceilings.ceiling_for("gb300_sm103", "gemm", "int8")
    assert ref is not None and (ref.key, ref.value, ref.unit) == ("gb300_sm103.int8_dense_tops", 165, "tops")


@pytest.mark.parametrize("hardware", [*HOPPER, "a100_sm80"])
def test_fp4_where_the_chip_has_no_fp4_row_is_no_roof(ceilings: Ceilings, hardware: str) -> None:
    """A missing row resolves to nothing, never to the FP8 or BF16 roof."""
    assert ceilings.ceiling_for(hardware, "gemm", "fp4") is None
    assert f"{hardware}.fp4_dense_tflops" not in ceilings.key_paths(hardware)


def test_paths_share_their_rows_measured_roof(ceilings: Ceilings) -> None:
    """achievable_ceiling_map is keyed by the row: a new path of a measured row gets its measured roof; a row without
    one (FP4 anywhere, anything on Blackwell, which has no measurement yet) keeps the datasheet roof (None here)."""
    fp8_dst_fp16 = ceilings.achievable_for(ceilings.ceiling_for("h200_sm90", "gemm", "fp8_dst_fp16"))
    assert key_of(fp8_dst_fp16) == "h200_sm90.empirical.fp8_gemm_burst_tflops"
    fp16_dst_fp16 = ceilings.achievable_for(ceilings.ceiling_for("h100_sm90", "gemm", "fp16_dst_fp16"))
    assert key_of(fp16_dst_fp16) == "h100_sm90.empirical.fp16_gemm_burst_tflops"
    for hw in BLACKWELL:
        for path in EXPECTED_ROWS:
            ref = ceilings.ceiling_for(hw, "gemm", path)
            assert ref is not None and ceilings.achievable_for(ref) is None, (hw, path)
