"""sol-ceilings.yaml hardware blocks for the GPUs captures come from, and the display name -> token lookup.

Every block says how a capture of its GPU is recognized (`cc`, `device_names`, `examples`);
Ceilings.hardware_for_device resolves ncu's device__attribute_display_name and compute capability to one token.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import perfreport.config.ceilings as ceilings_module
from perfreport.config.ceilings import Ceilings, load_ceilings
from perfreport.errors import ConfigError


@pytest.fixture(scope="module")
def ceilings() -> Ceilings:
    return load_ceilings()


def packaged_doc() -> dict:
    return yaml.safe_load(Path(ceilings_module.packaged_ceilings_path()).read_text(encoding="utf-8"))


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# The GPUs inference runs on, each with its token (docs/ceilings.md "Hardware tokens").
NEW_TOKENS = [
    "a100_sxm4_40gb_sm80", "a100_pcie_40gb_sm80", "a100_pcie_80gb_sm80", "a10_sm86", "a10g_sm86", "a40_sm86",
    "rtx3090_sm86", "rtx3070_sm86", "l4_sm89", "l40s_sm89", "l40_sm89", "rtx4090_sm89", "t4_sm75", "rtx2080ti_sm75",
    "rtx2060_sm75", "rtx2060_maxq_sm75", "gtx1660ti_sm75", "gtx1660super_sm75", "v100_sxm2_sm70", "v100_pcie_sm70",
    "h800_sm90", "h100_pcie_sm90", "h100_nvl_sm90", "gh200_sm90", "gh200_144g_sm90",
]
OLD_TOKENS = ["h200_sm90", "h100_sm90", "b200_sm100", "gb200_sm100", "b300_sm103", "gb300_sm103", "a100_sm80"]


def test_every_token_is_packaged_once_with_its_device_keys(ceilings: Ceilings) -> None:
    assert sorted(ceilings.hardware_keys()) == sorted(OLD_TOKENS + NEW_TOKENS)
    assert ceilings.warnings == ()
    for hw, block in packaged_doc()["hardware"].items():
        assert isinstance(block["cc"], str), hw  # quoted: YAML would read 8.0 as a float
        major, minor = block["cc"].split(".")
        assert hw.endswith(f"_sm{major}{minor}"), (hw, block["cc"])
        assert block["device_names"] and block["examples"], hw
        assert ceilings.compute_capability(hw) == block["cc"]


def _every_example() -> list[tuple[str, str, str]]:
    return [(hw, block["cc"], name) for hw, block in packaged_doc()["hardware"].items() for name in block["examples"]]


@pytest.mark.parametrize(("hardware", "cc", "name"), _every_example())
def test_every_token_resolves_from_its_examples(ceilings: Ceilings, hardware: str, cc: str, name: str) -> None:
    assert ceilings.hardware_for_device(name, cc) == hardware
    assert ceilings.hardware_for_device(name, None) == hardware  # names alone are unique too


# Display names as ncu stores them in real reports (device__attribute_display_name), with where each was read.
REAL_CAPTURES = [
    ("NVIDIA A40", "8.6", "a40_sm86"),  # /work/shared/data/wild/indexspaces (ncu 2022.4.0)
    ("NVIDIA H800", "9.0", "h800_sm90"),  # wild/sglang-h800 (ncu 2023.3.0)
    ("NVIDIA A100-PCIE-40GB", "8.0", "a100_pcie_40gb_sm80"),  # wild/mistic-a100pcie (ncu 2021.2.2)
    ("NVIDIA A100 80GB PCIe", "8.0", "a100_pcie_80gb_sm80"),  # wild/panjd123-cutlass (ncu 2024.1.1)
    ("NVIDIA GeForce RTX 3070", "8.6", "rtx3070_sm86"),  # wild/speedy-scan-3070 (ncu 2020.3.1)
    ("NVIDIA GeForce RTX 2060 with Max-Q Design", "7.5", "rtx2060_maxq_sm75"),  # wild/hyperspec-2060mq
    ("NVIDIA GeForce GTX 1660 Ti", "7.5", "gtx1660ti_sm75"),  # wild/mojo-1660ti
    ("NVIDIA GeForce RTX 2080 Ti", "7.5", "rtx2080ti_sm75"),  # wild/yzwang-cudacode
    ("NVIDIA H100 80GB HBM3", "9.0", "h100_sm90"),  # tests/data/ceilings/h100 (device/h100/run.sh)
    ("NVIDIA H200", "9.0", "h200_sm90"),  # tests/data/h200_oracle, the example campaign
    ("NVIDIA H200 ", "9.0", "h200_sm90"),  # the same, as some reports store it, with a trailing space
    ("Tesla V100-SXM2-32GB", "7.0", "v100_sxm2_sm70"),  # wild/hta-torch-traces (a PyTorch trace's device name)
]


@pytest.mark.parametrize(("name", "cc", "hardware"), REAL_CAPTURES)
def test_real_capture_names_resolve_to_their_gpu(ceilings: Ceilings, name: str, cc: str, hardware: str) -> None:
    assert ceilings.hardware_for_device(name, cc) == hardware


def test_the_same_die_resolves_per_memory_and_product(ceilings: Ceilings) -> None:
    """The A100s differ in HBM bandwidth, the H100s in product: each name gets its own block's DRAM roof."""
    hbm = {name: ceilings.value(f"{ceilings.hardware_for_device(name, '8.0')}.hbm_tbps") for name in
           ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe")}
    assert hbm == {"NVIDIA A100-SXM4-80GB": 2.039, "NVIDIA A100-SXM4-40GB": 1.555, "NVIDIA A100-PCIE-40GB": 1.555,
                   "NVIDIA A100 80GB PCIe": 1.935}
    hopper = {name: ceilings.hardware_for_device(name, "9.0") for name in
              ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H800", "NVIDIA GH200 480GB",
               "NVIDIA GH200 144G HBM3e")}
    assert hopper == {"NVIDIA H100 80GB HBM3": "h100_sm90", "NVIDIA H100 PCIe": "h100_pcie_sm90",
                      "NVIDIA H100 NVL": "h100_nvl_sm90", "NVIDIA H800": "h800_sm90",
                      "NVIDIA GH200 480GB": "gh200_sm90", "NVIDIA GH200 144G HBM3e": "gh200_144g_sm90"}
    # drivers before R470 printed names without the vendor prefix
    assert ceilings.hardware_for_device("A100-SXM4-40GB", "8.0") == "a100_sxm4_40gb_sm80"
    assert ceilings.hardware_for_device("GeForce RTX 2080 Ti", "7.5") == "rtx2080ti_sm75"


