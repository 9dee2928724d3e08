// kernels/reference_attention.cuh: plain, trusted attention out = softmax(q k^T / sqrt(d)) v with
// any key mask, on the GPU (an example's .device_reference at its timing size) and on the CPU in
// double (its .reference at the verification size). Head dimension kDim: 128 unless named (ch16's
// d64 twins call reference_attention<64>).
//
// Layout, per (batch, head) pair bh: q and out [bh][n_q][kDim], k and v [bh][n_k][kDim], BF16.
// `visible(qi, kj)` says whether query qi sees key kj (host and device callable); every query
// must see at least one key. The GPU version: one CTA per (query, bh), a thread per output
// dimension; keys in tiles of kDim, one thread per key for the score (FP32 FMAs, accurate expf),
// the tile's max and sum by block reduction. Slow (a few TFLOP/s) and plainly right.
#pragma once

#include <cuda_bf16.h>

#include <bench/bench.hpp>
#include <cmath>
#include <cstdint>
#include <kernels/group_reduce.cuh>
#include <span>
#include <vector>

namespace kernels {

inline constexpr int kRefHeadDim = 128;

namespace detail {
template <int kDim, class Visible>
__global__ void __launch_bounds__(kDim)
    reference_attention(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                        const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                        int64_t n_q, int64_t n_k, Visible visible) {
  constexpr int d = kDim;
  const int64_t qi = blockIdx.x, bh = blockIdx.y;
  const int t = threadIdx.x;
  __shared__ float q_row[d], p_tile[d];
  q_row[t] = __bfloat162float(q[(bh * n_q + qi) * d + t]);
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  for (int64_t j0 = 0; j0 < n_k; j0 += d) {
    __syncthreads();  // q_row written; the previous tile's p_tile read
    const int64_t j = j0 + t;
    float s = -INFINITY;
    if (j < n_k && visible(qi, j)) {
      s = 0.0f;
      for (int e = 0; e < d; ++e) s += q_row[e] * __bfloat162float(k_bh[j * d + e]);
      s *= scale;
    }
    const float tile_max = group_reduce<d>(s, Max{});
    if (tile_max == -INFINITY) continue;  // no visible key in this tile (uniform across the block)
    const float m_new = fmaxf(m, tile_max);
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new), c = expf(m - m_new);
    p_tile[t] = p;
    l = l * c + group_reduce<d>(p, Sum{});  // contains the barrier that publishes p_tile
    acc *= c;
    for (int e = 0; e < d && j0 + e < n_k; ++e)
      acc += p_tile[e] * __bfloat162float(v_bh[(j0 + e) * d + t]);
    m = m_new;
  }
  out[(bh * n_q + qi) * d + t] = __float2bfloat16(acc / l);
}
}  // namespace detail

template <int kDim = kRefHeadDim, class Visible>
void reference_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         __nv_bfloat16* out, int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                         cudaStream_t stream) {
  detail::reference_attention<kDim>
      <<<dim3(unsigned(n_q), unsigned(bh)), kDim, 0, stream>>>(q, k, v, out, n_q, n_k, visible);
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
