// tools/results.cpp: Google Benchmark JSON (1.7 and 1.8 shapes) into cases.
#include "results.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace {

using bench::tools::Outcome;

bench::tools::ResultsFile parse(const std::string& benchmarks) {
  return bench::tools::parse_results(R"({"context": {"hardware_key": "k"}, "benchmarks": )" + benchmarks + "}",
                                     "test.json");
}

TEST(Results, StripsGoogleBenchmarkSuffixes) {
  EXPECT_EQ(bench::tools::strip_gb_suffixes("ch07/copy/baseline/iterations:1/manual_time"), "ch07/copy/baseline");
  EXPECT_EQ(bench::tools::strip_gb_suffixes("ch07/copy/baseline/iterations:1/repeats:5/manual_time"),
            "ch07/copy/baseline");
  EXPECT_EQ(bench::tools::strip_gb_suffixes("ch07/copy/baseline"), "ch07/copy/baseline");
  EXPECT_EQ(bench::tools::example_of("ch07/copy/baseline"), "ch07/copy");
  // With axes the point follows the variant; the example's point is the row, expectation key.
  EXPECT_EQ(bench::tools::example_of("ch16/fa/optimized/b:4/s:4096"), "ch16/fa/b:4/s:4096");
  EXPECT_EQ(bench::tools::variant_of("ch16/fa/optimized/b:4/s:4096"), "optimized");
  EXPECT_EQ(bench::tools::variant_of("ch07/copy/baseline"), "baseline");
  EXPECT_EQ(bench::tools::base_example_of("ch16/fa/b:4/s:4096"), "ch16/fa");
  EXPECT_EQ(bench::tools::point_of("ch16/fa/b:4/s:4096"), "b:4/s:4096");
  EXPECT_EQ(bench::tools::point_of("ch07/copy"), "");
  EXPECT_EQ(bench::tools::axes_of("b:4/s:4096").at(1),
            (std::pair<std::string, std::string>{"s", "4096"}));
}

TEST(Results, ReadsCountersLabelAndTimeUnit) {
  const auto cases = bench::tools::extract_cases(parse(R"([{"name": "ch07/copy/optimized/iterations:1/manual_time",
      "run_type": "iteration", "real_time": 0.1, "time_unit": "ms", "noise": 0.01, "verified": 1,
      "gbps": 2400, "bytes": 2.4e8, "pct_ceiling": 80,
      "label": "role=optimized;fp=00ff00ff00ff00ff;mode=cold;stop=converged;bw=hbm_copy_gbps"}])"));
  ASSERT_EQ(cases.size(), 1u);
  const auto& c = cases[0];
  EXPECT_EQ(c.name, "ch07/copy/optimized");
  EXPECT_EQ(c.example, "ch07/copy");
  EXPECT_EQ(c.role, "optimized");
  EXPECT_EQ(c.fingerprint, "00ff00ff00ff00ff");
  EXPECT_EQ(c.bw_ceiling, "hbm_copy_gbps");
  EXPECT_DOUBLE_EQ(c.median_us, 100.0);
  EXPECT_TRUE(c.verified);
  EXPECT_DOUBLE_EQ(c.pct_ceiling.value(), 80.0);
}

TEST(Results, ReadsTheVariantsOwnMetricsNamedInTheLabel) {
  const auto cases = bench::tools::extract_cases(parse(R"([{"name": "ch11/prio/optimized/iterations:1/manual_time",
      "run_type": "iteration", "real_time": 3319, "time_unit": "us", "verified": 1,
      "critical_latency_us": 1962.5, "p10_us": 3300,
      "label": "role=optimized;impl=high_priority;fp=00ff00ff00ff00ff;mode=cold;stop=converged;metrics=critical_latency_us"}])"));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].metric_names, std::vector<std::string>{"critical_latency_us"});
  ASSERT_EQ(cases[0].metrics.count("critical_latency_us"), 1u);
  EXPECT_DOUBLE_EQ(cases[0].metrics.at("critical_latency_us"), 1962.5);
  EXPECT_EQ(cases[0].metrics.count("p10_us"), 0u);  // standard counters are not metrics
}

TEST(Results, ReadsThrottleCountersAndTheThrottledAllLabel) {
  const auto cases = bench::tools::extract_cases(parse(R"([
      {"name": "ch07/copy/baseline/iterations:1/manual_time", "run_type": "iteration", "real_time": 900,
       "time_unit": "us", "verified": 1, "samples": 40, "dropped_throttled": 3, "min_sm_mhz": 1410,
       "label": "role=baseline;fp=00ff00ff00ff00ff;mode=cold;stop=converged"},
      {"name": "ch07/copy/optimized/iterations:1/manual_time", "run_type": "iteration", "real_time": 700,
       "time_unit": "us", "verified": 1, "samples": 40, "dropped_throttled": 0, "min_sm_mhz": 1200,
       "label": "role=optimized;fp=00ff00ff00ff00ff;mode=cold;stop=converged;throttled=all"}])"));
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].dropped_throttled, 3);
  EXPECT_DOUBLE_EQ(cases[0].min_sm_mhz, 1410);
  EXPECT_FALSE(cases[0].throttled_all);
  EXPECT_EQ(cases[1].dropped_throttled, 0);
  EXPECT_TRUE(cases[1].throttled_all);
}

