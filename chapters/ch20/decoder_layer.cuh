// ch20/decoder_layer.cuh: the workload of ch20/transformer_decode (one Llama-3-8B-shaped decoder
// layer's decode step), its FP64 CPU reference, and the ladder's starting point: one plain kernel
// per op, generic over the activations' type (FP32 on rung 1, BF16 on rung 2).
//
// The layer, per sequence of the batch (one new token each):
//   xn = rmsnorm(x) · norm1;  qkv = xn W_qkvᵀ  (32 query heads, 8 KV heads, 128 dims each)
//   q, k = rope(q, k) at position `past`;  the new k and v are appended to the KV cache
//   attn = softmax(q Kᵀ / √128) V over the `past` cached keys and the new one (GQA: query head h
//          reads KV head h / 4);  h = x + attn W_oᵀ
//   hn = rmsnorm(h) · norm2;  [g | u] = hn W_gate_upᵀ;  y = h + (silu(g) · u) W_downᵀ
// Outputs: y, and the appended K and V rows. The cache is a harness input, refilled before every
// sample and read-only, so the appended row goes to its own outputs, k_new and v_new: the row a
// serving engine stores at position `past` (the attention reads it from there).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cmath>
#include <cstdint>
#include <kernels/group_reduce.cuh>
#include <span>
#include <vector>

namespace ch20 {

using bf16 = __nv_bfloat16;
constexpr int kHeadDim = 128, kThreads = 256, kWarps = kThreads / 32;
constexpr float kEps = 1e-5f;
constexpr double kRopeTheta = 500000.0;  // Llama 3's RoPE base

// The layer's sizes: batch (one new token each), heads, MLP width, cached keys per sequence.
struct LayerDims {
  int64_t batch, q_heads, kv_heads, group, hidden, qkv_dim, ffn, past;
  static LayerDims of(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t ffn, int64_t past) {
    return {batch,
            q_heads,
            kv_heads,
            q_heads / kv_heads,
            q_heads * kHeadDim,
            (q_heads + 2 * kv_heads) * kHeadDim,
            ffn,
            past};
  }
};

struct DecoderLayer {
  int64_t batch, q_heads, kv_heads, group, hidden, qkv_dim, ffn, past;
  bench::DeviceSpan<const bf16> x, norm1, norm2, w_qkv, w_o, w_gate_up, w_down, k_cache, v_cache;
  bench::DeviceSpan<bf16> y, k_new, v_new;
  // Weights uniform(-a, a), a = √(3 / fan-in): unit-scale outputs for unit-scale inputs.
  static bench::Fill fan_in(int64_t k) {
    return bench::uniform(-std::sqrt(3.0 / k), std::sqrt(3.0 / k));
  }
  // Verification keeps the structure (GQA groups of 4, two KV heads so a head mix-up shows) at a
  // size the FP64 CPU layer checks in a second: 8 / 2 heads, MLP 2744, 1000 cached keys (not a
  // whole number of attention steps or chunks), batch 3. 2744 is a multiple of 8, as 14336 is:
  // every GEMM operand row and the up half of gate_up start 16-byte aligned, as cuBLASLt's fast
  // paths want.
  explicit DecoderLayer(bench::Setup& s)
      : batch(s.size("batch", s.axis("batch"), 3)),
        q_heads(s.size("q_heads", 32, 8)),
        kv_heads(s.size("kv_heads", 8, 2)),
        group(q_heads / kv_heads),
        hidden(q_heads * kHeadDim),
        qkv_dim((q_heads + 2 * kv_heads) * kHeadDim),
        ffn(s.size("ffn", 14336, 2744)),
        past(s.size("past", 4096, 1000)),
        x(s.input<bf16>("x", batch * hidden, bench::normal(0, 1))),
        norm1(s.input<bf16>("norm1", hidden, bench::uniform(0.5, 1.5))),
        norm2(s.input<bf16>("norm2", hidden, bench::uniform(0.5, 1.5))),
        w_qkv(s.input<bf16>("w_qkv", qkv_dim * hidden, fan_in(hidden))),
        w_o(s.input<bf16>("w_o", hidden * hidden, fan_in(hidden))),
        w_gate_up(s.input<bf16>("w_gate_up", 2 * ffn * hidden,
                                fan_in(hidden))),  // gate rows, then up rows
        w_down(s.input<bf16>("w_down", hidden * ffn, fan_in(ffn))),
        k_cache(s.input<bf16>("k_cache", batch * kv_heads * past * kHeadDim, bench::normal(0, 1))),
        v_cache(s.input<bf16>("v_cache", batch * kv_heads * past * kHeadDim, bench::normal(0, 1))),
        y(s.output<bf16>("y", batch * hidden)),
        k_new(s.output<bf16>("k_new", batch * kv_heads * kHeadDim)),
        v_new(s.output<bf16>("v_new", batch * kv_heads * kHeadDim)) {
    // The fewest bytes a step moves: every weight once, the cached K and V once, the new K and V
    // row written, x read and y written. Batch 1: 436 MB of weights + 17 MB of cache = 453 MB.
    // Held to the HBM read ceiling: all but ~0.01% of it is read.
    const double weights =
        double(w_qkv.size() + w_o.size() + w_gate_up.size() + w_down.size()) * sizeof(bf16);
    const double kv =
        double(k_cache.size() + v_cache.size() + k_new.size() + v_new.size()) * sizeof(bf16);
    s.bytes(weights + kv + 2.0 * batch * hidden * sizeof(bf16), bench::ceiling::hbm_read);
    s.flops(2.0 * batch * (weights / sizeof(bf16)) + 4.0 * batch * q_heads * (past + 1) * kHeadDim);
  }
  LayerDims dims() const { return {batch, q_heads, kv_heads, group, hidden, qkv_dim, ffn, past}; }

