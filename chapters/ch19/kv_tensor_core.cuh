// ch19/kv_tensor_core.cuh: kv_quantization's step "fp8_tensor_core", grouped-query decode over an
// E4M3 KV cache with both products on the tensor cores. The same CTA shape, chunking and end
// (kernels::decode::finish_pass) as the chapter's other rungs (kernels/decode_attention.cuh).
// Those do q.k and p.v as FP32 FMAs on the CUDA cores: 32 warp instructions a key for the 4
// queries, 12 more to widen the key's E4M3 values to FP32, ~87-93 a key in all (the PTX of their
// loops), which at half the bytes may take longer to issue than the cache takes to read (an
// estimate from those counts; ncu has not measured it). Here a warp takes 16 keys at a time and
// does them in 16 mma.sync m16n8k16 (FP16 operands, FP32 sums):
//   S (16 keys x 8 columns) = K (16 x 128) . Q^T (128 x 8): 8 k-steps of 16 dimensions;
//   O^T (128 dims x 8 columns) += V^T (128 x 16 keys) . P^T (16 x 8): 8 tiles of 16 dimensions.
// The 4 queries sit in the even columns (the odd ones are zero in Q^T and ignored in O^T), so
// lane (g = lane / 4, t = lane % 4) finds query t in its S and O fragments alike: its running max,
// sum and 16 output dimensions are one query's, and the rescale needs no shuffle.
// E4M3 values are all FP16 values, so cvt.rn.f16x2.e4m3x2 (one instruction, two values) widens
// exactly, and the codes go in unscaled: K's dequant multiplies the two scores a lane holds (not
// 64 K values), V's multiplies o once at the end (finish_pass). q, pre-scaled to log2 units,
// rounds to FP16 (2^-11 relative, BF16's input is coarser); p in [0, 1] too.
// The order of a sum's terms is free, and the mma does not care which memory byte a fragment slot
// holds as long as both operands agree, so each lane loads whole 16-byte pieces:
//   K (A operand, rows = keys g and g + 8): bytes [16t, 16t + 16) and [64 + 16t, 80 + 16t) of each
//     row; 32-bit word s (0-7) of those 32 bytes is k-step s, its low byte pair the k-slots
//     (2t, 2t + 1), its high pair (2t + 8, 2t + 9), exactly the A fragment after one cvt each.
//     Q^T (B) takes the same bytes of q, built once per CTA.
//   V (A operand of the second product, rows = dimensions, k = keys): lane (g, t) loads bytes
//     [16g, 16g + 16) of keys t, t + 4, t + 8 and t + 12. Dimension tile m's rows g and g + 8
//     are bytes 16g + 2m and 16g + 2m + 1; k-slots (2t, 2t + 1) are keys (t, t + 8), and
//     (2t + 8, 2t + 9) keys (t + 4, t + 12): one byte permute (PRMT) interleaves two keys'
//     words, then a cvt per fragment register. A lane's 16 output values are then dimensions
//     16g .. 16g + 15.
//   P^T (B): k-slots (2t', 2t' + 1) of column g' are keys (t', t' + 8) of query g' / 2, which is
//     what lane (g = t', t = g' / 2) holds after the softmax, packed as one FP16 pair: one shuffle
//     each for the two B registers.
// Every load of a warp covers whole 128-byte rows (8 rows' halves for K, 4 whole rows for V), and a
// warp has its next 16 keys' 4 KB in flight while it computes on the current ones.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <kernels/decode_attention.cuh>

