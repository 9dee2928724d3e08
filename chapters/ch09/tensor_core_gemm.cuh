// ch09/tensor_core_gemm.cuh: the workload the tensor_core_gemm ladder shares across its files.
//   D (m x n, column-major, BF16) = A (m x k, row-major, BF16) x B (k x n, column-major, BF16),
//   FP32 accumulate: the "TN" layout, both operands k-contiguous (what wgmma's K-major shared
//   tiles and cuBLASLt's fastest BF16/FP8 kernels want).
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/reference_gemm.cuh>

#include <cstdint>
#include <string>

namespace ch09 {

using bf16 = __nv_bfloat16;

struct GemmBf16 {
  int64_t m, n, k;
  bench::DeviceSpan<const bf16> a, b;
  bench::DeviceSpan<bf16> d;
  GemmBf16(bench::Setup& s, int64_t m_, int64_t n_, int64_t k_)
      : m(m_), n(n_), k(k_),
        a(s.input<bf16>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<bf16>("b", n * k, bench::uniform(-1, 1))),
        d(s.output<bf16>("d", m * n)) {
    s.flops(2.0 * m * n * k, bench::ceiling::bf16);
  }
};

// cuBLASLt BF16 on the workload's buffers (plan and fastest candidate chosen in untimed setup):
// the vendor rung of tensor_core_gemm, the optimized one of cublaslt_gemm. The candidates are
// timed on LtGemm's own filled operands: here, before the harness fills them, w.a and w.b hold
// nothing (initcheck caught the ragged shape's non-TMA kernel reading them).
class CublasltBf16 {
 public:
  CublasltBf16(const GemmBf16& w, cudaStream_t stream) : gemm_(w.m, w.n, w.k, {.ab = CUDA_R_16BF, .d = CUDA_R_16BF}) {
    gemm_.pick_fastest(w.d.data(), stream);
  }
  void operator()(const GemmBf16& w, cudaStream_t stream) { gemm_.run(w.a.data(), w.b.data(), w.d.data(), stream); }

 private:
  kernels::LtGemm gemm_;
};

// The checks: double CPU reference at the verification size, the simple GPU GEMM at the timing size.
inline void reference(const GemmBf16& w, bench::HostData& h) {
  kernels::reference_gemm_tn(h.input<bf16>("a"), h.input<bf16>("b"), h.expected("d"), w.m, w.n, w.k);
}
inline void device_reference(const GemmBf16& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

// The wgmma rung (tensor_core_gemm_wgmma.cu): its shape requirement ("" when it can run) and
// its launch.
std::string wgmma_gemm_requires(const GemmBf16& w);
void launch_wgmma_gemm(const GemmBf16& w, cudaStream_t stream);

}  // namespace ch09