  // How many times the harness has filled the inputs (it calls this after each fill). A variant
  // is prepared before the first fill at the verification size and after it at the timing size;
  // the autotuned rung (ch20/fastest_plan.cuh) times its candidates only on filled inputs.
  void inputs_filled(cudaStream_t) { ++fills; }
  int fills = 0;
};

// ---- the unfused kernels: one op each, FP32 arithmetic, activations of type A ----------------
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(bf16* p, float v) { *p = __float2bfloat16(v); }

// cos and sin of the rotation of dimension pair (i, i + 64) at position pos: angle pos · θ^(-i/64).
__device__ __forceinline__ void rope_cos_sin(int64_t pos, int i, float& c, float& s) {
  const float inv_freq = powf(float(kRopeTheta), -float(i) / (kHeadDim / 2));
  sincosf(float(pos) * inv_freq, &s, &c);
}

// out = rmsnorm(in) · gain, one block per row.
template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    rmsnorm(const In* in, const bf16* gain, Out* out, int hidden) {
  const int64_t row = int64_t{blockIdx.x} * hidden;
  float sq = 0;
  for (int i = threadIdx.x; i < hidden; i += kThreads)
    sq += to_float(in[row + i]) * to_float(in[row + i]);
  const float inv_rms = rsqrtf(kernels::group_reduce<kThreads>(sq, kernels::Sum{}) / hidden + kEps);
  for (int i = threadIdx.x; i < hidden; i += kThreads)
    store(out + row + i, to_float(in[row + i]) * inv_rms * __bfloat162float(gain[i]));
}

// out [rows][n] = in [rows][k] · weight [n][k]ᵀ: a warp per output column, FP32 sums; the
// weight row is re-read from L1 for each of the rows.
template <class A>
__global__ void __launch_bounds__(kThreads)
    linear(const A* in, const bf16* weight, A* out, int rows, int n, int k) {
  const int j = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (j >= n) return;
  const bf16* w = weight + int64_t{j} * k;
  for (int r = 0; r < rows; ++r) {
    float sum = 0;
    for (int p = lane; p < k; p += 32)
      sum = fmaf(to_float(in[int64_t{r} * k + p]), __bfloat162float(w[p]), sum);
    sum = kernels::warp_reduce(sum, kernels::Sum{});
    if (lane == 0) store(out + int64_t{r} * n + j, sum);
  }
}

// RoPE on the q and k heads of qkv, in place (rotate-half pairs (i, i + 64)), one block per
// sequence.
template <class A>
__global__ void __launch_bounds__(kThreads)
    rope_in_place(A* qkv, int rotated_heads, int64_t qkv_dim, int64_t pos) {
  A* row = qkv + blockIdx.x * qkv_dim;
  for (int t = threadIdx.x; t < rotated_heads * kHeadDim / 2; t += kThreads) {
    const int head = t / (kHeadDim / 2), i = t % (kHeadDim / 2);
    A* pair = row + head * kHeadDim + i;
    float c, s;
    rope_cos_sin(pos, i, c, s);
    const float x1 = to_float(pair[0]), x2 = to_float(pair[kHeadDim / 2]);
    store(pair, x1 * c - x2 * s);
    store(pair + kHeadDim / 2, x2 * c + x1 * s);
  }
}

// The append: the new token's k and v (after RoPE) into k_new / v_new, one block per sequence.
template <class A>
__global__ void __launch_bounds__(kThreads)
    append_kv(const A* qkv, bf16* k_new, bf16* v_new, int q_heads, int kv_heads, int64_t qkv_dim) {
  const A* k = qkv + blockIdx.x * qkv_dim + q_heads * kHeadDim;
  const int64_t out = int64_t{blockIdx.x} * kv_heads * kHeadDim;
  for (int t = threadIdx.x; t < kv_heads * kHeadDim; t += kThreads) {
    store(k_new + out + t, to_float(k[t]));
    store(v_new + out + t, to_float(k[kv_heads * kHeadDim + t]));
  }
}

// scores [bh][past + 1] = q · key / √128, a warp per key; key `past` is the appended row.
// bh = sequence × q_heads + head; its KV pair (sequence, head / group) is bh / group.
template <class A>
__global__ void __launch_bounds__(kThreads)
    attention_scores(const A* qkv, const bf16* k_cache, const bf16* k_new, float* scores,
                     int q_heads, int group, int64_t qkv_dim, int64_t past) {
  const int64_t bh = blockIdx.y, j = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32,
                kv_pair = bh / group;
  const int lane = threadIdx.x % 32;
  if (j > past) return;
  const A* q = qkv + bh / q_heads * qkv_dim + bh % q_heads * kHeadDim;
  const bf16* key =
      j < past ? k_cache + (kv_pair * past + j) * kHeadDim : k_new + kv_pair * kHeadDim;
  float dot = 0;
  for (int d = lane; d < kHeadDim; d += 32)
    dot = fmaf(to_float(q[d]), __bfloat162float(key[d]), dot);
  dot = kernels::warp_reduce(dot, kernels::Sum{});
  if (lane == 0) scores[bh * (past + 1) + j] = dot * rsqrtf(float(kHeadDim));
}

// scores → probabilities in place, one block per bh.
__global__ void __launch_bounds__(kThreads) softmax_rows(float* scores, int64_t n) {
  float* row = scores + blockIdx.x * n;
  float top = -INFINITY, total = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) top = fmaxf(top, row[j]);
  top = kernels::group_reduce<kThreads>(top, kernels::Max{});
  for (int64_t j = threadIdx.x; j < n; j += kThreads) total += (row[j] = expf(row[j] - top));
  total = kernels::group_reduce<kThreads>(total, kernels::Sum{});
  for (int64_t j = threadIdx.x; j < n; j += kThreads) row[j] /= total;
}

