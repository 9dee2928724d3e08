// kernels/reference_gemm.cuh: a simple, trusted GEMM for re-checking fast ones at their timing
// size (an example's .device_reference), where a CPU reference would take minutes, and the
// CPU double reference for the verification size.
//   D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major): the "TN" layout,
//   both operands k-contiguous. Inputs of any type convertible to float; FP32 products and sums;
//   16 x 16 shared-memory tiles. Not fast (a few TFLOP/s), just plainly right.
#pragma once

#include <bench/bench.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace kernels {

namespace detail {
constexpr int kRefTile = 16;

template <class In, class Out>
__global__ void reference_gemm_tn(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ d, int m,
                                  int n, int k) {
  __shared__ float as[kRefTile][kRefTile + 1], bs[kRefTile][kRefTile + 1];
  const int i = blockIdx.x * kRefTile + threadIdx.x, j = blockIdx.y * kRefTile + threadIdx.y;
  const int64_t a_row = blockIdx.x * kRefTile + threadIdx.y, b_col = blockIdx.y * kRefTile + threadIdx.y;
  float acc = 0;
  for (int p0 = 0; p0 < k; p0 += kRefTile) {
    const int p = p0 + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = a_row < m && p < k ? static_cast<float>(a[a_row * k + p]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = b_col < n && p < k ? static_cast<float>(b[b_col * k + p]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kRefTile; ++q) acc += as[threadIdx.x][q] * bs[threadIdx.y][q];
    __syncthreads();
  }
  if (i < m && j < n) d[int64_t{j} * m + i] = Out(acc);
}
}  // namespace detail

template <class In, class Out>
void reference_gemm_tn(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  using detail::kRefTile;
  const dim3 grid(static_cast<unsigned>((m + kRefTile - 1) / kRefTile), static_cast<unsigned>((n + kRefTile - 1) / kRefTile));
  detail::reference_gemm_tn<<<grid, dim3(kRefTile, kRefTile), 0, stream>>>(a, b, d, int(m), int(n), int(k));
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
