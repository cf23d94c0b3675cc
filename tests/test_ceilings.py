"""sol-ceilings.yaml loader: the shipped file, key paths, family classification, ceiling choice, overrides."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

import perfreport.config.ceilings as ceilings_module
from perfreport.config.ceilings import CeilingRef, Ceilings, classify_family, load_ceilings
from perfreport.errors import ConfigError, InputError, PerfReportError

# every token of the packaged file, read from its YAML text (not through the loader under test)
_PACKAGED = yaml.safe_load((Path(__file__).parents[1] / "perfreport/config/sol-ceilings.yaml").read_text())
HARDWARE = sorted(_PACKAGED["hardware"])


@pytest.fixture(scope="module")
def ceilings() -> Ceilings:
    return load_ceilings()


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def key_of(ref: CeilingRef | None) -> str:
    assert ref is not None
    return ref.key


def packaged_doc() -> dict:
    return yaml.safe_load(Path(ceilings_module.packaged_ceilings_path()).read_text(encoding="utf-8"))


# --- the shipped file -------------------------------------------------------------------------------------


def test_packaged_file_loads_without_warnings(ceilings: Ceilings) -> None:
    assert ceilings.hardware_keys() == HARDWARE
    assert ceilings.warnings == ()
    assert ceilings.sources[0].endswith("sol-ceilings.yaml")
    assert all(ceilings.has_hardware(hw) for hw in HARDWARE)
    assert not ceilings.has_hardware("h200")


def test_every_datasheet_entry_has_positive_value_and_a_source() -> None:
    doc = packaged_doc()
    count = 0
    for hw, block in doc["hardware"].items():
        assert block["description"].strip(), hw
        for name, entry in block["datasheet"].items():
            assert isinstance(entry["value"], int | float) and entry["value"] > 0, f"{hw}.{name}"
            assert "https://" in entry["source"], f"{hw}.{name}: source needs the datasheet URL"
            assert "NVIDIA" in entry["source"], f"{hw}.{name}: source needs the datasheet title"
            count += 1
    assert count >= 50


def test_headline_values(ceilings: Ceilings) -> None:
    assert ceilings.value("h200_sm90.bf16_dense_tflops") == pytest.approx(989.5)
    assert ceilings.value("h200_sm90.fp8_dense_tflops") == pytest.approx(1979)
    assert ceilings.value("h200_sm90.hbm_tbps") == pytest.approx(4.8)
    assert ceilings.value("h200_sm90.nvlink_tbps") == pytest.approx(0.9)
    assert ceilings.value("h100_sm90.hbm_tbps") == pytest.approx(3.35)
    assert ceilings.value("a100_sm80.bf16_dense_tflops") == pytest.approx(312)
    assert ceilings.value("a100_sm80.fp64_tensor_tflops") == pytest.approx(19.5)
    assert ceilings.value("a100_sm80.hbm_tbps") == pytest.approx(2.039)
    assert ceilings.value("b200_sm100.fp4_dense_tflops") > ceilings.value("b200_sm100.fp8_dense_tflops")
    assert ceilings.value("gb300_sm103.fp4_dense_tflops") > ceilings.value("b200_sm100.fp4_dense_tflops")


def test_dense_from_sparse_is_said_in_source(ceilings: Ceilings) -> None:
    assert "with sparsity halved" in ceilings.entry("h200_sm90.fp8_dense_tflops")["source"]
    assert "with sparsity halved" not in ceilings.entry("a100_sm80.bf16_dense_tflops")["source"]


def test_missing_ceilings_are_omitted_not_zero(ceilings: Ceilings) -> None:
    a100 = ceilings.key_paths("a100_sm80")
    assert "a100_sm80.fp8_dense_tflops" not in a100
    assert "a100_sm80.fp4_dense_tflops" not in a100
    assert "h200_sm90.fp4_dense_tflops" not in ceilings.key_paths("h200_sm90")


def test_docs_sources_table_matches_the_yaml() -> None:
    text = (Path(__file__).parents[1] / "docs" / "ceilings.md").read_text(encoding="utf-8")
    lines = text.split("## Sources", 1)[1].splitlines()
    header = next(line for line in lines if line.startswith("| ceiling |"))
    columns = [c.strip(" `") for c in header.strip("|").split("|")][1:]
    table = {}
    for line in lines:
        if line.startswith("| `") and line.count("|") == len(columns) + 2:
            cells = [c.strip(" `") for c in line.strip("|").split("|")]
            table[cells[0]] = dict(zip(columns, cells[1:], strict=True))
    doc = packaged_doc()
    assert sorted(columns) == sorted(doc["hardware"])
    names = {n for block in doc["hardware"].values() for n in block["datasheet"]}
    assert set(table) == names
    for name, row in table.items():
        for hw, cell in row.items():
            entry = doc["hardware"][hw]["datasheet"].get(name)
            assert cell == ("—" if entry is None else f"{entry['value']:g}"), (hw, name)


def test_python_module_holds_no_peak_numbers() -> None:
    tree = ast.parse(Path(ceilings_module.__file__).read_text(encoding="utf-8"))
    numbers = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, int | float) and not isinstance(n.value, bool)]
    assert all(n in (0, 1, 2, 3) for n in numbers), numbers


# --- key paths --------------------------------------------------------------------------------------------


def test_entry_returns_value_and_source(ceilings: Ceilings) -> None:
    entry = ceilings.entry("h200_sm90.hbm_tbps")
    assert entry["value"] == pytest.approx(4.8)
    assert "H200" in entry["source"]


@pytest.mark.evidence
def test_the_earlier_h200_probes_agree_with_ceilings_measure(ceilings: Ceilings) -> None:
    """tests/data/h200_oracle/ceilings.json (oracle.py --ceilings, an earlier day) against the values of
    `ceilings measure` in sol-ceilings.yaml (tests/data/ceilings/h200/): the same GPU kind within 5%."""
    import json
    from pathlib import Path

    measured = json.loads((Path(__file__).parent / "data/h200_oracle/ceilings.json").read_text())
    for name in ("bf16_gemm_tflops", "fp8_gemm_tflops", "device_copy_tbps"):
        entry = ceilings.entry(f"h200_sm90.empirical.{name}")
        assert entry["method"].startswith("perftunereport ceilings measure:")
        assert abs(ceilings.value(f"h200_sm90.empirical.{name}") - measured[name]) / measured[name] < 0.05, name
    assert measured["gpu"] == "NVIDIA H200"


@pytest.mark.evidence
def test_bf16_burst_and_sustained_ceilings_are_what_the_h200_probe_measured(ceilings: Ceilings) -> None:
    """gemm_probe/ (an earlier day): 8192^3 bf16 after idle reaches the burst rate; back to back it settles at the
    sustained one while nvidia-smi shows the 700 W cap (throttle 0x4) and the SM clock under 1,600 MHz; the values
    `ceilings measure` wrote into sol-ceilings.yaml agree within 5%.
    Re-reads tests/data/h200_oracle/gemm_probe/ (gemm_ceiling_probe.jsonl, nvidia-smi.csv)."""
    import csv
    import json
    import statistics
    from pathlib import Path

    probe = Path(__file__).parent / "data/h200_oracle/gemm_probe"
    lines = (probe / "gemm_ceiling_probe.jsonl").read_text().splitlines()
    shapes = {tuple(d["shape"]): d for d in map(json.loads, lines)}
    big = shapes[(8192, 8192, 8192)]
    burst = ceilings.value("h200_sm90.empirical.bf16_gemm_burst_tflops")
    assert abs(burst - max(big["first_after_idle_tflops"])) / burst < 0.05
    sustained = statistics.median(big["sustained_slices_tflops"])
    assert abs(sustained - ceilings.value("h200_sm90.empirical.bf16_gemm_tflops")) / sustained < 0.02
    assert min(big["sustained_slices_tflops"]) > 665 and max(big["sustained_slices_tflops"]) < 685
    rows = list(csv.reader((probe / "nvidia-smi.csv").read_text().splitlines(), skipinitialspace=True))
    loaded = [(int(r[1].split()[0]), r[4]) for r in rows if float(r[2].split()[0]) > 500]
    assert len(loaded) > 100 and all(reason.endswith("4") for _, reason in loaded)
    assert statistics.median(clock for clock, _ in loaded) < 1600
    assert max(int(r[1].split()[0]) for r in rows) == 1980
    assert "700 W" in ceilings.entry("h200_sm90.empirical.bf16_gemm_tflops")["method"]


def test_empirical_null_value_is_refused(tmp_path: Path) -> None:
    override = tmp_path / "o.yaml"
    override.write_text(
        "hardware:\n  h200_sm90:\n    empirical:\n      bf16_gemm_tflops:\n        value: null\n"
        "        method: to be measured\n        measured: null\n        where: null\n"
    )
    c = load_ceilings(override)
    with pytest.raises(PerfReportError) as err:
        c.value("h200_sm90.empirical.bf16_gemm_tflops")
    msg = err.value.message
    assert "not been measured" in msg and "h200_sm90.bf16_dense_tflops" in msg


def test_unknown_ceiling_name_lists_available_names(ceilings: Ceilings) -> None:
    with pytest.raises(PerfReportError) as err:
        ceilings.value("a100_sm80.fp8_dense_tflops")
    msg = err.value.message
    assert "'a100_sm80.fp8_dense_tflops'" in msg
    assert "a100_sm80.bf16_dense_tflops" in msg and "a100_sm80.hbm_tbps" in msg


def test_unknown_hardware_lists_known_tokens(ceilings: Ceilings) -> None:
    with pytest.raises(PerfReportError) as err:
        ceilings.value("h300_sm90.hbm_tbps")
    assert all(hw in err.value.message for hw in HARDWARE)


@pytest.mark.parametrize("path", ["h200_sm90", "h200_sm90.datasheet.hbm_tbps", "a.b.c.d", ".hbm_tbps"])
def test_malformed_key_path_explains_the_format(ceilings: Ceilings, path: str) -> None:
    with pytest.raises(PerfReportError) as err:
        ceilings.value(path)
    assert "'<hardware>.<ceiling>'" in err.value.message
    if ".datasheet." in path:
        assert "'h200_sm90.hbm_tbps'" in err.value.message


# --- family classification --------------------------------------------------------------------------------

FAMILY_CASES = [
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm"),
    ("nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
     "_kernel__5x_cublas", "gemm"),
    ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_NNT", "gemm"),  # tests/data/h200_oracle, decode m=16 GEMM
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", "gemm"),
    ("triton_tem_fused_addmm_relu_0", "gemm"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
     "attention"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
     "attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>"
     "(pytorch_flash::Flash_fwd_params)", "attention"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
     "(vllm::Fp8KVCacheDataType)0, false, 512>(float*, float*, __nv_bfloat16*, __nv_bfloat16 const*)",
     "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>", "attention"),
    ("_attn_fwd", "attention"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>(...)",
     "attention"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
     "communication"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, __nv_bfloat16*, int, int)", "communication"),
    ("multimem_all_reduce_kernel", "communication"),
    ("fused_moe_kernel", "moe_gemm"),
    ("triton_red_fused__fused_rms_norm_mul_0", "norm"),
    ("triton_poi_fused_add_mul_0", "triton_fused"),
    ("rmsnorm_kernel", "norm"),
    ("void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(...)", "norm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
     "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
     "norm"),
    ("void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, long, "
     "c10::BFloat16 const*, float, int, int)", "norm"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
     "c10::BFloat16 const*, float, int, int)", "norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
     "std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)",
     "elementwise"),
    ("void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>"
     "(int, T2, T3)", "elementwise"),  # tests/data/h200_oracle, torch 2.11
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<...>(...)::"
     "{lambda(int)#1}>(int, ...)", "elementwise"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>"
     "(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
     "{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<...>)", "reduction"),
    ("void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", "reduction"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::"
     "OpaqueType<2u>, unsigned int, 2, 128, 1>(...)", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda("
     "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
     "(int, ...)", "copy"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
     "(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, "
     "long, long, int, int, int, float const*, float const*)", "copy"),
    ("something_unknown_kernel", "other"),
    ("small_reduce_kernel", "reduction"),
    ("void foo::get_property_kernel", "other"),
    ("", "other"),
]


@pytest.mark.parametrize(("kernel_name", "family"), FAMILY_CASES, ids=[c[0][:48] for c in FAMILY_CASES])
def test_kernel_name_classifies_into_its_family(ceilings: Ceilings, kernel_name: str, family: str) -> None:
    assert classify_family(kernel_name, ceilings) == family


def test_families_are_tried_most_specific_first_and_other_last(ceilings: Ceilings) -> None:
    families = ceilings.families()
    assert families[:5] == ["communication", "moe_gemm", "attention", "reduction", "gemm"]
    assert families.index("norm") < families.index("triton_fused")
    assert families.index("copy") < families.index("elementwise")
    assert families[-1] == "other"


# --- ceiling choice ---------------------------------------------------------------------------------------


def test_gemm_with_fp8_dtype_uses_fp8_ceiling(ceilings: Ceilings) -> None:
    ref = ceilings.ceiling_for("h200_sm90", "gemm", "fp8")
    assert ref == CeilingRef(key="h200_sm90.fp8_dense_tflops", value=pytest.approx(1979), kind="compute",
                             unit="tflops")


def test_tensor_family_without_dtype_uses_family_default(ceilings: Ceilings) -> None:
    ref = ceilings.ceiling_for("h200_sm90", "attention")
    assert ref is not None and ref.key == "h200_sm90.bf16_dense_tflops"
    assert key_of(ceilings.ceiling_for("h200_sm90", "moe_gemm", "BF16")) == "h200_sm90.bf16_dense_tflops"
    int8 = ceilings.ceiling_for("h200_sm90", "gemm", "int8")
    assert int8 is not None and (int8.kind, int8.unit) == ("compute", "tops")


def test_memory_family_uses_hbm_and_ignores_dtype(ceilings: Ceilings) -> None:
    ref = ceilings.ceiling_for("h200_sm90", "elementwise", "fp8")
    assert ref == CeilingRef(key="h200_sm90.hbm_tbps", value=pytest.approx(4.8), kind="memory", unit="tbps")
    assert key_of(ceilings.ceiling_for("a100_sm80", "other")) == "a100_sm80.hbm_tbps"


def test_communication_uses_nvlink(ceilings: Ceilings) -> None:
    ref = ceilings.ceiling_for("b200_sm100", "communication")
    assert ref is not None
    assert (ref.key, ref.kind, ref.unit) == ("b200_sm100.nvlink_tbps", "interconnect", "tbps")


def test_missing_ceiling_returns_none(ceilings: Ceilings) -> None:
    assert ceilings.ceiling_for("a100_sm80", "gemm", "fp8") is None
    assert ceilings.ceiling_for("h200_sm90", "gemm", "fp4") is None
    assert key_of(ceilings.ceiling_for("b200_sm100", "gemm", "fp4")) == "b200_sm100.fp4_dense_tflops"


def test_every_family_has_a_ceiling_on_every_hardware(ceilings: Ceilings) -> None:
    for hw in ceilings.hardware_keys():
        sheet = ceilings.key_paths(hw)
        for family in ceilings.families():
            ref = ceilings.ceiling_for(hw, family)
            # a ceiling the board lacks (no NVLink, no bf16 tensor cores) is omitted: None, never another roof
            default = f"{hw}.{_PACKAGED['category_ceiling_map'][family]}"
            assert (ref is not None and ref.key == default) if default in sheet else ref is None, (hw, family, ref)


def test_ceiling_for_unknown_hardware_family_dtype(ceilings: Ceilings) -> None:
    with pytest.raises(PerfReportError, match="known: " + ", ".join(HARDWARE)):
        ceilings.ceiling_for("h200", "gemm")
    with pytest.raises(PerfReportError, match="kernel family 'matmul'.*known families: attention"):
        ceilings.ceiling_for("h200_sm90", "matmul")
    dtypes = ("bf16, fp16, fp16_bf16_tf32, fp16_dst_fp16, fp4, fp4_fp6, fp4_fp6_dst_fp16, fp4_fp6_fp8, "
              "fp4_fp6_fp8_dst_fp16, fp64, fp8, fp8_dst_fp16, int8, tf32")
    with pytest.raises(PerfReportError, match=f"tensor dtype 'fp6'.*known: {dtypes}"):
        ceilings.ceiling_for("h200_sm90", "gemm", "fp6")


# --- overrides --------------------------------------------------------------------------------------------


def test_override_adds_hardware_and_changes_a_value(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "ceilings.yaml", {
        "hardware": {
            "h200_sm90": {
                "datasheet": {"hbm_tbps": {"value": 4.5, "source": "our H200 SKU datasheet, https://example.com"}},
                "empirical": {"bf16_gemm_tflops": {"value": 701.3, "method": "oracle.py --ceilings",
                                                   "measured": "2025-06-01", "where": "node-a, H200 SXM"}},
            },
            "rtx6000ada_sm89": {
                "description": "NVIDIA RTX 6000 Ada, CC 8.9",
                "datasheet": {"bf16_dense_tflops": {"value": 362.05, "source": "NVIDIA L40S datasheet, https://x"},
                              "hbm_tbps": {"value": 0.864, "source": "NVIDIA L40S datasheet, https://x"}},
            },
        },
    })
    merged = load_ceilings(override)
    assert merged.hardware_keys() == sorted([*HARDWARE, "rtx6000ada_sm89"])
    assert merged.value("h200_sm90.hbm_tbps") == pytest.approx(4.5)
    assert merged.value("h200_sm90.bf16_dense_tflops") == pytest.approx(989.5)  # untouched entries stay
    assert merged.value("h200_sm90.empirical.bf16_gemm_tflops") == pytest.approx(701.3)
    assert merged.entry("h200_sm90.empirical.bf16_gemm_tflops")["measured"] == "2025-06-01"
    assert merged.value(key_of(merged.ceiling_for("rtx6000ada_sm89", "gemm"))) == pytest.approx(362.05)
    assert merged.ceiling_for("rtx6000ada_sm89", "communication") is None
    assert merged.sources[-1] == str(override)
    assert load_ceilings().value("h200_sm90.hbm_tbps") == pytest.approx(4.8)  # packaged data not mutated


def test_override_yaml_date_is_normalized_to_iso_text(tmp_path: Path) -> None:
    override = tmp_path / "c.yaml"
    override.write_text(
        "hardware:\n  h200_sm90:\n    empirical:\n      device_copy_tbps:\n"
        "        {value: 4.1, method: copy_, measured: 2025-06-02, where: node-b}\n", encoding="utf-8")
    assert load_ceilings(override).entry("h200_sm90.empirical.device_copy_tbps")["measured"] == "2025-06-02"


def test_override_can_reorder_families_and_remap(tmp_path: Path) -> None:
    doc = packaged_doc()
    families = [{"family": "conv", "patterns": ["implicit_convolve", "conv2d"]}, *doc["families"]]
    remap = {"conv": "bf16_dense_tflops", "triton_fused": "bf16_dense_tflops"}
    override = write_yaml(tmp_path / "c.yaml", {"families": families, "category_ceiling_map": remap})
    merged = load_ceilings(override)
    assert merged.classify("implicit_convolve_sgemm") == "conv"  # gemm would match later
    assert merged.families()[0] == "conv"
    assert key_of(merged.ceiling_for("h200_sm90", "triton_fused")) == "h200_sm90.bf16_dense_tflops"
    assert key_of(merged.ceiling_for("h200_sm90", "conv", "fp8")) == "h200_sm90.fp8_dense_tflops"


def test_broken_override_reports_every_problem_with_paths(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "broken.yaml", {
        "schema_version": 2,
        "hardware": {
            "h200_sm90": {"datasheet": {"hbm_tbps": {"value": "fast", "source": "x"},
                                        "bf16_dense_tflops": {"value": 900}}},
            "new_gpu": {"datasheet": {"hbm": {"value": -1, "source": ""}}},
        },
        "dtype_ceiling_map": {"fp8": 3},
        "families": [{"family": "gemm", "patterns": ["(unclosed"]}],
    })
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    problems = err.value.problems
    assert err.value.source == str(override)
    msg = err.value.message
    assert msg.startswith(f"{override}: {len(problems)} problem(s):")
    expected = [
        "schema_version: expected 1, got int 2",
        "hardware.h200_sm90.datasheet.hbm_tbps.value: expected a number > 0",
        "got str 'fast'",
        "hardware.h200_sm90.datasheet.bf16_dense_tflops.source: missing",
        "hardware.new_gpu.description: missing",
        "hardware.new_gpu.datasheet.hbm: ceiling name must be lower_snake_case ending in _tflops",
        "hardware.new_gpu.datasheet.hbm.value: expected a number > 0",
        "hardware.new_gpu.datasheet.hbm.source: expected a string naming the datasheet",
        "dtype_ceiling_map.fp8: expected a ceiling name",
        "families[0].patterns[0]: '(unclosed' is not a valid Python regex",
    ]
    for fragment in expected:
        assert fragment in msg, fragment
    assert len(problems) == 9


def test_override_referencing_unknown_ceiling_is_reported_after_merge(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"category_ceiling_map": {"gemm": "fp6_dense_tflops"}})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    assert str(override) in err.value.source and "merged over" in err.value.source
    assert err.value.problems[0].startswith(
        "category_ceiling_map.gemm: 'fp6_dense_tflops' is not a datasheet ceiling of any hardware; known: [")


def test_override_family_without_ceiling_is_reported(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"families": [{"family": "conv", "patterns": ["conv"]}]})
    with pytest.raises(ConfigError, match="category_ceiling_map.conv: missing"):
        load_ceilings(override)


def test_empirical_value_needs_date_and_where(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {"h200_sm90": {"empirical": {
        "fp8_gemm_tflops": {"value": 1300.0}}}}})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    assert err.value.problems == [
        "hardware.h200_sm90.empirical.fp8_gemm_tflops.method: missing",
        "hardware.h200_sm90.empirical.fp8_gemm_tflops.measured: expected the date it was measured "
        "(YYYY-MM-DD), got NoneType None",
        "hardware.h200_sm90.empirical.fp8_gemm_tflops.where: missing",
    ]


def test_unknown_keys_warn_and_strict_makes_them_errors(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {"h200_sm90": {
        "datasheet": {"hbm_tbps": {"value": 4.8, "source": "s", "note": "x"}}}}})
    loaded = load_ceilings(override)
    assert loaded.warnings == (
        f"{override}: hardware.h200_sm90.datasheet.hbm_tbps: unknown key(s) ['note']; "
        "known: ['value', 'source']. Remove or rename them.",
    )
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['note'\]"):
        load_ceilings(override, strict=True)


def test_override_file_missing_or_not_yaml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_ceilings(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_ceilings(bad)
    assert err.value.source == str(bad) and "not valid YAML" in err.value.problems[0]


def test_empty_override_changes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert load_ceilings(empty).value("h200_sm90.hbm_tbps") == pytest.approx(4.8)


def test_broken_packaged_file_lists_all_problems(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    doc = packaged_doc()
    del doc["hardware"]["h200_sm90"]["datasheet"]["hbm_tbps"]["source"]
    doc["hardware"]["a100_sm80"]["datasheet"]["fp32_tflops"]["value"] = 0
    broken = write_yaml(tmp_path / "sol-ceilings.yaml", doc)
    monkeypatch.setattr(ceilings_module, "packaged_ceilings_path", lambda: str(broken))
    monkeypatch.setattr(ceilings_module, "_read_packaged", lambda: broken.read_text(encoding="utf-8"))
    with pytest.raises(ConfigError) as err:
        load_ceilings()
    assert err.value.problems == [
        "hardware.h200_sm90.datasheet.hbm_tbps.source: missing",
        "hardware.a100_sm80.datasheet.fp32_tflops.value: expected a number > 0 in the unit the key name ends "
        "with, got int 0",
    ]
