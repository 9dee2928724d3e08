// harness/src/soak.cpp: sustained mode's soak stops once its windows show the board settled,
// between the minimum and the cap. Series are window medians (relative batch times, 1.0 the
// steady state) as a board shows them: a cold one rising while the power limiter lowers the
// clock, a hot one flat from the start, both with noise.
#include "soak.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace bench::detail {
namespace {

constexpr int kK = SoakRule{}.windows;
// How many windows fit in the cap: past it the loop stops whatever the rule says.
constexpr int kWindowsInCap = static_cast<int>(kSustainedSoakMaxSeconds / kSoakWindowSeconds + 0.5);

// The first number of windows at which the rule says settled, or -1 within the series.
int settles_at(const std::vector<double>& m) {
  for (std::size_t n = 1; n <= m.size(); ++n)
    if (soak_settled(std::span(m).first(n))) return static_cast<int>(n);
  return -1;
}

// Deterministic noise in [-amplitude, amplitude]: no two neighbours alike, no long run of rises.
double pattern(int i, double amplitude) {
  constexpr double kShape[] = {1.0, -1.0, 0.3, -0.6, 0.8, -0.2, -1.0, 0.6};
  return amplitude * kShape[i % 8];
}

// Uniform in [-amplitude, amplitude] from the raw generator (the same numbers with any library).
double uniform(std::mt19937_64& rng, double amplitude) {
  return amplitude * (2.0 * static_cast<double>(rng() >> 11) * 0x1p-53 - 1.0);
}

// A cold board: 5% faster at the start, rising linearly for `ramp` windows, then flat.
std::vector<double> cold(int ramp, int total, auto noise) {
  std::vector<double> m;
  for (int i = 0; i < total; ++i)
    m.push_back(1.0 - 0.05 * std::max(0.0, 1.0 - double(i) / ramp) + noise(i));
  return m;
}

TEST(Soak, TheMinimumIsTheWindowsAHotBoardIsJudgedOn) {
  EXPECT_NEAR(kK * kSoakWindowSeconds, kSustainedSoakMinSeconds, 1e-12);
  EXPECT_LT(kSustainedSoakMinSeconds, kSustainedSoakMaxSeconds);
}

TEST(Soak, AHotFlatBoardSettlesAtTheMinimum) {
  std::vector<double> m;
  for (int i = 0; i < 40; ++i) m.push_back(1.0 + pattern(i, 0.015));
  EXPECT_EQ(settles_at(m), kK);
  std::vector<double> exact(kK, 1.0);  // identical windows are flat, not rising
  EXPECT_TRUE(soak_settled(exact));
  EXPECT_FALSE(soak_settled(std::span(exact).first(kK - 1))) << "fewer windows than the rule";
}

TEST(Soak, AHotBoardWithRandomNoiseSettlesAtOrSoonAfterTheMinimum) {
  // +-1.5% a window, independent: the halves' medians differ by over 1% now and then, which
  // costs a window or a few, never the cap.
  int at_minimum = 0, within_4_more = 0;
  constexpr int kTrials = 1000;
  for (int t = 0; t < kTrials; ++t) {
    std::mt19937_64 rng(t);
    std::vector<double> m;
    for (int i = 0; i < kWindowsInCap; ++i) m.push_back(1.0 + uniform(rng, 0.015));
    const int at = settles_at(m);
    at_minimum += at == kK;
    within_4_more += at > 0 && at <= kK + 4;
  }
  EXPECT_GE(at_minimum, kTrials * 6 / 10);
  EXPECT_GE(within_4_more, kTrials * 95 / 100);
}

TEST(Soak, AColdBoardIsNotSettledUntilTheFlatPartHasLastedTheRulesWindows) {
  // 5% over 400 ms of windows, then flat with +-1% noise.
  constexpr int kRamp = static_cast<int>(0.4 / kSoakWindowSeconds + 0.5);
  const auto m = cold(kRamp, 80, [](int i) { return pattern(i, 0.01); });
  for (int n = 1; n < kRamp + kK; ++n)
    EXPECT_FALSE(soak_settled(std::span(m).first(n)))
        << n << " windows, " << kRamp << " of them rising";
  // The rule compares the soak's halves, so the rise keeps it unsettled until the flat windows are
  // most of the earlier half: past the cap, where the loop stops as the fixed soak did.
  const int at = settles_at(m);
  EXPECT_GT(at, kWindowsInCap);
  EXPECT_NE(at, -1) << "a board that has been flat long enough must settle";
}

TEST(Soak, AColdBoardWithRandomNoiseSettlesOnTheRiseOnlyWhereNoiseHidesIt) {
  // The same rise with +-1% a window of independent noise. Over the minimum's windows the rise is
  // 2.5% and the noise can hide it; then the rule stops on the rise with half of it left, which
  // the first tenths of a second of the sampling window (a second or more) see. Most such soaks
  // go on past the rise.
  constexpr int kRamp = static_cast<int>(0.4 / kSoakWindowSeconds + 0.5);
  constexpr int kTrials = 1000;
  int on_the_rise = 0, over_half_left = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::mt19937_64 rng(t);
    const auto m = cold(kRamp, kWindowsInCap, [&](int) { return uniform(rng, 0.01); });
    const int at = settles_at(m);
    if (at > 0 && at < kRamp) {
      ++on_the_rise;
      over_half_left += at < kRamp / 2;
    }
  }
  EXPECT_LE(on_the_rise, kTrials / 3);
  EXPECT_EQ(over_half_left, 0) << "settled before the rule's windows";
}

