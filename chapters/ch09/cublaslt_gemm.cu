// ch09/cublaslt_gemm: a naive GEMM kernel → cuBLASLt BF16 (the FP8 step past it:
// cublaslt_gemm_fp8.cu).
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32
// accumulate, TN layout (kernels/cublaslt_gemm.hpp). Roofline at 4096^3: 1365 flop/byte (BF16
// operands): compute-bound; the ceiling is the BF16 tensor-core rate.
//
// What changes from baseline to optimized:
//   1. baseline: one thread per output walks k in global memory, FP32 FMA, no reuse (the
//      starting point of any GEMM lesson, far under the tensor-core ceiling: ch09's README,
//      'Measured', has its time);
//   2. optimized: one cuBLASLt matmul (plan and heuristic chosen once in untimed setup):
//      TMA + wgmma kernels, tuned per shape.
// Tolerance: relative L2 1e-2 (BF16 output rounding is ~2^-9).
//
//   ./bench compare --chapter ch09 --example cublaslt_gemm
#include <cuda_bf16.h>

#include <bench/bench.hpp>

#include "tensor_core_gemm.cuh"  // the BF16 GEMM workload, cuBLASLt rung and references

namespace {

using ch09::bf16;

struct Gemm4096 : ch09::GemmBf16 {  // A, B, D and the flop count as tensor_core_gemm's
  // Verification at 512 x 400 x 272: not a multiple of any tile.
  explicit Gemm4096(bench::Setup& s)
      : GemmBf16(s, s.size("m", 4096, 512), s.size("n", 4096, 400), s.size("k", 4096, 272)) {}
};

__global__ void naive_gemm(const bf16* __restrict__ a, const bf16* __restrict__ b,
                           bf16* __restrict__ d, int m, int n, int k) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, j = blockIdx.y;
  if (i >= m) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p)
    acc += __bfloat162float(a[i * k + p]) * __bfloat162float(b[j * k + p]);
  d[j * m + i] = __float2bfloat16(acc);
}

template <class W>
void launch_naive(const W& w, cudaStream_t stream) {
  naive_gemm<<<dim3(unsigned((w.m + 127) / 128), unsigned(w.n)), 128, 0, stream>>>(
      w.a.data(), w.b.data(), w.d.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch09, cublaslt_gemm, Gemm4096)
    .baseline("naive_thread_per_output", launch_naive<Gemm4096>)
    .stateful<kernels::CublasltGemmBf16>(bench::Role::optimized, "cublaslt_bf16")
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));

}  // namespace