def test_name_matching_is_full_stripped_and_case_insensitive(ceilings: Ceilings) -> None:
    assert ceilings.hardware_for_device("  nvidia   geforce rtx 4090 ", "8.9") == "rtx4090_sm89"
    assert ceilings.hardware_for_device("NVIDIA GeForce RTX 2060", "7.5") == "rtx2060_sm75"
    # full match: a longer name is another product, never its prefix's
    for other in ("NVIDIA GeForce RTX 2060 SUPER", "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 3070 Ti",
                  "NVIDIA GeForce RTX 3090 Ti", "NVIDIA H200 NVL", "NVIDIA H800 PCIe", "NVIDIA A10M",
                  "NVIDIA GeForce GTX 1660 Ti with Max-Q Design", "NVIDIA L40G", "Tesla V100S-PCIE-32GB"):
        assert ceilings.hardware_for_device(other, None) is None, other


def test_unknown_names_and_wrong_cc_give_none(ceilings: Ceilings) -> None:
    assert ceilings.hardware_for_device("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0") is None
    assert ceilings.hardware_for_device("AMD Instinct MI300X", "9.4") is None
    assert ceilings.hardware_for_device(None, "9.0") is None
    assert ceilings.hardware_for_device("", "9.0") is None
    assert ceilings.hardware_for_device("   ", None) is None
    assert ceilings.hardware_for_device("NVIDIA H200", "8.0") is None
    assert ceilings.hardware_for_device("NVIDIA A40", "8.0") is None
    assert ceilings.hardware_for_device("NVIDIA GeForce RTX 3070", "8.9") is None
    assert ceilings.hardware_for_device("NVIDIA A100-PCIE-40GB", "8.6") is None


