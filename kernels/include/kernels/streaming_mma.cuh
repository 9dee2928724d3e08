// kernels/streaming_mma.cuh: the weight-streaming GEMV of kernels/streaming_gemv.cuh on tensor
// cores, for 1 to 32 tokens: out = act · Wᵀ, BF16 weights [n][k] row-major, FP32 sums, the same
// Op hooks (row, fill_row, store) around the product.
//
// Why: the FP32 GEMV does 8 FMAs per weight element and token it streams. At 1 token that is far
// below the SMs' FMA rate and the bytes set the time; at 8 tokens a 16-byte weight load costs 64
// FMAs a lane, and the FMA issue rate, not HBM, sets the time (ch20 README). mma.sync m16n8k16
// (kernels/mma_bf16.cuh) does a 16 x 16 weight block times 16 x 8 tokens in one instruction, so the
// arithmetic stops mattering and the stream is the limit again.
//
// The stream is the FP32 GEMV's: 16-byte weight loads, 256 bytes a lane in flight, a persistent
// grid. What changes:
//   - A block owns a tile of kMmaTileGroups groups (32 rows: two m16 tiles), and its 8 warps split
//     k: warp w takes the slabs w, w + 8, ... of kMmaSlabK columns. A k-split inside the block,
//     not a warp per tile, because ch20's o and down projections have 4096 rows, 128 tiles: a warp
//     per 32-row tile would leave 7 of 8 warps idle and the bytes in flight 8x short.
//   - The k numbering inside a 32-column chunk makes each lane's 16-byte load its A fragment with
//     no shuffle. Lane (g = lane / 4, t = lane % 4) loads columns 8t..8t+7 of rows g and g + 8;
//     register pair j (j = 0..3, columns 8t+2j, 8t+2j+1) is, for MMA step s = j / 2, a0 / a1 when
//     j is even and a2 / a3 when odd: MMA step s's logical column 2t + c (c < 2) is physical
//     8t + 4s + c and 2t + 8 + c is 8t + 4s + 2 + c. A sum over k does not care about the order,
//     only that A and B agree: the lane loads the same 8 columns of token g for B, registers 2s
//     and 2s + 1 being b0 and b1.
//   - B comes from the activations in global memory (L2-resident: 917 KB at most, ch20's down at
//     32 tokens), straight into registers, not from shared memory: the 8 warps of a block read
//     disjoint k ranges, so nothing a warp would stage is read by another, and staging would be a
//     copy without reuse; the reuse is inside the warp, one B load serving both m16 tiles. The
//     loads bypass L1 (ld.global.cg): no other warp of the SM reads the same bytes, and the
//     buffer is rewritten by the fill kernel every step, so nothing stale may sit in L1. The
//     activations at 32 tokens x 14336 columns do not fit shared memory anyway, and the fill
//     hook writes whole rows (a norm needs the whole row): so Op::fill_row runs first, in a
//     kernel of its own (a block per token), into a global buffer [tokens][k]. The L2 reads of
//     B are tokens / 32 of the weight bytes (1x at 32 tokens, 1/4 at 8).
//   - Tokens beyond the count are zeros in the B fragment (never loaded, never stored): a tile is
//     8 tokens, so 2 to 4 tokens run 8-token MMAs. That costs tensor work (idle at these sizes),
//     no bytes; what 1 to 4 tokens do pay is the block's reduction and the fill kernel, which the
//     FP32 GEMV does not have (at 1 to 4 tokens its FMAs keep up with the bytes: the better
//     kernel there).
//   - The 8 warps' partial sums meet in shared memory, [warp][row][token] FP32; the block adds
//     them and calls op.store per (group, slot, token) with the token's sums of the group's slots.
// Weights are read before the kernel waits for the fill kernel (kernels/pdl.cuh): the first slab
// of each warp is in flight while the activations are being written.
// Limits: k a multiple of 8; groups of kRowsPerWarp rows as the FP32 GEMV's Op defines them.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/mma_bf16.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/pdl.cuh>
#include <kernels/streaming_gemv.cuh>
#include <kernels/vector_access.cuh>
#include <stdexcept>

