// docs/validity.md, "defences at their thresholds": the three adversaries that sat under the old
// margins on an H100 (2026-11-27), planted and run through the real Runner, each beside a control
// that shows the honest form of the same variant is measured, and a check that the adversary
// really does what it is accused of.
//   - partial escape: part of the work on a private low-priority stream that waits for the
//     case's stream and is never joined back (15% and 22%; the old wall-clock check failed only
//     gaps over 25%);
//   - a hot variant that skips one repeat in eight on inputs it has seen (the old first-launch
//     margin of 1.5x let one in four through);
//   - a cold variant that skips its work on some samples and writes one element so its outputs
//     are not all poison (half of them, and one in twenty).
#include "bench/stats.hpp"
#include "device_kernels.hpp"
#include "harness_fixture.hpp"
#include "work_tracer.hpp"
#include "workload.hpp"

namespace bench::testing {
namespace {

constexpr uint64_t kWorkNs = 200'000;  // the honest work of every variant here: 200 us and a copy

__global__ void copy_range(const float* in, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < end; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}

// ---- partial escape ---------------------------------------------------------------------------
// The share `escaped` of the wait and of the copy runs on a private low-priority stream after the
// case's stream has done its part; `joined` makes the case's stream wait for it (the control).
struct PartialEscape {
  PartialEscape(double escaped, bool joined) : escaped(escaped), joined(joined) {
    int lowest = 0, highest = 0;
    BENCH_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    BENCH_CUDA_CHECK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, lowest));
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&main_done, cudaEventDisableTiming));
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));
  }
  ~PartialEscape() {
    cudaStreamSynchronize(side);
    cudaStreamDestroy(side);
    cudaEventDestroy(main_done);
    cudaEventDestroy(side_done);
  }
  void operator()(const SmallCopy& w, cudaStream_t s) {
    const auto split = static_cast<int64_t>(static_cast<double>(w.n) * (1 - escaped));
    detail::launch_spin(static_cast<uint64_t>(kWorkNs * (1 - escaped)), sink.data(), s);
    copy_range<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), 0, split);
    BENCH_CUDA_CHECK(cudaEventRecord(main_done, s));
    BENCH_CUDA_CHECK(cudaStreamWaitEvent(side, main_done));
    detail::launch_spin(static_cast<uint64_t>(kWorkNs * escaped), sink.data() + 1, side);
    copy_range<<<264, 256, 0, side>>>(w.in.data(), w.out.data(), split, w.n);
    BENCH_CHECK_LAUNCH();
    if (joined) {
      BENCH_CUDA_CHECK(cudaEventRecord(side_done, side));
      BENCH_CUDA_CHECK(cudaStreamWaitEvent(s, side_done));
    }
  }
  double escaped;
  bool joined;
  cudaStream_t side = nullptr;
  cudaEvent_t main_done = nullptr, side_done = nullptr;
  DeviceBuffer<unsigned long long> sink{2};
};
template <int Percent, bool Joined>
struct Escapes : PartialEscape {
  Escapes(const SmallCopy&, cudaStream_t) : PartialEscape(Percent / 100.0, Joined) {}
};

BENCH_EXAMPLE(test, partial_escape, SmallCopy)
    .stateful<Escapes<15, true>>(Role::baseline, "joined_15")
    .stateful<Escapes<15, false>>(Role::step, "escapes_15")
    .stateful<Escapes<22, false>>(Role::optimized, "escapes_22")
    .reference(copy_reference);

// ---- hot: skips one repeat in `Every` on inputs it has seen ---------------------------------------
// state[0]: last hash; state[1]: calls on unchanged inputs; state[2]: skips. *skip for the work.
__global__ void decide_skip(const float* in, int64_t n, unsigned long long* state, int* skip, int every) {
  const unsigned long long h = sampled_hash(in, n);
  const bool seen = h == state[0];
  state[0] = h;
  *skip = 0;
  if (every > 0 && seen && ++state[1] % every == 0) {
    *skip = 1;
    ++state[2];
  }
}
__global__ void spin_then_copy(const float* in, float* out, int64_t n, const int* skip) {
  if (*skip) return;
  if (threadIdx.x == 0) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < 50'000);  // 50 us: a repeat that skips is visibly short
  }
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}
template <int Every>
struct SkipsRepeats {
  SkipsRepeats(const SmallCopy&, cudaStream_t) { BENCH_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes())); }
  void operator()(const SmallCopy& w, cudaStream_t s) {
    decide_skip<<<1, 1, 0, s>>>(w.in.data(), w.n, state.data(), skip.data(), Every);
    spin_then_copy<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, skip.data());
    BENCH_CHECK_LAUNCH();
  }
  unsigned long long skips() const {
    unsigned long long host = 0;
    BENCH_CUDA_CHECK(cudaMemcpy(&host, state.data() + 2, sizeof host, cudaMemcpyDeviceToHost));
    return host;
  }
  DeviceBuffer<unsigned long long> state{3};
  DeviceBuffer<int> skip{1};
};

