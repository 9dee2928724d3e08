// ch20/layer_ops.cuh: the pieces of the decoder layer that rung 6 (streaming_gemv) and the
// megakernel share: the cache as kernels/decode_attention.cuh reads it, and the prologues and
// epilogues that kernels/streaming_gemv.cuh's projections run around their products (the RMSNorms,
// RoPE and the K/V append, the residual adds, SwiGLU). transformer_decode.cu's rung 6 comment says
// what each does in the step; the megakernel (ch20/megakernel.cuh) runs the same ones in its
// phases.
#pragma once

#include <kernels/bf16_pack.cuh>
#include <kernels/decode_attention.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/streaming_gemv.cuh>

#include "decoder_layer.cuh"

namespace ch20 {

namespace decode = kernels::decode;
namespace gemv = kernels::gemv;

// The cache as kernels/decode_attention.cuh reads it: pair bh (sequence x 32 + head) walks the
// rows of KV pair bh / group, [sequence][kv_head][past][128].
struct GqaCache {
  const bf16* k;
  const bf16* v;
  int64_t n_k;
  int64_t group;
  __device__ decode::PairKeys<decode::RowsFrom> pair(int64_t bh) const {
    return {n_k, {bh / group * n_k}};
  }
};

// act_row = rmsnorm(in [token]) · gain, rounded to BF16 as the rmsnorm kernel does; 16-byte
// accesses, by all gemv::kThreads threads of a block.
__device__ inline void fill_rmsnorm_row(const bf16* in, const bf16* gain, bf16* act_row, int token,
                                        int64_t k) {
  const int64_t vectors = k / kernels::kBf16PerVector;
  const uint4* gains = reinterpret_cast<const uint4*>(gain);
  const uint4* row = reinterpret_cast<const uint4*>(in + token * k);
  float sq = 0;
  for (int64_t i = threadIdx.x; i < vectors; i += gemv::kThreads) {
    float v[kernels::kBf16PerVector];
    kernels::unpack_bf16x8(row[i], v);
#pragma unroll
    for (int e = 0; e < kernels::kBf16PerVector; ++e) sq += v[e] * v[e];
  }
  const float inv_rms =
      rsqrtf(kernels::group_reduce<gemv::kThreads>(sq, kernels::Sum{}) / float(k) + kEps);
  for (int64_t i = threadIdx.x; i < vectors; i += gemv::kThreads) {
    float v[kernels::kBf16PerVector], g[kernels::kBf16PerVector];
    kernels::unpack_bf16x8(row[i], v);
    kernels::unpack_bf16x8(gains[i], g);
#pragma unroll
    for (int e = 0; e < kernels::kBf16PerVector; ++e) v[e] *= inv_rms * g[e];
    reinterpret_cast<uint4*>(act_row)[i] = kernels::pack_bf16x8(v);
  }
}

__device__ inline void fill_copy_row(const bf16* in, bf16* act_row, int token, int64_t k) {
  const uint4* src = reinterpret_cast<const uint4*>(in + token * k);
  for (int64_t i = threadIdx.x; i < k / kernels::kBf16PerVector; i += gemv::kThreads)
    reinterpret_cast<uint4*>(act_row)[i] = src[i];
}

// A group is two RoPE pairs of a q or k head (dims i, i + 1 and their partners i + 64, i + 65),
// or four dims of a v head: the lane of pair slot 0 or 1 rotates it with its partner's sum.
struct QkvRopeAppend {
  const bf16 *x, *norm1;
  bf16 *q, *k_new, *v_new;
  int q_heads, kv_heads;
  int64_t pos;
  static constexpr int kGroupsPerHead = kHeadDim / gemv::kRowsPerWarp, kHalf = kHeadDim / 2;
  __device__ int64_t row(int64_t group, int slot) const {
    const int64_t head = group / kGroupsPerHead, t = group % kGroupsPerHead;
    if (head < q_heads + kv_heads) return head * kHeadDim + 2 * t + slot % 2 + slot / 2 * kHalf;
    return head * kHeadDim + gemv::kRowsPerWarp * t + slot;
  }
  __device__ void fill_row(bf16* act_row, int token, int64_t k) const {
    fill_rmsnorm_row(x, norm1, act_row, token, k);
  }
  __device__ void store(int64_t group, int slot, int token,
                        const float (&sums)[gemv::kRowsPerWarp]) const {
    const int64_t head = group / kGroupsPerHead, t = group % kGroupsPerHead;
    if (head >= q_heads + kv_heads) {
      const int64_t v_head = head - q_heads - kv_heads;
      v_new[(token * kv_heads + v_head) * kHeadDim + gemv::kRowsPerWarp * t + slot] =
          __float2bfloat16(gemv::pick(sums, slot));
      return;
    }
    if (slot >= 2) return;  // the partner rows: rotated by slots 0 and 1
    const int i = int(2 * t) + slot;
    float c, s;
    rope_cos_sin(pos, i, c, s);
    const float x1 = gemv::pick(sums, slot), x2 = gemv::pick(sums, slot + 2);
    bf16* out = head < q_heads ? q + (token * q_heads + head) * kHeadDim
                               : k_new + (token * kv_heads + head - q_heads) * kHeadDim;
    out[i] = __float2bfloat16(x1 * c - x2 * s);
    out[i + kHalf] = __float2bfloat16(x2 * c + x1 * s);
  }
};

// out [t][j] = residual [t][j] + (in [t] · W [j]): the o projection (h = x + ...) and the down
// projection (y = h + ...), in groups of kRows rows (the megakernel's narrow groups: 2).
template <int kRows = gemv::kRowsPerWarp>
struct ResidualProjection {
  const bf16 *in, *residual;
  bf16* out;
  int64_t n;
  __device__ int64_t row(int64_t group, int slot) const { return group * kRows + slot; }
  __device__ void fill_row(bf16* act_row, int token, int64_t k) const {
    fill_copy_row(in, act_row, token, k);
  }
  __device__ void store(int64_t group, int slot, int token, const float (&sums)[kRows]) const {
    const int64_t j = token * n + row(group, slot);
    out[j] = __float2bfloat16(__bfloat162float(residual[j]) + gemv::pick(sums, slot));
  }
};

// silu(g) = g · sigmoid(g), with the fast exponential: every fused rung's SwiGLU uses this one (the
// FP32 rung 1 and the CPU reference keep the accurate expf).
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// A group is gate rows c, c + 1 and up rows ffn + c, ffn + c + 1: act = silu(gate) · up.
struct GateUpSwiglu {
  const bf16 *h, *norm2;
  bf16* act;
  int64_t ffn;
  __device__ int64_t row(int64_t group, int slot) const {
    return 2 * group + slot % 2 + slot / 2 * ffn;
  }
  __device__ void fill_row(bf16* act_row, int token, int64_t k) const {
    fill_rmsnorm_row(h, norm2, act_row, token, k);
  }
  __device__ void store(int64_t group, int slot, int token,
                        const float (&sums)[gemv::kRowsPerWarp]) const {
    if (slot >= 2) return;
    const float g = gemv::pick(sums, slot), u = gemv::pick(sums, slot + 2);
    act[token * ffn + 2 * group + slot] = __float2bfloat16(silu(g) * u);
  }
};

}  // namespace ch20