namespace kernels::gemv {

constexpr int kMmaTileGroups = 8;                            // a block's tile: 32 rows
constexpr int kMmaTileRows = kMmaTileGroups * kRowsPerWarp;  // 32
constexpr int kMmaMTiles = kMmaTileRows / 16;                // m16 tiles a warp holds
constexpr int kMmaVectors = 4;  // 16-byte loads a lane has in flight per row, 2 rows per m16 tile:
                                // 2 x 2 x 4 x 16 = 256 bytes a lane, as the FP32 GEMV
constexpr int kMmaSlabK = kMmaVectors * 4 * kBf16PerVector;  // 128 columns a warp's slab
constexpr int kMmaMaxTokens = 32;
// Registers (ptxas, sm_90a, CUDA 13.0, ch20's epilogues): see the ch20 README's rung table.

// The fragment order the kernel uses, or, for the GPU test only, b0 and b1 swapped: the mistake a
// wrong k numbering makes, which the test must see.
enum class Fragments { correct, planted_b_swap };

// The weights a warp has in flight: w [m16 tile][row g or g + 8][vector].
using MmaSlab = uint4[kMmaMTiles][2][kMmaVectors];

// Loads slab `slab` of tile `tile`'s rows (zeros past k or past the last group).
template <class Op>
__device__ __forceinline__ void load_mma_slab(const bf16* weight, int64_t k, int64_t groups,
                                              const Op& op, int64_t tile, int64_t slab,
                                              MmaSlab& w) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t vectors = k / kBf16PerVector;
#pragma unroll
  for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m * 16 + h * 8 + g;  // row of the tile
      const int64_t group = tile * kMmaTileGroups + r / kRowsPerWarp;
      const uint4* row =
          group < groups
              ? reinterpret_cast<const uint4*>(weight + op.row(group, r % kRowsPerWarp) * k)
              : nullptr;
#pragma unroll
      for (int u = 0; u < kMmaVectors; ++u) {
        const int64_t v = slab * (kMmaSlabK / kBf16PerVector) + u * 4 + t;
        w[m][h][u] = row != nullptr && v < vectors ? load_stream(row + v) : make_uint4(0, 0, 0, 0);
      }
    }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// The prologue as a kernel of its own, a block per token: Op::fill_row writes act [token][0..k).
template <class Op>
__global__ void __launch_bounds__(kThreads) fill_activation_rows(Op op, bf16* act, int64_t k) {
  pdl::allow_dependents();  // the product's blocks may start streaming weights now
  pdl::wait_for_prerequisite();
  op.fill_row(act + blockIdx.x * k, int(blockIdx.x), k);
}

template <int kNTiles, Fragments kFragments, class Op>
__global__ void __launch_bounds__(kThreads, kNTiles <= 2 ? 2 : 1)
    stream_rows_mma(const bf16* weight, const bf16* act, int64_t k, int64_t groups, int tokens,
                    Op op) {
  constexpr int kTokens = kNTiles * 8, kStride = kTokens + 1;  // +1: fewer bank conflicts
  __shared__ float partial[kWarps][kMmaTileRows][kStride];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t vectors = k / kBf16PerVector;
  const int64_t slabs = (k + kMmaSlabK - 1) / kMmaSlabK;
  const int64_t tiles = (groups + kMmaTileGroups - 1) / kMmaTileGroups;
  const uint4* act_vectors = reinterpret_cast<const uint4*>(act);
  MmaSlab w;
  // The weights wait for nothing: each warp's first slab goes out before the activations exist.
  if (blockIdx.x < tiles && warp < slabs) load_mma_slab(weight, k, groups, op, blockIdx.x, warp, w);
  pdl::wait_for_prerequisite();
  pdl::allow_dependents();

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float acc[kMmaMTiles][kNTiles][4] = {};
    for (int64_t slab = warp; slab < slabs; slab += kWarps) {  // warp-uniform
      if (tile != blockIdx.x || slab != warp) load_mma_slab(weight, k, groups, op, tile, slab, w);
      uint4 b[kNTiles][kMmaVectors];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int u = 0; u < kMmaVectors; ++u) {
          const int token = n * 8 + g;
          const int64_t v = slab * (kMmaSlabK / kBf16PerVector) + u * 4 + t;
          b[n][u] = token < tokens && v < vectors ? __ldcg(act_vectors + token * vectors + v)
                                                  : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
      for (int u = 0; u < kMmaVectors; ++u)
#pragma unroll
        for (int s = 0; s < 2; ++s) {  // the two MMA steps of a 32-column chunk
#pragma unroll
          for (int m = 0; m < kMmaMTiles; ++m) {
            const uint32_t a[4] = {word(w[m][0][u], 2 * s), word(w[m][1][u], 2 * s),
                                   word(w[m][0][u], 2 * s + 1), word(w[m][1][u], 2 * s + 1)};
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) {
              const uint32_t b0 = word(b[n][u], 2 * s), b1 = word(b[n][u], 2 * s + 1);
              if constexpr (kFragments == Fragments::correct)
                mma_bf16_m16n8k16(acc[m][n], a, b0, b1);
              else
                mma_bf16_m16n8k16(acc[m][n], a, b1, b0);
            }
          }
        }
    }
    // C fragment: c0, c1 = (row g, tokens 2t, 2t + 1), c2, c3 = (row g + 8, the same tokens).