// docs/validity.md row 2's counters: checked samples (host + device), how, and escape_5pct; with
// repetitions the worst run's stand for the case.
TEST(Results, ReadsTheSampleChecksAndKeepsTheWorstRunsWhenPooled) {
  const auto cases = bench::tools::extract_cases(parse(R"json([
      {"name": "ch16/decode/optimized/iterations:1/manual_time", "run_type": "iteration", "real_time": 75,
       "time_unit": "us", "samples": 1782, "dropped_throttled": 2, "verified_samples": 5, "compared_samples": 0,
       "escape_5pct": 0.25, "label": "role=optimized;mode=hot;checks=cpu (no device reference)"},
      {"name": "ch16/decode/optimized/iterations:1/manual_time", "run_type": "iteration", "real_time": 76,
       "time_unit": "us", "samples": 1700, "verified_samples": 4, "compared_samples": 1,
       "escape_5pct": 1.0, "label": "role=optimized;mode=hot;checks=cpu (no device reference)"},
      {"name": "ch16/flash/optimized/iterations:1/manual_time", "run_type": "iteration", "real_time": 1800,
       "time_unit": "us", "samples": 60, "verified_samples": 1, "compared_samples": 59, "escape_5pct": 0,
       "label": "role=optimized;mode=sustained;checks=device-deferred"},
      {"name": "ch07/copy/optimized/iterations:1/manual_time", "run_type": "iteration", "real_time": 700,
       "time_unit": "us", "samples": 40, "label": "role=optimized;mode=cold"}])json"));
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_DOUBLE_EQ(cases[0].escape_5pct.value(), 1.0);  // the second run's, the worse
  EXPECT_EQ(cases[0].checked_samples, 5);
  EXPECT_EQ(cases[0].timed_samples, 1700);
  EXPECT_EQ(cases[0].sample_check, "cpu (no device reference)");
  EXPECT_DOUBLE_EQ(cases[1].escape_5pct.value(), 0.0);
  EXPECT_EQ(cases[1].checked_samples, 60);
  EXPECT_FALSE(cases[2].escape_5pct.has_value());  // an older results file: nothing claimed
}

// An example of several GPUs says how many in its label; the others say nothing and read 1.
TEST(Results, ReadsTheGpusAnExampleNeeds) {
  const auto cases = bench::tools::extract_cases(parse(R"([
      {"name": "ch04/allreduce/baseline/iterations:1/manual_time", "run_type": "iteration", "real_time": 900,
       "time_unit": "us", "verified": 1, "label": "role=baseline;fp=00ff00ff00ff00ff;mode=cold;stop=converged;gpus=2"},
      {"name": "ch07/copy/baseline/iterations:1/manual_time", "run_type": "iteration", "real_time": 900,
       "time_unit": "us", "verified": 1, "label": "role=baseline;fp=00ff00ff00ff00ff;mode=cold;stop=converged"}])"));
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].min_gpus, 2);
  EXPECT_EQ(cases[1].min_gpus, 1);
}

TEST(Results, ErrorsAndSkipsInBothShapes) {
  const auto cases = bench::tools::extract_cases(parse(R"([
      {"name": "ch07/a/baseline/iterations:1/manual_time", "error_occurred": true,
       "error_message": "SKIPPED: requires 2 GPUs, this machine has 1"},
      {"name": "ch07/a/optimized/iterations:1/manual_time", "error_occurred": true,
       "error_message": "FAILED: verification: max abs error 1"},
      {"name": "ch07/b/baseline/iterations:1/manual_time", "skipped": true, "skip_message": "not here"},
      {"name": "ch07/b/optimized/iterations:1/manual_time", "error_occurred": true,
       "error_message": "cudaErrorIllegalAddress"}])"));
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0].outcome, Outcome::skipped);
  EXPECT_EQ(cases[0].message, "requires 2 GPUs, this machine has 1");
  EXPECT_EQ(cases[1].outcome, Outcome::failed);
  EXPECT_EQ(cases[1].message, "verification: max abs error 1");
  EXPECT_EQ(cases[2].outcome, Outcome::skipped);
  EXPECT_EQ(cases[3].outcome, Outcome::failed);
}

