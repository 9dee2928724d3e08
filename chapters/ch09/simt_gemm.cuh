// ch09/simt_gemm.cuh: the two SIMT GEMM kernels of micro_tiling_matmul, templated on the element
// types so tensor_core_gemm can start its ladder from the best SIMT kernel on BF16 inputs.
//   D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major), FP32 accumulate.
// Any shape: tiles are zero-filled past the edges and stores are bounds-checked.
#pragma once

#include <bench/bench.hpp>

#include <cstdint>

namespace ch09 {

// --- 32 x 32 shared tiles, one output per thread ---------------------------------------------
constexpr int kTile = 32;

template <class In, class Out>
__global__ void __launch_bounds__(kTile * kTile) tiled_gemm(const In* __restrict__ a, const In* __restrict__ b,
                                                           Out* __restrict__ d, int m, int n, int k) {
  __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];  // [row or column][p], padded
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row0 = blockIdx.x * kTile, col0 = blockIdx.y * kTile;
  float acc = 0.0f;
  for (int p0 = 0; p0 < k; p0 += kTile) {
    as[ty][tx] = row0 + ty < m && p0 + tx < k ? float(a[(row0 + ty) * k + p0 + tx]) : 0.0f;
    bs[ty][tx] = col0 + ty < n && p0 + tx < k ? float(b[(col0 + ty) * k + p0 + tx]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTile; ++q) acc += as[tx][q] * bs[ty][q];
    __syncthreads();
  }
  if (row0 + tx < m && col0 + ty < n) d[(col0 + ty) * m + row0 + tx] = Out(acc);
}

// --- 128 x 128 block tile, 8 x 8 outputs per thread ---------------------------------------------
constexpr int kMicroBM = 128, kMicroBN = 128, kMicroBK = 8, kMicroThreads = 256;

// Thread t fetches 4 consecutive k of row (or column) t / 2 of a 128 x 8 tile, zero past edges.
template <class In>
__device__ __forceinline__ void fetch_tile(const In* __restrict__ src, int64_t rows, int k, int64_t row0, int p0,
                                           float (&r)[4]) {
  const int64_t row = row0 + threadIdx.x / 2;
  const int p = p0 + (threadIdx.x % 2) * 4;
#pragma unroll
  for (int q = 0; q < 4; ++q) r[q] = row < rows && p + q < k ? float(src[row * k + p + q]) : 0.0f;
}
// ... and stores them k-major: tile[p][row].
__device__ __forceinline__ void stash_tile(float (*tile)[kMicroBM], const float (&r)[4]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) tile[(threadIdx.x % 2) * 4 + q][threadIdx.x / 2] = r[q];
}

template <class In, class Out>
__global__ void __launch_bounds__(kMicroThreads) micro_tiled_gemm(const In* __restrict__ a, const In* __restrict__ b,
                                                                  Out* __restrict__ d, int m, int n, int k) {
  __shared__ __align__(16) float as[2][kMicroBK][kMicroBM], bs[2][kMicroBK][kMicroBN];
  const int64_t row0 = blockIdx.x * int64_t{kMicroBM}, col0 = blockIdx.y * int64_t{kMicroBN};
  const int tr = (threadIdx.x % 16) * 4, tc = (threadIdx.x / 16) * 4;  // micro-tile origin
  float acc[8][8] = {};
  float ra[4], rb[4];
  fetch_tile(a, m, k, row0, 0, ra);
  fetch_tile(b, n, k, col0, 0, rb);
  stash_tile(as[0], ra);
  stash_tile(bs[0], rb);
  __syncthreads();
  int buf = 0;
  for (int p0 = 0; p0 < k; p0 += kMicroBK) {
    const bool more = p0 + kMicroBK < k;
    if (more) {  // next tile into registers while this one is used
      fetch_tile(a, m, k, row0, p0 + kMicroBK, ra);
      fetch_tile(b, n, k, col0, p0 + kMicroBK, rb);
    }
#pragma unroll
    for (int p = 0; p < kMicroBK; ++p) {
      float x[8], y[8];
      *reinterpret_cast<float4*>(x) = *reinterpret_cast<const float4*>(&as[buf][p][tr]);
      *reinterpret_cast<float4*>(x + 4) = *reinterpret_cast<const float4*>(&as[buf][p][tr + 64]);
      *reinterpret_cast<float4*>(y) = *reinterpret_cast<const float4*>(&bs[buf][p][tc]);
      *reinterpret_cast<float4*>(y + 4) = *reinterpret_cast<const float4*>(&bs[buf][p][tc + 64]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
    }
    if (more) {
      stash_tile(as[buf ^ 1], ra);
      stash_tile(bs[buf ^ 1], rb);
    }
    __syncthreads();
    buf ^= 1;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t col = col0 + tc + (j % 4) + (j / 4) * 64;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t row = row0 + tr + (i % 4) + (i / 4) * 64;
      if (row < m && col < n) d[col * m + row] = Out(acc[i][j]);
    }
  }
}

template <class In, class Out>
void launch_tiled_gemm(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const dim3 grid(unsigned((m + kTile - 1) / kTile), unsigned((n + kTile - 1) / kTile));
  tiled_gemm<<<grid, dim3(kTile, kTile), 0, stream>>>(a, b, d, int(m), int(n), int(k));
  BENCH_CHECK_LAUNCH();
}

template <class In, class Out>
void launch_micro_tiled_gemm(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  const dim3 grid(unsigned((m + kMicroBM - 1) / kMicroBM), unsigned((n + kMicroBN - 1) / kMicroBN));
  micro_tiled_gemm<<<grid, kMicroThreads, 0, stream>>>(a, b, d, int(m), int(n), int(k));
  BENCH_CHECK_LAUNCH();
}

}  // namespace ch09
