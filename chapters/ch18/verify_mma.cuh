// ch18/verify_mma.cuh: the 8 draft queries of speculative verification on the tensor cores.
//
// Per (sequence, head) pair the work is two skinny GEMMs per tile of keys, with N = 8 = the draft
// queries, exactly the N of mma.sync m16n8k16 (kernels/mma_bf16.cuh has the fragment layouts):
//   S^T (16 keys x 8 queries)  = K (16 keys x 128)  . Q^T (128 x 8):   8 mma, k = the dimensions;
//   O^T (128 x 8 queries)     += V^T (128 x 16 keys) . P^T (16 keys x 8): 8 mma, k = the keys.
// K is the A operand as stored (ldmatrix), V^T the A operand of V stored key-major
// (ldmatrix.trans), Q^T's B fragments are read once from global memory and stay in 16 registers.
// The one mismatch: S^T comes out as a C fragment holding (key g, queries 2t, 2t+1) in lane
// 4g + t, and the second mma wants P^T as a B fragment holding (keys 2t, 2t+1, query g): the
// transpose of each 8 x 8 half. movmatrix.trans (sm_75+) transposes an 8 x 8 BF16 fragment across
// the warp in one instruction, so P goes from the first mma to the second in registers: pack to
// BF16, 2 movmatrix per 16 keys.
//
// One CTA: one pair and one chunk of its keys, 4 warps. K and V arrive in 64-key tiles (32 KB of
// K and V) through a 3-stage cp.async ring (kernels/async_copy.cuh): two tiles, 64 KB, in flight
// per CTA while it computes the third; 96 KB of shared memory lets 2 CTAs share an SM, 128 KB in
// flight per SM against the ~24 KB+ Little's law asks for (3 TB/s x ~1 us / 132 SMs). Warp w
// takes keys 16w..16w+15 of every tile and keeps its own online softmax
// (kernels/online_softmax.cuh) per query column in FP32: lane 4g + t holds columns 2t and 2t+1
// (m, l, and the O^T fragment of 8 x 4 floats); a column's max runs over the 8 lanes that share t
// (3 shuffles). At the end the 4 warps merge through shared memory (the ring, drained), and the
// CTA writes o / l or, with several splits, the partial (m, l, o) that kernels::decode::merge_splits folds
// (kernels/decode_attention.cuh's layout).
// Rows of the ring are 256 bytes; 16-byte chunk c of row r sits at c ^ (r % 8), so each ldmatrix
// phase (8 rows, one logical chunk) touches 8 distinct chunks: all 32 banks, no conflict.
#pragma once

#include <kernels/decode_attention.cuh>
#include <kernels/online_softmax.cuh>

#include <kernels/async_copy.cuh>
#include <kernels/mma_bf16.cuh>

namespace ch18 {

using kernels::decode::bf16;
using kernels::decode::kHeadDim;

constexpr int kMmaQueries = 8;  // = mma's N
constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaTileKeys = 16 * kMmaWarps;  // 64: one m16 tile of keys per warp
constexpr int kMmaStages = 3;
constexpr int kMmaRowChunks = kHeadDim * 2 / 16;  // 16-byte chunks per 256-byte row
constexpr int kMergeStride = kHeadDim + 4;  // floats; +4 spreads a fragment's stores over the banks

struct MmaRing {
  bf16 k[kMmaStages][kMmaTileKeys * kHeadDim];  // 3 x 16 KB
  bf16 v[kMmaStages][kMmaTileKeys * kHeadDim];  // 3 x 16 KB
};
struct MmaMerge {  // the drained ring, reused for the warps' (m, l, o)
  float o[kMmaWarps][kMmaQueries][kMergeStride];
  float ml[kMmaWarps][kMmaQueries][2];
};
static_assert(sizeof(MmaMerge) <= sizeof(MmaRing));
constexpr int kMmaSmemBytes = sizeof(MmaRing);

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of 256-byte rows.
__device__ __forceinline__ uint32_t swizzle_256(int row, int chunk) {
  return uint32_t(row * 256 + ((chunk ^ (row & 7)) << 4));
}

// The transpose of an 8 x 8 BF16 matrix held as one fragment register per lane (row lane / 4,
// columns 2 (lane % 4), +1), returned in the same layout.
__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
  uint32_t t;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(t) : "r"(x));
  return t;
}

