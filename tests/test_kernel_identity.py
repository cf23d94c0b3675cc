"""Kernel identity across tools on real names: torch trace (kineto), ncu reports, ncu CSV, mangled symbols."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from perfreport.errors import InputError
from perfreport.kernels.identity import name_matches, normalize, simplify
from perfreport.ncu.read import read_export
from perfreport.ncu.rep.reader import read_rep

TESTS = Path(__file__).parent
TRACE = TESTS / "data" / "torch" / "workload_torch_trace.json.gz"
CAPTURES = TESTS.parent / "campaigns" / "h200-decoder-layer" / "captures"
PREFILL_REP = CAPTURES / "prefill" / "layer_full.ncu-rep.gz"
PREFILL_CSV = TESTS / "data" / "h200_campaign" / "prefill_layer_basic-raw.csv"

# the same kernel as kineto, an ncu report and an ncu CSV print it (all three copied from the files above)
ADD_TORCH = ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
             "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
ADD_REP = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, "
           "std::array<char *, (unsigned long)3>>(int, T2, T3)")
ADD_CSV = ("void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>"
           "(int, T2, T3)")
ADD_MANGLED = ("_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3"
               "EEEEviT0_T1_")
LN_TORCH = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, "
            "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
LN_REP = ("void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)1>(int, T2, "
          "const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)")
LN_CSV = ("void at::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, 1>(int, T2, const T1 *, const T1 *, "
          "const T1 *, T2 *, T2 *, T1 *)")
LN_MANGLED = ("_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_kernelIN3c10"
              "8BFloat16EfLb1EEEviT0_PKT_S8_S8_PS5_S9_PS6_")
NVJET = ("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
         "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT")
SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"


def _torch_names() -> list[str]:
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "kernel"]


def test_normalize_gives_one_function_identity_per_spelling() -> None:
    for name in (ADD_TORCH, ADD_REP, ADD_CSV, ADD_MANGLED):
        assert normalize(name) == "vectorized_elementwise_kernel"
    for name in (LN_TORCH, LN_REP, LN_CSV, LN_MANGLED):
        assert normalize(name) == "vectorized_layer_norm_kernel"
    assert normalize("vernier::bench::demo::<unnamed>::saxpyKernel(float, const float *, float *, unsigned long)") \
        == "saxpyKernel"
    assert normalize("  " + SDPA + " ") == SDPA
    assert normalize("_Zfoo") == "_Zfoo"  # unreadable mangled name: kept, still joins with itself


@pytest.mark.parametrize("path", [CAPTURES / "prefill" / "layer_full.ncu-rep.gz",
                                  CAPTURES / "decode" / "layer_full.ncu-rep.gz"])
def test_mangled_names_of_real_captures_reduce_to_ncus_function_name(path: Path) -> None:
    launches = read_rep(path).launches
    mangled = [launch for launch in launches if launch.mangled and launch.mangled.startswith("_Z")]
    assert mangled, "the capture has C++ kernels with mangled names"
    for launch in launches:
        assert normalize(launch.mangled or launch.name) == launch.function
        assert normalize(launch.name) == launch.function


def test_simplify_makes_tool_spellings_equal() -> None:
    assert simplify(ADD_TORCH) == simplify(ADD_REP) == simplify(ADD_CSV) == \
        "vectorized_elementwise_kernel<8,CUDAFunctor_add<BFloat16>,array<char*,3>> [at]"
    ln = "vectorized_layer_norm_kernel<BFloat16,float,1> [at]"
    assert simplify(LN_TORCH) == simplify(LN_REP) == simplify(LN_CSV) == ln
    silu = [n for n in _torch_names() if "silu_kernel" in n][0]
    rep_silu = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::<unnamed>::silu_kernel("
                "at::TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 6)]::"
                "operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, (unsigned long)2>>"
                "(int, T2, T3)")
    assert simplify(silu) == simplify(rep_silu) == (
        "vectorized_elementwise_kernel<8,silu_kernel::{lambda()#1}::operator()::{lambda()#6}::operator()::"
        "{lambda(BFloat16)#1},array<char*,2>> [at]")


def _assert_layer_matches(torch_names: list[str], ncu_names: list[str]) -> None:
    """The warehouse joins tools by simplify(): the layer's kernels meet, and only those (one per function)."""
    shared = {simplify(n) for n in torch_names} & {simplify(n) for n in ncu_names}
    assert sorted(shared) == sorted([
        *NVJET, SDPA, "vectorized_layer_norm_kernel<BFloat16,float,1> [at]",
        "vectorized_elementwise_kernel<8,CUDAFunctor_add<BFloat16>,array<char*,3>> [at]",
        "vectorized_elementwise_kernel<8,silu_kernel::{lambda()#1}::operator()::{lambda()#6}::operator()::"
        "{lambda(BFloat16)#1},array<char*,2>> [at]",
    ])
    torch_only = sorted(normalize(n) for n in torch_names if simplify(n) not in shared)
    assert torch_only[0] == "distribution_elementwise_grid_stride_kernel"


def test_torch_trace_pairs_with_the_campaign_ncu_report() -> None:
    _assert_layer_matches(_torch_names(), [launch.name for launch in read_rep(PREFILL_REP).launches])