BENCH_EXAMPLE(test, hot_repeat_skips, SmallCopy)
    .stateful<SkipsRepeats<0>>(Role::baseline, "honest")
    .stateful<SkipsRepeats<8>>(Role::optimized, "skips_1_in_8")
    .reference(copy_reference)
    .mode(Mode::hot);

// ---- cold: skips whole samples, writing one element ------------------------------------------------
__global__ void write_first(const float* in, float* out) { out[0] = in[0]; }
template <int Every>
struct SkipsSamples {
  SkipsSamples(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    // It behaves through the two checked verification runs, then skips every Every-th call.
    if (Every > 0 && ++calls > 10 && calls % Every == 0) {
      ++skips;
      write_first<<<1, 1, 0, s>>>(w.in.data(), w.out.data());
    } else {
      detail::launch_spin(kWorkNs, sink.data(), s);
      copy_range<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), 0, w.n);
    }
    BENCH_CHECK_LAUNCH();
  }
  long calls = 0, skips = 0;
  DeviceBuffer<unsigned long long> sink{1};
};

BENCH_EXAMPLE(test, cold_sample_skips, SmallCopy)
    .stateful<SkipsSamples<0>>(Role::baseline, "honest")
    .stateful<SkipsSamples<2>>(Role::step, "skips_every_2nd")
    .stateful<SkipsSamples<20>>(Role::optimized, "skips_every_20th")
    .reference(copy_reference);

bool cupti_available() { return detail::WorkTracer::get().available(); }

TEST(Thresholds, Row1_JoinedSideStreamIsMeasuredAndTraced) {
  const auto r = run_case("partial_escape", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  if (!cupti_available()) GTEST_SKIP() << detail::WorkTracer::get().why_unavailable();
  EXPECT_EQ(r.escape_method, "cupti");
  EXPECT_GE(r.traced_calls, 6);
}

TEST(Thresholds, Row1_FifteenPercentEscapedIsCaughtNamingTheKernel) {
  if (!cupti_available()) GTEST_SKIP() << detail::WorkTracer::get().why_unavailable();
  const auto r = run_case("partial_escape", "escapes_15");
  EXPECT_NE(outcome(r).find("FAILED: work escaped the timed stream: kernel"), std::string::npos) << outcome(r);
}

TEST(Thresholds, Row1_TwentyTwoPercentEscapedUnderTheOldMarginIsCaught) {
  if (!cupti_available()) GTEST_SKIP() << detail::WorkTracer::get().why_unavailable();
  const auto r = run_case("partial_escape", "optimized");
  EXPECT_NE(outcome(r).find("FAILED: work escaped the timed stream"), std::string::npos) << outcome(r);
}

TEST(Thresholds, Row18_TheHotAdversaryReallySkipsOneRepeatInEight) {
  // Outside the Runner: 17 calls on unchanged inputs are 16 repeats, of which it skips 2.
  detail::WorkloadInstance w = detail::build_workload(*find_example("hot_repeat_skips"), true);
  detail::fill_inputs(w, 7, nullptr);
  const auto& work = *static_cast<const SmallCopy*>(w.object.get());
  SkipsRepeats<8> adversary(work, nullptr);
  for (int i = 0; i < 17; ++i) adversary(work, nullptr);
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(adversary.skips(), 2u);
}

TEST(Thresholds, Row18_HonestHotVariantIsMeasured) {
  const auto r = run_case("hot_repeat_skips", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_GT(r.probed_repeats, 0);
  EXPECT_EQ(r.fast_repeats, 0);
}

TEST(Thresholds, Row18_SkippingOneRepeatInEightFails) {
  const auto r = run_case("hot_repeat_skips", "optimized");
  EXPECT_NE(outcome(r).find("skips work on inputs it has already seen"), std::string::npos) << outcome(r);
}

TEST(Thresholds, Row2_HonestColdVariantIsMeasuredWithCheckedSamples) {
  const auto r = run_case("cold_sample_skips", "baseline", 40);
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_GE(r.verified_samples, 1);  // at least the sample at the secret position
  EXPECT_TRUE(r.suspect.empty()) << r.suspect;
}

TEST(Thresholds, Row2_SkippingHalfTheSamplesFails) {
  const auto r = run_case("cold_sample_skips", "skips_every_2nd", 40);
  EXPECT_NE(outcome(r).find("FAILED: timed sample"), std::string::npos) << outcome(r);
}

TEST(Thresholds, Row2_SkippingOneSampleInTwentyFails) {
  // 40 samples meet two skips at least; each runs under half the median, so each is checked.
  const auto r = run_case("cold_sample_skips", "optimized", 40);
  EXPECT_NE(outcome(r).find("under half the median so far"), std::string::npos) << outcome(r);
}

}  // namespace
}  // namespace bench::testing
