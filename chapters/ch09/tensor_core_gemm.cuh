// ch09/tensor_core_gemm.cuh: what the tensor_core_gemm ladder shares across its files.
//   D (m x n, column-major, BF16) = A (m x k, row-major, BF16) x B (k x n, column-major, BF16),
//   FP32 accumulate: the "TN" layout, both operands k-contiguous (what wgmma's K-major shared
//   tiles and cuBLASLt's fastest BF16/FP8 kernels want).
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/cublaslt_gemm_bf16.hpp>
#include <kernels/gemm_bf16.cuh>

#include <cstdint>
#include <string>

namespace ch09 {

using bf16 = __nv_bfloat16;
// The workload, its checks and the cuBLASLt rung are the suite's one BF16 GEMM:
// kernels::GemmBf16, kernels::reference_gemm_bf16 / device_reference_gemm_bf16 and
// kernels::CublasltGemmBf16.
using kernels::GemmBf16;

// The wgmma rung (tensor_core_gemm_wgmma.cu): its shape requirement ("" when it can run) and
// its launch.
std::string wgmma_gemm_requires(const GemmBf16& w);
void launch_wgmma_gemm(const GemmBf16& w, cudaStream_t stream);

}  // namespace ch09
