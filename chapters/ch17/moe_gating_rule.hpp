// ch17/moe_gating_rule.hpp: what a mixture-of-experts gate chooses, defined so that the CPU
// reference, the baseline kernels and the fused kernel choose the same experts in the same order,
// bit for bit. Host and device code; tests/unit/moe_gating_rule_test.cpp checks it by hand.
//
// A gate ranks scores and keeps the best. Two things decide whether two implementations agree:
//   1. Equal scores. The rule: a higher score ranks first; on equal scores the lower index ranks
//      first (expert index, or group index when groups are ranked). rank_key() packs both into one
//      64-bit integer whose larger value ranks first, so "the best" is a plain integer maximum.
//   2. Scores that are equal in one implementation and not in another. DeepSeek-V3 ranks
//      sigmoid(logit) + bias, and a sigmoid built on expf may differ by an ulp between the host's
//      libm and the device's, which is enough to reorder two nearly equal experts. So the score is
//      defined by sigmoid() below: only correctly rounded IEEE operations (fmaf, a product feeding
//      only rintf, an addition of an exact product, a division), which give the same bits on any
//      IEEE machine, host or device, whatever the compiler contracts. Mixtral ranks softmax
//      probabilities; softmax is increasing in the logit, so it ranks the logits themselves: exact.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CH17_HOST_DEVICE __host__ __device__
#else
#define CH17_HOST_DEVICE
#endif

namespace ch17 {

// exp(z) for |z| <= 80: z = k ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 in two parts so k ln2 is
// exact to 2^-40), exp(r) by its Taylor series to r^7 (remainder < 6e-9 relative), scaled by 2^k.
// Within 2 ulp of exp; bit-identical on host and device.
CH17_HOST_DEVICE inline float exp_bitwise(float z) {
  z = fminf(fmaxf(z, -80.0f), 80.0f);         // keeps 2^k and the result normal
  const float k = rintf(z * 1.44269504f);     // the product only feeds rintf: nothing to contract
  float r = fmaf(k, -0.693145751953125f, z);  // ln2 = high part (low 9 bits zero) + low part
  r = fmaf(k, -1.42860677e-6f, r);
  float p = 1.0f / 5040;
  p = fmaf(p, r, 1.0f / 720);
  p = fmaf(p, r, 1.0f / 120);
  p = fmaf(p, r, 1.0f / 24);
  p = fmaf(p, r, 1.0f / 6);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const float scale = std::bit_cast<float>(uint32_t(int(k) + 127) << 23);  // 2^k
  return p * scale;  // exact: a power of two times a normal float that stays normal
}

// sigmoid(x) = 1 / (1 + exp(-x)). If the device fuses 1 + p * scale into one fma, nothing changes:
// p * scale is exact. The division is IEEE (nvcc's default -prec-div=true; __fdiv_rn says so).
CH17_HOST_DEVICE inline float sigmoid(float x) {
  const float d = 1.0f + exp_bitwise(-x);
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(1.0f, d);
#else
  return 1.0f / d;
#endif
}

// A float as an unsigned integer of the same order (negative floats flipped, positive ones with the
// sign bit set): -inf < ... < -0 < +0 < ... < +inf, as integers. (Callers never pass NaN, and -0
// and +0 rank apart here; a sigmoid or a sum of them never yields -0.)
CH17_HOST_DEVICE inline uint32_t ordered_bits(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}
CH17_HOST_DEVICE inline float from_ordered_bits(uint32_t ordered) {
  const uint32_t bits = (ordered & 0x80000000u) != 0 ? ordered & 0x7fffffffu : ~ordered;
  return std::bit_cast<float>(bits);
}

// The ranking rule as one integer: score in the high word, the index inverted in the low word, so
// that of two equal scores the lower index has the larger key. Larger key = ranks first.
CH17_HOST_DEVICE inline uint64_t rank_key(float score, uint32_t index) {
  return uint64_t{ordered_bits(score)} << 32 | uint32_t(0xffffffffu - index);
}
CH17_HOST_DEVICE inline uint32_t index_of(uint64_t key) { return 0xffffffffu - uint32_t(key); }
CH17_HOST_DEVICE inline float score_of(uint64_t key) {
  return from_ordered_bits(uint32_t(key >> 32));
}

// Sorts eight keys best first (largest first), carrying one payload each: Knuth's 19-comparator
// network for 8 inputs, no branches, so a warp's lanes sort their registers in lockstep.
// (The 0-1 principle test in tests/unit checks it on all 256 inputs of zeros and ones.)
template <class Payload>
CH17_HOST_DEVICE inline void sort8_best_first(uint64_t (&key)[8], Payload (&payload)[8]) {
  // Constant indices after inlining, so the arrays stay in registers.
  const auto order = [&](int a, int b) {
    const bool swap = key[b] > key[a];
    const uint64_t ka = key[a];
    const Payload pa = payload[a];
    key[a] = swap ? key[b] : ka;
    key[b] = swap ? ka : key[b];
    payload[a] = swap ? payload[b] : pa;
    payload[b] = swap ? pa : payload[b];
  };
  order(0, 2), order(1, 3), order(4, 6), order(5, 7);
  order(0, 4), order(1, 5), order(2, 6), order(3, 7);
  order(0, 1), order(2, 3), order(4, 5), order(6, 7);
  order(2, 4), order(3, 5);
  order(1, 4), order(3, 6);
  order(1, 2), order(3, 4), order(5, 6);
}

// DeepSeek-V3's group-limited gate, in general form (the chapter times 256 experts, 8 groups of
// 32, 4 groups kept, top 8).
struct GroupLimitedGate {
  int experts, groups, kept_groups, top_k;
  constexpr int per_group() const { return experts / groups; }
};

// The k best of n scores by the rule, best first, into `chosen` (indices). O(n k): a reference,
// on the host and, a thread a token, on the device (moe_gating.cu's device reference).
CH17_HOST_DEVICE inline void top_k_by_rule(const float* scores, int n, int k, int32_t* chosen) {
  uint64_t previous = ~uint64_t{0};  // each round takes the best key below the last one taken
  for (int round = 0; round < k; ++round) {
    uint64_t best = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t key = rank_key(scores[i], uint32_t(i));
      if (key < previous && key > best) best = key;
    }
    chosen[round] = int32_t(index_of(best));
    previous = best;
  }
}

