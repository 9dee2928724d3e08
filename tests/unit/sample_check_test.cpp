// harness/src/sample_check.cpp: which timed samples are device-checked, the worst case a
// variant can pick against that schedule, and the verdict on a device comparison's counts.
#include "sample_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

// ---- where checks run: interleaved, or held until sampling ends (sustained mode) -------------
TEST(HeldSlots, AtMostAQuarterOfTheFreeMemory) {
  constexpr std::size_t GiB = 1ull << 30;
  EXPECT_EQ(held_slots_cap(GiB, 79 * GiB), 19);    // ch07's 1 GiB copies on an H100
  EXPECT_EQ(held_slots_cap(GiB, 4 * GiB), 1);      // exactly a quarter: one set, as before
  EXPECT_EQ(held_slots_cap(GiB + 1, 4 * GiB), 0);  // over it: device checks off, as before
  EXPECT_EQ(held_slots_cap(64, 79 * GiB), kMaxHeldSlots);
  EXPECT_EQ(held_slots_cap(0, 79 * GiB), kMaxHeldSlots);
}

TEST(HeldSlots, OneForEveryCheckTheScheduleAsksFor) {
  EXPECT_EQ(expected_device_checks(0), 0);
  EXPECT_EQ(expected_device_checks(50), 50);  // sustained mode's ~50 batches of 20 ms: all checked
  EXPECT_EQ(expected_device_checks(93), 93);
  // 93 (1 + ln(n / 93)) for n past 93, within the sum's rounding.
  EXPECT_NEAR(expected_device_checks(200), 93 * (1 + std::log(200.0 / 93)), 1.5);
}

TEST(DeviceCheckPlan, InterleavedChecksRunAtOnceWhileTheirCostIsWithinBudget) {
  DeviceCheckPlan plan(/*deferred=*/false, /*slots=*/10);
  EXPECT_EQ(plan.slots(), 0);
  EXPECT_EQ(plan.place(), DeviceCheckPlan::Where::at_once);
  // The rule as before: one more while those run so far cost at most twice the sampling time,
  // kCompareBudgetFloorSeconds at least.
  constexpr double kFloor = kCompareBudgetFloorSeconds;
  EXPECT_EQ(plan.chance(1, kFloor, 0.1), 1.0);
  EXPECT_EQ(plan.chance(1, kFloor + 0.01, 0.1), 0.0);
  EXPECT_EQ(plan.chance(200, 2 * kFloor - 0.1, kFloor), device_check_probability(200));
  EXPECT_EQ(plan.chance(200, 2 * kFloor + 0.1, kFloor), 0.0);
  plan.ran(0.4);  // no held checks: the measured cost changes nothing
  EXPECT_EQ(plan.chance(1, kFloor, 0.1), 1.0);
}

TEST(DeviceCheckPlan, DeferredMeasuresTheFirstAtOnceThenHoldsUntilTheSlotsRunOut) {
  DeviceCheckPlan plan(/*deferred=*/true, /*slots=*/3);
  EXPECT_EQ(plan.place(), DeviceCheckPlan::Where::measure_at_once);
  plan.ran(0.001);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(plan.place(), DeviceCheckPlan::Where::deferred) << k;
    plan.held();
  }
  EXPECT_EQ(plan.place(), DeviceCheckPlan::Where::at_once);  // every slot held: checked now
  EXPECT_EQ(plan.held_count(), 3);
}

TEST(DeviceCheckPlan, DeferredBudgetCountsTheHeldChecksAtTheLastMeasuredCost) {
  // Checks of 1/4 s (exact in binary, so the bound is met exactly), 0.2 s of sampling: the
  // budget is the floor.
  DeviceCheckPlan plan(/*deferred=*/true, /*slots=*/100);
  constexpr double kCheck = 1.0 / 4;
  plan.ran(kCheck);
  const double spent = kCheck;  // the one run at once
  int held = 0;
  while (plan.chance(held + 2, spent, 0.2) > 0) {
    plan.held();
    ++held;
  }
  // Owed (1 + held) / 4 = the floor still allows one more, as an interleaved check with the floor
  // spent would: floor * 4 held beside the one run, and the next would be over.
  EXPECT_EQ(held, static_cast<int>(kCompareBudgetFloorSeconds / kCheck));
  EXPECT_EQ(plan.chance(1, spent, 0.2), 0.0);
  // More sampling time raises the budget again.
  EXPECT_EQ(plan.chance(1, spent, kCompareBudgetFloorSeconds), 1.0);
}

// Which samples a simulated run checks: those certain to be (chance 1; it draws nothing), or every
// one with any chance (the most its checks can cost).
enum class Draw { certain, any_chance };

