// kernels/reference_gemm.cuh: a simple, trusted GEMM for re-checking fast ones at their timing
// size (an example's .device_reference), where a CPU reference would take minutes, and the
// CPU double reference for the verification size.
//   D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major): the "TN" layout,
//   both operands k-contiguous. Inputs of any type convertible to float; FP32 products and sums,
//   each output summed over k in order. Not fast (CUDA cores, no tensor cores), just plainly right.
#pragma once

#include <bench/bench.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace kernels {

namespace detail {
// A CTA computes a kRefTile x kRefTile block of D, a thread kRefMicro x kRefMicro of it, over
// k-slices of kRefSlice staged in shared memory k-major (each operand element read once per CTA,
// and each thread reads its kRefMicro values of A and of B per k step as one 16-byte load, not
// two scalar loads per FMA). Every output is still one FP32 sum over p = 0, 1, ..., k - 1 in that
// order, one FMA a step, with zeros past k: the same operations as the one-output-per-thread form
// it replaced, so the same bits, about four times faster (shared memory, not the FMAs, bounded
// that form: two loads per FMA).
constexpr int kRefTile = 64, kRefSlice = 16, kRefMicro = 4;
constexpr int kRefThreads = (kRefTile / kRefMicro) * (kRefTile / kRefMicro);
constexpr int kRefPad = 4;  // keeps each k row 16-byte aligned; spreads the staging stores

template <class In>
__device__ void stage_slice(const In* __restrict__ x, int64_t first_row, int64_t rows, int64_t k,
                            int64_t p0, float (&s)[kRefSlice][kRefTile + kRefPad]) {
  // Consecutive threads read consecutive p of a row: coalesced, as both operands are k-contiguous.
  for (int e = threadIdx.x; e < kRefTile * kRefSlice; e += kRefThreads) {
    const int row = e / kRefSlice, p = e % kRefSlice;
    const int64_t r = first_row + row, q = p0 + p;
    s[p][row] = r < rows && q < k ? static_cast<float>(x[r * k + q]) : 0.0f;
  }
}

template <class In, class Out>
__global__ void __launch_bounds__(kRefThreads)
    reference_gemm_tn(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ d,
                      int m, int n, int k) {
  __shared__ __align__(16) float as[kRefSlice][kRefTile + kRefPad],
      bs[kRefSlice][kRefTile + kRefPad];
  const int ti = threadIdx.x % (kRefTile / kRefMicro), tj = threadIdx.x / (kRefTile / kRefMicro);
  const int64_t i0 = int64_t{blockIdx.x} * kRefTile, j0 = int64_t{blockIdx.y} * kRefTile;
  float acc[kRefMicro][kRefMicro] = {};
  for (int64_t p0 = 0; p0 < k; p0 += kRefSlice) {
    stage_slice(a, i0, m, k, p0, as);
    stage_slice(b, j0, n, k, p0, bs);
    __syncthreads();
#pragma unroll 8  // not 16: fully unrolled, ptxas (CUDA 13.0) spills
    for (int q = 0; q < kRefSlice; ++q) {
      const float4 av = *reinterpret_cast<const float4*>(&as[q][ti * kRefMicro]);
      const float4 bv = *reinterpret_cast<const float4*>(&bs[q][tj * kRefMicro]);
      const float ar[kRefMicro] = {av.x, av.y, av.z, av.w},
                  br[kRefMicro] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int r = 0; r < kRefMicro; ++r)
#pragma unroll
        for (int c = 0; c < kRefMicro; ++c) acc[r][c] = fmaf(ar[r], br[c], acc[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int c = 0; c < kRefMicro; ++c) {
    const int64_t j = j0 + tj * kRefMicro + c;
#pragma unroll
    for (int r = 0; r < kRefMicro; ++r) {
      const int64_t i = i0 + ti * kRefMicro + r;
      if (i < m && j < n) d[j * m + i] = Out(acc[r][c]);
    }
  }
}
}  // namespace detail

template <class In, class Out>
void reference_gemm_tn(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  using detail::kRefTile;
  const dim3 grid(static_cast<unsigned>((m + kRefTile - 1) / kRefTile), static_cast<unsigned>((n + kRefTile - 1) / kRefTile));
  detail::reference_gemm_tn<<<grid, detail::kRefThreads, 0, stream>>>(a, b, d, int(m), int(n),
                                                                      int(k));
  BENCH_CHECK_LAUNCH();
}

// The same product on the CPU in double, for an example's .reference at its verification size:
//   kernels::reference_gemm_tn(h.input<float>("a"), h.input<float>("b"), h.expected("d"), m, n, k);
template <class In>
void reference_gemm_tn(std::span<const In> a, std::span<const In> b, std::span<double> d, int64_t m, int64_t n,
                       int64_t k) {
  std::vector<double> column(static_cast<std::size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) column[p] = static_cast<float>(b[j * k + p]);
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<float>(a[i * k + p]) * column[p];
      d[j * m + i] = sum;
    }
  }
}

}  // namespace kernels
