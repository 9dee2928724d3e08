// VALIDITY.md rows 8, 9, 12 and 14: the timing itself. A spin kernel of known duration must be
// measured within 3%; cold samples of a small problem must be slower than hot ones; an A/A pair
// must not look like a speedup; CUDA errors must fail the case with the CUDA message.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <kernels/event_span.hpp>

#include "bench/stats.hpp"
#include "device_kernels.hpp"
#include "harness_fixture.hpp"

namespace bench::testing {
namespace {

// Row 9: copies a few elements, then spins until `ns` of global time have passed since it began.
struct Spin {
  int64_t n, ns;
  DeviceSpan<const float> in;
  DeviceSpan<float> out;
  Spin(Setup& s, int64_t duration_ns)
      : n(s.size("n", 256, 256)), ns(duration_ns),
        in(s.input<float>("in", n, uniform(-1, 1))),
        out(s.output<float>("out", n)) {
    s.param("ns", ns);
  }
};
template <int64_t Ns>
struct SpinFor : Spin {
  explicit SpinFor(Setup& s) : Spin(s, Ns) {}
};

__global__ void spin_copy(const float* in, float* out, int64_t n, int64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<int64_t>(now - start) < ns);
}
void launch_spin_copy(const Spin& w, cudaStream_t s) {
  spin_copy<<<1, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, w.ns);
  BENCH_CHECK_LAUNCH();
}
void spin_reference(const Spin& w, HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) out[i] = in[i];
}

BENCH_EXAMPLE(test, spin_10us, SpinFor<10'000>).baseline("spin", launch_spin_copy).reference(spin_reference);
BENCH_EXAMPLE(test, spin_100us, SpinFor<100'000>).baseline("spin", launch_spin_copy).reference(spin_reference);
BENCH_EXAMPLE(test, spin_1ms, SpinFor<1'000'000>).baseline("spin", launch_spin_copy).reference(spin_reference);

BENCH_EXAMPLE(test, small_copy, SmallCopy)
    .baseline("copy", launch_copy)
    .optimized("same_copy", launch_copy)
    .reference(copy_reference);

// Row 8's careful adversary: the same copy with its input read under an L2::evict_last cache
// policy. Lines so marked, up to the GPU's persisting L2 set-aside (docs/validity.md row 8 gives
// a default), outlive plain loads of any size, so without the sampler's reset the 4 MiB input of
// one sample would still be in L2 for the next, though the harness refilled it and read 2x the L2.
static __global__ void kept_copy_kernel(const float* in, float* out, int64_t n) {
  uint64_t keep;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v;
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(in + i), "l"(keep));
    out[i] = v;
  }
}
void launch_kept_copy(const SmallCopy& w, cudaStream_t s) {
  kept_copy_kernel<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}
BENCH_EXAMPLE(test, small_copy_kept_in_l2, SmallCopy)
    .baseline("copy", launch_copy)
    .optimized("kept_in_l2", launch_kept_copy)
    .reference(copy_reference);

class SpinAccuracy : public ::testing::TestWithParam<std::pair<const char*, double>> {};

TEST_P(SpinAccuracy, MedianWithinThreePercentOfTheKnownDuration) {
  const auto [example, seconds] = GetParam();
  const auto r = run_case(example, "baseline", 30);
  ASSERT_EQ(outcome(r), "measured");
  const double median = stats::median(r.samples);
  std::printf("%s: median %.3f us for %.3f us of spin (%+.2f%%), noise %.4f, timer floor %.3f us\n",
              example, median * 1e6, seconds * 1e6, 100 * (median / seconds - 1),
              stats::relative_noise(r.samples), r.timer_floor_s * 1e6);
  // 3%, but never tighter than the event timer's stated resolution (~0.5 us, cudaEventElapsedTime):
  // the 10 us spin read +2.4% to +3.04% on H200s (2026-11-23), the kernel's own start and copy.
  // Launch latency counted as kernel time (row 9's adversary) adds microseconds, still caught.
  EXPECT_NEAR(median, seconds, std::max(0.03 * seconds, 0.5e-6));
}
INSTANTIATE_TEST_SUITE_P(Row9, SpinAccuracy,
                         ::testing::Values(std::make_pair("spin_10us", 10e-6),
                                           std::make_pair("spin_100us", 100e-6),
                                           std::make_pair("spin_1ms", 1e-3)));