TEST(Results, RepetitionsArePooledAndAggregatesIgnored) {
  const auto cases = bench::tools::extract_cases(parse(R"([
      {"name": "ch07/a/baseline/iterations:1/repeats:3/manual_time", "run_type": "iteration", "real_time": 100, "time_unit": "us"},
      {"name": "ch07/a/baseline/iterations:1/repeats:3/manual_time", "run_type": "iteration", "real_time": 104, "time_unit": "us"},
      {"name": "ch07/a/baseline/iterations:1/repeats:3/manual_time", "run_type": "iteration", "real_time": 101, "time_unit": "us"},
      {"name": "ch07/a/baseline/iterations:1/repeats:3/manual_time_mean", "run_type": "aggregate",
       "aggregate_name": "mean", "real_time": 999, "time_unit": "us"}])"));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_DOUBLE_EQ(cases[0].median_us, 101.0);
}

// bench compare --repetitions: one row per run, each with its samples; the pool is scored and
// each run's median kept, in order, for the update's run-to-run check.
TEST(Results, RunsOfSeparateProcessesKeepTheirMediansAndPoolTheirSamples) {
  const auto cases = bench::tools::extract_cases(parse(R"([
      {"name": "ch02/a/baseline/manual_time", "run_type": "iteration", "real_time": 2, "time_unit": "us",
       "bench_samples": {"samples": [1, 2, 3]}},
      {"name": "ch02/a/baseline/manual_time", "run_type": "iteration", "real_time": 11, "time_unit": "us",
       "bench_samples": {"samples": [10, 11, 12]}}])"));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].run_medians_us, (std::vector<double>{2, 11}));
  EXPECT_EQ(cases[0].samples.size(), 6u);
  EXPECT_DOUBLE_EQ(cases[0].median_us, 6.5);  // of the pooled samples
}

// A case one run reported and a later run's process lost still fails: repetitions cannot hide a
// crash behind an earlier good run.
TEST(Results, ACaseMissingFromOneRunFailsEvenIfAnotherReportedIt) {
  auto file = parse(R"([{"name": "ch02/a/baseline/manual_time", "run_type": "iteration",
      "real_time": 5, "time_unit": "us"}])");
  file.crashes.push_back({"ch02/a", "killed by signal 6 (Aborted)", "boom", {"ch02/a/baseline"}});
  const auto cases = bench::tools::extract_cases(file);
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].outcome, Outcome::failed);
  EXPECT_NE(cases[0].message.find("repetition's process killed by signal 6"), std::string::npos) << cases[0].message;
}

TEST(Results, AttachedSamplesAndCrashes) {
  auto file = parse(R"([{"name": "ch07/a/baseline/iterations:1/manual_time", "run_type": "iteration",
      "real_time": 5, "time_unit": "us",
      "bench_samples": {"samples": [1, 2, 3, 4, 100], "fingerprint": {"hash": "abc"}}}])");
  file.crashes.push_back({"ch07/a", "killed by signal 11 (Segmentation fault)", "boom",
                          {"ch07/a/baseline", "ch07/a/optimized"}});
  const auto cases = bench::tools::extract_cases(file);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].samples.size(), 5u);
  EXPECT_DOUBLE_EQ(cases[0].median_us, 3.0);  // from the raw samples
  EXPECT_EQ(cases[0].fingerprint, "abc");
  EXPECT_EQ(cases[1].outcome, Outcome::failed);
  EXPECT_NE(cases[1].message.find("signal 11"), std::string::npos);
}