TEST(Soak, ASlowRiseNeverSettles) {
  // 0.5% a window, forever: the cap ends the soak.
  std::vector<double> m, noisy;
  for (int i = 0; i < 200; ++i) {
    m.push_back(1.0 + 0.005 * i);
    noisy.push_back(1.0 + 0.005 * i + pattern(i, 0.01));
  }
  EXPECT_EQ(settles_at(m), -1);
  EXPECT_EQ(settles_at(noisy), -1);
}

TEST(Soak, AFallingSeriesIsNoSteadyStateEither) {
  // A board faster each window (the clock recovering after heavier work) is not steady.
  std::vector<double> m;
  for (int i = 0; i < 100; ++i) m.push_back(1.0 - 0.003 * i);
  EXPECT_EQ(settles_at(m), -1);
}

TEST(Soak, ADriftWithinTheSpreadIsStillADrift) {
  // Rising 0.1% a window: the windows agree within the spread and the halves within the trend,
  // but every window is slower than the one before.
  std::vector<double> m;
  for (int i = 0; i < kK; ++i) m.push_back(1.0 + 0.001 * i);
  EXPECT_FALSE(soak_settled(m));
  std::swap(m[1], m[2]);  // the same windows, not in order: noise, not a drift
  EXPECT_TRUE(soak_settled(m));
}

TEST(Soak, AnOutlierWindowWaitsUntilItLeavesTheLastWindows) {
  std::vector<double> m(30, 1.0);
  for (int i = 0; i < 30; ++i) m[i] += pattern(i, 0.005);
  constexpr int kAt = 3;
  m[kAt] = 1.06;  // a slow window (another process, a clock dip): not the board's level
  EXPECT_EQ(settles_at(m), kAt + kK + 1);
  // The first window, faster after the idle gap before the soak: one window late.
  std::vector<double> fast_first(30, 1.0);
  fast_first[0] = 0.95;
  EXPECT_EQ(settles_at(fast_first), kK + 1);
}

TEST(Soak, TheLoopStopsBetweenTheMinimumAndTheCap) {
  EXPECT_FALSE(soak_done(0.0, true));
  EXPECT_FALSE(soak_done(kSustainedSoakMinSeconds - 1e-3, true))
      << "settled, but under the minimum";
  EXPECT_TRUE(soak_done(kSustainedSoakMinSeconds, true));
  EXPECT_FALSE(soak_done(0.5, false));
  EXPECT_FALSE(soak_done(kSustainedSoakMaxSeconds - 1e-3, false));
  EXPECT_TRUE(soak_done(kSustainedSoakMaxSeconds, false)) << "the cap, settled or not";
  EXPECT_TRUE(soak_done(kSustainedSoakMaxSeconds + 0.1, false));
  // --bench_fixed_soak passes the cap as the minimum: the fixed soak, settled or not.
  EXPECT_FALSE(soak_done(0.5, true, kSustainedSoakMaxSeconds));
  EXPECT_TRUE(soak_done(kSustainedSoakMaxSeconds, true, kSustainedSoakMaxSeconds));
}

// The runner's loop on a series of batch times: batches back to back, each ending elapsed
// seconds after the soak began; returns how many batches ran.
int batches_soaked(const std::vector<double>& batch_seconds,
                   double min_s = kSustainedSoakMinSeconds) {
  SoakWindows soak(soak_batches_per_window(batch_seconds.front()));
  double elapsed = 0;
  for (std::size_t i = 0; i < batch_seconds.size(); ++i) {
    soak.add(batch_seconds[i]);
    elapsed += batch_seconds[i];
    if (soak_done(elapsed, soak.settled(), min_s)) return static_cast<int>(i) + 1;
  }
  return -1;
}

TEST(Soak, TheLoopHonoursTheBounds) {
  constexpr double kBatch = 20.5e-3;  // a sustained batch: kSustainedBatchSeconds and a little
  // Flat: two batches a window, five windows, done at the first batch past the minimum.
  EXPECT_EQ(batches_soaked(std::vector<double>(100, kBatch)), 10);
  // Rising 0.25% a batch, forever: the cap, the first batch past it.
  std::vector<double> rising;
  for (int i = 0; i < 100; ++i) rising.push_back(kBatch * (1 + 0.0025 * i));
  double elapsed = 0;
  int at_cap = 0;
  while (elapsed < kSustainedSoakMaxSeconds) elapsed += rising[at_cap++];
  EXPECT_EQ(batches_soaked(rising), at_cap);
  // Long batches (one a window) settle in five, under the minimum: the minimum still holds.
  constexpr double kLong = 30e-3;
  EXPECT_EQ(soak_batches_per_window(kLong), 1);
  EXPECT_EQ(batches_soaked(std::vector<double>(100, kLong)), 7);  // 6 batches are 180 ms
  // The fixed soak: the cap, though flat.
  EXPECT_EQ(batches_soaked(std::vector<double>(100, kBatch), kSustainedSoakMaxSeconds), 49);
}

TEST(Soak, WindowsAreWholeAndTakeTheirMedianBatch) {
  EXPECT_EQ(soak_batches_per_window(20.3e-3), 2);
  EXPECT_EQ(soak_batches_per_window(74e-3), 1);
  EXPECT_EQ(soak_batches_per_window(5e-3), 8);
  EXPECT_EQ(soak_batches_per_window(0), 1);
  SoakWindows w(3);
  for (double b : {1.0, 9.0, 1.1, 2.0, 2.1}) w.add(b);  // one slow batch in the first window
  ASSERT_EQ(w.medians().size(), 1u) << "the second window is not whole yet";
  EXPECT_EQ(w.medians()[0], 1.1);
  w.add(2.2);
  EXPECT_EQ(w.medians(), (std::vector<double>{1.1, 2.1}));
}

}  // namespace
}  // namespace bench::detail
