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

}  // namespace kernels
