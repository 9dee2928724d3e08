// Tests ch20's autotuner (chapters/ch20/fastest_plan.cuh), which the transformer_decode example's
// optimized side uses to keep the fastest of rungs 5-7, with plans of known duration: each spins on
// %globaltimer for a set time and counts its launches in device memory. The kept plan must be the
// fastest wherever it stands among the candidates (first, middle or last, so a pick of the first,
// the last or the slowest fails one of them), its reported time that plan's; after the choice a
// call must launch the kept plan and no other. A candidate that throws bench::Unsupported is left
// out, and none left is Unsupported with its reason. Untimed (inputs not filled yet), the first is
// kept and nothing runs until a call. A plan's own metrics (ch20's op breakdown) are reported for
// the kept plan only.
#include <gtest/gtest.h>

#include <ch20/fastest_plan.cuh>
#include <cstdint>
#include <string>
#include <vector>

#include "device_copy.hpp"

namespace {

constexpr int kPlans = 3;

// The "workload": a launch counter per plan.
struct Counters {
  bench::DeviceBuffer<unsigned> launches{kPlans};
  Counters() { zero(); }
  void zero() const {
    EXPECT_EQ(cudaMemset(launches.data(), 0, launches.bytes()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<unsigned> read() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return download(launches.data(), kPlans);
  }
};

__global__ void spin_and_count(int64_t ns, unsigned* launches) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<int64_t>(now - start) < ns);
  ++*launches;  // one thread, and launches on one stream run in order
}

// Plan kId: kMicroseconds a call. Its rung number is kId.
template <int kId, int kMicroseconds>
struct SpinPlan {
  static constexpr int kRung = kId;
  static constexpr double kUs = kMicroseconds;
  SpinPlan(const Counters&, cudaStream_t) {}
  void operator()(const Counters& w, cudaStream_t s) const {
    spin_and_count<<<1, 1, 0, s>>>(int64_t{kMicroseconds} * 1000, w.launches.data() + kId);
    BENCH_CHECK_LAUNCH();
  }
};
using Slow = SpinPlan<0, 60>;
using Fastest = SpinPlan<1, 20>;
using Middle = SpinPlan<2, 40>;

// SpinPlan that also reports a metric of its own, as ch20's graphed rungs report their ops.
template <int kId, int kMicroseconds>
struct ReportingPlan : SpinPlan<kId, kMicroseconds> {
  using SpinPlan<kId, kMicroseconds>::SpinPlan;
  std::vector<bench::Metric> metrics() const {
    return {{"own_plan" + std::to_string(kId), kId + 1.0}};
  }
};

struct RefusingPlan {
  RefusingPlan(const Counters&, cudaStream_t) { throw bench::Unsupported("not on this workload"); }
  void operator()(const Counters&, cudaStream_t) const {}
};

double metric(const std::vector<bench::Metric>& metrics, const std::string& name) {
  for (const bench::Metric& m : metrics)
    if (m.name == name) return m.value;
  return -1;  // absent
}

template <class P>
void consider(ch20::FastestPlan<Counters>& plan, const Counters& w, cudaStream_t s) {
  plan.consider<P>("plan" + std::to_string(P::kRung), P::kRung, w, s);
}

class FastestPlan : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess); }
  void TearDown() override { cudaStreamDestroy(s); }

  // Plans A, B, C in that order: the kept one must be Fastest, each timed near its spin, and a
  // call after the choice must launch Fastest only.
  template <class A, class B, class C>
  void expect_keeps_the_fastest() {
    const Counters w;
    ch20::FastestPlan<Counters> plan;
    consider<A>(plan, w, s);
    consider<B>(plan, w, s);
    consider<C>(plan, w, s);
    plan.keep_fastest(s, /*time_them=*/true);
    const std::vector<bench::Metric> metrics = plan.metrics();
    EXPECT_EQ(metric(metrics, "chosen_rung"), Fastest::kRung);
    EXPECT_EQ(plan.chosen_label(), "plan" + std::to_string(Fastest::kRung));
    EXPECT_GT(metric(metrics, "tuning_setup_ms"), 0);
    for (auto [rung, us] :
         {std::pair{Slow::kRung, Slow::kUs}, std::pair{Fastest::kRung, Fastest::kUs},
          std::pair{Middle::kRung, Middle::kUs}}) {
      const double measured = metric(metrics, "tuning_us_plan" + std::to_string(rung));
      EXPECT_GT(measured, 0.9 * us) << "plan " << rung;  // %globaltimer ticks coarsely
      EXPECT_LT(measured, us + 10) << "plan " << rung;
    }
    // Warm-up and rounds: every candidate ran 1 + kRounds x kCallsPerRound times.
    const unsigned tuned =
        1 + ch20::FastestPlan<Counters>::kRounds * ch20::FastestPlan<Counters>::kCallsPerRound;
    EXPECT_EQ(w.read(), (std::vector<unsigned>{tuned, tuned, tuned}));
    w.zero();
    for (int call = 0; call < 3; ++call) plan(s);
    std::vector<unsigned> expected(kPlans, 0);
    expected[Fastest::kRung] = 3;
    EXPECT_EQ(w.read(), expected);
  }

  cudaStream_t s = nullptr;
};

