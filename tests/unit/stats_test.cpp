// Tests harness/src/stats.cpp: quantiles, noise, the stopping rule, the throttle rule (VALIDITY
// row 11) and the bootstrap interval (row 14).
#include "bench/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace bench::stats;

std::vector<double> normal_samples(double mean, double rel_sd, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, mean * rel_sd);
  std::vector<double> out(n);
  for (auto& x : out) x = d(rng);
  return out;
}

TEST(Quantile, InterpolatesBetweenSortedValues) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0 / 3), 2);
  EXPECT_TRUE(std::isnan(median(std::vector<double>{})));
}

TEST(RunningMedian, EqualsTheMedianOfEverythingAddedSoFar) {
  // Exactly, after every addition: ties, a descending run, then random values.
  std::mt19937_64 draw(11);
  std::uniform_real_distribution<double> value(0.0, 1.0);
  std::vector<double> added;
  RunningMedian running;
  EXPECT_TRUE(std::isnan(running.median()));
  auto add = [&](double v) {
    added.push_back(v);
    running.add(v);
    ASSERT_EQ(running.size(), added.size());
    ASSERT_EQ(running.median(), median(added)) << added.size() << " values";
  };
  for (double v : {2.0, 2.0, 1.0, 3.0, 2.0}) add(v);
  for (int i = 10; i > 0; --i) add(i * 0.1);
  for (int i = 0; i < 500; ++i) add(value(draw));
}

TEST(RelativeNoise, MatchesRelativeSpreadOfNormalData) {
  const auto v = normal_samples(100, 0.02, 20000, 1);
  EXPECT_NEAR(relative_noise(v), 0.02, 0.002);
}

TEST(RelativeNoise, OneOutlierBarelyMovesIt) {
  auto v = normal_samples(100, 0.01, 40, 2);
  const double before = relative_noise(v);
  v[7] = 1000;
  EXPECT_NEAR(relative_noise(v), before, 0.25 * before);
}

TEST(StopRule, NeedsMinimumSamplesAndTimeThenLowNoise) {
  StopRule rule;
  rule.min_samples = 10;
  rule.min_time_s = 1e-3;
  rule.max_noise = 0.05;
  rule.timeout_s = 10;
  const auto quiet = normal_samples(1e-3, 0.01, 9, 3);
  EXPECT_EQ(should_stop(rule, quiet, 0.1), StopReason::none);  // too few samples
  const auto enough = normal_samples(1e-3, 0.01, 10, 3);
  EXPECT_EQ(should_stop(rule, enough, 0.1), StopReason::converged);
  const auto noisy = normal_samples(1e-3, 0.5, 50, 4);
  EXPECT_EQ(should_stop(rule, noisy, 0.1), StopReason::none);
  EXPECT_EQ(should_stop(rule, noisy, 11), StopReason::timeout);
  rule.max_samples = 50;
  EXPECT_EQ(should_stop(rule, noisy, 0.1), StopReason::max_samples);
}

TEST(StopRule, MinimumTimeCountsMeasuredTime) {
  StopRule rule;
  rule.min_samples = 5;
  rule.min_time_s = 1.0;
  rule.timeout_s = 100;
  const std::vector<double> tiny(100, 1e-6);
  EXPECT_EQ(should_stop(rule, tiny, 1), StopReason::none);
}

TEST(StopRule, TimeoutNeverStopsBeforeAFewSamples) {
  StopRule rule;
  rule.timeout_s = 0;
  EXPECT_EQ(should_stop(rule, std::vector<double>{1.0, 1.0}, 5), StopReason::none);
}

TEST(ThrottleRule, DropsSamplesBelowNinetyPercentOfReferenceClock) {
  std::vector<double> mhz(20, 1980);
  mhz[3] = 1500;   // throttled
  mhz[11] = 1700;  // throttled (below 1782)
  mhz[12] = 1800;  // within 10%
  const auto r = apply_throttle_rule(mhz, 0.10);
  EXPECT_DOUBLE_EQ(r.reference_mhz, 1980);
  EXPECT_EQ(r.dropped, (std::vector<std::size_t>{3, 11}));
  EXPECT_EQ(r.kept.size(), 18u);
  EXPECT_FALSE(r.too_many_throttled);
}

