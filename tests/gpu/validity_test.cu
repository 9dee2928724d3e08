// VALIDITY.md rows 1-7 and 10: each adversary planted as a variant and run through the real
// Runner, which must reject it with the right reason (or, for row 10, measure correctly).
#include <cuda_bf16.h>

#include "bench/stats.hpp"
#include "device_kernels.hpp"
#include "harness_fixture.hpp"
#include "sampler.hpp"

namespace bench::testing {
namespace {

// Row 1: the work runs on a stream of its own that never joins the case's stream.
void escaping(const SmallCopy& w, cudaStream_t) {
  static cudaStream_t side = [] {
    cudaStream_t s;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  static DeviceBuffer<unsigned long long> sink(1);
  detail::launch_spin(500'000, sink.data(), side);  // 0.5 ms the timer must not miss
  copy_kernel<<<264, 256, 0, side>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

// Row 2: computes once, caches the answer in device memory and replays it afterwards.
void replaying(const SmallCopy& w, cudaStream_t s) {
  static DeviceBuffer<float> cache;
  static int64_t cached_n = 0;
  if (cached_n != w.n) {
    cache = DeviceBuffer<float>(w.n);
    launch_copy(w, s);  // the honest computation, once per size
    BENCH_CUDA_CHECK(cudaMemcpyAsync(cache.data(), w.out.data(), w.out.bytes(), cudaMemcpyDeviceToDevice, s));
    cached_n = w.n;
    return;
  }
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.out.data(), cache.data(), w.out.bytes(), cudaMemcpyDeviceToDevice, s));
}

// Row 3: writes nothing.
void lazy(const SmallCopy&, cudaStream_t) {}

// Row 4: zeroes its inputs and outputs zeros, so a reference on the live inputs would agree.
void zeroing(const SmallCopy& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(const_cast<float*>(w.in.data()), 0, w.in.bytes(), s));
  BENCH_CUDA_CHECK(cudaMemsetAsync(w.out.data(), 0, w.out.bytes(), s));
}

// Row 5: writes a constant, the mean of the outputs (about 0 for uniform(-1, 1) inputs).
void constant(const SmallCopy& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(w.out.data(), 0, w.out.bytes(), s));
}

// Row 6: an FP32 result computed through BF16.
__global__ void copy_through_bf16(const float* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = __bfloat162float(__float2bfloat16(in[i]));
}
void low_precision(const SmallCopy& w, cudaStream_t s) {
  copy_through_bf16<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

// Row 10: the first call on each workload is slow (a stand-in for module load, lazy loading or
// handle creation).
struct SlowFirstCall {
  SlowFirstCall(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    if (first) {
      detail::launch_spin(20'000'000, sink.data(), s);  // 20 ms
      first = false;
    }
    launch_copy(w, s);
  }
  // Also exercises bench::Metric: a stateful variant's own figure becomes a case counter.
  std::vector<Metric> metrics() { return {{"slow_calls", first ? 0.0 : 1.0}}; }
  bool first = true;
  DeviceBuffer<unsigned long long> sink{1};
};

// Blocks the host inside the timed launch without declaring it.
void undeclared_sync(const SmallCopy& w, cudaStream_t s) {
  launch_copy(w, s);
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
}

// Does its work ahead of the timed window: the copy on a stream of its own, waited for on the
// host, then only a one-thread kernel on the case's stream. Under a blocking kernel that holds
// only the case's stream, the copy runs while the host is still queueing the sample, before the
// start event, and the sample times the one-thread kernel.
static __global__ void touch(float* out) { out[0] = out[0]; }
void copy_ahead_then_touch(const float* in, float* out, int64_t n, cudaStream_t s) {
  static const cudaStream_t side = [] {
    cudaStream_t t = nullptr;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    return t;
  }();
  copy_kernel<<<264, 256, 0, side>>>(in, out, n);
  BENCH_CHECK_LAUNCH();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(side));
  touch<<<1, 1, 0, s>>>(out);
  BENCH_CHECK_LAUNCH();
}
void ahead_of_window(const SmallCopy& w, cudaStream_t s) {
  copy_ahead_then_touch(w.in.data(), w.out.data(), w.n, s);
}

BENCH_EXAMPLE(test, adversaries, SmallCopy)
    .baseline("honest", launch_copy)
    .step("escaping", escaping)
    .step("replaying", replaying)
    .step("lazy", lazy)
    .step("zeroing", zeroing)
    .step("low_precision", low_precision)
    .stateful<SlowFirstCall>(Role::step, "slow_first_call")
    .step("undeclared_sync", undeclared_sync)
    .step("declared_sync", undeclared_sync, {.blocks_host = true})
    .step("ahead_of_window", ahead_of_window)
    .optimized("honest_again", launch_copy)
    .reference(copy_reference);  // FP32 default tolerance: relative L2 <= 1e-5

// Row 5 needs a tolerance loose enough that a constant would pass: the harness must refuse it.
BENCH_EXAMPLE(test, loose_tolerance, SmallCopy)
    .baseline("constant", constant)
    .reference(copy_reference)
    .tolerance(allclose(2.0, 0.0));  // |out - ref| <= 2 always holds for inputs in (-1, 1)

BENCH_EXAMPLE(test, too_new, SmallCopy)
    .baseline("future", launch_copy)
    .min_compute_capability(200);

TEST(Validity, HonestVariantIsMeasuredAndVerified) {
  const auto r = run_case("adversaries", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_GE(r.samples.size(), 10u);
  EXPECT_EQ(r.max_abs_err, 0.0);
  EXPECT_EQ(r.fingerprint_hash.size(), 16u);
}

TEST(Validity, Row1_WorkOnAnUnjoinedStreamIsCaught) {
  const auto r = run_case("adversaries", "escaping");
  EXPECT_NE(outcome(r).find("FAILED: work escaped the timed stream"), std::string::npos) << outcome(r);
}

// Row 9 in the traced calls: the side stream's copy starts while the hold keeps the case's stream
// (and the call's opening marker) waiting, and the work tracer names it. Its honest form (the
// copy on the case's stream) is the example's baseline, measured above.
TEST(Validity, Row9_WorkStartedAheadOfTheCallIsCaughtByTheTracer) {
  const auto r = run_case("adversaries", "ahead_of_window");
  if (r.escape_method != "cupti") GTEST_SKIP() << "no CUPTI here: " << r.escape_method;
  EXPECT_NE(outcome(r).find("FAILED: work ran ahead of the timed call: kernel"), std::string::npos)
      << outcome(r);
}

// Row 9 in the timed samples, on the sampler itself (the runner's checks, which run first, would
// fail the adversary before any sample): behind the hold of the whole GPU the side stream's copy
// cannot start, so the launch's wait for it outlasts the hold's timeout and the sample fails; the
// same launch without a hold (a variant declared blocks_host) comes back with the copy timed, and
// the honest copy behind the hold with its time.
TEST(Validity, Row9_WorkDoneAheadOfTheTimedWindowFailsTheSample) {
  detail::Sampler sampler(query_device(0));
  if (!sampler.holds_whole_gpu()) GTEST_SKIP() << "the hold cannot fill this GPU's SMs exactly";
  cudaStream_t stream = nullptr;  // blocking, as the runner's case stream
  BENCH_CUDA_CHECK(cudaStreamCreate(&stream));
  // 256 MiB: the copy's time, not a launch's host latency, must decide the unheld case below.
  DeviceBuffer<float> in(int64_t{1} << 26), out(int64_t{1} << 26);
  BENCH_CUDA_CHECK(cudaMemset(in.data(), 0, in.bytes()));
  const int64_t n = in.size();
  const auto side_then_touch = [&](cudaStream_t s) {
    copy_ahead_then_touch(in.data(), out.data(), n, s);
  };
  const auto honest = [&](cudaStream_t s) {
    copy_kernel<<<264, 256, 0, s>>>(in.data(), out.data(), n);
    BENCH_CHECK_LAUNCH();
  };
  const double copy_s = sampler.cold(honest, stream, true).seconds;
  const double unheld_s = sampler.cold(side_then_touch, stream, false).seconds;
  std::printf("honest copy behind the hold %.2f us; the adversary without a hold %.2f us\n",
              copy_s * 1e6, unheld_s * 1e6);
  EXPECT_GT(copy_s, 0.0);
  // Sampled as a variant that blocks the host (no hold), the flush is waited for before the start
  // event, so the side stream's copy runs inside the window and is timed.
  EXPECT_GT(unheld_s, 0.8 * copy_s);
  try {
    sampler.cold(side_then_touch, stream, true);
    ADD_FAILURE() << "the adversary's sample came back behind the hold";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("blocked the host"), std::string::npos) << e.what();
  }
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(Validity, Row2_ReplayedResultFailsTheSecondRun) {
  const auto r = run_case("adversaries", "replaying");
  EXPECT_NE(outcome(r).find("FAILED: verification run 2"), std::string::npos) << outcome(r);
}

TEST(Validity, Row3_UnwrittenOutputIsCaughtByThePoison) {
  const auto r = run_case("adversaries", "lazy");
  EXPECT_NE(outcome(r).find("FAILED: verification run 1: output 'out': 10007 non-finite"), std::string::npos)
      << outcome(r);
}

TEST(Validity, Row4_ModifiedInputsAreCaught) {
  const auto r = run_case("adversaries", "zeroing");
  EXPECT_NE(outcome(r).find("modified its inputs"), std::string::npos) << outcome(r);
}

TEST(Validity, Row5_ReferenceWithoutSpreadUnderTheToleranceIsRefused) {
  const auto r = run_case("loose_tolerance", "baseline");
  EXPECT_NE(outcome(r).find("has no spread"), std::string::npos) << outcome(r);
}

TEST(Validity, Row6_Fp32ComputedInBf16FailsTheFp32Tolerance) {
  const auto r = run_case("adversaries", "low_precision");
  EXPECT_NE(outcome(r).find("FAILED: verification run 1"), std::string::npos) << outcome(r);
}

TEST(Validity, Row7_VariantsOfOneExampleSeeTheSameWorkload) {
  const auto a = run_case("adversaries", "baseline");
  const auto b = run_case("adversaries", "optimized");
  ASSERT_EQ(outcome(b), "measured");
  EXPECT_EQ(a.fingerprint_hash, b.fingerprint_hash);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
}

TEST(Validity, Row10_SlowFirstCallIsReportedButDoesNotMoveTheMedian) {
  const auto honest = run_case("adversaries", "baseline", 30);
  const auto slow = run_case("adversaries", "slow_first_call", 30);
  ASSERT_EQ(outcome(slow), "measured");
  EXPECT_GT(slow.first_call_s, 15e-3);
  ASSERT_EQ(slow.metrics.size(), 1u);
  EXPECT_EQ(slow.metrics[0].name, "slow_calls");
  EXPECT_EQ(slow.metrics[0].value, 1.0);
  EXPECT_NEAR(stats::median(slow.samples), stats::median(honest.samples), 0.1 * stats::median(honest.samples));
}

TEST(Validity, HostBlockingVariantMustBeDeclared) {
  const auto undeclared = run_case("adversaries", "undeclared_sync", 3);
  EXPECT_NE(outcome(undeclared).find("blocked the host"), std::string::npos) << outcome(undeclared);
  EXPECT_EQ(outcome(run_case("adversaries", "declared_sync")), "measured");
}

TEST(Validity, UnsupportedHardwareIsSkippedWithTheReason) {
  const auto r = run_case("too_new", "baseline");
  EXPECT_NE(outcome(r).find("SKIPPED: requires compute capability 20.0"), std::string::npos) << outcome(r);
}

}  // namespace
}  // namespace bench::testing
