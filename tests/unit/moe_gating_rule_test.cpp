// Tests chapters/ch17/moe_gating_rule.hpp, the rule ch17's MoE gates choose experts by, without a
// GPU: the ranking key (higher score first, lower index on equal scores), the bit-reproducible
// sigmoid (close to the true one, monotone, exact where it must be), the 8-key sorting network
// (every 0-1 input, so every input), and the DeepSeek-V3 group-limited choice on small gates worked
// out by hand, ties of experts and of groups included; and, on ch17's tie-rich inputs, a CPU
// emulation of the fused kernel's warp algorithm (moe_gating.cu), which must agree with the rule
// and must disagree once either tie rule is reversed (so those inputs do test the rule).
#include "../../chapters/ch17/moe_gating_rule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using ch17::rank_key;

TEST(MoeGatingRule, HigherScoreFirstLowerIndexOnTies) {
  EXPECT_GT(rank_key(2.0f, 7), rank_key(1.0f, 0));
  EXPECT_GT(rank_key(1.0f, 3), rank_key(1.0f, 4));  // equal scores: the lower index first
  EXPECT_GT(rank_key(-1.0f, 9), rank_key(-2.0f, 0));
  EXPECT_GT(rank_key(0.0f, 9), rank_key(-0x1p-149f, 0));
  EXPECT_GT(rank_key(-3e38f, 255), rank_key(-INFINITY, 0));  // a masked expert ranks last
  EXPECT_GT(rank_key(-INFINITY, 255), uint64_t{0});  // 0 is below every key: "nothing" in a maximum
  for (float v : {-INFINITY, -3.5f, -0x1p-149f, 0.0f, 0x1p-126f, 0.5f, 1.0f, 3e38f, INFINITY}) {
    EXPECT_EQ(ch17::score_of(rank_key(v, 17)), v);
    EXPECT_EQ(ch17::index_of(rank_key(v, 17)), 17u);
  }
}

TEST(MoeGatingRule, TopKTakesTiesInIndexOrder) {
  const float scores[] = {1, 3, 3, 2, 3};
  int32_t chosen[5];
  ch17::top_k_by_rule(scores, 5, 5, chosen);
  EXPECT_EQ(std::vector<int32_t>(chosen, chosen + 5), (std::vector<int32_t>{1, 2, 4, 3, 0}));
  ch17::top_k_by_rule(scores, 5, 2, chosen);
  EXPECT_EQ(std::vector<int32_t>(chosen, chosen + 2), (std::vector<int32_t>{1, 2}));
}

TEST(MoeGatingRule, ExpAndSigmoidAreCloseToTheTrueFunctions) {
  for (double z = -80; z <= 80; z += 0.0137) {
    const double e = std::exp(double(float(z)));
    EXPECT_NEAR(ch17::exp_bitwise(float(z)) / e, 1.0, 3e-7) << "z = " << float(z);
  }
  for (double x = -30; x <= 30; x += 0.0071) {
    const double s = 1.0 / (1.0 + std::exp(-double(float(x))));
    EXPECT_NEAR(ch17::sigmoid(float(x)) / s, 1.0, 4e-7) << "x = " << float(x);
  }
  EXPECT_EQ(ch17::sigmoid(0.0f), 0.5f);  // exp(0) = 1 exactly
  EXPECT_EQ(ch17::sigmoid(100.0f), 1.0f);
  EXPECT_GT(ch17::sigmoid(-1000.0f), 0.0f);  // clamped at exp(80): stays normal, never 0
}

TEST(MoeGatingRule, SigmoidIsMonotone) {  // else ranking by it would not be ranking by the logit
  float previous = ch17::sigmoid(-20.0f);
  for (float x = -20.0f; x < 20.0f; x = std::nextafter(x + 1e-4f, INFINITY)) {
    const float s = ch17::sigmoid(x);
    ASSERT_GE(s, previous) << "x = " << x;
    previous = s;
  }
}

