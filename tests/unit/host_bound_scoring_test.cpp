// tools/scoring.cpp and expectations_update.cpp for host-dependent examples: a host-bound
// baseline makes the pair scored by the optimized side's time; a host-bound optimized side
// makes it scored against the spread of speedups recorded over machines (docs/expectations.md).
#include <gtest/gtest.h>

#include "case_result_fixture.hpp"
#include "expectations_update.hpp"
#include "scoring.hpp"

namespace {

using bench::tools::CaseResult;
using bench::tools::ScoreBasis;
using bench::tools::Status;

CaseResult side(const std::string& variant, double median_us, double noise, bool host_bound, unsigned seed) {
  CaseResult c = bench::tools::testing::verified_case("ch12/graphs", variant, variant, median_us);
  c.samples = bench::tools::testing::normal_samples(median_us, noise, 400, seed);
  c.noise = noise;
  c.host_bound = host_bound;
  c.sample_count = 400;
  return c;
}

// Recorded on the machine that wrote the entry: baseline 1221 us (host-bound), optimized 285 us.
bench::Expectations recorded(double tolerance = 0.10) {
  bench::Expectations x;
  auto& e = x.examples["ch12/graphs"];
  e.speedup = 1221.0 / 285.0;
  e.tolerance = tolerance;
  e.variants["baseline"] = {1221.0, 0.09};
  e.variants["optimized"] = {285.0, 0.002};
  return x;
}

bench::tools::ScoredRow score_one(double baseline_us, double optimized_us, const bench::Expectations& x,
                                  bool optimized_host_bound = false) {
  const std::vector<CaseResult> cases = {side("baseline", baseline_us, 0.09, true, 1),
                                         side("optimized", optimized_us, 0.005, optimized_host_bound, 2)};
  return bench::tools::score(cases, x, "test_gpu").rows.at(0);
}

TEST(HostBoundScoring, AnotherHostsBaselineDoesNotMoveTheStatus) {
  // The fresh machine that scored 2.94x against 4.28x +-20%: its host launched 30% slower.
  const auto row = score_one(838.0 * 1.0, 285.0, recorded());
  EXPECT_EQ(row.basis, ScoreBasis::optimized_time);
  EXPECT_EQ(row.status, Status::pass) << row.reason;
  const auto slow_host = score_one(1221.0 * 0.69, 286.0, recorded());
  EXPECT_EQ(slow_host.status, Status::pass) << slow_host.reason;
}

TEST(HostBoundScoring, APlanted15PercentSlowdownOfTheOptimizedSideRegresses) {
  const auto row = score_one(1221.0, 285.0 * 1.15, recorded());
  EXPECT_EQ(row.status, Status::regressed) << row.reason;
  EXPECT_NE(row.reason.find("host-bound"), std::string::npos) << row.reason;
}

TEST(HostBoundScoring, AFasterOptimizedSideIsImprovedAndNoSpeedupStillCounts) {
  EXPECT_EQ(score_one(1221.0, 285.0 * 0.8, recorded()).status, Status::improved);
  EXPECT_EQ(score_one(287.0, 285.0, recorded()).status, Status::no_speedup);
}

TEST(HostBoundScoring, DeviceBoundPairsKeepTheSpeedupRule) {
  const std::vector<CaseResult> cases = {side("baseline", 1221.0, 0.002, false, 1),
                                         side("optimized", 285.0 * 1.15, 0.002, false, 2)};
  const auto row = bench::tools::score(cases, recorded(), "test_gpu").rows.at(0);
  EXPECT_EQ(row.basis, ScoreBasis::speedup);
  EXPECT_EQ(row.status, Status::regressed) << row.reason;
}

TEST(HostBoundScoring, AHostBoundOptimizedSideIsScoredAgainstTheMachinesSpread) {
  bench::Expectations x = recorded();
  x.examples["ch12/graphs"].machines = {{4.28, 285.0, "a", ""}, {3.60, 330.0, "b", ""}};
  // The band runs from 3.60x -10% (3.24x) to 4.28x +10%: 3.0x is below it, beyond the noise.
  EXPECT_EQ(score_one(1221.0, 1221.0 / 3.0, x, true).status, Status::regressed);
  // 3.5x lies between the two machines: PASS, though 18% under the entry's own 4.28x.
  const auto row = score_one(1221.0, 1221.0 / 3.5, x, true);
  EXPECT_EQ(row.basis, ScoreBasis::machine_spread);
  EXPECT_EQ(row.status, Status::pass) << row.reason;
}

bench::tools::Scorecard card_of(double baseline_us, double optimized_us, const bench::Expectations& x) {
  const std::vector<CaseResult> cases = {side("baseline", baseline_us, 0.03, true, 1),
                                         side("optimized", optimized_us, 0.003, true, 2)};
  return bench::tools::score(cases, x, "test_gpu");
}

TEST(HostBoundScoring, AddMachineAppendsOnlyWhereTheScoredFigureIsTheHosts) {
  bench::tools::UpdatePolicy policy;
  policy.add_machine = true;
  policy.date = "2026-11-23T00:00:00Z";
  const nlohmann::json context = {{"host_name", "lease-2"}};
  const auto update = bench::tools::plan_update(recorded(), card_of(1221.0, 1221.0 / 3.0, recorded()), context, policy);
  ASSERT_EQ(update.accepted.size(), 1u) << (update.refused.empty() ? "" : update.refused[0]);
  const auto& machines = update.updated.examples.at("ch12/graphs").machines;
  ASSERT_EQ(machines.size(), 1u);
  EXPECT_EQ(machines[0].host, "lease-2");
  EXPECT_NEAR(machines[0].speedup, 3.0, 0.05);
  EXPECT_EQ(update.updated.examples.at("ch12/graphs").speedup, recorded().examples.at("ch12/graphs").speedup);

  // The same machine again (or the one whose update wrote the entry) is no second machine.
  const auto again = bench::tools::plan_update(update.updated, card_of(1221.0, 1221.0 / 3.0, update.updated), context, policy);
  EXPECT_TRUE(again.accepted.empty());
  ASSERT_EQ(again.refused.size(), 1u);
  EXPECT_NE(again.refused[0].find("this machine (lease-2) is already in its machines list"), std::string::npos)
      << again.refused[0];
  EXPECT_EQ(again.updated.examples.at("ch12/graphs").machines.size(), 1u);

  // A device-bound pair: a different figure is a regression, never "another machine".
  const std::vector<CaseResult> device = {side("baseline", 1221.0, 0.002, false, 1),
                                          side("optimized", 285.0, 0.002, false, 2)};
  const auto refused = bench::tools::plan_update(recorded(), bench::tools::score(device, recorded(), "k"), context, policy);
  EXPECT_TRUE(refused.accepted.empty());
  ASSERT_EQ(refused.refused.size(), 1u);
  EXPECT_NE(refused.refused[0].find("not the machine"), std::string::npos) << refused.refused[0];
}

TEST(HostBoundScoring, AnAcceptedHostBoundEntryIgnoresTheBaselinesJitterInItsTolerance) {
  bench::tools::UpdatePolicy policy;
  policy.date = "2026-11-23T00:00:00Z";
  bench::Expectations x;  // a new entry
  const std::vector<CaseResult> cases = {side("baseline", 1221.0, 0.09, true, 1), side("optimized", 285.0, 0.003, false, 2)};
  const auto update = bench::tools::plan_update(x, bench::tools::score(cases, x, "k"), {{"host_name", "h"}}, policy);
  ASSERT_EQ(update.accepted.size(), 1u) << (update.refused.empty() ? "" : update.refused[0]);
  const auto& e = update.updated.examples.at("ch12/graphs");
  EXPECT_DOUBLE_EQ(e.tolerance, 0.10);  // not 2 x 9%
  EXPECT_TRUE(e.machines.empty());      // its scored figure is the GPU's: no spread to record
}

}  // namespace
