"""Kernel families of the Blackwell libraries (issue 20 item 4): every name of the seed's worked examples, and real
names of the same libraries, classify into the family whose ceiling judges them.

Each case says where the name was seen. Names cut short ("...") are as the profile table that printed them cut them;
the rules match on their start, so the cut does not decide the family.
"""

from __future__ import annotations

import pytest

from perfreport.config.ceilings import Ceilings, classify_family, load_ceilings

BLACKWELL_CASES = [
    # --- NVFP4 / FP8 GEMMs ---------------------------------------------------------------------------------------
    # the seed's worked example (TensorRT-LLM trtllm-gen NVFP4 batched GEMM, as zymtrace lists it)
    ("bmm_E2m1E2m1_Fp32_sm100f", "gemm"),
    # TensorRT-LLM fused-MoE FC1 (NVFP4 x NVFP4 -> NVFP4, SwiGLU fused), an nsys capture of vLLM on B200
    ("bmm_E2m1_E2m1E2m1_Fp32_Ab16_Bb16_Cb16_t128x8x512_s5_et128x8_m128x8x64_c1x1x1_rM_TN_transOut_schPd2x1x2x3_"
     "biasFp32M_bN_tma_tmaSf_rgTma_clmp_swiGlu_dynB_sm100f", "gemm"),
    # the same family in FlashInfer's older cubin naming, from trtllm_batched_gemm_runner.cu's error message
    ("bmm_E2m1_E2m1E2m1_Fp32_bA16_bB16_bC16_t128x8x512u2_s5_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_"
     "schedS_biasM_bN_ldgsts_tmaOpt_clmp_swiGlu_dynBatch_sm100f", "gemm"),
    # fused-MoE FC2 (NVFP4 in, BF16 out), SGLang torch-profiler kernel inventory on B200
    ("bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_TN_...", "gemm"),
    # FP8 block-scale MoE FC1 and FC2, SGLang DeepSeek profile on B200
    ("bmm_E4m3_E4m3E4m3_Fp32_t128x64x128u2_s6_et64x64_m64x64x32_c1x1x1_rM_TN_transOut_noShfl_dsFp8_schPd4x2x2x3_bN_"
     "tma_tmaSf_rgTma_clmp_lbW4_dynB_sm100f", "gemm"),
    ("bmm_Bfloat16_E4m3E4m3_Fp32_t128x16x128_s6_et64x16_m64x16x32_c1x1x1_rM_TN_transOut_noShfl_d...", "gemm"),
    # DeepGEMM's SM100 FP8/FP4 GEMM, SGLang GLM-5.1-FP8 profile on B200
    ("void deep_gemm::sm100_fp8_fp4_gemm_1d1d_impl<(cute::UMMA::Major)0, (cute::UMMA::Major)0, 128u, 128u, 0u, 0u, "
     "0u, 16u, 128u, 128u, 1u, 128u, 128u, 128u, 12u, 128u, 128u, 2u, true, 148u, true, (deep_gemm::GemmType)0, "
     "false, cutlass::float_e4m3_t, cutlass::float_e4m3_t, cutlass::bfloat16_t, ...", "gemm"),
    # cuBLASLt on B200: BF16 split-K (SGLang profile), NVFP4 block-scaled (oo), FP8 (qq, a kernel's comment)
    ("nvjet_sm100_tst_64x8_64x16_2x4_h_bz_splitK_TNT", "gemm"),
    ("nvjet_sm100_ootst_128x128_256x7_4x1_2cta_v_bx_Avec16UE4M3_Bvec16UE4M3_...", "gemm"),
    ("nvjet_sm100_qqtst_128x256_128x6_2x1_2cta_v_bz_bias_TNT", "gemm"),
    # CUTLASS library kernels: FP8 via cuBLASLt (microsoft/superbenchmark tests/data/cublaslt_ncu.log, CC 10.0) and
    # NVFP4 block-scaled via torch._scaled_mm on B200
    ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_f16_relu_"
     "aux_scalemax", "gemm"),
    ("cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xf4_ue4m3xf4_f32_f16_f16_256x128x256_0_tnn_"
     "align32_o_vs16_2sm_bias_f16_relu", "gemm"),
    # cuBLAS's xmma naming on SM100, a B300 profiling fixture in a public repository
    ("sm100_xmma_gemm_bf16f16_bf16f16_bf16f32_tn_n_tilesize256x128x64_stage4_warpsize2x2x1", "gemm"),
    # hand-written tcgen05 kernels (extern "C" / __global__ names in public repositories)
    ("tcgen05_gemm_one_tile", "gemm"),
    ("tcgen05_gemm_kernel", "gemm"),
    # --- attention -----------------------------------------------------------------------------------------------
    # the seed's worked example (TensorRT-LLM / FlashInfer trtllm-gen FMHA, MLA with FP8 Q/KV)
    ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk576HV512", "attention"),
    # MLA decode and a causal prefill, SGLang profiles on B200
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta256PagedKvDenseP64MultiCtasKvVarSeqQ16Kv128"
     "StaticSwapsAbForGen", "attention"),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16H64PagedKvCausalP64VarSeqQ128Kv128PersistentContext", "attention"),
    # the multi-CTA reduction after it (FlashInfer's test of the DeepSeek kernel sequence)
    ("fmhaReductionKernel", "attention"),
    # CUTLASS's SM100 FMHA, a B200 profile table
    ("void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaFwdKernelTmaWarpspecialized<cute::tuple<cutlass::f"
     "...", "attention"),
    # --- copy ----------------------------------------------------------------------------------------------------
    # the seed's worked example: vLLM's MLA KV-cache write; the demangled form as a ROCm profile printed it
    ("concat_and_cache_mla_kernel", "copy"),
    ("void vllm::concat_and_cache_mla_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>"
     "(__hip_bfloat16 const...", "copy"),
    # --- communication (judged against nvlink_tbps) ---------------------------------------------------------------
    # the seed's worked examples
    ("multimem_all_reduce_kernel", "communication"),
    ("multimem_all_reduce_kernel<bfloat16>", "communication"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "communication"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "communication"),  # FSDP traces (older NCCL kernel naming)
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
     "__nv_bfloat16*, int, int)", "communication"),
    # FlashInfer's port of TensorRT-LLM's all-reduce + residual + RMSNorm fusion (SGLang profiles on B200)
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::"
     "trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, false, false>(flashinfer::"
     "trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)", "communication"),
    ("void flashinfer::trtllm_mnnvl_allreduce::twoshotAllreduceKernel<(unsigned char)2, __nv_bfloat16, true>"
     "(flashinfer::trtllm_mnnvl_allreduce::AllReduceFusionParams)", "communication"),
    # TensorRT-LLM's own kernels, by function name: custom all-reduce, MoE all-reduce fusion, Helix context
    # parallelism, and userbuffers' multicast all-reduce + RMSNorm
    ("twoShotAllReduceKernel", "communication"),
    ("oneshotAllreduceFusionKernel", "communication"),
    ("moereduce_allreduce_fusion_kernel_oneshot_lamport", "communication"),
    ("helixAllToAllKernel", "communication"),
    ("userbuffers_fp16_sum_gpu_mc_rmsnorm", "communication"),
    # --- what the new rules must leave alone ---------------------------------------------------------------------
    ("rmsNormLamport", "norm"),  # the RMSNorm after FlashInfer's MNNVL all-reduce: no communication of its own
    ("routingMainKernel", "other"),  # TensorRT-LLM fused-MoE routing, no GEMM although bmm_ kernels follow it
    ("finalizeKernel", "other"),
    ("small_reduce_kernel", "reduction"),
    ("smallReduceKernel", "reduction"),  # made-up guard: lower-case 'allReduce' is not the camel-case word start
]