TEST(MoeGatingRule, SortNetworkSortsEveryInput) {
  for (int bits = 0; bits < 256; ++bits) {  // 0-1 principle: sorting all 0-1 inputs sorts all
    uint64_t key[8];
    int payload[8];
    for (int i = 0; i < 8; ++i) key[i] = (bits >> i) & 1, payload[i] = int(key[i]);
    ch17::sort8_best_first(key, payload);
    for (int i = 0; i + 1 < 8; ++i) ASSERT_GE(key[i], key[i + 1]) << "input " << bits;
    for (int i = 0; i < 8; ++i) ASSERT_EQ(uint64_t(payload[i]), key[i]);  // payloads move with keys
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    uint64_t key[8];
    float payload[8];
    std::vector<uint64_t> expected;
    for (int i = 0; i < 8; ++i) {
      key[i] = rank_key(float(int(rng() % 5)), uint32_t(i));  // equal scores, distinct indices
      payload[i] = float(i);
      expected.push_back(key[i]);
    }
    std::sort(expected.rbegin(), expected.rend());
    ch17::sort8_best_first(key, payload);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(key[i], expected[i]);
      EXPECT_EQ(payload[i], float(ch17::index_of(key[i])));
    }
  }
}

// Small gates: logits 0 make every sigmoid exactly 0.5, so the choice score is 0.5 + bias, exact
// for these dyadic biases, and the expected answer can be worked out by hand.
std::vector<int32_t> choose(const ch17::GroupLimitedGate& gate, const std::vector<float>& logits,
                            const std::vector<float>& bias) {
  std::vector<float> scratch(gate.experts);
  std::vector<int32_t> chosen(gate.top_k);
  ch17::choose_group_limited(gate, logits.data(), bias.data(), scratch.data(), chosen.data());
  return chosen;
}

TEST(MoeGatingRule, GroupsRankedByTheirTwoBestNotTheirBest) {
  const ch17::GroupLimitedGate gate{8, 4, 2, 3};  // 4 groups of 2 experts, keep 2, top 3
  // choice scores: g0 {1.0, 0} (sum 1.0, holds the single best expert), g1 {0.75, 0.75} (1.5),
  // g2 {0.625, 0.625} (1.25), g3 {0.5, 0.5} (1.0). Kept: g1, g2; expert 0 is not eligible.
  const std::vector<float> bias = {0.5f, -0.5f, 0.25f, 0.25f, 0.125f, 0.125f, 0.0f, 0.0f};
  EXPECT_EQ(choose(gate, std::vector<float>(8, 0.0f), bias), (std::vector<int32_t>{2, 3, 4}));
}

TEST(MoeGatingRule, TiedGroupsAndTiedExpertsGoByLowerIndex) {
  const ch17::GroupLimitedGate gate{8, 4, 2, 3};
  // choice scores: g0 {0.75, 0.75}, g1 {1.0, 0.5}, g2 {1.0, 0.5}, g3 {0.625, 0.875}: every group
  // sums to 1.5, so g0 and g1 are kept; among experts 0..3 the best is 2 (1.0), then 0 and 1 (0.75
  // each, 0 first).
  const std::vector<float> bias = {0.25f, 0.25f, 0.5f, 0.0f, 0.5f, 0.0f, 0.125f, 0.375f};
  EXPECT_EQ(choose(gate, std::vector<float>(8, 0.0f), bias), (std::vector<int32_t>{2, 0, 1}));
}