# --- what the new blocks hold --------------------------------------------------------------------------------------


def test_gddr_boards_keep_hbm_tbps_as_their_dram_roof(ceilings: Ceilings) -> None:
    for hw, gbps in (("l4_sm89", 0.3), ("rtx3070_sm86", 0.448), ("rtx4090_sm89", 1.008), ("t4_sm75", 0.32),
                     ("a10g_sm86", 0.6)):
        assert ceilings.value(f"{hw}.hbm_tbps") == pytest.approx(gbps)
        assert "GDDR6" in ceilings.description(hw), hw
        ref = ceilings.ceiling_for(hw, "elementwise")
        assert ref is not None and (ref.key, ref.kind) == (f"{hw}.hbm_tbps", "memory")


def test_geforce_tensor_rates_are_the_fp32_accumulate_ones(ceilings: Ceilings) -> None:
    for hw in ("rtx3090_sm86", "rtx3070_sm86", "rtx4090_sm89", "rtx2080ti_sm75"):
        source = ceilings.entry(f"{hw}.fp16_dense_tflops")["source"]
        assert "FP32 Accumulate" in source and "FP32-accumulate rate" in source, hw
    assert ceilings.value("rtx3090_sm86.bf16_dense_tflops") == pytest.approx(71)
    assert ceilings.value("rtx4090_sm89.fp8_dense_tflops") == pytest.approx(330.3)
    assert ceilings.value("rtx2080ti_sm75.fp16_dense_tflops") == pytest.approx(53.8)


def test_sparse_only_figures_are_halved_and_say_so(ceilings: Ceilings) -> None:
    for path, value in (("l4_sm89.bf16_dense_tflops", 121), ("l4_sm89.fp8_dense_tflops", 242.5),
                        ("h800_sm90.fp8_dense_tflops", 1979), ("h100_pcie_sm90.bf16_dense_tflops", 756.5),
                        ("h100_nvl_sm90.fp8_dense_tflops", 1670.5), ("gh200_sm90.bf16_dense_tflops", 989.5)):
        assert ceilings.value(path) == pytest.approx(value)
        assert "with sparsity halved" in ceilings.entry(path)["source"], path
    assert "with sparsity halved" not in ceilings.entry("l40s_sm89.bf16_dense_tflops")["source"]  # dense printed


def test_ceilings_a_gpu_lacks_are_left_out(ceilings: Ceilings) -> None:
    tu116 = {p.split(".", 1)[1] for p in ceilings.key_paths("gtx1660ti_sm75")}
    assert tu116 == {"fp32_tflops", "fp16_tflops", "fp64_tflops", "hbm_tbps"}  # no tensor cores on TU116
    fp32 = ceilings.value("gtx1660ti_sm75.fp32_tflops")
    assert ceilings.value("gtx1660ti_sm75.fp16_tflops") == pytest.approx(2 * fp32, rel=0.01)
    assert ceilings.ceiling_for("gtx1660super_sm75", "gemm", "fp16") is None
    assert ceilings.ceiling_for("t4_sm75", "gemm", "bf16") is None  # Turing has no BF16
    assert ceilings.ceiling_for("v100_sxm2_sm70", "gemm", "tf32") is None
    assert ceilings.ceiling_for("a100_pcie_40gb_sm80", "gemm", "fp8") is None
    assert ceilings.ceiling_for("l4_sm89", "communication") is None  # no NVLink
    ref = ceilings.ceiling_for("t4_sm75", "gemm", "fp16")
    assert ref is not None and (ref.key, ref.value) == ("t4_sm75.fp16_dense_tflops", 65)
    a10g = {p.split(".", 1)[1] for p in ceilings.key_paths("a10g_sm86")}
    assert a10g == {"hbm_tbps"}  # NVIDIA publishes no A10G compute figure
    assert "UNSURE" in ceilings.entry("a10g_sm86.hbm_tbps")["source"]
    assert ceilings.value("h800_sm90.fp64_tflops") == pytest.approx(1)
    assert ceilings.value("h800_sm90.nvlink_tbps") == pytest.approx(0.4)