// Grid (splits, pairs); args as kernels::decode::Args, K and V as its ContiguousKv, with n_q = kMmaQueries, q_first = 0 and a chunk
// that is a whole number of tiles.
__global__ void __launch_bounds__(kMmaThreads) verify_mma_attention(kernels::decode::Args a,
                                                                        kernels::decode::ContiguousKv kv) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  MmaRing& ring = *reinterpret_cast<MmaRing*>(smem_raw);
  const int64_t bh = blockIdx.y;
  const int split = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment row group and column pair
  const int64_t begin = split * a.chunk, end = min(begin + a.chunk, kv.n_k);
  const int tiles = int((end - begin + kMmaTileKeys - 1) / kMmaTileKeys);
  const bf16* k_pair = kv.k + bh * kv.n_k * kHeadDim;
  const bf16* v_pair = kv.v + bh * kv.n_k * kHeadDim;

  // Tile i's K and V rows into stage i % kMmaStages; rows past n_k are zero-filled (from row 0 of
  // the pair, in bounds), so an absent key's V is 0, never NaN bits under a zero weight.
  auto load_tile = [&](int i) {
    const int64_t key0 = begin + int64_t{i} * kMmaTileKeys;
    uint8_t* k_dst = reinterpret_cast<uint8_t*>(ring.k[i % kMmaStages]);
    uint8_t* v_dst = reinterpret_cast<uint8_t*>(ring.v[i % kMmaStages]);
#pragma unroll
    for (int u = 0; u < kMmaTileKeys * kMmaRowChunks / kMmaThreads; ++u) {
      const int idx = threadIdx.x + u * kMmaThreads, r = idx / kMmaRowChunks,
                c = idx % kMmaRowChunks;
      const bool inside = key0 + r < end;
      const int64_t src = (inside ? key0 + r : 0) * kHeadDim + c * 8;
      kernels::cp_async::copy16(k_dst + swizzle_256(r, c), k_pair + src, inside ? 16 : 0);
      kernels::cp_async::copy16(v_dst + swizzle_256(r, c), v_pair + src, inside ? 16 : 0);
    }
  };
#pragma unroll
  for (int i = 0; i < kMmaStages - 1; ++i) {
    if (i < tiles) load_tile(i);
    kernels::cp_async::commit();  // empty groups too: the wait count below stays uniform
  }

  // Q^T as B fragments for the 8 k-steps of 16 dimensions: (dims 2t, 2t+1 | 2t+8, 2t+9; query g).
  uint32_t qb[kHeadDim / 16][2];
  const auto* q_row = reinterpret_cast<const uint32_t*>(a.q + (bh * kMmaQueries + g) * kHeadDim);
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    qb[kk][0] = q_row[8 * kk + t], qb[kk][1] = q_row[8 * kk + 4 + t];

  // Columns h = 0, 1 of this lane are queries 2t + h; query qi sees keys j < visible0 + qi.
  const int64_t visible0 = kv.n_k - (kMmaQueries - 1);
  const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));  // scores in log2 units
  float o[kHeadDim / 16][4] = {}, m[2] = {kernels::kEmptyMax, kernels::kEmptyMax},
                     l[2] = {0.0f, 0.0f};
  using kernels::cp_async::smem_addr;
  for (int i = 0; i < tiles; ++i) {
    kernels::cp_async::wait<kMmaStages - 2>();
    __syncthreads();  // tile i landed for every thread; every warp is done with tile i - 1's stage
    if (i + kMmaStages - 1 < tiles) load_tile(i + kMmaStages - 1);  // into tile i - 1's stage
    kernels::cp_async::commit();
    const uint32_t k_tile = smem_addr(ring.k[i % kMmaStages]),
                   v_tile = smem_addr(ring.v[i % kMmaStages]);
    const int row0 = 16 * warp;  // this warp's 16 keys of the tile

    // S^T = K Q^T: c0, c1 = (key g; queries 2t, 2t+1), c2, c3 = (key g + 8; the same queries).
    float s[4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t ka[4];
      kernels::ldmatrix_x4(ka, k_tile + swizzle_256(row0 + lane % 16, 2 * kk + lane / 16));
      kernels::mma_bf16_m16n8k16(s, ka, qb[kk][0], qb[kk][1]);
    }
    // Online softmax per query column: mask, the column max over the 8 lanes sharing t, rescale.
    const int64_t key = begin + int64_t{i} * kMmaTileKeys + row0 + g;
    float m_new[2] = {m[0], m[1]};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool seen =
          key + 8 * (e / 2) < visible0 + 2 * t + e % 2;  // also false for keys past n_k
      s[e] = seen ? s[e] * scale : -INFINITY;
      m_new[e % 2] = fmaxf(m_new[e % 2], s[e]);
    }
    float c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int mask = 4; mask < 32; mask *= 2)
        m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], mask));
      c[h] = kernels::exp2_ftz(m[h] - m_new[h]);
      m[h] = m_new[h], l[h] *= c[h];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[e] = kernels::exp2_ftz(s[e] - m[e % 2]), l[e % 2] += s[e];  // p; 0 if masked
