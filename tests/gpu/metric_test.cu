// Scored by a metric (docs/writing-an-example.md): the harness asks every variant for the scored
// figure after every timed sample, outside the timed region, and keeps one value per kept sample.
// Planted through the real Runner: a variant that reports it on some samples only, one that
// reports no metrics at all, one whose figure cannot be a ratio's term (all FAILED, naming the
// metric), and one that flatters itself on a quarter of its samples (scored by the median of its
// per-sample values, and SUSPECT), beside the honest form they are measured against. Every
// variant also reports its own clock's time of the whole call (bench::timed_call_ms), which the
// harness holds against its events: planted at that check's thresholds, a clock 10% slow or 2%
// fast passes and one 13% slow or 5% fast fails, and a variant that leaves it out fails.
#include <algorithm>
#include <cmath>

#include "bench/stats.hpp"
#include "harness_fixture.hpp"

namespace bench::testing {
namespace {

constexpr const char* kMetric = "copy_latency_us";

// Honest: the copy's own time, from events inside the timed work, read after each sample.
struct TimedCopy {
  TimedCopy(const SmallCopy&, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaEventCreate(&start));
    BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~TimedCopy() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  void operator()(const SmallCopy& w, cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaEventRecord(start, s));
    launch_copy(w, s);
    BENCH_CUDA_CHECK(cudaEventRecord(stop, s));
  }
  double latency_us() const {
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e3;
  }
  std::vector<Metric> metrics() {
    ++calls;
    return {{kMetric, latency_us()}, timed_call_ms("call_ms", latency_us() * 1e-3)};
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  int calls = 0;
};

// Reports the figure on every third call only.
struct Intermittent : TimedCopy {
  using TimedCopy::TimedCopy;
  std::vector<Metric> metrics() {
    ++calls;
    if (calls % 3 != 0) return {{"other_figure", 1.0}, timed_call_ms("call_ms", latency_us() * 1e-3)};
    return {{kMetric, latency_us()}, timed_call_ms("call_ms", latency_us() * 1e-3)};
  }
};

// Reports a tenth of its latency on one call in four: better than its samples support.
struct Flattering : TimedCopy {
  using TimedCopy::TimedCopy;
  std::vector<Metric> metrics() {
    ++calls;
    return {{kMetric, latency_us() * (calls % 4 == 0 ? 0.1 : 1.0)},
            timed_call_ms("call_ms", latency_us() * 1e-3)};
  }
};

// A figure of zero: no ratio can be taken of it.
struct Zero : TimedCopy {
  using TimedCopy::TimedCopy;
  std::vector<Metric> metrics() { return {{kMetric, 0.0}, timed_call_ms("call_ms", latency_us() * 1e-3)}; }
};

BENCH_EXAMPLE(test, scored_by_metric, SmallCopy)
    .scored_by(kMetric, Better::lower)
    .stateful<TimedCopy>(Role::baseline, "honest")
    .stateful<Intermittent>(Role::step, "intermittent")
    .stateful<Flattering>(Role::step, "flattering")
    .stateful<Zero>(Role::step, "zero")
    .step("plain", launch_copy)
    .stateful<TimedCopy>(Role::optimized, "honest_too")
    .reference(copy_reference);

// The clock check, on a call long enough (256 copies, ~1 ms) that the events' own overhead is
// a small part of it: a variant whose figure and whole-call time come from a clock that runs
// `rate` times the harness's. Honest at 1; a clock that runs slow flatters every latency it
// reports.
template <int kRatePercent>
struct RatedClock : TimedCopy {
  using TimedCopy::TimedCopy;
  void operator()(const SmallCopy& w, cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaEventRecord(start, s));
    for (int i = 0; i < 256; ++i) launch_copy(w, s);
    BENCH_CUDA_CHECK(cudaEventRecord(stop, s));
  }
  std::vector<Metric> metrics() {
    const double rate = kRatePercent / 100.0;
    return {{kMetric, latency_us() * rate}, timed_call_ms("call_ms", latency_us() * 1e-3 * rate)};
  }
};
// Reports its figure but no whole-call time.
struct NoCallTime : RatedClock<100> {
  using RatedClock::RatedClock;
  std::vector<Metric> metrics() { return {{kMetric, latency_us()}}; }
};

BENCH_EXAMPLE(test, scored_by_own_clock, SmallCopy)
    .scored_by(kMetric, Better::lower)
    .stateful<RatedClock<100>>(Role::baseline, "honest")
    .stateful<RatedClock<92>>(Role::step, "slow_8pct")
    .stateful<RatedClock<87>>(Role::step, "slow_13pct")
    .stateful<RatedClock<101>>(Role::step, "fast_1pct")
    .stateful<RatedClock<105>>(Role::step, "fast_5pct")
    .stateful<NoCallTime>(Role::step, "no_call_time")
    .stateful<RatedClock<100>>(Role::optimized, "honest_too")
    .reference(copy_reference);

double scored_counter(const detail::CaseRun& r) {
  for (const auto& m : r.metrics)
    if (m.name == kMetric) return m.value;
  return -1;
}

TEST(ScoredByMetric, EveryKeptSampleHasItsValueAndTheCounterIsTheirMedian) {
  const auto r = run_case("scored_by_metric", "baseline", 20);
  ASSERT_EQ(outcome(r), "measured");
  ASSERT_EQ(r.scored_values.size(), r.samples.size());
  EXPECT_GE(r.samples.size(), 20u);
  EXPECT_DOUBLE_EQ(scored_counter(r), stats::median(r.scored_values));
  // The copy's own time is inside the sample's: never more than the sample took.
  EXPECT_LE(stats::median(r.scored_values), 2 * stats::median(r.samples) * 1e6);
  EXPECT_TRUE(r.suspect.empty()) << r.suspect;
}

TEST(ScoredByMetric, AFigureLeftOutOfSomeSamplesFailsNamingIt) {
  const auto r = run_case("scored_by_metric", "intermittent");
  EXPECT_EQ(
      outcome(r).rfind(
          "FAILED: timed sample 1: the variant did not report copy_latency_us, the metric the "
          "example is scored by",
          0),
      0u)
      << outcome(r);
}

TEST(ScoredByMetric, AVariantWithoutMetricsFailsBeforeTiming) {
  const auto r = run_case("scored_by_metric", "plain");
  EXPECT_NE(
      outcome(r).find(
          "FAILED: the example is scored by copy_latency_us, but this variant reports no metrics"),
      std::string::npos)
      << outcome(r);
  EXPECT_TRUE(r.samples.empty());
}

TEST(ScoredByMetric, AFigureThatCannotBeARatiosTermFails) {
  const auto r = run_case("scored_by_metric", "zero");
  EXPECT_NE(outcome(r).find("reported copy_latency_us = 0; the example is scored by it, so it must "
                            "be a positive number"),
            std::string::npos)
      << outcome(r);
}

// The flattering figure on a quarter of the samples does not move the median the pair is scored
// by, and the two clusters it makes are named.
TEST(ScoredByMetric, AFigureBetterThanItsSamplesSupportIsSuspectAndScoredByTheMedian) {
  const auto honest = run_case("scored_by_metric", "baseline", 40);
  const auto flattering = run_case("scored_by_metric", "flattering", 40);
  ASSERT_EQ(outcome(flattering), "measured");
  ASSERT_EQ(flattering.scored_values.size(), flattering.samples.size());
  const auto flattered =
      std::count_if(flattering.scored_values.begin(), flattering.scored_values.end(),
                    [&](double v) { return v < 0.3 * scored_counter(flattering); });
  EXPECT_GE(flattered,
            static_cast<long>(flattering.scored_values.size() / 5));  // it did flatter itself
  EXPECT_GT(scored_counter(flattering), 0.7 * scored_counter(honest));
  EXPECT_NE(flattering.suspect.find("two clusters of copy_latency_us"), std::string::npos)
      << flattering.suspect;
}

TEST(ScoredByMetric, AVariantsClockWithinTheChecksBoundsIsMeasured) {
  for (const char* variant : {"baseline", "slow_8pct", "fast_1pct"}) {
    const auto r = run_case("scored_by_own_clock", variant);
    EXPECT_EQ(outcome(r), "measured") << variant;
  }
}

TEST(ScoredByMetric, AVariantsClockOutsideTheChecksBoundsFails) {
  for (const char* variant : {"slow_13pct", "fast_5pct"}) {
    const auto r = run_case("scored_by_own_clock", variant);
    EXPECT_EQ(outcome(r).rfind("FAILED: the variant's own clock says a call took ", 0), 0u)
        << variant << ": " << outcome(r);
  }
}

TEST(ScoredByMetric, AVariantWithoutAWholeCallTimeFails) {
  const auto r = run_case("scored_by_own_clock", "no_call_time");
  EXPECT_NE(outcome(r).find("reported no measure of the whole call by that clock"), std::string::npos)
      << outcome(r);
}

}  // namespace
}  // namespace bench::testing