def test_computed_values_say_so() -> None:
    for hw in ("rtx2060_sm75", "rtx2060_maxq_sm75", "gtx1660ti_sm75", "gtx1660super_sm75"):
        for name, entry in packaged_doc()["hardware"][hw]["datasheet"].items():
            if name != "hbm_tbps":
                assert entry["source"].startswith("Computed") and "UNSURE" in entry["source"], (hw, name)


# --- a bad override is refused with its key path -------------------------------------------------------------------


def test_overlapping_pattern_is_refused_after_merge(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {"h200_sm90": {"device_names": ["NVIDIA H.*"]}}})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    assert err.value.source.startswith(f"{override} (merged over ")
    msg = err.value.message
    assert ("hardware.h100_sm90.examples[0]: 'NVIDIA H100 80GB HBM3' also fully matches "
            "hardware.h200_sm90.device_names[0] 'NVIDIA H.*'") in msg
    assert "hardware.h800_sm90.examples[0]: 'NVIDIA H800' also fully matches hardware.h200_sm90" in msg
    assert "narrow one of the patterns" in msg


def test_new_block_claiming_a_packaged_gpu_is_refused(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {"my_a40_sm86": {
        "description": "our A40 SKU", "cc": "8.6", "device_names": ["NVIDIA A40"], "examples": ["NVIDIA A40"],
        "datasheet": {"hbm_tbps": {"value": 0.7, "source": "NVIDIA A40 datasheet, https://x"}}}}})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    problems = err.value.problems
    assert any(p.startswith("hardware.a40_sm86.examples[0]: 'NVIDIA A40' also fully matches hardware.my_a40_sm86")
               for p in problems), problems
    assert any(p.startswith("hardware.my_a40_sm86.examples[0]: 'NVIDIA A40' also fully matches hardware.a40_sm86")
               for p in problems), problems


def test_bad_regex_missing_cc_and_bad_cc_are_refused_with_paths(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {
        "h200_sm90": {"device_names": ["(NVIDIA H200"]},
        "b200_sm100": {"cc": 10.0},  # unquoted: YAML reads a float
        "a40_sm86": {"cc": "8.0"},  # disagrees with the token's _sm86
        "my_gpu_sm89": {"description": "NVIDIA RTX 6000 Ada Generation, CC 8.9",
                        "device_names": ["NVIDIA RTX 6000 Ada Generation"],
                        "examples": ["NVIDIA RTX 6000 Ada Generation"],
                        "datasheet": {"hbm_tbps": {"value": 0.96, "source": "NVIDIA RTX 6000 Ada datasheet, https://x"}}},
        "other_gpu_sm89": {"description": "x", "cc": "8.9", "device_names": "NVIDIA L20", "examples": [],
                           "datasheet": {"hbm_tbps": {"value": 0.864, "source": "NVIDIA L20, https://x"}}},
    }})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    assert err.value.source == str(override)
    problems = err.value.problems
    expected = [
        "hardware.h200_sm90.device_names[0]: '(NVIDIA H200' is not a valid Python regex (missing ), unterminated",
        "hardware.b200_sm100.cc: expected the compute capability as a quoted '<major>.<minor>' string such as "
        "\"9.0\" (quote it: YAML reads 9.0 as a number), got float 10.0",
        "hardware.a40_sm86.cc: '8.0' disagrees with the token's _sm86 suffix",
        "hardware.my_gpu_sm89.cc: missing (device_names is given, and a block with one of ['cc', 'device_names', "
        "'examples'] needs all three",
        "hardware.other_gpu_sm89.device_names: expected a non-empty list of regexes",
        "hardware.other_gpu_sm89.examples: expected a non-empty list of display names",
    ]
    for fragment in expected:
        assert any(p.startswith(fragment) for p in problems), (fragment, problems)
    assert len(problems) == len(expected)