// Which experts a DeepSeek-V3 gate sends one token to, best first:
//   choice score of expert e = sigmoid(logit[e]) + bias[e], in float;
//   a group's score = the sum of its two best choice scores (larger + smaller, in float);
//   keep the kept_groups best groups by the rule; rank only their experts; take the top_k.
// `choice` is scratch of `experts` floats. The weights (not chosen here) are sigmoid(logit) of the
// chosen experts, renormalised to sum to 1: the bias steers the choice, never the weights.
CH17_HOST_DEVICE inline void choose_group_limited(const GroupLimitedGate& gate, const float* logits,
                                                  const float* bias, float* choice,
                                                  int32_t* chosen) {
  for (int e = 0; e < gate.experts; ++e) choice[e] = sigmoid(logits[e]) + bias[e];
  float group_score[64];
  for (int g = 0; g < gate.groups; ++g) {
    int32_t two[2];
    top_k_by_rule(choice + g * gate.per_group(), gate.per_group(), 2, two);
    group_score[g] = choice[g * gate.per_group() + two[0]] + choice[g * gate.per_group() + two[1]];
  }
  int32_t kept[64];
  top_k_by_rule(group_score, gate.groups, gate.kept_groups, kept);
  for (int g = 0; g < gate.groups; ++g) {
    bool is_kept = false;
    for (int j = 0; j < gate.kept_groups; ++j) is_kept = is_kept || kept[j] == g;
    if (!is_kept)
      for (int e = g * gate.per_group(); e < (g + 1) * gate.per_group(); ++e) choice[e] = -INFINITY;
  }
  top_k_by_rule(choice, gate.experts, gate.top_k, chosen);
}

}  // namespace ch17
