// ch20/group_attention_mma.cuh: one KV head's query heads over a chunk of the cache, on mma.sync,
// the operands loaded from global memory straight into fragment registers (ch20's megakernel rung
// `megakernel_attention_mma`, its attention phase).
//
// Why: rung 7's attention phase (kernels/decode_attention.cuh's attend_split, a CTA per query
// head and chunk) widens, multiplies and reduces every K and V row once for each of the group's 4
// query heads, about 300 instructions a warp for 8 keys of one head (Nsight Compute's count at
// batch 1, H200), and its warp stall samples by source line put only about a quarter of that
// phase's samples on waits for K and V. Here a CTA serves the whole group from one read, and the
// tensor cores do the products: a warp's 16 keys cost 16 MMAs for S, 16 for P V and 32 byte
// permutes, for all the heads. It pays from batch 2 up, where the phase is work; at batch 1 the
// phase takes the same time either way, a chain of dependent round trips rather than issue (ch20's
// README, "Rung 7c", has both).
//
// Shared memory is not used for K and V: the megakernel's weight streams need the L1 room (ch20's
// README: staging W_o in shared memory slowed every other phase), so each lane loads exactly the
// bytes its fragments hold, 16-byte loads, and the layouts below are chosen so that it can.
//
// S = Q K^T, m16n8k16 (kernels/mma_bf16.cuh's fragments; g = lane / 4, t = lane % 4): rows are the
// group's query heads (rows past the group are zeros), columns 8 keys, k the head dimension. A dot
// product does not care in which order it visits the dimensions, so k-step ks's 16 logical k are
// mapped to physical dimensions 32 t + 4 ks + {0, 1} (a0, b0) and 32 t + 4 ks + {2, 3} (a2, b1):
// over the 8 steps lane (g, t) then needs dimensions [32 t, 32 t + 32) of its query row g and of
// its key row g, 64 contiguous bytes each (4 loads), word 2 ks and 2 ks + 1 at step ks.
//
// O^T = V^T P^T, m16n8k8, per 8-key tile: rows are 16 dimensions (m-tile mt's row r is dimension
// 16 r + 2 mt for r < 8, 16 (r - 8) + 2 mt + 1 past it: lane g's two rows over the 8 m-tiles are
// dimensions [16 g, 16 g + 16), 32 contiguous bytes), k the tile's 8 keys, columns the query heads.
// P^T's B fragment (keys 2t, 2t + 1; head g) is exactly what S's C fragment left in the lane (head
// g; keys 2t, 2t + 1), packed to BF16: no shuffle. V^T's A fragment pairs two keys of one
// dimension, so a lane loads V rows 2t and 2t + 1 of the tile (32 bytes each) and pairs their
// halves with one byte permute a register.
//
// Each warp takes 16 keys a step (two tiles; K's 8 and V's 8 loads issued before the first MMA:
// 256 bytes a lane in flight), the CTA's 8 warps 128 consecutive keys; keys past the chunk or the
// cache load as zeros and score -inf. At the end the warps' (m, l, o) meet in shared memory and
// the CTA writes one partial a query head, in the slots and units decode::finish_pass uses (m in
// log2 units of the scaled score, l = sum 2^(s - m), o = sum 2^(s - m) v), so the megakernel's
// per-head merge reads them unchanged.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <kernels/bf16_pack.cuh>
#include <kernels/decode_attention.cuh>
#include <kernels/mma_bf16.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/vector_access.cuh>

#include "decoder_layer.cuh"

namespace ch20::group_mma {

constexpr int kMaxGroup = 8;                      // query heads a KV head: the N of P V's MMA
constexpr int kWarpKeys = 16;                     // keys a warp takes a step: two 8-key tiles
constexpr int kCtaStepKeys = kWarps * kWarpKeys;  // 128
static_assert(kWarps == kernels::decode::kWarps, "the warps' merge is decode's (merge_warps)");
constexpr int kVectorsPerRow = kHeadDim / kernels::kBf16PerVector;  // 16

struct Args {
  const bf16* q;  // [token][q_heads][128]; KV head kv's group is heads kv x group ..
  const bf16* k;  // [token][kv_heads][n_k][128]
  const bf16* v;
  float* part_ml;      // [token x q_heads][splits][2]
  float* part_o;       // [token x q_heads][splits][128]
  int64_t n_k, chunk;  // chunk: keys a split, a multiple of kCtaStepKeys
  int splits, group, q_heads, kv_heads;
};

// The CTA's shared memory for the warps' merge: o [warp][group][128], then (m, l) [warp][group].
inline constexpr size_t smem_bytes(int group) {
  return size_t(kWarps) * group * (kHeadDim + 2) * sizeof(float);
}

// KV pair `pair` (token x kv_heads + KV head): its group's first query head, token x q_heads + KV
// head x group.
__device__ __forceinline__ int64_t first_query_head(int64_t pair, int q_heads, int kv_heads,
                                                    int64_t group) {
  return pair / kv_heads * q_heads + pair % kv_heads * group;
}

// Pair `pair` (token x kv_heads + KV head), keys [split x chunk, + chunk): the partials of its
// group's query heads, slot (bh x splits + split) for bh = token x q_heads + kv x group + head.
// Every thread of the CTA calls it; it synchronizes the CTA once, and the caller must synchronize
// before smem is written again.
__device__ __forceinline__ void attend(const Args& a, int64_t pair, int split, float* smem) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t bh0 = first_query_head(pair, a.q_heads, a.kv_heads, a.group);
  const int64_t begin = int64_t{split} * a.chunk, end = min(begin + a.chunk, a.n_k);
  const auto* k_rows = reinterpret_cast<const uint4*>(a.k) + pair * a.n_k * kVectorsPerRow;
  const auto* v_rows = reinterpret_cast<const uint4*>(a.v) + pair * a.n_k * kVectorsPerRow;