def test_patterns_and_examples_must_test_each_other(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {
        "l4_sm89": {"device_names": ["NVIDIA L4", "NVIDIA L4 24GB"]},  # the new pattern has no example
        "t4_sm75": {"examples": ["Tesla T4", "NVIDIA T4"]},  # an example its own patterns do not match
    }})
    with pytest.raises(ConfigError) as err:
        load_ceilings(override)
    problems = err.value.problems
    assert any(p.startswith("hardware.l4_sm89.device_names[1]: 'NVIDIA L4 24GB' matches none of hardware.l4_sm89."
                            "examples") for p in problems), problems
    assert any(p.startswith("hardware.t4_sm75.examples[1]: 'NVIDIA T4' fully matches none of hardware.t4_sm75."
                            "device_names") for p in problems), problems
    assert len(problems) == 2


def test_good_override_adds_a_recognized_gpu_and_a_block_named_by_token_only(tmp_path: Path) -> None:
    override = write_yaml(tmp_path / "c.yaml", {"hardware": {
        "rtx6000ada_sm89": {"description": "NVIDIA RTX 6000 Ada Generation (48 GB GDDR6), CC 8.9", "cc": "8.9",
                            "device_names": ["NVIDIA RTX 6000 Ada Generation"],
                            "examples": ["NVIDIA RTX 6000 Ada Generation"],
                            "datasheet": {"hbm_tbps": {"value": 0.96, "source": "NVIDIA RTX 6000 Ada, https://x"}}},
        "lab_gpu": {"description": "a board we only name by token",
                    "datasheet": {"hbm_tbps": {"value": 1.0, "source": "NVIDIA sheet, https://x"}}},
        "t4_sm75": {"device_names": ["(NVIDIA )?Tesla T4"], "examples": ["Tesla T4", "NVIDIA Tesla T4"]},
    }})
    merged = load_ceilings(override)
    assert merged.hardware_for_device("NVIDIA RTX 6000 Ada Generation", "8.9") == "rtx6000ada_sm89"
    assert merged.hardware_for_device("NVIDIA Tesla T4", "7.5") == "t4_sm75"
    assert merged.has_hardware("lab_gpu") and merged.compute_capability("lab_gpu") is None
    assert merged.hardware_for_device("NVIDIA H200", "9.0") == "h200_sm90"  # packaged blocks unchanged


def test_broken_packaged_device_keys_name_their_path(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = packaged_doc()
    del doc["hardware"]["a100_sm80"]["cc"]
    doc["hardware"]["l40_sm89"]["device_names"] = ["NVIDIA L40S?"]  # would swallow the L40S too
    text = yaml.safe_dump(doc, sort_keys=False)
    monkeypatch.setattr(ceilings_module, "_read_packaged", lambda: text)
    with pytest.raises(ConfigError) as err:
        load_ceilings()
    assert any(re.match(r"hardware\.a100_sm80\.cc: missing \(every packaged block is recognized", p)
               for p in err.value.problems), err.value.problems
    # shape problems stop the load before the cross-block check; fix the cc and the overlap is reported
    doc["hardware"]["a100_sm80"]["cc"] = "8.0"
    text = yaml.safe_dump(doc, sort_keys=False)
    with pytest.raises(ConfigError) as err:
        load_ceilings()
    assert any(p.startswith("hardware.l40s_sm89.examples[0]: 'NVIDIA L40S' also fully matches "
                            "hardware.l40_sm89.device_names[0] 'NVIDIA L40S?'") for p in err.value.problems)
