// ch10/mma_tile.cuh: the BF16 GEMM that double_buffered_gemm and tma_pipeline feed in different
// ways, and the tile math they share, so that between their variants only the loading changes.
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32 accumulate:
// the suite's TN layout. The kernels compute D^T (n x m, row-major: the same bytes) = B A^T, so
// X = B gives a CTA tile's rows and Y = A its columns, both k-contiguous, and a thread's pair of
// adjacent accumulators is two adjacent elements of D: one bf16x2 store.
//
// One CTA: a 128 x 128 tile of D^T, k in blocks of 32. 8 warps in 2 (rows) x 4 (columns), each
// 64 x 32 = 4 x 4 mma.sync.m16n8k16 (BF16 in, FP32 accumulate; 64 accumulators a thread),
// operands loaded from shared memory with ldmatrix.x4 (4 for X and 2 for Y per 16 of k).
// A stage is an X block and a Y block, 128 rows x 64 bytes each: 16 KiB. Rows are stored in the
// 64-byte swizzle, 16-byte chunk c of row r at chunk c ^ ((r / 2) % 4): the pattern TMA's
// CU_TENSOR_MAP_SWIZZLE_64B writes (CUTLASS's Swizzle<2,4,3>, the one it picks for 32-element
// BF16 rows; the 128-byte swizzle needs 128-byte rows), so cp.async and TMA fill the same layout
// and one ldmatrix routine reads both. Why swizzle: an ldmatrix phase reads 8 rows at one chunk;
// unswizzled, rows 64 bytes apart put rows r and r + 2 on the same banks (4-way conflict);
// swizzled, the 8 addresses cover all 32 banks once.
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/async_copy.cuh>
#include <kernels/gemm_bf16.cuh>
#include <kernels/tma.cuh>

#include <cstdint>
#include <string>

namespace ch10 {

using bf16 = __nv_bfloat16;

// Timing 4096^3; verification 256 x 384 x 224: m != n catches a transposed store, and 7
// k-blocks wrap a 4-stage ring (stage reuse, barrier parity flips).
struct GemmBf16 : kernels::GemmBf16 {
  explicit GemmBf16(bench::Setup& s)
      : kernels::GemmBf16(s, s.size("m", 4096, 256), s.size("n", 4096, 384),
                          s.size("k", 4096, 224)) {}
};

// --- the CTA tile -------------------------------------------------------------------------------
constexpr int kTileRows = 128;  // rows of D^T (columns of D), from X = B
constexpr int kTileCols = 128;  // columns of D^T (rows of D), from Y = A
constexpr int kBlockK = 32;     // one k-block: 64 bytes of BF16 per row
constexpr int kThreads = 256;   // 8 warps, 2 x 4, each 64 x 32
constexpr int kRowBytes = kBlockK * int(sizeof(bf16));
constexpr uint32_t kStageBytes = (kTileRows + kTileCols) * kRowBytes;  // 16 KiB

struct Stage {
  alignas(1024) bf16 x[kTileRows * kBlockK];  // 8 KiB, 1024-aligned: TMA's swizzle is address bits
  bf16 y[kTileCols * kBlockK];
};
static_assert(sizeof(Stage) == kStageBytes && kStageBytes % 1024 == 0, "stages stay 1024-aligned");

// Dynamic shared memory: `stages` stages, `extra` bytes after them, 1024 to align the base.
constexpr size_t ring_bytes(int stages, size_t extra = 0) {
  return stages * sizeof(Stage) + extra + 1024;
}
__device__ __forceinline__ Stage* align_ring(uint8_t* raw) {
  return &kernels::tma::aligned_1024<Stage>(raw);
}

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in an X or Y block.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return uint32_t(row * kRowBytes + ((chunk ^ ((row >> 1) & 3)) << 4));
}

// Four 8x8 BF16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and each lane
// receives (row lane / 4, columns 2 (lane % 4) + {0, 1}) of each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d (16 x 8, FP32) += a (16 x 16, row-major) * b (16 x 8, "col": k-contiguous per column).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A warp's 64 x 32 accumulators: [16-row tile i][8-column tile j][fragment].
using WarpAcc = float[4][4][4];

// One k-block of a warp's tile from a filled stage: 2 x (6 ldmatrix.x4 + 16 mma).
__device__ __forceinline__ void mma_k_block(WarpAcc& acc, const Stage& st, int warp_row,
                                            int warp_col, int lane) {
  const uint32_t x = kernels::cp_async::smem_addr(st.x), y = kernels::cp_async::smem_addr(st.y);
#pragma unroll
  for (int kk = 0; kk < kBlockK / 16; ++kk) {
    uint32_t xf[4][4], yf[2][4];
    // X (A operand): matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      ldmatrix_x4(xf[i], x + swizzled(warp_row * 64 + 16 * i + lane % 16, 2 * kk + lane / 16));
    }
    // Y (B operand), two 8-column tiles per load: (cols 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7),
    // (8-15, 8-15).
#pragma unroll
    for (int j = 0; j < 2; ++j)
      ldmatrix_x4(yf[j], y + swizzled(warp_col * 32 + 16 * j + 8 * (lane / 16) + lane % 8,
                                      2 * kk + (lane / 8) % 2));
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        mma_m16n8k16(acc[i][j], xf[i], yf[j / 2][2 * (j % 2)], yf[j / 2][2 * (j % 2) + 1]);
  }
}

// Epilogue, straight from registers: fragment {0, 1} is (row lane / 4, columns 2 (lane % 4) and
// the next) of its 16 x 8 tile, {2, 3} the same 8 rows lower. out is D^T: row-major, m wide.
__device__ __forceinline__ void store_warp_tile(const WarpAcc& acc, bf16* __restrict__ out,
                                                int64_t cols, int64_t row0, int64_t col0,
                                                int lane) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t row = row0 + 16 * i + lane / 4, col = col0 + 8 * j + 2 * (lane % 4);
      *reinterpret_cast<__nv_bfloat162*>(out + row * cols + col) =
          __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<__nv_bfloat162*>(out + (row + 8) * cols + col) =
          __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
    }
}

// Whole tiles only, on every variant: no edge code, so no variant pays for one.
inline std::string tiles_only(const GemmBf16& w) {
  if (w.m % kTileCols != 0 || w.n % kTileRows != 0 || w.k % kBlockK != 0 || w.k == 0)
    return "whole tiles only: needs m % 128 == 0, n % 128 == 0, k % 32 == 0, k > 0";
  return "";
}

// What both examples register besides their variants: whole tiles, the checks, ch09's GEMM bound.
// Applied with .with(gemm_checks).
inline void gemm_checks(bench::Example<GemmBf16>& example) {
  example.requires_that(tiles_only)
      .reference(kernels::reference_gemm_bf16)
      .device_reference(kernels::device_reference_gemm_bf16)
      .tolerance(bench::relative_l2(1e-2));
}

// The cp.async pipeline (double_buffered_gemm.cu) with 4 stages: that example's optimized
// variant and tma_pipeline's baseline.
void launch_cp_async_4stage(const GemmBf16& w, cudaStream_t stream);

}  // namespace ch10