TEST(Timing, Row8_ColdSamplesOfAnL2SizedProblemAreSlowerThanHot) {
  detail::options().mode = Mode::hot;
  const auto hot = run_case("small_copy", "baseline", 30);
  detail::options().mode = Mode::cold;
  const auto cold = run_case("small_copy", "baseline", 30);
  detail::options().mode.reset();
  ASSERT_EQ(outcome(hot), "measured");
  ASSERT_EQ(outcome(cold), "measured");
  const double h = stats::median(hot.samples), c = stats::median(cold.samples);
  std::printf("8 MB copy: cold %.2f us, hot %.2f us\n", c * 1e6, h * 1e6);
  EXPECT_GT(c, 1.1 * h);
}

// The median of `runs` event-timed launches of `timed`, each after `before` (outside the events).
template <class Before, class Timed>
double median_us(int runs, Before before, Timed timed) {
  kernels::EventSpan span;
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    before();
    span.begin(nullptr);
    timed();
    span.end(nullptr);
    us.push_back(span.ms() * 1e3);
  }
  return stats::median(us);
}

TEST(Timing, Row8_InputsKeptInL2ByAnEvictLastPolicyAreFlushedToo) {
  int persisting_max = 0, l2 = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&persisting_max, cudaDevAttrMaxPersistingL2CacheSize, 0));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  if (persisting_max < (8 << 20))
    GTEST_SKIP() << "this GPU's persisting L2 set-aside (" << persisting_max
                 << " bytes) cannot hold the 4 MiB input";
  // Control, outside the harness: with the set-aside at its largest and no reset, the kept
  // copy's input outlives a read of 2x the L2 (the sampler's flush) and the copy runs warmer.
  const int64_t n = 1 << 20;
  bench::DeviceBuffer<float> in(n), out(n), flush(2 * int64_t{l2} / int64_t{sizeof(float)});
  bench::DeviceBuffer<unsigned int> sink(1);
  BENCH_CUDA_CHECK(cudaMemset(in.data(), 0, in.bytes()));
  BENCH_CUDA_CHECK(cudaMemset(flush.data(), 0, flush.bytes()));
  BENCH_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(persisting_max)));
  auto plain = [&] { copy_kernel<<<264, 256>>>(in.data(), out.data(), n); };
  auto kept = [&] { kept_copy_kernel<<<264, 256>>>(in.data(), out.data(), n); };
  auto flush_l2 = [&] {
    detail::launch_l2_flush(flush.data(), flush.bytes(), sink.data(), nullptr);
  };
  const double raw_hot = median_us(21, plain, plain);
  const double raw_cold = median_us(
      21, [&] { plain(), flush_l2(); }, plain);
  const double raw_kept = median_us(
      21, [&] { kept(), flush_l2(); }, kept);
  BENCH_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  BENCH_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  std::printf("control, no reset: kept %.2f us, plain cold %.2f us, hot %.2f us\n", raw_kept,
              raw_cold, raw_hot);
  EXPECT_LT(raw_kept, raw_cold - 0.25 * (raw_cold - raw_hot))
      << "the adversary does not keep its input in L2 here: the check below proves nothing";

  // The harness: cold samples of the kept copy are as cold as the plain copy's.
  detail::options().mode = Mode::hot;
  const auto hot = run_case("small_copy_kept_in_l2", "baseline", 30);
  detail::options().mode = Mode::cold;
  const auto cold = run_case("small_copy_kept_in_l2", "baseline", 30);
  const auto kept_cold = run_case("small_copy_kept_in_l2", "optimized", 30);
  detail::options().mode.reset();
  ASSERT_EQ(outcome(hot), "measured");
  ASSERT_EQ(outcome(cold), "measured");
  ASSERT_EQ(outcome(kept_cold), "measured");
  const double h = stats::median(hot.samples), c = stats::median(cold.samples),
               k = stats::median(kept_cold.samples);
  std::printf("harness, cold samples: kept %.2f us, plain %.2f us; hot %.2f us\n", k * 1e6, c * 1e6,
              h * 1e6);
  EXPECT_GT(k, c - 0.25 * (c - h));
}

// Mode::sustained: the soak and the sampling window last at least what bench.hpp promises (a
// power-limited figure is taken at the limiter's steady state, not in the burst before it), and
// the samples are still the work's own time.
TEST(Timing, SustainedModeSoaksThenSamplesForItsWholeWindow) {
  detail::options().mode = Mode::sustained;
  const auto r = run_case("spin_100us", "baseline", 20);
  detail::options().mode.reset();
  ASSERT_EQ(outcome(r), "measured");
  const double soak = phase_seconds(r, "soak"), sampling = phase_seconds(r, "samples");
  const double median = stats::median(r.samples);
  std::printf("sustained: soak %.2f s, sampling %.2f s, %zu samples, median %.3f us\n", soak, sampling,
              r.samples.size(), median * 1e6);
  EXPECT_GE(soak, kSustainedSoakSeconds);
  EXPECT_GE(sampling, kSustainedSampleSeconds);
  EXPECT_NEAR(median, 100e-6, 3e-6);
  EXPECT_TRUE(r.dropped.empty()) << r.dropped.size() << " samples dropped: sustained keeps every clock";
}

