// harness/src/sample_check.cpp: which timed samples are device-checked, the worst case a
// variant can pick against that schedule, and the verdict on a device comparison's counts.
#include "sample_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace bench::detail {
namespace {

std::vector<double> schedule(int samples) {
  std::vector<double> chances;
  for (int i = 1; i <= samples; ++i) chances.push_back(device_check_probability(i));
  return chances;
}

TEST(SampleCheck, EverySampleUpToTheNinetyThirdIsChecked) {
  for (int i = 1; i <= 93; ++i) EXPECT_EQ(device_check_probability(i), 1.0) << i;
  EXPECT_NEAR(device_check_probability(186), 0.5, 1e-12);
}

TEST(SampleCheck, AFivePercentCorrupterEscapesUnderOnePercentAtAnyLength) {
  // The rule: a variant spoiling 5% of its samples, placed where checks are rarest,
  // fails with probability >= 99% whatever the number of samples.
  for (int n : {20, 93, 100, 200, 500, 1000, 5000, 20000})
    EXPECT_LE(worst_case_escape(schedule(n), 0.05), 0.01) << n << " samples";
}

TEST(SampleCheck, TheOldRandomRateLetAFivePercentCorrupterThroughMostOfTheTime) {
  // rate min(1, 8 / i), the random checks before issue 38: the worst case at 100 samples.
  std::vector<double> old;
  for (int i = 1; i <= 100; ++i) old.push_back(std::min(1.0, 8.0 / i));
  EXPECT_GT(worst_case_escape(old, 0.05), 0.5);
}

TEST(SampleCheck, UncheckedSamplesLetAnyCorrupterThrough) {
  EXPECT_EQ(worst_case_escape(std::vector<double>(100, 0.0), 0.05), 1.0);
  EXPECT_EQ(worst_case_escape({}, 0.05), 1.0);
  // One unchecked sample among checked ones is where a 5% corrupter of 20 samples puts its one.
  std::vector<double> one_gap(20, 1.0);
  one_gap[7] = 0.0;
  EXPECT_EQ(worst_case_escape(one_gap, 0.05), 1.0);
}

DeviceComparison counts(unsigned long long mismatches, unsigned long long non_finite, double err2, double ref2) {
  DeviceComparison c{};
  c.mismatches = mismatches;
  c.non_finite = non_finite;
  c.err2 = err2;
  c.ref2 = ref2;
  return c;
}

TEST(SampleCheck, VerdictFollowsTheHostComparison) {
  EXPECT_TRUE(device_comparison_passes(counts(0, 0, 0, 1), exact()));
  EXPECT_FALSE(device_comparison_passes(counts(1, 0, 0, 1), exact()));
  EXPECT_FALSE(device_comparison_passes(counts(0, 1, 0, 1), allclose(1, 1)));
  EXPECT_TRUE(device_comparison_passes(counts(0, 0, 1e-10, 1), relative_l2(1e-5)));
  EXPECT_FALSE(device_comparison_passes(counts(0, 0, 1e-8, 1), relative_l2(1e-5)));
  EXPECT_FALSE(device_comparison_passes(counts(0, 0, 0, 0), relative_l2(1e-5)));    // a zero reference
  EXPECT_FALSE(device_comparison_passes(counts(0, 0, NAN, 1), relative_l2(1e-5)));  // Inf against Inf
}

}  // namespace
}  // namespace bench::detail