TEST_F(FastestPlan, KeepsTheFastestFirst) { expect_keeps_the_fastest<Fastest, Slow, Middle>(); }
TEST_F(FastestPlan, KeepsTheFastestInTheMiddle) {
  expect_keeps_the_fastest<Slow, Fastest, Middle>();
}
TEST_F(FastestPlan, KeepsTheFastestLast) { expect_keeps_the_fastest<Slow, Middle, Fastest>(); }

TEST_F(FastestPlan, LeavesOutAPlanThatCannotRun) {
  const Counters w;
  ch20::FastestPlan<Counters> plan;
  consider<Slow>(plan, w, s);
  plan.consider<RefusingPlan>("refusing", 9, w, s);
  consider<Middle>(plan, w, s);
  plan.keep_fastest(s, /*time_them=*/true);
  const std::vector<bench::Metric> metrics = plan.metrics();
  EXPECT_EQ(metric(metrics, "chosen_rung"), Middle::kRung);
  EXPECT_EQ(metric(metrics, "tuning_us_refusing"), -1);
}

TEST_F(FastestPlan, NoPlanLeftIsUnsupportedWithTheReason) {
  const Counters w;
  ch20::FastestPlan<Counters> plan;
  plan.consider<RefusingPlan>("refusing", 9, w, s);
  try {
    plan.keep_fastest(s, /*time_them=*/true);
    FAIL() << "keep_fastest kept a plan although none could run";
  } catch (const bench::Unsupported& why) {
    EXPECT_NE(std::string(why.what()).find("refusing: not on this workload"), std::string::npos)
        << why.what();
  }
}

TEST_F(FastestPlan, ReportsTheKeptPlansOwnMetricsOnly) {
  const Counters w;
  ch20::FastestPlan<Counters> plan;
  consider<ReportingPlan<0, 60>>(plan, w, s);  // Slow, with metrics of its own
  consider<ReportingPlan<1, 20>>(plan, w, s);  // Fastest, likewise
  consider<Middle>(plan, w, s);
  plan.keep_fastest(s, /*time_them=*/true);
  const std::vector<bench::Metric> metrics = plan.metrics();
  EXPECT_EQ(metric(metrics, "chosen_rung"), Fastest::kRung);
  EXPECT_EQ(metric(metrics, "own_plan1"), 2.0);
  EXPECT_EQ(metric(metrics, "own_plan0"), -1);  // a candidate not kept: freed, not asked
}

// Inputs not filled yet (the verification size's preparation): nothing runs, the first is kept.
TEST_F(FastestPlan, UntimedKeepsTheFirstAndLaunchesNothing) {
  const Counters w;
  ch20::FastestPlan<Counters> plan;
  consider<Slow>(plan, w, s);
  consider<Fastest>(plan, w, s);
  plan.keep_fastest(s, /*time_them=*/false);
  EXPECT_EQ(w.read(), (std::vector<unsigned>{0, 0, 0}));
  const std::vector<bench::Metric> metrics = plan.metrics();
  EXPECT_EQ(metric(metrics, "chosen_rung"), Slow::kRung);
  EXPECT_EQ(metric(metrics, "tuning_us_plan0"), -1);
  plan(s);
  EXPECT_EQ(w.read(), (std::vector<unsigned>{1, 0, 0}));
}

}  // namespace