TEST(Timing, ASmokeRunOfASustainedCaseSkipsTheSoakAndStillChecks) {
  detail::options().mode = Mode::sustained;
  detail::options().smoke = true;
  const auto r = run_case("spin_100us", "baseline", 3);
  detail::options().smoke = false;
  detail::options().mode.reset();
  ASSERT_EQ(outcome(r), "measured");
  double sampling = -1;
  bool final_check = false;  // measured + this phase: the last timed sample was verified
  for (const auto& [phase, seconds] : r.phase_seconds) {
    EXPECT_NE(phase, "soak") << "a smoke run soaked";
    if (phase == "samples") sampling = seconds;
    final_check = final_check || phase == "final_check";
  }
  EXPECT_GE(sampling, 0.0) << "no sampling phase";
  EXPECT_LT(sampling, kSustainedSampleSeconds)
      << "a smoke run sampled for the whole sustained window";
  EXPECT_TRUE(final_check) << "a smoke run must still check its last timed sample";
}

TEST(Timing, Row14_AnAAPairIsNotASpeedup) {
  const auto a = run_case("small_copy", "baseline", 50);
  const auto b = run_case("small_copy", "optimized", 50);
  ASSERT_EQ(outcome(a), "measured");
  ASSERT_EQ(outcome(b), "measured");
  const auto i = stats::speedup_interval(a.samples, b.samples);
  std::printf("A/A speedup %.4f [%.4f, %.4f]\n", i.estimate, i.low, i.high);
  // The driver calls a pair a speedup only when the whole interval is above 1.02
  // (tools/scoring.hpp): an A/A interval must reach below that, and, run the other way round,
  // above 1/1.02. The two runs are sequential, so their medians may drift apart by a percent or
  // two on a busy host (other GPUs' tests beside this one); that drift is what the threshold is
  // for, and a bound on the estimate tighter than it tests the host, not the defence.
  EXPECT_LT(i.low, 1.02) << "an A/A pair was scored a speedup";
  EXPECT_GT(i.high, 1.0 / 1.02) << "an A/A pair, the other way round, was scored a speedup";
}

struct Process {
  std::string output;
  int exit_code = -1;
};
Process run_crash_cases(const std::string& filter, const std::string& extra = "") {
  // Under timeout(1): should the harness itself hang, the test fails instead of stalling ctest.
  const std::string command = "timeout -k 5 120 " + std::string(BENCH_CRASH_CASES) + " --benchmark_filter='" +
                              filter + "' --bench_min_samples=3 --bench_timeout=0.1 " + extra + " 2>&1";
  Process p;
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) p.output += buffer.data();
  const int status = pclose(pipe);
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return p;
}

TEST(Errors, Row12_InvalidLaunchConfigurationFailsTheCaseWithTheCudaMessage) {
  const auto p = run_crash_cases("bad_launch");
  // The runtime reports an over-sized block as cudaErrorInvalidValue on Hopper with CUDA 13.
  EXPECT_NE(p.output.find("FAILED: kernel launch failed: cudaErrorInvalid"), std::string::npos) << p.output;
  EXPECT_EQ(p.exit_code, 0) << p.output;  // not sticky: the process goes on
}

TEST(Errors, Row12_OutOfBoundsWriteFailsAndEndsTheProcessAfterReporting) {
  const auto p = run_crash_cases("crash/(out_of_bounds|after)");
  EXPECT_NE(p.output.find("cudaErrorIllegalAddress"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("sticky"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("FAILED: CUDA context lost in an earlier case"), std::string::npos) << p.output;
  EXPECT_EQ(p.exit_code, 3) << p.output;
}

// A kernel that never ends: no CUDA error will ever say so, and cudaStreamSynchronize waits
// forever. The case watchdog names the case and ends the process with its own exit code, and the
// cases after it never start.
TEST(Errors, AHungKernelIsNamedAndEndsTheProcess) {
  const auto start = std::chrono::steady_clock::now();
  const auto p = run_crash_cases("crash/(hang|out_of_bounds_then_after)", "--bench_case_timeout=3");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(p.output.find("FATAL: crash/hang/baseline did not finish in 3 s"), std::string::npos) << p.output;
  EXPECT_EQ(p.exit_code, 4) << p.output;  // not 124: timeout(1) did not have to step in
  EXPECT_EQ(p.output.find("crash/out_of_bounds_then_after/baseline"), std::string::npos) << p.output;
  EXPECT_LT(seconds, 60) << p.output;
}

}  // namespace
}  // namespace bench::testing