TEST(MoeGatingRule, BiasSteersTheChoice) {
  const ch17::GroupLimitedGate gate{4, 1, 1, 2};  // one group: a plain top 2 of sigmoid + bias
  const std::vector<float> logits = {2.0f, 0.0f, 1.0f, -1.0f};  // sigmoid 0.881, 0.5, 0.731, 0.269
  EXPECT_EQ(choose(gate, logits, {0, 0, 0, 0}), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(choose(gate, logits, {0, 0.5f, 0, 0.75f}), (std::vector<int32_t>{3, 1}));  // 1.019, 1.0
}

// The fused deepseek_v3 kernel's steps for one token, lane by lane (lane l holds experts
// 8l..8l+7, a group is 4 lanes): sort each lane's keys, merge each group's two best over its lanes,
// rank the groups, then 8 rounds of taking the lowest lane holding the largest head score.
// `lowest_lane_wins` and `lower_group_wins` reverse a tie rule when false.
std::vector<int32_t> warp_algorithm(const float* logits, const float* bias, bool lowest_lane_wins,
                                    bool lower_group_wins) {
  uint64_t key[32][8];
  float score[32][8], best[32], second[32];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 8; ++i) {
      score[l][i] = ch17::sigmoid(logits[8 * l + i]);
      key[l][i] = rank_key(score[l][i] + bias[8 * l + i], uint32_t(8 * l + i));
    }
    ch17::sort8_best_first(key[l], score[l]);
    best[l] = ch17::score_of(key[l][0]), second[l] = ch17::score_of(key[l][1]);
  }
  for (int offset = 1; offset < 4; offset *= 2) {  // the two xor shuffles
    float b[32], s[32];
    for (int l = 0; l < 32; ++l) {
      const float ob = best[l ^ offset], os = second[l ^ offset];
      s[l] = std::max(std::min(best[l], ob), std::max(second[l], os));
      b[l] = std::max(best[l], ob);
    }
    std::copy(b, b + 32, best), std::copy(s, s + 32, second);
  }
  uint32_t head[32];
  for (int l = 0; l < 32; ++l) {
    const uint32_t group = uint32_t(lower_group_wins ? l / 4 : 7 - l / 4);
    int ahead = 0;
    for (int g = 0; g < 8; ++g)
      ahead += rank_key(best[4 * g] + second[4 * g], uint32_t(lower_group_wins ? g : 7 - g)) >
               rank_key(best[l] + second[l], group);
    head[l] = ahead < 4 ? uint32_t(key[l][0] >> 32) : 0;
  }
  std::vector<int32_t> chosen;
  for (int round = 0; round < 8; ++round) {
    const uint32_t top = *std::max_element(head, head + 32);
    int w = lowest_lane_wins ? 0 : 31;
    while (head[w] != top) w += lowest_lane_wins ? 1 : -1;
    chosen.push_back(int32_t(ch17::index_of(key[w][0])));
    for (int i = 0; i + 1 < 8; ++i) key[w][i] = key[w][i + 1], score[w][i] = score[w][i + 1];
    key[w][7] = 0;
    head[w] = uint32_t(key[w][0] >> 32);
  }
  return chosen;
}

TEST(MoeGatingRule, FusedWarpAlgorithmAgreesOnTieRichInputs) {
  // ch17/moe_gating's inputs: logits whole numbers in [-8, 8], bias -1, 0 or 1.
  const ch17::GroupLimitedGate gate{256, 8, 4, 8};
  std::mt19937 rng(42);
  std::vector<float> bias(256), logits(256);
  for (float& b : bias) b = float(int(rng() % 3) - 1);
  int agree = 0, agree_highest_lane = 0, agree_higher_group = 0;
  const int tokens = 2000;
  for (int t = 0; t < tokens; ++t) {
    for (float& x : logits) x = float(int(rng() % 17) - 8);
    const std::vector<int32_t> expected = choose(gate, logits, bias);
    agree += warp_algorithm(logits.data(), bias.data(), true, true) == expected;
    agree_highest_lane += warp_algorithm(logits.data(), bias.data(), false, true) == expected;
    agree_higher_group += warp_algorithm(logits.data(), bias.data(), true, false) == expected;
  }
  EXPECT_EQ(agree, tokens);
  EXPECT_LT(agree_highest_lane, tokens / 2);       // expert ties decide most tokens' order
  EXPECT_LT(agree_higher_group, tokens * 9 / 10);  // group ties decide a good share of them
}

}  // namespace
