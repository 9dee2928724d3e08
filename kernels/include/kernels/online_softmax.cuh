// kernels/online_softmax.cuh: the running state of an attention softmax over part of the keys,
// and the log-sum-exp merge of two such parts (FlashAttention's online softmax, flash decoding's
// split-KV combine).
//
// Scores are kept in the log2 domain (s = q.k / sqrt(d) * log2(e)), so each exponential is one
// MUFU.EX2. A part of the keys is summarised by (m, l, o): its largest score m, l = sum 2^(s - m),
// and o = sum 2^(s - m) v (unnormalised). Two parts merge exactly:
//   m = max(m1, m2),  l = l1 2^(m1 - m) + l2 2^(m2 - m),  o = o1 2^(m1 - m) + o2 2^(m2 - m),
// and the attention output is o / l. An empty part is (kEmptyMax, 0, 0): kEmptyMax is finite, so
// 2^(m1 - m) is never (-inf) - (-inf) = NaN, and a masked score of -inf contributes 2^-inf = 0.
#pragma once

#include <cuda_runtime.h>

namespace kernels {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kEmptyMax = -1e30f;  // the running max of a part that has seen no key

// 2^t as the bare MUFU.EX2 (subnormal results flush to 0; 2^-inf = 0). Every exponent here is
// <= 0, so results lie in [0, 1] and a flushed term is below 2^-126 of the largest, which is 1.
__device__ __forceinline__ float exp2_ftz(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

// Folds part 2 (m2, l2, o2) into part 1 (m, l, o), in place.
template <int N>
__device__ __forceinline__ void merge_softmax_parts(float& m, float& l, float (&o)[N], float m2,
                                                    float l2, const float (&o2)[N]) {
  const float m_new = fmaxf(m, m2);
  const float c1 = exp2_ftz(m - m_new), c2 = exp2_ftz(m2 - m_new);
  l = l * c1 + l2 * c2;
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] = o[i] * c1 + o2[i] * c2;
  m = m_new;
}

// One key tile of the online softmax held in mma.sync C fragments (kernels/mma_bf16.cuh): a thread
// holds rows g and g + 8 (h = 0, 1: elements 2h and 2h + 1 of each tile) of kTiles 8-key score
// tiles s, in log2 units and -inf where masked, and the 4 lanes of a quad hold a row's keys.
// Folds the tile into each row's running max m (over the quad, so its 4 lanes hold the same m; m
// starts at kEmptyMax, never -inf) and running sum l (this thread's keys only: the quad's shares
// are summed at the end), rescales the output fragments o by 2^(m_old - m_new), and leaves
// p = 2^(s - m) in s, 0 where masked: the A fragments of P V, once packed.
template <int kTiles, int kOutTiles>
__device__ __forceinline__ void online_softmax_fragment_tile(float (&s)[kTiles][4], float (&m)[2],
                                                             float (&l)[2],
                                                             float (&o)[kOutTiles][4]) {
  float m_new[2] = {m[0], m[1]};
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) m_new[e / 2] = fmaxf(m_new[e / 2], s[j][e]);
  float c[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 1));
    m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 2));
    c[h] = exp2_ftz(m[h] - m_new[h]);
    l[h] *= c[h], m[h] = m_new[h];
  }
#pragma unroll
  for (int j = 0; j < kOutTiles; ++j)
    o[j][0] *= c[0], o[j][1] *= c[0], o[j][2] *= c[1], o[j][3] *= c[1];
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = exp2_ftz(s[j][e] - m[e / 2]), l[e / 2] += s[j][e];
}

}  // namespace kernels
