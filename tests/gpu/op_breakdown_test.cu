// Tests chapters/ch20/op_breakdown.hpp's time_ops on a GPU, with a step of known ops: each spins on
// %globaltimer for a set time. Each op's reported time must be near its spin and its GB/s its
// bytes over that time; a host slow to enqueue (it sleeps before every launch) must not show in
// the ops' times while its whole pass fits in the hold, and a pass that does not fit must report
// nothing rather than padded times. (tests/unit/op_breakdown_test.cpp tests the host side.)
#include <gtest/gtest.h>

#include <ch20/op_breakdown.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void spin_for(int64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<int64_t>(now - start) < ns);
}

struct SpinOp {
  const char* name;
  double bytes;
  int us;
};

// A step of spinning ops; before each launch the host sleeps host_delay (a slow host).
struct SpinStep {
  std::vector<SpinOp> list;
  std::chrono::microseconds host_delay{0};
  template <class Op>
  void ops(const int&, cudaStream_t s, Op&& op) const {
    for (const SpinOp& o : list)
      op(o.name, o.bytes, [&] {
        std::this_thread::sleep_for(host_delay);
        spin_for<<<1, 1, 0, s>>>(int64_t{o.us} * 1000);
        BENCH_CHECK_LAUNCH();
      });
  }
};

double metric(const std::vector<bench::Metric>& metrics, const std::string& name) {
  for (const bench::Metric& m : metrics)
    if (m.name == name) return m.value;
  return -1;  // absent
}

class OpBreakdown : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess); }
  void TearDown() override { cudaStreamDestroy(s); }

  // Each op near its spin (a launch and an event record on top: a few us), the sum theirs.
  void expect_spin_times(const SpinStep& step) {
    const int w = 0;
    const std::vector<bench::Metric> metrics = ch20::time_ops(step, w, s);
    double sum = 0;
    for (const SpinOp& o : step.list) {
      const double us = metric(metrics, std::string("op_us_") + o.name);
      EXPECT_GT(us, 0.9 * o.us) << o.name;  // %globaltimer ticks coarsely
      EXPECT_LT(us, o.us + 8) << o.name;
      sum += us;
      if (o.bytes > 0)
        EXPECT_DOUBLE_EQ(metric(metrics, std::string("op_gbps_") + o.name), o.bytes / (us * 1e3));
      else
        EXPECT_EQ(metric(metrics, std::string("op_gbps_") + o.name), -1) << o.name;
    }
    EXPECT_NEAR(metric(metrics, "op_us_sum"), sum, 1e-9);
  }

  cudaStream_t s = nullptr;
};

TEST_F(OpBreakdown, EachOpNearItsSpin) {
  expect_spin_times({{{"qkv", 50e6, 30}, {"norm", 0, 10}, {"down", 117e6, 50}}});
}

// 50 us of host time before each 10 us op: 7 repeats of 3 ops are ~1 ms of enqueueing (2 ms if
// every sleep overran by as much again), inside the 5 ms hold, so the GPU never waits for the host
// and the ops read 10 us, not 50.
TEST_F(OpBreakdown, ASlowHostInsideTheHoldDoesNotShow) {
  static_assert(ch20::kBreakdownHold >= std::chrono::milliseconds(5));
  expect_spin_times(
      {{{"a", 1e6, 10}, {"b", 0, 10}, {"c", 1e6, 10}}, std::chrono::microseconds(50)});
}

// 1 ms before each op: 21 ms of enqueueing, past the hold. No breakdown, rather than padded times.
TEST_F(OpBreakdown, ASlowHostPastTheHoldReportsNothing) {
  const SpinStep step{{{"a", 1e6, 10}, {"b", 0, 10}, {"c", 1e6, 10}}, std::chrono::milliseconds(1)};
  const int w = 0;
  EXPECT_TRUE(ch20::time_ops(step, w, s).empty());
}

}  // namespace