// A sustained run simulated through the plan: each sample's chance as runner.cpp records it;
// `drawn`, when given, receives how many samples were checked.
std::vector<double> sustained_chances(int samples, int slots, double check_seconds,
                                      double sample_seconds, int* at_once,
                                      Draw draw = Draw::certain, int* drawn = nullptr) {
  DeviceCheckPlan plan(/*deferred=*/true, slots);
  std::vector<double> chances;
  double spent = 0;
  *at_once = 0;
  for (int i = 1; i <= samples; ++i) {
    const double chance = plan.chance(i, spent, i * sample_seconds);
    chances.push_back(chance);
    if (draw == Draw::certain ? chance < 1.0 : chance == 0.0) continue;
    if (drawn) ++*drawn;
    switch (plan.place()) {
      case DeviceCheckPlan::Where::deferred:
        plan.held();
        break;
      case DeviceCheckPlan::Where::measure_at_once:
      case DeviceCheckPlan::Where::at_once:
        ++*at_once;
        spent += check_seconds;
        plan.ran(check_seconds);
        break;
    }
  }
  return chances;
}

TEST(DeviceCheckPlan, WhereChecksRunLeavesEachSamplesChanceAndSoTheWorstCase) {
  // 50 sustained samples of 20 ms, 5 ms checks: every sample checked, deferred or not.
  int at_once = 0;
  const auto all_held = sustained_chances(50, 100, 0.005, 0.02, &at_once);
  EXPECT_EQ(at_once, 1);  // the one that measured a check's cost
  EXPECT_EQ(worst_case_escape(all_held, 0.05), 0.0);
  // Two slots only: the rest are checked at once, with the same chance.
  const auto few_slots = sustained_chances(50, 2, 0.005, 0.02, &at_once);
  EXPECT_EQ(at_once, 48);
  EXPECT_EQ(few_slots, all_held);
}

TEST(DeviceCheckPlan, ASlowReferenceStillChecksEverySampleAtTheFloor) {
  // At the floor's threshold: 20 samples of 70 ms (a prefill step's), each check costing the
  // floor / 20 (0.5 s, longer than ch15's 370 ms prefill check): every sample checked, and a
  // variant that spoils one of the 20 is caught for certain. At 0.5 s the old floor left 19 of
  // them unchecked.
  const double at_threshold = kCompareBudgetFloorSeconds / 20;
  int at_once = 0;
  const auto chances = sustained_chances(20, 100, at_threshold, 0.07, &at_once);
  EXPECT_EQ(std::count(chances.begin(), chances.end(), 1.0), 20);
  EXPECT_EQ(worst_case_escape(chances, 0.05), 0.0);
  // Interleaved the same: one more while the floor is not passed.
  DeviceCheckPlan interleaved(/*deferred=*/false, 0);
  double spent = 0;
  int checked = 0;
  for (int i = 1; i <= 20; ++i)
    if (interleaved.chance(i, spent, i * 0.07) == 1.0) spent += at_threshold, ++checked;
  EXPECT_EQ(checked, 20);
}

TEST(DeviceCheckPlan, ATrainingStepShapedCaseIsCoveredAtTheFloor) {
  // ch01/training_step's shape on an H200 (2026-11-28): 126 sustained samples over a 3 s timeout,
  // 85 ms a check (reference GEMMs at 3.3 TFLOP a step). Every sample with any chance is drawn
  // here, the most its checks can cost: the budget never runs out, so each keeps its chance and a
  // 5% spoiler escapes under 1%. Those checks cost over 10 s, the old floor, under which the run
  // left 16 samples with no chance of a check and escape_5pct 1.0.
  constexpr int kSamples = 126;
  constexpr double kCheck = 0.085, kSample = 3.0 / kSamples;
  int at_once = 0, drawn = 0;
  const auto chances =
      sustained_chances(kSamples, 200, kCheck, kSample, &at_once, Draw::any_chance, &drawn);
  EXPECT_EQ(std::count(chances.begin(), chances.end(), 0.0), 0);
  EXPECT_LT(worst_case_escape(chances, 0.05), 0.01);
  EXPECT_GT(drawn * kCheck, 10.0);
  EXPECT_LE(drawn * kCheck, kCompareBudgetFloorSeconds);
}

TEST(DeviceCheckPlan, OverBudgetSamplesGoUncheckedAndTheWorstCaseSaysSo) {
  // Just over the floor's threshold: 1 s checks of 1/64 s samples: the checks' cost passes the
  // floor after a few, twice the sampling time never reaches it, and samples after it have no
  // chance of a device check. escape_5pct counts them.
  int at_once = 0;
  const auto chances = sustained_chances(50, 100, 1.0, 1.0 / 64, &at_once);
  EXPECT_EQ(at_once, 1);
  // Owed 1 + held within max(floor, i / 32): the one at once and `floor` held, then none.
  const int checked = 1 + static_cast<int>(kCompareBudgetFloorSeconds);
  EXPECT_EQ(std::count(chances.begin(), chances.end(), 1.0), checked);
  EXPECT_EQ(std::count(chances.begin(), chances.end(), 0.0), 50 - checked);
  EXPECT_EQ(worst_case_escape(chances, 0.05), 1.0);
}

}  // namespace
}  // namespace bench::detail
