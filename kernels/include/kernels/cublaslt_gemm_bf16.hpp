// kernels/cublaslt_gemm_bf16.hpp: cuBLASLt as the vendor rung of a kernels::GemmBf16 workload
// (BF16 in and out, FP32 accumulate, the suite's TN layout), on the workload's own buffers.
//   .stateful<kernels::CublasltGemmBf16>(bench::Role::vendor, "cublaslt")
// Untimed setup: the plan and the fastest of cuBLASLt's heuristic candidates, timed on LtGemm's
// own filled operands (the constructor runs before the harness fills w.a and w.b). The chapter
// that uses it links CUDA::cublasLt.
#pragma once

#include <kernels/cublaslt_gemm.hpp>
#include <kernels/gemm_bf16.cuh>

namespace kernels {

class CublasltGemmBf16 {
 public:
  CublasltGemmBf16(const GemmBf16& w, cudaStream_t stream)
      : gemm_(w.m, w.n, w.k, {.ab = CUDA_R_16BF, .d = CUDA_R_16BF}) {
    gemm_.pick_fastest(w.d.data(), stream);
  }
  void operator()(const GemmBf16& w, cudaStream_t stream) {
    gemm_.run(w.a.data(), w.b.data(), w.d.data(), stream);
  }

 private:
  LtGemm gemm_;
};

}  // namespace kernels