@pytest.fixture(scope="module")
def ceilings() -> Ceilings:
    return load_ceilings(strict=True)


@pytest.mark.parametrize(("kernel_name", "family"), BLACKWELL_CASES, ids=[c[0][:56] for c in BLACKWELL_CASES])
def test_blackwell_kernel_name_classifies_into_its_family(ceilings: Ceilings, kernel_name: str, family: str) -> None:
    assert classify_family(kernel_name, ceilings) == family


@pytest.mark.parametrize("hardware", ["b200_sm100", "gb200_sm100", "b300_sm103", "gb300_sm103"])
def test_blackwell_communication_is_judged_against_nvlink(ceilings: Ceilings, hardware: str) -> None:
    family = classify_family("multimem_all_reduce_kernel", ceilings)
    ref = ceilings.ceiling_for(hardware, family, "bf16")  # an interconnect roof ignores the tensor dtype
    assert ref is not None
    assert (ref.key, ref.value, ref.kind, ref.unit) == (f"{hardware}.nvlink_tbps", 1.8, "interconnect", "tbps")


def test_nvfp4_gemm_roof_follows_the_measured_path_not_the_name(ceilings: Ceilings) -> None:
    """bmm_E2m1... is a `gemm`: the counters' path picks FP4 (UTCOMMA) or the FP8/FP6 row (UTCQMMA)."""
    family = classify_family("bmm_E2m1E2m1_Fp32_sm100f", ceilings)
    fp4 = ceilings.ceiling_for("gb200_sm100", family, "fp4")
    f8f6f4 = ceilings.ceiling_for("gb200_sm100", family, "fp4_fp6_fp8")
    default = ceilings.ceiling_for("gb200_sm100", family)
    assert fp4 is not None and f8f6f4 is not None and default is not None
    assert (fp4.key, fp4.value) == ("gb200_sm100.fp4_dense_tflops", 10000)
    assert (f8f6f4.key, f8f6f4.value) == ("gb200_sm100.fp8_dense_tflops", 5000)
    assert default.key == "gb200_sm100.bf16_dense_tflops"
