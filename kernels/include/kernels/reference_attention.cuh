// kernels/reference_attention.cuh: plain, trusted attention out = softmax(q k^T / sqrt(d)) v with
// any key mask, on the GPU (an example's .device_reference at its timing size) and on the CPU in
// double (its .reference at the verification size). Head dimension kDim: 128 unless named (ch16's
// d64 twins call reference_attention<64>).
//
// Layout, per (batch, head) pair bh: q and out [bh][n_q][kDim], k and v [bh][n_k][kDim], BF16;
// on the GPU k and v 16-byte aligned (cudaMalloc gives 256; callers offset them by whole rows).
// `visible(qi, kj)` says whether query qi sees key kj (host and device callable); every query
// must see at least one key.
//
// The GPU version: one CTA per (8 consecutive queries, bh), a thread per output dimension. Keys go
// in tiles of kDim: the tile's K rows, then its V rows, are copied once into shared memory with
// 16-byte coalesced loads and serve all the CTA's queries (K and V cross from L2 once per 8
// queries, not once per query). For each query on its own: thread t scores key j0 + t (a
// sequential FP32 FMA chain over the dimensions, then times the scale), the tile's max and sum go
// through group_reduce's order over the block, accurate expf, and each output dimension
// accumulates p * v over the tile's keys in order. A query with no visible key in a tile leaves
// that tile out; a tile that no query of the CTA sees is not loaded at all. Slow (no tensor
// cores) and plainly right.
#pragma once

#include <cuda_bf16.h>

#include <bench/bench.hpp>
#include <cmath>
#include <cstdint>
#include <kernels/group_reduce.cuh>
#include <span>
#include <stdexcept>
#include <vector>

namespace kernels {

inline constexpr int kRefHeadDim = 128;

namespace detail {

// Queries a CTA serves: K and V cross from L2 once per 8 queries, and ch16's b1 s4096 (32 heads)
// still makes 16384 CTAs. A CTA with fewer queries (a decode step's 1) skips the absent ones'
// arithmetic, so decode pays nothing for the other 7.
inline constexpr int kRefQueriesPerBlock = 8;

// group_reduce<kThreads> of each of kCount values, every thread of the block receiving them: the
// same butterfly within each warp and the same fold of the warps' partials in warp order as one
// group_reduce call a value (so bit-identical results), with two barriers for all kCount.
template <int kThreads, int kCount, class Op>
__device__ __forceinline__ void group_reduce_each(float (&v)[kCount], Op op) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "a warp or a whole block");
  constexpr int kWarps = kThreads / 32;
#pragma unroll
  for (int i = 0; i < kCount; ++i) v[i] = warp_reduce(v[i], op);
  if constexpr (kWarps > 1) {
    __shared__ float warp_partials[kCount][kWarps];
    __syncthreads();  // a previous call's readers are done with the slots
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int i = 0; i < kCount; ++i) warp_partials[i][threadIdx.x / 32] = v[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      v[i] = warp_partials[i][0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v[i] = op(v[i], warp_partials[i][w]);
    }
  }
}

// A tile of kDim rows of kDim BF16 values in shared memory. Rows padded by 16 bytes: thread t
// reading 16 bytes of row t (the scores) then meets no bank conflict.
template <int kDim>
using RefTile = __nv_bfloat16[kDim][kDim + 8];

// Rows j0 .. j0 + kDim - 1 of `rows` ([n_k][kDim]) into `tile`, consecutive threads on
// consecutive 16-byte pieces; rows past n_k are zero.
template <int kDim>
__device__ __forceinline__ void load_ref_tile(RefTile<kDim>& tile, const __nv_bfloat16* rows,
                                              int64_t j0, int64_t n_k) {
  constexpr int kPieces = kDim / 8;
  for (int idx = threadIdx.x; idx < kDim * kPieces; idx += kDim) {
    const int r = idx / kPieces, c = idx % kPieces;
    uint4 piece = make_uint4(0, 0, 0, 0);
    if (j0 + r < n_k) piece = *reinterpret_cast<const uint4*>(rows + (j0 + r) * kDim + c * 8);
    *reinterpret_cast<uint4*>(&tile[r][c * 8]) = piece;
  }
}

// (kDim, 1): with the thread count alone ptxas held the d64 form to 64 registers, and it spilled.
template <int kDim, class Visible>
__global__ void __launch_bounds__(kDim, 1)
    reference_attention(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                        const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                        int64_t n_q, int64_t n_k, Visible visible) {
  constexpr int d = kDim, kQ = kRefQueriesPerBlock;
  static_assert(d % 32 == 0, "whole warps, whole 16-byte pieces");
  const int64_t q0 = int64_t(blockIdx.x) * kQ, bh = blockIdx.y;
  const int queries = int(n_q - q0 < kQ ? n_q - q0 : kQ);  // this CTA's, 1 .. kQ
  const int t = threadIdx.x;
  __shared__ alignas(16) RefTile<d> kv_tile;  // the tile's K rows, then its V rows
  __shared__ alignas(16) float q_rows[kQ][d];
  __shared__ alignas(16) float p_tile[d][kQ];  // [key in tile][query]
#pragma unroll
  for (int i = 0; i < kQ; ++i)
    q_rows[i][t] = i < queries ? __bfloat162float(q[(bh * n_q + q0 + i) * d + t]) : 0.0f;
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));
  float m[kQ], l[kQ], acc[kQ];
