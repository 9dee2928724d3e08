// Tests chapters/ch20/op_breakdown.hpp's host side without a GPU: the metrics ch20's graphed
// rungs report from their ops' event times (each op's median, GB/s only for the ops that stream
// a weight matrix or the cache, the sum of the medians), and the op list being run through the
// same callback a plain call uses.
#include "../../chapters/ch20/op_breakdown.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::map<std::string, double> by_name(const std::vector<bench::Metric>& metrics) {
  std::map<std::string, double> out;
  for (const bench::Metric& m : metrics) {
    EXPECT_FALSE(m.whole_timed_call) << m.name;
    EXPECT_TRUE(out.emplace(m.name, m.value).second) << "reported twice: " << m.name;
  }
  return out;
}

TEST(OpBreakdown, EachOpsMedianAndTheirSum) {
  const auto metrics = by_name(ch20::op_metrics({
      {"norm1", 0, {3.0, 2.0, 100.0}},          // one slow repeat: the median ignores it
      {"qkv", 50e6, {20.0, 25.0, 21.0, 19.0}},  // even count: the middle two's mean
      {"attention", 17e6, {10.0, 10.0, 10.0}},
  }));
  EXPECT_DOUBLE_EQ(metrics.at("op_us_norm1"), 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("op_us_qkv"), 20.5);
  EXPECT_DOUBLE_EQ(metrics.at("op_us_attention"), 10.0);
  EXPECT_DOUBLE_EQ(metrics.at("op_us_sum"), 3.0 + 20.5 + 10.0);
}

TEST(OpBreakdown, GbpsOnlyForStreamedBytes) {
  const auto metrics = by_name(ch20::op_metrics({
      {"qkv", 50'331'648, {20.0}},  // W_qkv at 4096 hidden: 6144 x 4096 BF16
      {"swiglu", 0, {4.0}},
  }));
  EXPECT_NEAR(metrics.at("op_gbps_qkv"), 50'331'648 / 20e-6 / 1e9, 1e-9);  // 2516.6 GB/s
  EXPECT_EQ(metrics.count("op_gbps_swiglu"), 0u);
  EXPECT_EQ(metrics.size(), 4u);  // op_us_qkv, op_gbps_qkv, op_us_swiglu, op_us_sum
}

TEST(OpBreakdown, MetricsFollowTheStepsOpOrder) {
  const auto metrics =
      ch20::op_metrics({{"o", 1, {1.0}}, {"gate_up", 1, {2.0}}, {"down", 1, {3.0}}});
  std::vector<std::string> names;
  for (const bench::Metric& m : metrics) names.push_back(m.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"op_us_o", "op_gbps_o", "op_us_gate_up", "op_gbps_gate_up",
                                      "op_us_down", "op_gbps_down", "op_us_sum"}));
}

TEST(OpBreakdown, NoOpsNoMetrics) { EXPECT_TRUE(ch20::op_metrics({}).empty()); }

TEST(OpBreakdown, RefusesAnOpNamedTwiceOrUntimed) {
  EXPECT_THROW(ch20::op_metrics({{"o", 1, {1.0}}, {"o", 1, {2.0}}}), std::logic_error);
  EXPECT_THROW(ch20::op_metrics({{"o", 1, {}}}), std::logic_error);
}

// The call path: JustLaunch runs every op's launch once, in order, and ignores name and bytes.
TEST(OpBreakdown, JustLaunchRunsEachOpOnce) {
  std::vector<int> launched;
  const ch20::JustLaunch op;
  op("qkv", 1.0, [&] { launched.push_back(1); });
  op("attention", 2.0, [&] { launched.push_back(2); });
  EXPECT_EQ(launched, (std::vector<int>{1, 2}));
}

}  // namespace
