// kernels/flash_attention_mma.cuh: the FlashAttention-2 forward pass of one 128-query block and
// one head on mma.sync (sm_80+), head_dim kD (128, or 64 for ch16's d64 twins), BF16 in and out,
// FP32 accumulate and softmax.
// Which keys a block walks, and which scores it masks, is a policy (`Walk`, below): every key
// (dense), keys up to the query (causal), or the kept blocks of a block mask (ch18).
//
// The kernel body: a CTA of 8 warps, each warp 16 query rows. Q's fragments stay in registers;
// K and V arrive in 64-key tiles through a 2-stage cp.async ring in shared memory (rows of 2 kD
// bytes, 16-byte chunk c of row r at c ^ (r % 8): an ldmatrix phase of 8 rows then covers all 32
// banks, at 256-byte rows and at d64's 128-byte ones alike). Per tile, per warp: S (16 x 64) by
// kD / 2 mma.sync m16n8k16 (kernels/mma_bf16.cuh), the online softmax on the S fragments (row max
// and sum over the quad of lanes that share a row), P packed to BF16 in registers as the A
// operand, O (16 x kD, FP32) += P V by kD / 2 more mma.sync with V read through ldmatrix.trans.
// Rows past `seq` are computed on zero-filled Q and not stored. d64 keeps the 64-key tiles: the
// Walk contract (and ch18's mask blocks of two tiles) counts them, and S stays 32 registers.
//
// A Walk is a small struct with these device members (t counts the block's 64-key tiles):
//   int tiles() const;                         how many tiles this block walks
//   int64_t first_key(int t) const;            the first key of tile t (tiles may skip keys)
//   bool masked(int t) const;                  tile t scores -inf throughout (p = 0)
//   bool visible(int64_t row, int64_t key) const;  the per-score mask (rows and keys < seq)
// Usage: a kernel of kFlashThreads threads with sizeof(FlashSmemD<kD>) bytes of dynamic shared
// memory (96 KiB at d128, 48 KiB at d64: the opt-in over 48 KiB is the caller's) calls
//   kernels::flash_attention_block<kD>(q + head, k + head, v + head, out + head, seq, qb, walk);
// (kD defaults to 128, kFlashHeadDim, which ch18 uses.)
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <kernels/async_copy.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/mma_bf16.cuh>
#include <kernels/online_softmax.cuh>

namespace kernels {

inline constexpr int kFlashHeadDim = 128;    // the default head dim (ch18's)
inline constexpr int kFlashQueryRows = 128;  // a CTA's query rows
inline constexpr int kFlashKeyTile = 64;     // keys per pipeline stage
inline constexpr int kFlashThreads = 256;    // 8 warps x 16 query rows

template <int kD>
struct FlashSmemD {
  static_assert(kD == 64 || kD == 128, "rows of 8 or 16 swizzled 16-byte chunks");
  __nv_bfloat16 q[kFlashQueryRows * kD];   // 32 KiB (d128), 16 KiB (d64)
  __nv_bfloat16 k[2][kFlashKeyTile * kD];  // 2 x 16 KiB, 2 x 8 KiB
  __nv_bfloat16 v[2][kFlashKeyTile * kD];  // 2 x 16 KiB, 2 x 8 KiB
};
using FlashSmem = FlashSmemD<kFlashHeadDim>;

namespace flash_detail {

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of 2 kD-byte rows.
template <int kD>
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return uint32_t(row * (kD * 2) + ((chunk ^ (row & 7)) << 4));
}

// Queues rows [row0, row0 + rows) of a [seq][kD] matrix into `tile`; rows past seq are zero-filled
// (from an in-bounds source: kernels/async_copy.cuh).
template <int kD>
__device__ __forceinline__ void load_rows(__nv_bfloat16* tile, const __nv_bfloat16* src,
                                          int64_t row0, int rows, int64_t seq) {
  constexpr int kRowChunks = kD * 2 / 16;  // 16-byte chunks per row
  for (int i = threadIdx.x; i < rows * kRowChunks; i += kFlashThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const bool inside = row0 + r < seq;
    cp_async::copy16(reinterpret_cast<uint8_t*>(tile) + swizzled<kD>(r, c),
                     src + (inside ? row0 + r : 0) * kD + c * 8, inside ? 16 : 0);
  }
}

}  // namespace flash_detail

// The end of a pass, for one warp's 16 query rows: each thread's partial row sums l[h] (rows
// row0 and row0 + 8) summed over its quad of lanes, then out[row] = O / l as BF16 straight from
// the fragments, rows past seq not stored. acc(j, e) is the FP32 output of row row0 + 8 (e / 2),
// column 8 j + 2 (lane % 4) + e % 2: the C fragment order of mma.sync and of wgmma alike. out has
// rows of kD.
template <int kD, class Acc>
__device__ __forceinline__ void flash_store_rows(float (&l)[2], int64_t row0, int64_t seq,
                                                 __nv_bfloat16* out, Acc acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int64_t row = row0 + 8 * h;
    if (row >= seq) continue;
    const float inv = 1.0f / l[h];
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
      *reinterpret_cast<__nv_bfloat162*>(out + row * kD + 8 * j + 2 * (lane % 4)) =
          __floats2bfloat162_rn(acc(j, 2 * h) * inv, acc(j, 2 * h + 1) * inv);
  }
}