#pragma unroll
    for (int mt = 0; mt < kHeadDim / 16; ++mt)
      o[mt][0] *= c[0], o[mt][1] *= c[1], o[mt][2] *= c[0], o[mt][3] *= c[1];

    // O^T += V^T P^T: P^T's B fragments are the transposes of S^T's two 8 x 8 halves, in BF16.
    const uint32_t pb0 =
        transpose_8x8(kernels::pack_bf16x2(s[0], s[1]));  // (keys 2t, 2t+1; query g)
    const uint32_t pb1 =
        transpose_8x8(kernels::pack_bf16x2(s[2], s[3]));  // (keys 2t + 8, 2t + 9; query g)
#pragma unroll
    for (int mt = 0; mt < kHeadDim / 16; ++mt) {
      // Matrices 0-3: (dims 0-7, keys 0-7), (dims 8-15, keys 0-7), (dims 0-7, keys 8-15), (8-15,
      // 8-15).
      uint32_t va[4];
      kernels::ldmatrix_x4_trans(
          va, v_tile + swizzle_256(row0 + lane % 8 + 8 * (lane / 16), 2 * mt + (lane / 8) % 2));
      kernels::mma_bf16_m16n8k16(o[mt], va, pb0, pb1);
    }
  }

  // A column's l over its 8 lanes; then the 4 warps' parts merge through the drained ring.
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int mask = 4; mask < 32; mask *= 2) l[h] += __shfl_xor_sync(0xffffffffu, l[h], mask);
  kernels::cp_async::wait<0>();
  __syncthreads();  // no copy in flight and no warp still reading the ring
  MmaMerge& merge = *reinterpret_cast<MmaMerge*>(smem_raw);
#pragma unroll
  for (int mt = 0; mt < kHeadDim / 16; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) merge.o[warp][2 * t + e % 2][16 * mt + g + 8 * (e / 2)] = o[mt][e];
  if (g == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      merge.ml[warp][2 * t + h][0] = m[h], merge.ml[warp][2 * t + h][1] = l[h];
  __syncthreads();
  for (int idx = threadIdx.x; idx < kMmaQueries * kHeadDim; idx += kMmaThreads) {
    const int qi = idx / kHeadDim, d = idx % kHeadDim;
    float mm = merge.ml[0][qi][0], ll = merge.ml[0][qi][1], oo[1] = {merge.o[0][qi][d]};
#pragma unroll
    for (int w = 1; w < kMmaWarps; ++w) {
      const float ow[1] = {merge.o[w][qi][d]};
      kernels::merge_softmax_parts(mm, ll, oo, merge.ml[w][qi][0], merge.ml[w][qi][1], ow);
    }
    if (a.splits == 1) {
      a.out[(bh * kMmaQueries + qi) * kHeadDim + d] = __float2bfloat16(oo[0] / ll);
    } else {
      const int64_t slot = (bh * kMmaQueries + qi) * a.splits + split;  // merge_splits' layout
      a.part_o[slot * kHeadDim + d] = oo[0];
      if (d == 0) a.part_ml[2 * slot] = mm, a.part_ml[2 * slot + 1] = ll;
    }
  }
}

}  // namespace ch18