namespace ch19::kv_tensor_core {

namespace decode = kernels::decode;
using decode::kHeadDim;

constexpr int kTileKeys = 16;
constexpr int kCtaStepKeys = decode::kWarps * kTileKeys;

// d (16 x 8, FP32) += a (16 x 16) . b (16 x 8), FP16 operands (kernels/mma_bf16.cuh's fragment
// layout, with FP16 in place of BF16).
__device__ __forceinline__ void mma_f16_m16n8k16(float (&d)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint32_t b0,
                                                 uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four E4M3 codes as two FP16 pairs, exactly: bytes 0, 1 of `word` into `low` (byte 0 in the lower
// half), bytes 2, 3 into `high`. One cvt.rn.f16x2.e4m3x2 each.
struct F16Pairs {
  uint32_t low, high;
};
__device__ __forceinline__ F16Pairs e4m3x4_to_f16(uint32_t word) {
  F16Pairs r;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      " cvt.rn.f16x2.e4m3x2 %1, hi;\n}"
      : "=r"(r.low), "=r"(r.high)
      : "r"(word));
  return r;
}
__device__ __forceinline__ uint32_t f16x2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Word s (0-7) of a lane's 32 K bytes: byte offset in the 128-byte row, for lane column t.
__device__ __forceinline__ int k_word_offset(int t, int s) {
  return (s < 4 ? 0 : kHeadDim / 2) + 16 * t + 4 * (s % 4);
}

// A warp's 16 keys from `at` (keys at or past `end` read as zeros). K: rows at + g and at + g + 8,
// 32 bytes each; V: rows at + t, at + t + 4, at + t + 8, at + t + 12, 16 bytes each.
constexpr int kRowVectors = kHeadDim / 16;  // 16-byte vectors in an E4M3 row
struct KTile {
  uint4 rows[2][2];  // [row g, row g + 8][bytes 16t.., 64 + 16t..]
};
struct VTile {
  uint4 rows[4];  // [key t + 4i], bytes 16g..
};
// 16 bytes of key `key`'s row from `vectors` (the lane's first vector of row 0 of the pair), or
// zeros for a key past the end (never NaN bits: p x v must be 0 there).
__device__ __forceinline__ uint4 load_piece(const uint4* vectors, int64_t row0, int64_t key,
                                            int64_t end) {
  return key < end ? kernels::load_stream(vectors + (row0 + key) * kRowVectors)
                   : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void load_k(const __nv_fp8_e4m3* k, int64_t row0, int64_t at,
                                       int64_t end, int g, int t, KTile& tile) {
  const auto* vectors = reinterpret_cast<const uint4*>(k) + t;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      tile.rows[r][h] = load_piece(vectors + 4 * h, row0, at + g + 8 * r, end);
}
__device__ __forceinline__ void load_v(const __nv_fp8_e4m3* v, int64_t row0, int64_t at,
                                       int64_t end, int g, int t, VTile& tile) {
  const auto* vectors = reinterpret_cast<const uint4*>(v) + g;
#pragma unroll
  for (int i = 0; i < 4; ++i) tile.rows[i] = load_piece(vectors, row0, at + t + 4 * i, end);
}

// 32-bit word w (0-3) of a 16-byte load.
__device__ __forceinline__ uint32_t word_of(const uint4& x, int w) {
  return w == 0 ? x.x : w == 1 ? x.y : w == 2 ? x.z : x.w;
}

// Two CTAs an SM, as the other rungs (119 registers, no spill: ptxas, sm_90a, CUDA 13.0), so the
// split count, and the grid, are theirs.
template <int kQ, class Kv>
__global__ void __launch_bounds__(decode::kThreads, 2) pass(decode::Args a, Kv kv) {
  static_assert(decode::RowsOf<Kv>::type::kScaled, "the E4M3 cache's rung");
  static_assert(kQ == 4, "4 queries, in the even columns of the 8-column mma");
  const int64_t bh = blockIdx.y;
  const int split = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  __shared__ alignas(16) float o_s[decode::kWarps][kQ][kHeadDim];  // finish_pass's
  __shared__ float ml_s[decode::kWarps][kQ][2];
  const int64_t begin = split * a.chunk, end = min(begin + a.chunk, kv.n_k);
  if (begin >= end) return;
  const float2 dequant = kv.scales(bh);

  // Q^T's B fragments, column g: query g / 2 for even g, zero for odd g.
  uint32_t qb[8][2];
  {
    const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
    const decode::bf16* q = a.q + (bh * a.n_q + a.q_first + g / 2) * kHeadDim;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int d = k_word_offset(t, s);
      float x[4] = {};
      if (g % 2 == 0)
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = __bfloat162float(q[d + e]) * scale;
      qb[s][0] = f16x2_bits(x[0], x[1]), qb[s][1] = f16x2_bits(x[2], x[3]);
    }
  }

  const int64_t row0 = kv.pair(bh).row(0);
  float m = kernels::kEmptyMax, l = 0.0f;  // query t's: m warp-wide, l over this lane's keys
  float o[8][4] = {};                      // O^T fragments: [dimension tile][c0..c3]
  KTile k_tile;
  VTile v_tile;
  const int64_t first = begin + warp * kTileKeys;
  if (first < end) {
    load_k(kv.k, row0, first, end, g, t, k_tile);
    load_v(kv.v, row0, first, end, g, t, v_tile);
  }
  for (int64_t at = first; at < end; at += kCtaStepKeys) {
    const int64_t at_next = at + kCtaStepKeys;
    float s[4] = {};  // S: (key g, query t), (key g, pad), (key g + 8, query t), (key g + 8, pad)
#pragma unroll
    for (int step = 0; step < 8; ++step) {
      // Rows g and g + 8, k-slots (2t, 2t + 1) from the low byte pair, (2t + 8, 2t + 9) the high.
      const F16Pairs kg = e4m3x4_to_f16(word_of(k_tile.rows[0][step / 4], step % 4)),
                     kg8 = e4m3x4_to_f16(word_of(k_tile.rows[1][step / 4], step % 4));
      mma_f16_m16n8k16(s, kg.low, kg8.low, kg.high, kg8.high, qb[step][0], qb[step][1]);
    }
    // This K tile is in the mma's registers now: the next one's loads go out at once, a whole
    // softmax and p.v ahead of their use (V's after the p.v, a whole q.k ahead).
    if (at_next < end) load_k(kv.k, row0, at_next, end, g, t, k_tile);
    // K's dequant scale, and -inf for keys past the end (their zero rows would score 0).
    const float s0 = at + g < end ? s[0] * dequant.x : -INFINITY;
    const float s1 = at + g + 8 < end ? s[2] * dequant.x : -INFINITY;
    float tile_max = fmaxf(s0, s1);
#pragma unroll
    for (int mask = 4; mask < 32; mask *= 2)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, mask));
    if (__any_sync(0xffffffffu, tile_max > m)) {  // warp-uniform; exact to skip (the factor is 1)
      const float m_new = fmaxf(m, tile_max), c = kernels::exp2_ftz(m - m_new);
      l *= c;
#pragma unroll
      for (int i = 0; i < 8; ++i) o[i][0] *= c, o[i][2] *= c;
      m = m_new;
    }
    const float p0 = kernels::exp2_ftz(s0 - m), p1 = kernels::exp2_ftz(s1 - m);
    l += p0 + p1;
    // P^T's B fragment, column g (query g / 2): keys (t, t + 8) from lane (t, g / 2), keys
    // (t + 4, t + 12) from lane (t + 4, g / 2).
    const uint32_t p_pair = f16x2_bits(p0, p1);
    const uint32_t pb0 = __shfl_sync(0xffffffffu, p_pair, 4 * t + g / 2);
    const uint32_t pb1 = __shfl_sync(0xffffffffu, p_pair, 4 * (t + 4) + g / 2);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      // Dimension tile i: rows g, g + 8 are bytes 2i, 2i + 1 of the lane's 16 (word i / 2).
      const uint32_t sel = i % 2 == 0 ? 0x5140u : 0x7362u;  // (x.b, y.b, x.b+1, y.b+1)
      // Keys t and t + 8 (k-slots 2t, 2t + 1), rows g (low pair) and g + 8 (high pair); then
      // keys t + 4 and t + 12 (k-slots 2t + 8, 2t + 9).
      const F16Pairs keys_t = e4m3x4_to_f16(
          __byte_perm(word_of(v_tile.rows[0], i / 2), word_of(v_tile.rows[2], i / 2), sel));
      const F16Pairs keys_t4 = e4m3x4_to_f16(
          __byte_perm(word_of(v_tile.rows[1], i / 2), word_of(v_tile.rows[3], i / 2), sel));
      mma_f16_m16n8k16(o[i], keys_t.low, keys_t.high, keys_t4.low, keys_t4.high, pb0, pb1);
    }
    if (at_next < end) load_v(kv.v, row0, at_next, end, g, t, v_tile);
  }

  // Lane (g, t) holds query t's dimensions 16g .. 16g + 15 (o[i][0]: 16g + 2i; o[i][2]: + 1).
