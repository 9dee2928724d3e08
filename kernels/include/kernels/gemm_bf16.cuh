// kernels/gemm_bf16.cuh: the BF16 TN GEMM workload that tensor-core examples share, with its
// checks. D (m x n, column-major, BF16) = A (m x k, row-major, BF16) x B (k x n, column-major,
// BF16), FP32 accumulate: both operands k-contiguous (what ldmatrix, TMA boxes, wgmma's K-major
// tiles and cuBLASLt's fastest BF16 kernels want). Flops 2mnk against the BF16 tensor ceiling;
// bytes 2(mk + nk + mn), A and B read once and D written once, against the copy ceiling (reads
// and a write): what places the GEMM on the roofline.
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/reference_gemm.cuh>

#include <cstdint>

namespace kernels {

struct GemmBf16 {
  int64_t m, n, k;
  bench::DeviceSpan<const __nv_bfloat16> a, b;
  bench::DeviceSpan<__nv_bfloat16> d;
  GemmBf16(bench::Setup& s, int64_t m_, int64_t n_, int64_t k_)
      : m(m_),
        n(n_),
        k(k_),
        a(s.input<__nv_bfloat16>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<__nv_bfloat16>("b", n * k, bench::uniform(-1, 1))),
        d(s.output<__nv_bfloat16>("d", m * n)) {
    s.flops(2.0 * m * n * k, bench::ceiling::bf16);
    s.bytes(double(a.bytes() + b.bytes() + d.bytes()));  // fewest bytes: A, B read; D written
  }
};

// Double CPU reference for the verification size; the simple GPU GEMM for the timing size.
inline void reference_gemm_bf16(const GemmBf16& w, bench::HostData& h) {
  reference_gemm_tn(h.input<__nv_bfloat16>("a"), h.input<__nv_bfloat16>("b"), h.expected("d"), w.m,
                    w.n, w.k);
}
inline void device_reference_gemm_bf16(const GemmBf16& w, cudaStream_t stream) {
  reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

}  // namespace kernels
