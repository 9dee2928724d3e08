// ch09/tensor_core_gemm: one BF16 GEMM (FP32 accumulate, BF16 out) up the tensor-core ladder.
//
// D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major), BF16 in and out, FP32
// accumulate, at the axis `shape`: 4096^3, 8192^3 and ragged. Roofline: 2mnk flops
// over 2(mk + nk + mn) bytes = 1365 flop/byte at 4096^3 (2731 at 8192^3), against a BF16 ridge of
// ~990 TFLOP/s / 3.35 TB/s = ~300 flop/byte: compute-bound, and bound by *which* unit computes.
//
// The ladder:
//   1. baseline "simt_micro_tile": micro_tiling_matmul's best SIMT kernel (128 x 128 tiles, 8 x 8
//      per thread) on the BF16 inputs: FFMA on the FP32 pipe, ceiling ~60 TFLOP/s;
//   2. step "wmma": nvcuda::wmma 16x16x16 BF16 fragments (HMMA), 64 x 64 block tiles staged
//      through shared memory by ordinary loads, four warps of 32 x 32: the tensor cores do the
//      math but the loads, the synchronous staging and the small tile starve them;
//   3. optimized "wgmma_tma_4stage" (sm_90a, tensor_core_gemm_wgmma.cu): warpgroup-wide
//      wgmma.mma_async m64n256k16 (HGMMA) reading 128B-swizzled tiles that TMA copies into a
//      4-stage mbarrier ring, a producer warpgroup and two consumer warpgroups;
//   4. vendor "cublaslt": cuBLASLt BF16 matmul on the same buffers (kernels/cublaslt_gemm.hpp).
// shape:ragged (4095 x 4097 x 1023) shows the shapes the wgmma rung refuses: it
// needs m % 256, n % 128, k % 64 == 0 and says so through variant_requires; the other rungs
// handle any shape (zero-filled edge tiles, bounds-checked stores).
// Verification: relative L2 <= 1e-2 against a double CPU reference at 512 x 384 x 320 (a
// multiple of the wgmma tile; 255 x 257 x 129 for the ragged shape) and against
// kernels/reference_gemm.cuh (FP32 accumulate) at the timing size. Why 1e-2: the output is BF16
// (8 mantissa bits, ~2e-3 relative rounding each) and FP32 sums over k = 4096 in different
// orders; a BF16-accumulated product (~1e-1 over k = 4096) would fail.
//
//   ./bench compare --chapter ch09 --example tensor_core_gemm
#include <bench/bench.hpp>
#include <mma.h>

#include "simt_gemm.cuh"
#include "tensor_core_gemm.cuh"

namespace {

using ch09::bf16;
using kernels::GemmBf16;

// The axis `shape`: m x n x k when timing and when verifying (a multiple of the wgmma tile; odd
// sizes for ragged).
struct Dims {
  int64_t m, n, k, verify_m, verify_n, verify_k;
};
Dims dims_of(const std::string& shape) {
  if (shape == "8192") return {8192, 8192, 8192, 512, 384, 320};
  if (shape == "ragged") return {4095, 4097, 1023, 255, 257, 129};
  return {4096, 4096, 4096, 512, 384, 320};
}
struct Gemm : GemmBf16 {
  explicit Gemm(bench::Setup& s) : Gemm(s, dims_of(s.string_axis("shape"))) {}
  Gemm(bench::Setup& s, Dims d)
      : GemmBf16(s, s.size("m", d.m, d.verify_m), s.size("n", d.n, d.verify_n), s.size("k", d.k, d.verify_k)) {}
};

void launch_simt(const GemmBf16& w, cudaStream_t stream) {
  ch09::launch_micro_tiled_gemm(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

// --- step: WMMA ---------------------------------------------------------------------------------
namespace wmma = nvcuda::wmma;
constexpr int kWTile = 64, kWK = 32, kWLd = kWK + 8;  // +8 BF16 per row: off the bank pattern

__global__ void __launch_bounds__(128) wmma_gemm(const bf16* __restrict__ a, const bf16* __restrict__ b,
                                                 bf16* __restrict__ d, int m, int n, int k) {
  __shared__ __align__(32) bf16 as[kWTile][kWLd], bs[kWTile][kWLd];  // [row or column][p]
  __shared__ __align__(32) float cs[kWTile][kWTile + 4];              // [column][row]
  const int64_t row0 = blockIdx.x * int64_t{kWTile}, col0 = blockIdx.y * int64_t{kWTile};
  const int warp = threadIdx.x / 32, wr = (warp % 2) * 32, wc = (warp / 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& row : acc)
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  for (int p0 = 0; p0 < k; p0 += kWK) {
    for (int e = threadIdx.x; e < kWTile * kWK; e += blockDim.x) {  // coalesced along p, zero past edges
      const int r = e / kWK, p = e % kWK;
      as[r][p] = row0 + r < m && p0 + p < k ? a[(row0 + r) * k + p0 + p] : bf16(0.0f);
      bs[r][p] = col0 + r < n && p0 + p < k ? b[(col0 + r) * k + p0 + p] : bf16(0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kWK; p += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &as[wr + 16 * i][p], kWLd);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[wc + 16 * j][p], kWLd);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wc + 16 * j][wr + 16 * i], acc[i][j], kWTile + 4, wmma::mem_col_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kWTile * kWTile; e += blockDim.x) {  // coalesced along rows of column-major D
    const int c = e / kWTile, r = e % kWTile;
    if (row0 + r < m && col0 + c < n) d[(col0 + c) * m + row0 + r] = bf16(cs[c][r]);
  }
}

void launch_wmma(const GemmBf16& w, cudaStream_t stream) {
  const dim3 grid(unsigned((w.m + kWTile - 1) / kWTile), unsigned((w.n + kWTile - 1) / kWTile));
  wmma_gemm<<<grid, 128, 0, stream>>>(w.a.data(), w.b.data(), w.d.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch09, tensor_core_gemm, Gemm)
    .string_axis("shape", {"4096", "8192", "ragged"})
    // At 8192^3 the wgmma and cuBLASLt rungs hold the board at its power limit: timed sustained
    // (after a 1 s soak), as the tensor-core ceilings are, so the speedup does not depend on the
    // clock the limiter happened to allow (cold runs on one board disagreed: README).
    .mode_where([](const bench::Point& p) { return p.string_axis("shape") == "8192"; }, bench::Mode::sustained)
    .baseline("simt_micro_tile", launch_simt)
    .step("wmma", launch_wmma)
    .optimized("wgmma_tma_4stage", ch09::launch_wgmma_gemm, {.arch_specific = 90})
    .variant_requires([](const GemmBf16& w) { return ch09::wgmma_gemm_requires(w); })
    .stateful<kernels::CublasltGemmBf16>(bench::Role::vendor, "cublaslt")
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));

}  // namespace
