// tools/expectations_update.cpp: which scored rows may become expectations, judged on noise.
#include "expectations_update.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/stats.hpp"
#include "case_result_fixture.hpp"

namespace {

using bench::tools::CaseResult;
using bench::tools::plan_update;
using bench::tools::UpdatePolicy;

CaseResult make_case(const std::string& variant, double median_us, double noise, int n, unsigned seed) {
  CaseResult c = bench::tools::testing::verified_case("ch12/launches", variant, variant, median_us);
  c.samples = bench::tools::testing::normal_samples(median_us, noise, n, seed);
  c.noise = noise;
  c.sample_count = n;
  return c;
}

bench::tools::UpdateResult update_with(double baseline_noise, int baseline_samples) {
  const std::vector<CaseResult> cases = {make_case("baseline", 1000, baseline_noise, baseline_samples, 1),
                                         make_case("optimized", 280, 0.002, 200, 2)};
  const auto card = bench::tools::score(cases, std::nullopt, "test_gpu");
  UpdatePolicy policy;
  policy.date = "2026-01-01T00:00:00Z";
  return plan_update(std::nullopt, card, nlohmann::json::object(), policy);
}

TEST(ExpectationsUpdate, QuietVariantsAreAcceptedWithTheDefaultTolerance) {
  const auto r = update_with(0.01, 100);
  ASSERT_EQ(r.accepted.size(), 1u) << (r.refused.empty() ? "" : r.refused[0]);
  EXPECT_DOUBLE_EQ(r.updated.examples.at("ch12/launches").tolerance, 0.10);
}

// A host-bound baseline: 6% per-sample jitter, but 2000 samples pin its median to ~0.17%.
TEST(ExpectationsUpdate, AJitteryVariantWithManySamplesIsAcceptedWithAWiderBand) {
  const auto r = update_with(0.06, 2000);
  ASSERT_EQ(r.accepted.size(), 1u) << (r.refused.empty() ? "" : r.refused[0]);
  EXPECT_DOUBLE_EQ(r.updated.examples.at("ch12/launches").tolerance, 0.12);
}

// The same jitter over 40 samples leaves the median uncertain to ~1.2%: refused, saying why.
TEST(ExpectationsUpdate, AJitteryVariantWithFewSamplesIsRefused) {
  const auto r = update_with(0.06, 40);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("baseline is too noisy: 6.0% > 5.0%, and 40 samples pin its median only to"),
            std::string::npos) << r.refused[0];
}

TEST(ExpectationsUpdate, BeyondTheJitterLimitIsRefusedWhateverTheSampleCount) {
  const auto r = update_with(0.20, 100000);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("too noisy: 20.0%"), std::string::npos) << r.refused[0];
}

// bench compare --repetitions: a pageable-copy-like baseline, 8% jitter over 80 samples per run
// (a median known only to ~1.1% by the sample-count rule), measured in `runs` processes whose
// medians are `run_medians`; the pinned side is steady.
bench::tools::UpdateResult update_with_runs(const std::vector<double>& run_medians) {
  CaseResult base = make_case("baseline", 0, 0.08, 80, 3);
  base.samples.clear();
  for (std::size_t i = 0; i < run_medians.size(); ++i) {
    const auto run = bench::tools::testing::normal_samples(run_medians[i], 0.08, 80, 10 + unsigned(i));
    base.samples.insert(base.samples.end(), run.begin(), run.end());
  }
  base.run_medians_us = run_medians;
  base.sample_count = static_cast<int64_t>(base.samples.size()) / static_cast<int64_t>(run_medians.size());
  base.median_us = bench::stats::median(base.samples);
  base.noise = bench::stats::relative_noise(base.samples);
  CaseResult pinned = make_case("optimized", 5000, 0.003, 300, 4);
  pinned.run_medians_us.assign(run_medians.size(), 5000);
  const auto card = bench::tools::score({base, pinned}, std::nullopt, "test_gpu");
  UpdatePolicy policy;
  policy.date = "2026-01-01T00:00:00Z";
  return plan_update(std::nullopt, card, nlohmann::json::object(), policy);
}

TEST(ExpectationsUpdate, AJitteryVariantWhoseRunsAgreeIsAcceptedOnTheirEvidence) {
  const auto r = update_with_runs({35000, 37000, 36000, 38500, 36500});
  ASSERT_EQ(r.accepted.size(), 1u) << (r.refused.empty() ? "" : r.refused[0]);
  const auto& entry = r.updated.examples.at("ch12/launches");
  EXPECT_GE(entry.tolerance, 0.16);  // twice the pooled noise
  EXPECT_NEAR(entry.speedup, 7.3, 0.3);
}

TEST(ExpectationsUpdate, RunsThatDisagreeBeyondTheToleranceAreRefused) {
  const auto r = update_with_runs({35000, 36000, 52000, 36500, 35500});
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("run 3 of 5 gave 10.40x"), std::string::npos) << r.refused[0];
  EXPECT_NE(r.refused[0].find("the runs do not reproduce each other"), std::string::npos) << r.refused[0];
}