// attn [bh][128] = Σ_j p_j v_j, one block per bh, a thread per dimension.
template <class A>
__global__ void __launch_bounds__(kHeadDim)
    attention_values(const float* probs, const bf16* v_cache, const bf16* v_new, A* attn, int group,
                     int64_t past) {
  const int64_t bh = blockIdx.x, kv_pair = bh / group;
  const int d = threadIdx.x;
  const float* p = probs + bh * (past + 1);
  float acc = 0;
  for (int64_t j = 0; j < past; ++j)
    acc = fmaf(p[j], __bfloat162float(v_cache[(kv_pair * past + j) * kHeadDim + d]), acc);
  acc = fmaf(p[past], __bfloat162float(v_new[kv_pair * kHeadDim + d]), acc);
  store(attn + bh * kHeadDim + d, acc);
}

template <class X, class Y, class Out>
__global__ void add(const X* a, const Y* b, Out* sum, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store(sum + i, to_float(a[i]) + to_float(b[i]));
}

template <class A>
__global__ void silu_in_place(A* g, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store(g + i, to_float(g[i]) / (1.0f + expf(-to_float(g[i]))));
}

template <class A>
__global__ void multiply(const A* a, const A* b, A* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    store(out + i, to_float(a[i]) * to_float(b[i]));
}

inline unsigned blocks_for(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 1024));
}

// ---- the FP64 CPU layer ----------------------------------------------------------------------
namespace reference {

inline std::vector<double> widen(std::span<const bf16> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}

// out [rows][n] = in [rows][k] · weight [n][k]ᵀ
inline std::vector<double> matmul(const std::vector<double>& in, std::span<const bf16> weight,
                                  int64_t rows, int64_t n, int64_t k) {
  std::vector<double> out(size_t(rows * n));
  const std::vector<double> w = widen(weight);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += in[r * k + p] * w[j * k + p];
      out[r * n + j] = sum;
    }
  return out;
}

inline std::vector<double> norm(const std::vector<double>& in, std::span<const bf16> gain,
                                int64_t hidden) {
  std::vector<double> out(in.size());
  for (size_t row = 0; row < in.size(); row += size_t(hidden)) {
    double sq = 0;
    for (int64_t i = 0; i < hidden; ++i) sq += in[row + i] * in[row + i];
    const double inv_rms = 1.0 / std::sqrt(sq / hidden + kEps);
    for (int64_t i = 0; i < hidden; ++i)
      out[row + i] = in[row + i] * inv_rms * static_cast<float>(gain[i]);
  }
  return out;
}