// docs/results-format.md: an example scored by a metric carries it in the label, its median as
// a counter and its value after each kept sample in the samples file; a saved file reads back the
// same, and runs of separate processes pool the values and keep each run's median.
TEST(Results, AScoredMetricRoundTripsThroughASavedFile) {
  const auto file = parse(R"([
      {"name": "ch15/pd/optimized/manual_time", "run_type": "iteration", "real_time": 900, "time_unit": "us",
       "verified": 1, "p99_us": 2, "label": "role=optimized;fp=00ff00ff00ff00ff;metrics=p99_us;scored_by=p99_us:lower",
       "bench_samples": {"samples": [900, 901, 902], "scored_metric": {"name": "p99_us", "better": "lower",
                                                                      "samples": [1, 2, 3]}}},
      {"name": "ch15/pd/optimized/manual_time", "run_type": "iteration", "real_time": 900, "time_unit": "us",
       "verified": 1, "p99_us": 11, "label": "role=optimized;fp=00ff00ff00ff00ff;metrics=p99_us;scored_by=p99_us:lower",
       "bench_samples": {"samples": [900, 901, 902], "scored_metric": {"name": "p99_us", "better": "lower",
                                                                      "samples": [10, 11, 12]}}}])");
  const auto path = std::filesystem::temp_directory_path() /
                    ("scored_metric_" + std::to_string(::getpid()) + ".json");
  bench::tools::save_results(path, file);
  const auto reread = bench::tools::load_results(path);
  std::filesystem::remove(path);
  for (const auto& results : {file, reread}) {
    const auto cases = bench::tools::extract_cases(results);
    ASSERT_EQ(cases.size(), 1u);
    ASSERT_TRUE(cases[0].scored_by);
    EXPECT_EQ(*cases[0].scored_by, (bench::ScoredMetric{"p99_us", "lower"}));
    EXPECT_EQ(cases[0].metric_samples, (std::vector<double>{1, 2, 3, 10, 11, 12}));
    EXPECT_EQ(cases[0].run_metric_medians, (std::vector<double>{2, 11}));
    EXPECT_DOUBLE_EQ(cases[0].metrics.at("p99_us"), 6.5);  // the pooled values' median
  }
  // A file from before: no scored_by, scored by time.
  const auto old = bench::tools::extract_cases(parse(R"([{"name": "ch07/a/optimized/manual_time",
      "run_type": "iteration", "real_time": 5, "time_unit": "us", "label": "role=optimized"}])"));
  EXPECT_FALSE(old.at(0).scored_by);
  EXPECT_TRUE(old.at(0).metric_samples.empty());
}

TEST(Results, NotResultsIsAnErrorWithPosition) {
  EXPECT_THROW(bench::tools::parse_results("{\"benchmarks\": 3}", "x.json"), bench::tools::ResultsError);
  try {
    bench::tools::parse_results("{\n\"benchmarks\": [\n", "x.json");
    FAIL();
  } catch (const bench::tools::ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json:3:"), std::string::npos) << e.what();
  }
}

// A sanitize (verify-only) or profile row has a zero time: a file holding one is refused, and a
// live run's row of that kind is FAILED, never scored.
TEST(Results, UntimedRowsAreNeverScored) {
  for (const char* mode : {"verify", "profile"}) {
    const std::string rows = std::string(R"([{"name": "ch07/copy/baseline/iterations:1/manual_time", "run_type": "iteration",
        "real_time": 0, "time_unit": "us", "verified": 1, "label": "role=baseline;mode=)") + mode + R"("}])";
    try {
      parse(rows);
      ADD_FAILURE() << mode << " row accepted";
    } catch (const bench::tools::ResultsError& e) {
      EXPECT_NE(std::string(e.what()).find("not a measurement"), std::string::npos) << e.what();
    }
    const auto cases = bench::tools::extract_cases(
        bench::tools::ResultsFile{nlohmann::json::object(), nlohmann::json::parse(rows), {}});
    ASSERT_EQ(cases.size(), 1u);
    EXPECT_EQ(cases[0].outcome, Outcome::failed) << mode;
  }
}

// bench sanitize reads the verify-only rows it asked for: verified, never FAILED for their zero
// time; a profile row is still no result there.
TEST(Results, SanitizeReadsVerifyOnlyRows) {
  const auto rows_of = [](const char* mode) {
    return nlohmann::json::parse(std::string(R"([{"name": "ch07/copy/baseline/iterations:1/manual_time", "run_type": "iteration",
        "real_time": 0, "time_unit": "us", "verified": 1, "label": "role=baseline;mode=)") + mode + R"("}])");
  };
  using bench::tools::RowsWanted;
  const auto verify = bench::tools::extract_cases({nlohmann::json::object(), rows_of("verify"), {}}, RowsWanted::verify_only);
  ASSERT_EQ(verify.size(), 1u);
  EXPECT_EQ(verify[0].outcome, Outcome::measured) << verify[0].message;
  EXPECT_TRUE(verify[0].verified);
  const auto profile = bench::tools::extract_cases({nlohmann::json::object(), rows_of("profile"), {}}, RowsWanted::verify_only);
  ASSERT_EQ(profile.size(), 1u);
  EXPECT_EQ(profile[0].outcome, Outcome::failed);
}

}  // namespace

TEST(NullNonFinite, ReplacesBareNonFiniteNumbersButNotStrings) {
  const std::string gb = R"({"a": -nan, "b": nan, "c": inf, "d": -inf, "e": "nan inf", "f": 1.5, "g": [nan]})";
  const auto j = nlohmann::json::parse(bench::tools::null_non_finite(gb));
  EXPECT_TRUE(j["a"].is_null());
  EXPECT_TRUE(j["b"].is_null());
  EXPECT_TRUE(j["c"].is_null());
  EXPECT_TRUE(j["d"].is_null());
  EXPECT_EQ(j["e"], "nan inf");
  EXPECT_EQ(j["f"], 1.5);
  EXPECT_TRUE(j["g"][0].is_null());
}