#pragma unroll
  for (int mask = 4; mask < 32; mask *= 2) l += __shfl_xor_sync(0xffffffffu, l, mask);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    o_s[warp][t][16 * g + 2 * i] = o[i][0], o_s[warp][t][16 * g + 2 * i + 1] = o[i][2];
  if (g == 0) ml_s[warp][t][0] = m, ml_s[warp][t][1] = l;
  __syncwarp();
  // finish_pass takes the shared kernel's layout: lane `part` of each half-warp holds dimensions
  // 8 part .. 8 part + 7 of every query. Half 0 takes the warp's state, half 1 an empty part.
  const int half = lane / decode::kLanesPerKey, part = lane % decode::kLanesPerKey;
  float m_all[kQ], l_all[kQ], o_all[kQ][8];
#pragma unroll
  for (int j = 0; j < kQ; ++j) {
    m_all[j] = half == 0 ? ml_s[warp][j][0] : kernels::kEmptyMax;
    l_all[j] = half == 0 ? ml_s[warp][j][1] : 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o_all[j][e] = half == 0 ? o_s[warp][j][8 * part + e] : 0.0f;
  }
  __syncwarp();  // finish_pass rewrites these slots
  decode::finish_pass<kQ, true>(a, kv, bh, split, m_all, l_all, o_all, o_s, ml_s);
}

}  // namespace ch19::kv_tensor_core