// The layer's inputs as the host holds them, and where its FP64 outputs go.
struct HostLayer {
  std::span<const bf16> x, norm1, norm2, w_qkv, w_o, w_gate_up, w_down, k_cache, v_cache;
};
struct HostOutputs {
  std::span<double> y, k_new, v_new;
};

inline void layer(const LayerDims& w, const HostLayer& in, const HostOutputs& out) {
  const int64_t rows = w.batch, hidden = w.hidden, half = kHeadDim / 2;
  const std::vector<double> x = widen(in.x);
  const auto k_cache = in.k_cache, v_cache = in.v_cache;
  std::vector<double> qkv = matmul(norm(x, in.norm1, hidden), in.w_qkv, rows, w.qkv_dim, hidden);
  for (int64_t r = 0; r < rows; ++r)  // RoPE on the q and k heads at position `past`
    for (int64_t head = 0; head < w.q_heads + w.kv_heads; ++head)
      for (int64_t i = 0; i < half; ++i) {
        double* pair = &qkv[r * w.qkv_dim + head * kHeadDim + i];
        const double angle = double(w.past) * std::pow(kRopeTheta, -double(i) / half);
        const double x1 = pair[0], x2 = pair[half];
        pair[0] = x1 * std::cos(angle) - x2 * std::sin(angle);
        pair[half] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
  const auto k_new = out.k_new, v_new = out.v_new;
  const int64_t kv_row = w.kv_heads * kHeadDim;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < kv_row; ++t) {
      k_new[r * kv_row + t] = qkv[r * w.qkv_dim + hidden + t];
      v_new[r * kv_row + t] = qkv[r * w.qkv_dim + hidden + kv_row + t];
    }
  std::vector<double> attn(size_t(rows * hidden)), p(size_t(w.past + 1));
  for (int64_t bh = 0; bh < rows * w.q_heads; ++bh) {
    const int64_t r = bh / w.q_heads, kv_pair = bh / w.group, kv_head = kv_pair % w.kv_heads;
    const double* q = &qkv[r * w.qkv_dim + bh % w.q_heads * kHeadDim];
    auto cached = [&](std::span<const bf16> cache, int64_t j, int64_t d) {
      return double(static_cast<float>(cache[(kv_pair * w.past + j) * kHeadDim + d]));
    };
    auto key = [&](int64_t j, int64_t d) {
      return j < w.past ? cached(k_cache, j, d) : k_new[r * kv_row + kv_head * kHeadDim + d];
    };
    auto value = [&](int64_t j, int64_t d) {
      return j < w.past ? cached(v_cache, j, d) : v_new[r * kv_row + kv_head * kHeadDim + d];
    };
    double top = -INFINITY, total = 0;
    for (int64_t j = 0; j <= w.past; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < kHeadDim; ++d) dot += q[d] * key(j, d);
      top = std::max(top, p[j] = dot / std::sqrt(double(kHeadDim)));
    }
    for (double& s : p) total += (s = std::exp(s - top));
    for (int64_t d = 0; d < kHeadDim; ++d) {
      double o = 0;
      for (int64_t j = 0; j <= w.past; ++j) o += p[j] * value(j, d);
      attn[bh * kHeadDim + d] = o / total;
    }
  }
  const std::vector<double> o = matmul(attn, in.w_o, rows, hidden, hidden);
  std::vector<double> resid(x.size());
  for (size_t i = 0; i < x.size(); ++i) resid[i] = x[i] + o[i];
  const std::vector<double> gate_up =
      matmul(norm(resid, in.norm2, hidden), in.w_gate_up, rows, 2 * w.ffn, hidden);
  std::vector<double> act(size_t(rows * w.ffn));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < w.ffn; ++c) {
      const double g = gate_up[r * 2 * w.ffn + c];
      act[r * w.ffn + c] = g / (1 + std::exp(-g)) * gate_up[r * 2 * w.ffn + w.ffn + c];
    }
  const std::vector<double> down = matmul(act, in.w_down, rows, hidden, w.ffn);
  for (size_t i = 0; i < resid.size(); ++i) out.y[i] = resid[i] + down[i];
}

inline void layer(const DecoderLayer& w, bench::HostData& h) {
  layer(w.dims(),
        {h.input<bf16>("x"), h.input<bf16>("norm1"), h.input<bf16>("norm2"), h.input<bf16>("w_qkv"),
         h.input<bf16>("w_o"), h.input<bf16>("w_gate_up"), h.input<bf16>("w_down"),
         h.input<bf16>("k_cache"), h.input<bf16>("v_cache")},
        {h.expected("y"), h.expected("k_new"), h.expected("v_new")});
}

}  // namespace reference
}  // namespace ch20