// q, out: this head's [seq][kD]; k, v: the same head's [seq][kD]; qb: the query block.
template <int kD = kFlashHeadDim, class Walk>
__device__ __forceinline__ void flash_attention_block(const __nv_bfloat16* q,
                                                      const __nv_bfloat16* k,
                                                      const __nv_bfloat16* v, __nv_bfloat16* out,
                                                      int64_t seq, int qb, const Walk& walk) {
  using flash_detail::load_rows;
  using flash_detail::swizzled;
  constexpr int kKeys = kFlashKeyTile;
  extern __shared__ __align__(128) uint8_t flash_smem_raw[];
  FlashSmemD<kD>& sm = *reinterpret_cast<FlashSmemD<kD>*>(flash_smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles = walk.tiles();
  auto load_kv = [&](int t) {
    const int64_t key0 = walk.first_key(t);
    load_rows<kD>(sm.k[t % 2], k, key0, kKeys, seq);
    load_rows<kD>(sm.v[t % 2], v, key0, kKeys, seq);
  };
  load_rows<kD>(sm.q, q, int64_t{qb} * kFlashQueryRows, kFlashQueryRows, seq);
  load_kv(0);
  cp_async::commit();
  cp_async::wait<0>();
  __syncthreads();
  using cp_async::smem_addr;
  uint32_t qa[kD / 16][4];  // this warp's 16 query rows as A fragments, all of head_dim
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    ldmatrix_x4(qa[kk], smem_addr(sm.q) + swizzled<kD>(warp * 16 + lane % 16, 2 * kk + lane / 16));

  // Thread state for rows g and g + 8 of the warp's 16 (g = lane / 4): h = 0, 1.
  float o[kD / 8][4] = {}, m[2] = {kEmptyMax, kEmptyMax}, l[2] = {0.0f, 0.0f};
  const float scale = kLog2e / sqrtf(float(kD));
  const int64_t row0 = int64_t{qb} * kFlashQueryRows + warp * 16 + lane / 4;  // row of h = 0
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) load_kv(t + 1);  // into the other stage, freed by the barrier ending t - 1
    cp_async::commit();
    cp_async::wait<1>();
    __syncthreads();  // tile t has landed for every thread
    const uint32_t k_tile = smem_addr(sm.k[t % 2]), v_tile = smem_addr(sm.v[t % 2]);
    // S = Q K^T for 64 keys: 8 tiles of 16 x 8.
    float s[kKeys / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int j = 0; j < kKeys / 16; ++j) {
        uint32_t kf[4];
        const int key = 16 * j + lane % 8 + 8 * (lane / 16);
        ldmatrix_x4(kf, k_tile + swizzled<kD>(key, 2 * kk + (lane / 8) % 2));
        mma_bf16_m16n8k16(s[2 * j], qa[kk], kf[0], kf[1]);
        mma_bf16_m16n8k16(s[2 * j + 1], qa[kk], kf[2], kf[3]);
      }
    // Online softmax: masked tiles, masked scores and keys past seq score -inf.
    const bool masked = walk.masked(t);
    const int64_t key0 = walk.first_key(t) + 2 * (lane % 4);
    float m_new[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = key0 + 8 * j + e % 2;
        const bool seen = !masked && key < seq && walk.visible(row0 + 8 * (e / 2), key);
        s[j][e] = seen ? s[j][e] * scale : -INFINITY;
        m_new[e / 2] = fmaxf(m_new[e / 2], s[j][e]);
      }
    float c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 1));
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 2));
      c[h] = exp2_ftz(m[h] - m_new[h]);
      l[h] *= c[h], m[h] = m_new[h];
    }
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
      o[j][0] *= c[0], o[j][1] *= c[0], o[j][2] *= c[1], o[j][3] *= c[1];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = exp2_ftz(s[j][e] - m[e / 2]), l[e / 2] += s[j][e];
    // O += P V: P's C fragments repacked as A fragments, V's B fragments by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const float(&lo)[4] = s[2 * kk], (&hi)[4] = s[2 * kk + 1];  // keys 16kk + 0-7, 16kk + 8-15
      const uint32_t pa[4] = {pack_bf16x2(lo[0], lo[1]), pack_bf16x2(lo[2], lo[3]),
                              pack_bf16x2(hi[0], hi[1]), pack_bf16x2(hi[2], hi[3])};
#pragma unroll
      for (int jj = 0; jj < kD / 16; ++jj) {
        uint32_t vf[4];
        const int key = 16 * kk + lane % 8 + 8 * ((lane / 8) % 2);
        ldmatrix_x4_trans(vf, v_tile + swizzled<kD>(key, 2 * jj + lane / 16));
        mma_bf16_m16n8k16(o[2 * jj], pa, vf[0], vf[1]);
        mma_bf16_m16n8k16(o[2 * jj + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with stage t % 2 before tile t + 2 is queued into it
  }
  flash_store_rows<kD>(l, row0, seq, out, [&](int j, int e) { return o[j][e]; });
}

}  // namespace kernels