TEST(ThrottleRule, OneHighClockCannotBecomeTheReference) {
  std::vector<double> mhz(30, 1500);
  mhz[0] = 2500;
  const auto r = apply_throttle_rule(mhz, 0.10);
  EXPECT_DOUBLE_EQ(r.reference_mhz, 1500);
  EXPECT_TRUE(r.dropped.empty());
}

TEST(ThrottleRule, KeepsEverythingWhenTooFewWouldRemain) {
  std::vector<double> mhz = {1980, 1980, 1980, 900, 900, 900};
  // p90 is 1980: three of six samples would be dropped, leaving 3 < min_keep 5.
  const auto r = apply_throttle_rule(mhz, 0.10, 5);
  EXPECT_TRUE(r.too_many_throttled);
  EXPECT_EQ(r.kept.size(), 6u);
  EXPECT_TRUE(r.dropped.empty());
}

TEST(SpeedupInterval, AnAARunContainsOne) {
  const auto a = normal_samples(100, 0.02, 200, 5);
  const auto b = normal_samples(100, 0.02, 200, 6);
  const auto i = speedup_interval(a, b);
  EXPECT_LE(i.low, 1.0);
  EXPECT_GE(i.high, 1.0);
  EXPECT_NEAR(i.estimate, 1.0, 0.01);
}

TEST(SpeedupInterval, ARealSpeedupExcludesOne) {
  const auto a = normal_samples(200, 0.02, 100, 7);
  const auto b = normal_samples(100, 0.02, 100, 8);
  const auto i = speedup_interval(a, b);
  EXPECT_GT(i.low, 1.9);
  EXPECT_LT(i.high, 2.1);
  EXPECT_LE(i.low, i.estimate);
  EXPECT_GE(i.high, i.estimate);
}

TEST(SpeedupInterval, IsDeterministicForASeed) {
  const auto a = normal_samples(150, 0.05, 50, 9);
  const auto b = normal_samples(100, 0.05, 50, 10);
  const auto x = speedup_interval(a, b, 500, 42), y = speedup_interval(a, b, 500, 42);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
}

}  // namespace

namespace {

std::vector<double> normal_samples(int n, double mean, double sd, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> x;
  for (int i = 0; i < n; ++i) x.push_back(d(gen));
  return x;
}

TEST(TwoClusters, OneHonestDistributionIsNotSuspect) {
  EXPECT_FALSE(bench::stats::two_clusters(normal_samples(200, 100e-6, 2e-6, 1)));
}

TEST(TwoClusters, AFewSlowOutliersAreNotSuspect) {
  auto x = normal_samples(100, 100e-6, 1e-6, 2);
  for (int i = 0; i < 8; ++i) x[i] = 250e-6;  // 8% of samples hit a hiccup: under the 10% share
  EXPECT_FALSE(bench::stats::two_clusters(x));
}

TEST(TwoClusters, SkippingHalfTheSamplesIsSuspect) {
  auto x = normal_samples(100, 200e-6, 2e-6, 3);
  for (int i = 0; i < 100; i += 2) x[i] = 45e-6;
  const auto c = bench::stats::two_clusters(x);
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->fast_share, 0.5, 1e-9);
  EXPECT_NEAR(c->fast_median, 45e-6, 1e-9);
  EXPECT_NEAR(c->slow_median, 200e-6, 5e-6);
}

TEST(TwoClusters, AtTheThresholdTenPercentApartByOneAndAHalfIsSuspect) {
  std::vector<double> x(90, 150e-6);
  x.insert(x.end(), 10, 99e-6);  // 10% of samples, 1.515x faster
  EXPECT_TRUE(bench::stats::two_clusters(x));
  std::vector<double> y(90, 150e-6);
  y.insert(y.end(), 10, 101e-6);  // 1.485x: under the gap
  EXPECT_FALSE(bench::stats::two_clusters(y));
}

}  // namespace