  // Query head g's dimensions [32 t, 32 t + 32) as A words (zeros past the group). q was written
  // in this launch (before a grid barrier): plain loads, not the read-only path.
  uint32_t qa[16];
  {
    uint4 raw[4] = {};
    if (g < a.group) {
      const auto* row = reinterpret_cast<const uint4*>(a.q + (bh0 + g) * kHeadDim) + 4 * t;
#pragma unroll
      for (int i = 0; i < 4; ++i) raw[i] = row[i];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      qa[4 * i] = raw[i].x, qa[4 * i + 1] = raw[i].y, qa[4 * i + 2] = raw[i].z,
             qa[4 * i + 3] = raw[i].w;
  }

  const float scale = kernels::kLog2e * rsqrtf(float(kHeadDim));  // scores in log2 units
  float m = kernels::kEmptyMax;  // head g's running max (the row's 4 lanes agree)
  float l = 0.0f;                // this lane's share of head g's sum, reduced at the end
  float o[8][4] = {};            // O^T, m-tile mt: (dim 16g + 2mt, heads 2t, 2t+1), (dim + 1, same)
  for (int64_t k0 = begin + warp * kWarpKeys; k0 < end; k0 += kCtaStepKeys) {
    // Tile j: K row k0 + 8j + g, vectors 4t .. 4t + 3; V rows k0 + 8j + 2t + e, vectors 2g, 2g + 1.
    uint4 kr[2][4], vr[2][2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t key = k0 + 8 * j + g;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        kr[j][i] = key < end ? kernels::load_stream(k_rows + key * kVectorsPerRow + 4 * t + i)
                             : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t v_key = k0 + 8 * j + 2 * t + e;
#pragma unroll
        for (int i = 0; i < 2; ++i)
          vr[j][e][i] = v_key < end
                            ? kernels::load_stream(v_rows + v_key * kVectorsPerRow + 2 * g + i)
                            : make_uint4(0, 0, 0, 0);
      }
    }
    // S, scaled, keys past the end at -inf: sc[j][e] is (head g, key k0 + 8j + 2t + e).
    float sc[2][2], top = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const auto* kw = reinterpret_cast<const uint32_t*>(kr[j]);
      float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint32_t qf[4] = {qa[2 * ks], 0u, qa[2 * ks + 1], 0u};
        kernels::mma_bf16_m16n8k16(s, qf, kw[2 * ks], kw[2 * ks + 1]);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[j][e] = k0 + 8 * j + 2 * t + e < end ? s[e] * scale : -INFINITY;
        top = fmaxf(top, sc[j][e]);
      }
    }
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    const float m_new = fmaxf(m, top), corr = kernels::exp2_ftz(m - m_new);
    m = m_new;
    l *= corr;
    // O^T's columns are heads 2t and 2t + 1, whose factors lanes 8t and 8t + 4 computed.
    const float corr_lo = __shfl_sync(0xffffffffu, corr, 8 * t),
                corr_hi = __shfl_sync(0xffffffffu, corr, 8 * t + 4);
#pragma unroll
    for (int mt = 0; mt < 8; ++mt)
      o[mt][0] *= corr_lo, o[mt][1] *= corr_hi, o[mt][2] *= corr_lo, o[mt][3] *= corr_hi;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p0 = kernels::exp2_ftz(sc[j][0] - m_new),
                  p1 = kernels::exp2_ftz(sc[j][1] - m_new);
      l += p0 + p1;
      const uint32_t pb = kernels::pack_bf16x2(p0, p1);  // P^T's B: keys 2t, 2t + 1; head g
      const auto* v0 = reinterpret_cast<const uint32_t*>(vr[j][0]);  // key 2t: dims 16g .. +15
      const auto* v1 = reinterpret_cast<const uint32_t*>(vr[j][1]);  // key 2t + 1
#pragma unroll
      for (int mt = 0; mt < 8; ++mt)
        kernels::mma_bf16_m16n8k8(o[mt], __byte_perm(v0[mt], v1[mt], 0x5410),
                                  __byte_perm(v0[mt], v1[mt], 0x7632), pb);
    }
  }

  // The warps' parts meet in shared memory; the CTA writes each head's partial.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  float* o_s = smem;                                 // [warp][group][128]
  float* ml_s = smem + kWarps * a.group * kHeadDim;  // [warp][group][2]
  if (t == 0 && g < a.group)
    ml_s[2 * (warp * a.group + g)] = m, ml_s[2 * (warp * a.group + g) + 1] = l;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int head = 2 * t + e;
    if (head < a.group)
#pragma unroll
      for (int mt = 0; mt < 8; ++mt)
        *reinterpret_cast<float2*>(o_s + (warp * a.group + head) * kHeadDim + 16 * g + 2 * mt) =
            make_float2(o[mt][e], o[mt][2 + e]);
  }
  __syncthreads();
  kernels::decode::merge_warps(o_s, ml_s, a.group,
                               [&](int head, int d, float mm, float ll, float oo) {
                                 const int64_t slot = (bh0 + head) * a.splits + split;
                                 a.part_o[slot * kHeadDim + d] = oo;
                                 if (d == 0) a.part_ml[2 * slot] = mm, a.part_ml[2 * slot + 1] = ll;
                               });
}

}  // namespace ch20::group_mma