#pragma unroll
    for (int m = 0; m < kMmaMTiles; ++m)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          partial[warp][m * 16 + g + (i / 2) * 8][n * 8 + 2 * t + i % 2] = acc[m][n][i];
    __syncthreads();
    // A thread per (group, slot, token) of the tile, with the token's sums of the group's slots.
    const int per_group = kRowsPerWarp * tokens;
    for (int i = threadIdx.x; i < kMmaTileGroups * per_group; i += kThreads) {
      const int j = i / per_group, slot = i % per_group / tokens, token = i % tokens;
      const int64_t group = tile * kMmaTileGroups + j;
      if (group >= groups) continue;
      float sums[kRowsPerWarp] = {};
#pragma unroll
      for (int s = 0; s < kRowsPerWarp; ++s)
#pragma unroll
        for (int v = 0; v < kWarps; ++v) sums[s] += partial[v][j * kRowsPerWarp + s][token];
      op.store(group, slot, token, sums);
    }
    __syncthreads();  // the next tile's partials overwrite these
  }
}

// One projection's launches, planned untimed: the fill kernel and the product's kernel for the
// token tiles (8, 16, 24 or 32 tokens), its persistent grid, and the activation buffer. Each call
// launches both programmatically (kernels/pdl.cuh).
template <class Op>
class StreamingMma {
 public:
  StreamingMma(int tokens, int64_t groups, int64_t k, Fragments fragments = Fragments::correct)
      : tokens_(tokens), groups_(groups), k_(k), act_(size_t(tokens) * size_t(k)) {
    if (tokens < 1 || tokens > kMmaMaxTokens || k % kBf16PerVector != 0)
      throw std::invalid_argument("StreamingMma: 1 to 32 tokens, k a multiple of 8");
    if (fragments == Fragments::planted_b_swap) {
      if (tokens > 8)
        throw std::invalid_argument("StreamingMma: the planted mistake is 1-8 tokens");
      kernel_ = stream_rows_mma<1, Fragments::planted_b_swap, Op>;
    } else {
      switch ((tokens + 7) / 8) {
        case 1:
          kernel_ = stream_rows_mma<1, Fragments::correct, Op>;
          break;
        case 2:
          kernel_ = stream_rows_mma<2, Fragments::correct, Op>;
          break;
        case 3:
          kernel_ = stream_rows_mma<3, Fragments::correct, Op>;
          break;
        default:
          kernel_ = stream_rows_mma<4, Fragments::correct, Op>;
          break;
      }
    }
    const int64_t tiles = (groups + kMmaTileGroups - 1) / kMmaTileGroups;
    const int64_t resident = int64_t{sm_count()} * std::max(blocks_per_sm(kernel_, kThreads, 0), 1);
    grid_ = unsigned(std::min(tiles, resident));
  }
  void operator()(const bf16* weight, const Op& op, cudaStream_t s) const {
    pdl::launch(fill_activation_rows<Op>, dim3(unsigned(tokens_)), dim3(kThreads), 0, s, op,
                act_.data(), k_);
    pdl::launch(kernel_, dim3(grid_), dim3(kThreads), 0, s, weight,
                static_cast<const bf16*>(act_.data()), k_, groups_, tokens_, op);
  }

 private:
  int tokens_;
  int64_t groups_, k_;
  bench::DeviceBuffer<bf16> act_;
  void (*kernel_)(const bf16*, const bf16*, int64_t, int64_t, int, Op) = nullptr;
  unsigned grid_ = 0;
};

}  // namespace kernels::gemv