def test_torch_trace_pairs_with_the_ncu_csv_simplified_names() -> None:
    _assert_layer_matches(_torch_names(), [launch.name for launch in read_export(PREFILL_CSV).launches])


def test_name_matches_uses_ncu_kernel_name_semantics() -> None:
    assert name_matches("vectorized_elementwise_kernel", ADD_TORCH)
    assert name_matches("vectorized_elementwise_kernel", ADD_MANGLED)
    assert not name_matches("vectorized", ADD_TORCH)  # plain text is an exact function-name match
    assert name_matches("regex:nvjet|gemm", NVJET[0]) and not name_matches("regex:^gemm", NVJET[0])
    assert not name_matches("regex:CUDAFunctor_add", ADD_TORCH)  # function base: templates are not searched
    assert name_matches("regex:CUDAFunctor_add", ADD_TORCH, base="demangled")
    assert name_matches(ADD_REP, ADD_REP, base="demangled") and not name_matches(ADD_TORCH, ADD_REP, base="demangled")
    with pytest.raises(InputError, match="not a valid regular expression"):
        name_matches("regex:(", NVJET[0])
    with pytest.raises(InputError, match="expected one of function, demangled, mangled"):
        name_matches("x", "x", base="short")


# the same elementwise kernel as ncu (tests/data/h100_zero_flop/zero_flop_full.ncu-rep.gz) and kineto
# (/work/shared/data/wild/hta-torch-traces/hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz) print it: ncu
# casts `(int)128`, prints the enclosing function template's `void` and its parameters as placeholders (`const T1 &`)
COPY_REP = ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::"
            "direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::"
            "[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, "
            "const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
COPY_TORCH = ('void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_co'
              'py_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() '
              'const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, '
              'at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() '
              'const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native'
              '::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}:'
              ':operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, '
              'at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() '
              'const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})')
ZERO_FLOP_REP = TESTS / "data" / "h100_zero_flop" / "zero_flop_full.ncu-rep.gz"
SPLITK_REP = TESTS / "data" / "h200_many_layers" / "layers16_basic.ncu-rep.gz"
DECODE_TRACE = TESTS / "data" / "torch" / "decode_steps_torch_trace.json.gz"


def test_templated_elementwise_kernel_has_one_key_whatever_the_demangler() -> None:
    assert COPY_REP in {launch.name for launch in read_rep(ZERO_FLOP_REP).launches}
    assert simplify(COPY_REP) == simplify(COPY_TORCH) == (
        "elementwise_kernel<128,2,gpu_kernel_impl_nocast<direct_copy_kernel_cuda::{lambda()#3}::operator()::"
        "{lambda()#7}::operator()::{lambda(float)#1}>::{lambda(int)#1}> [at]")
    assert normalize(COPY_REP) == normalize(COPY_TORCH) == "elementwise_kernel"


def test_bool_casts_and_true_false_are_one_spelling_on_real_names() -> None:
    rep = [n for n in (launch.name for launch in read_rep(SPLITK_REP).launches) if "splitKreduce_kernel<" in n]
    events = json.loads(gzip.decompress(DECODE_TRACE.read_bytes()))["traceEvents"]
    torch = [e["name"] for e in events if e.get("cat") == "kernel" and "splitKreduce_kernel<" in e["name"]]
    assert "(bool)1" in rep[0] and "true" in torch[0]
    assert {simplify(n) for n in rep} == {simplify(n) for n in torch} == {
        "splitKreduce_kernel<32,16,int,float,__nv_bfloat16,float,__nv_bfloat16,0,float,__nv_bfloat16,__nv_bfloat16,"
        "1,0,0,0> [cublasLt]"}


@pytest.mark.parametrize(("ncu", "cxxabi"), [
    ("void k<(unsigned int)8, (long)1, (char)65, (unsigned long long)2, (short)-1>(int)",
     "void k<8u, 1l, (char)65, 2ull, -1>(int)"),
    ("void k<(bool)1, (bool)0>(int)", "void k<true, false>(int)"),
    ("void ns::<unnamed>::k<ns::<unnamed>::Op<(int)4>>(T1)", "void ns::(anonymous namespace)::k<ns::(anonymous "
                                                             "namespace)::Op<4> >(ns::(anonymous namespace)::Op<4>)"),
])
def test_casts_suffixes_and_spaces_are_spelled_once(ncu: str, cxxabi: str) -> None:
    assert simplify(ncu) == simplify(cxxabi)


def test_kernels_of_different_namespaces_or_names_stay_apart() -> None:
    keys = [simplify(n) for n in ("void cutlass::gemm_kernel<float>(int)", "void flashinfer::gemm_kernel<float>(int)",
                                  "void cutlass::Kernel<A>(A::Params)", "void cutlass::Kernel2<A>(A::Params)",
                                  "void cutlass::Kernel<B>(B::Params)")]
    assert keys == ["gemm_kernel<float> [cutlass]", "gemm_kernel<float> [flashinfer]", "Kernel<A> [cutlass]",
                    "Kernel2<A> [cutlass]", "Kernel<B> [cutlass]"]
    # a real cutlass kernel of a kineto trace keeps its library
    assert simplify("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nt_align1>("
                    "cutlass_80_tensorop_s1688gemm_128x128_16x4_nt_align1::Params)") == \
        "Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nt_align1> [cutlass]"