// Two runs are not enough to stand in for the sample-count rule.
TEST(ExpectationsUpdate, TwoRunsStillNeedTheSampleCountRule) {
  const auto r = update_with_runs({35000, 36000});
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("baseline is too noisy"), std::string::npos) << r.refused[0];
}

}  // namespace

// docs/expectations.md, "Scored by a metric": the entry records the metric beside its ratio, and
// a file whose entry records another figure than the run declares is refused at its position.
namespace {

CaseResult scored_case(const std::string& variant, double metric, double noise, unsigned seed) {
  CaseResult c = make_case(variant, 500, 0.01, 100, seed);
  c.example = "ch15/interference";
  c.name = c.example + "/" + variant;
  c.scored_by = bench::ScoredMetric{"p99_us", "lower"};
  c.metric_names = {"p99_us"};
  c.metric_samples = bench::tools::testing::normal_samples(metric, noise, 100, seed + 10);
  c.metrics["p99_us"] = bench::stats::median(c.metric_samples);
  return c;
}

bench::tools::Scorecard scored_card() {
  return bench::tools::score(
      {scored_case("baseline", 460, 0.03, 1), scored_case("optimized", 200, 0.03, 2)}, std::nullopt,
      "test_gpu");
}

TEST(ExpectationsUpdate, APairScoredByAMetricRecordsIt) {
  UpdatePolicy policy;
  policy.date = "2026-01-01T00:00:00Z";
  const auto r = plan_update(std::nullopt, scored_card(), nlohmann::json::object(), policy);
  ASSERT_EQ(r.accepted.size(), 1u) << (r.refused.empty() ? "" : r.refused[0]);
  const auto& entry = r.updated.examples.at("ch15/interference");
  ASSERT_TRUE(entry.metric);
  EXPECT_EQ(*entry.metric, (bench::ScoredMetric{"p99_us", "lower"}));
  EXPECT_NEAR(entry.speedup, 2.3, 0.05);
  EXPECT_FALSE(entry.pct_ceiling);
  EXPECT_GT(entry.tolerance, 0.05);  // twice the metric's own noise (3%), not the time's (1%)
}

TEST(ExpectationsUpdate, AFileRecordingAnotherFigureIsRefusedAtItsPosition) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("test_gpu_" + std::to_string(::getpid())) / "test_gpu.json";
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << R"({
  "format_version": 1,
  "hardware_key": "test_gpu",
  "examples": {
    "ch15/interference": {"metric": {"name": "p50_us", "better": "lower"},
                          "variants": {"baseline": {"median_us": 500.0}}, "speedup": 2.0, "tolerance": 0.1}
  }
})";
  UpdatePolicy policy;
  try {
    bench::tools::update_expectations_file(file, scored_card(), nlohmann::json::object(), policy);
    ADD_FAILURE() << "a file recording p50_us was updated for an example scored by p99_us";
  } catch (const bench::ExpectationsError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  file.string() +
                  ":5:37: at /examples/ch15~1interference/metric: the entry records "
                  "a speedup of p50_us (lower is better), but the example is scored by p99_us "
                  "(lower is better)"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(file.parent_path());
}

}  // namespace

// On a machine of four GPUs, an update writes the examples that need several GPUs into the
// machine's file and every other example into its GPU's one-GPU file (update_targets).
TEST(ExpectationsUpdate, AMachineOfSeveralGpusWritesOneGpuExamplesToTheGpusOwnFile) {
  std::vector<CaseResult> cases = {make_case("baseline", 1000, 0.01, 100, 1),
                                   make_case("optimized", 280, 0.01, 100, 2)};
  for (int i = 0; i < 2; ++i) {
    CaseResult c = bench::tools::testing::verified_case("ch04/allreduce", i ? "optimized" : "baseline",
                                                        i ? "optimized" : "baseline", i ? 250.0 : 1000.0);
    c.min_gpus = 2;
    cases.push_back(c);
  }
  const std::filesystem::path dir = "/expectations";
  const auto four = bench::tools::update_targets(dir, bench::tools::score(cases, std::nullopt, "4x_h100"));
  ASSERT_EQ(four.size(), 2u);
  EXPECT_EQ(four[0].first, dir / "4x_h100.json");
  EXPECT_EQ(four[0].second.hardware_key, "4x_h100");
  EXPECT_EQ(four[1].first, dir / "h100.json");
  EXPECT_EQ(four[1].second.hardware_key, "h100");
  for (const auto& row : four[0].second.rows) EXPECT_EQ(row.example, "ch04/allreduce");
  for (const auto& row : four[1].second.rows) EXPECT_EQ(row.example, "ch12/launches");
  EXPECT_FALSE(four[0].second.rows.empty());
  EXPECT_FALSE(four[1].second.rows.empty());

  // One GPU: one file, every row. Only one-GPU examples on four GPUs: only the one-GPU file.
  const auto one = bench::tools::update_targets(dir, bench::tools::score(cases, std::nullopt, "h100"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first, dir / "h100.json");
  cases.resize(2);
  const auto only_single = bench::tools::update_targets(dir, bench::tools::score(cases, std::nullopt, "4x_h100"));
  ASSERT_EQ(only_single.size(), 1u);
  EXPECT_EQ(only_single[0].first, dir / "h100.json");
}