#pragma unroll
  for (int i = 0; i < kQ; ++i) m[i] = -INFINITY, l[i] = 0.0f, acc[i] = 0.0f;
  for (int64_t j0 = 0; j0 < n_k; j0 += d) {
    const int64_t j = j0 + t;
    unsigned sees = 0;  // bit i: query q0 + i sees key j
#pragma unroll
    for (int i = 0; i < kQ; ++i)
      if (i < queries && j < n_k && visible(q0 + i, j)) sees |= 1u << i;
    // Also the barrier that frees the previous tile's V and p_tile (at the first tile: publishes
    // q_rows).
    if (!__syncthreads_or(sees != 0)) continue;  // no query of this CTA sees a key of the tile
    load_ref_tile<d>(kv_tile, k_bh, j0, n_k);
    __syncthreads();

    float s[kQ];
#pragma unroll
    for (int i = 0; i < kQ; ++i) s[i] = 0.0f;
    for (int e0 = 0; e0 < d; e0 += 8) {
      alignas(16) __nv_bfloat16 k8[8];  // key j's dimensions e0 .. e0 + 7
      *reinterpret_cast<uint4*>(k8) = *reinterpret_cast<const uint4*>(&kv_tile[t][e0]);
#pragma unroll
      for (int i = 0; i < kQ; ++i) {
        if (i >= queries) continue;
        const float4* q4 = reinterpret_cast<const float4*>(&q_rows[i][e0]);  // two 16-byte loads
        const float4 lo = q4[0], hi = q4[1];
        const float q8[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int u = 0; u < 8; ++u) s[i] = fmaf(q8[u], __bfloat162float(k8[u]), s[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kQ; ++i) s[i] = (sees >> i & 1u) ? s[i] * scale : -INFINITY;

    float tile_max[kQ], p[kQ], c[kQ];
#pragma unroll
    for (int i = 0; i < kQ; ++i) tile_max[i] = s[i];
    group_reduce_each<d>(tile_max, Max{});  // its first barrier: every thread is done with K
    unsigned live = 0;  // bit i: query q0 + i sees a key of this tile (the same in every thread)
#pragma unroll
    for (int i = 0; i < kQ; ++i) {
      p[i] = 0.0f, c[i] = 1.0f;
      if (tile_max[i] != -INFINITY) {
        live |= 1u << i;
        const float m_new = fmaxf(m[i], tile_max[i]);
        p[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - m_new);
        c[i] = expf(m[i] - m_new);
        m[i] = m_new;
      }
      p_tile[t][i] = p[i];
    }
    group_reduce_each<d>(p, Sum{});  // now the tile's sums; its barriers publish p_tile
#pragma unroll
    for (int i = 0; i < kQ; ++i)
      if (live >> i & 1u) l[i] = fmaf(l[i], c[i], p[i]), acc[i] *= c[i];

    load_ref_tile<d>(kv_tile, v_bh, j0, n_k);
    __syncthreads();
    const int keys = int(n_k - j0 < d ? n_k - j0 : d);
    for (int e = 0; e < keys; ++e) {
      const float v_e = __bfloat162float(kv_tile[e][t]);
      float p_e[kQ];  // key e's p for every query: read whole (two 16-byte loads), used if live
#pragma unroll
      for (int i = 0; i < kQ; ++i) p_e[i] = p_tile[e][i];
#pragma unroll
      for (int i = 0; i < kQ; ++i)
        if (live >> i & 1u) acc[i] = fmaf(p_e[i], v_e, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kQ; ++i)
    if (i < queries) out[(bh * n_q + q0 + i) * d + t] = __float2bfloat16(acc[i] / l[i]);
}
}  // namespace detail

template <int kDim = kRefHeadDim, class Visible>
void reference_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         __nv_bfloat16* out, int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                         cudaStream_t stream) {
  if ((reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) % 16 != 0)
    throw std::invalid_argument("reference_attention: k and v must be 16-byte aligned");
  constexpr int kQ = detail::kRefQueriesPerBlock;
  detail::reference_attention<kDim><<<dim3(unsigned((n_q + kQ - 1) / kQ), unsigned(bh)), kDim, 0,
                                       stream>>>(q, k, v, out, n_q, n_k, visible);
  BENCH_CHECK_LAUNCH();
}

// The same in double from the BF16 inputs, into `out` [bh][n_q][kDim]. K and V may also be given
// as doubles (a cache dequantised on the host: ch19's FP8 KV cache).
inline double to_double(__nv_bfloat16 x) { return double(__bfloat162float(x)); }
inline double to_double(double x) { return x; }
template <int kDim = kRefHeadDim, class KvValue, class Visible>
void reference_attention(std::span<const __nv_bfloat16> q, std::span<const KvValue> k,
                         std::span<const KvValue> v, std::span<double> out, int64_t bh, int64_t n_q,
                         int64_t n_k, Visible visible) {
  constexpr int d = kDim;
  std::vector<double> s(static_cast<std::size_t>(n_k));
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < n_q; ++i) {
      const __nv_bfloat16* qr = q.data() + (b * n_q + i) * d;
      double m = -INFINITY;
      for (int64_t j = 0; j < n_k; ++j) {
        s[j] = -INFINITY;
        if (!visible(i, j)) continue;
        const KvValue* kr = k.data() + (b * n_k + j) * d;
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += to_double(qr[e]) * to_double(kr[e]);
        s[j] = dot / std::sqrt(double(d));
        m = std::fmax(m, s[j]);
      }
      double l = 0;
      double* o = out.data() + (b * n_q + i) * d;
      for (int e = 0; e < d; ++e) o[e] = 0;
      for (int64_t j = 0; j < n_k; ++j) {
        if (s[j] == -INFINITY) continue;
        const double p = std::exp(s[j] - m);
        l += p;
        const KvValue* vr = v.data() + (b * n_k + j) * d;
        for (int e = 0; e < d; ++e) o[e] += p * to_double(vr[e]);
      }
      for (int e = 0; e < d; ++e) o[e] /= l;
    }
}

}  // namespace kernels
