// docs/validity.md rows 2 and 18 in sustained and hot mode: a variant honest in cold and hot runs
// that skips work only inside sustained batches, and one honest for its first few hot batches
// that then skips, each planted at the defence's threshold and run through the real Runner,
// beside an honest control and a control showing the adversary really skips (HotProbe.*, at
// the end: the same adversary, told by another tell when to start).
//
// What sustained mode checks (harness/src/runner.cpp, TimedSamples), and so the rule proved:
//   - A timed sample is one batch of r.batch back-to-back launches on inputs refilled before it,
//     into outputs poisoned before it; r.batch = ceil(kSustainedBatchSeconds (20 ms) / one
//     launch's event time), at most 1000. Every output check sees the batch's LAST launch only:
//     the poison check (every sample), the device check (sample i, from 1, with probability
//     min(1, 93/i) while within budget: every sample up to the 93rd; a 1 s window of 20 ms
//     batches is ~50 samples), the secret host check, and the host check of a sample under half
//     the median so far. So a variant that spoils the last launch of a share f of its samples is
//     caught as in cold mode (escapes with probability at most exp(-93 f), under 1% at f = 5%).
//   - A launch that is not a batch's last is overwritten by the next: no output check ever sees
//     it. Only timing does. (i) The timed batches' first-launch rule fails a first launch over
//     1.5x the mean repeat + 20 us: that needs over a third of the repeats skipped. (ii) The
//     probe: kProbeBatches (4) batches with an event after every launch; FAILED when the repeats
//     under half the median repeat (median >= 5 us) number at least max(2, ceil(4% of those
//     probed)). Before this file the probe ran BEFORE the soak, in batches of min(r.batch, 64):
//     a variant that skips only after the soak (it sees a second of back-to-back batches of
//     r.batch launches, as the adversary below does by its host clock) met the probe honest,
//     and skipping any share under a third of its non-last launches passed with every output
//     check (derived from the code above; not run against the old harness).
//   - Now (runner.cpp, TimedSamples::probe_among_samples_), in hot and sustained mode alike,
//     the 4 probed batches sit at secret positions drawn uniformly over the samples the stop rule
//     asks for (its minimum time over one launch's: ~50 of 20 ms in the 1 s window; at least
//     min_samples, at most what the timeout holds), each r.batch launches long on fresh inputs
//     into poisoned outputs, as a timed sample is; any not reached when sampling stops run then.
//     The rule this file proves: a variant that skips k = ceil(4% x (r.batch - 1)) of the
//     repeats of every sustained batch (the fewest that reach 4% of a batch's repeats),
//     wherever it puts them, never the last, FAILS with certainty: the 4 probed batches hold
//     4k fast repeats, at least the bar of ceil(4% x 4 (r.batch - 1)). One that skips in only a
//     share q of its batches, which it cannot tell from the probed ones, is caught by chance:
//     at that rate when all 4 probes land on its cheating batches (about q^4); at 4x that rate
//     or more (k per batch then reaches the whole bar) when one does (about 1 - (1 - q)^4: 94%
//     at q = 1/2, the least that moves the median).
//
// Deferred device checks (DeferredChecks.*, at the end): in sustained mode a sample drawn for a
// device check has its outputs held and is checked after sampling ends, so the batches run
// nearly back to back. Planted: an honest variant beside a device reference as slow as a batch
// (checked between batches it would halve the GPU's duty cycle: the control runs it so), one that
// spoils one element of one batch in every 20, at an offset it draws (FAILED by a deferred check,
// the sample named), and one that changes its inputs from the middle of sampling on (FAILED at
// once, as inputs modified).
//
// How the adversary knows it is in sustained mode, with nothing the harness tells it: it reads
// the host clock at each call. Calls under kGap apart are one batch; a harness synchronises
// between batches. After kSoakRuns batches of at least kLongRun launches (the soak: ~50 batches
// of ~100 launches of its 200 us work) it skips. Cold mode (one launch per sample) and hot mode
// (batches of ~1 ms, 5 launches here) never show it that. It learns the batch length from the
// batch before and never skips a batch's first or last launch.
//
// Hot mode (HotProbe.*): the same adversary, honest for its first 5 batches of 2 launches or
// more by the host clock, what the hot probe's batches and the escape check's came to when the
// probe ran before the samples (so it met that probe honest; derived from the code, not run
// against the old harness). Its hot batches are 5 launches (1 ms of 200 us work): 1 skip in a
// batch's 4 repeats is the fewest that reach 4%, and the bar over 4 x 4 probed repeats is 2.
// Now it is honest for at most 4 samples and probes (the escape check's batch comes first), and
// probes sit at distinct positions, each in front of its own sample: at most 2 of the 4 fall
// there, so at least 2 meet a skip each and it FAILS with certainty. A variant honest for h
// timed batches that skips at the bar only where it takes all 4 probes (longer batches) passes
// with probability about 4h / (the probes' range): docs/validity.md, row 18.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "device_kernels.hpp"
#include "harness_fixture.hpp"
#include "workload.hpp"

namespace bench::testing {
namespace {

constexpr uint64_t kWorkNs = 200'000;  // the honest work: 200 us and a copy
// The probe's bar (runner.hpp): the adversary at the threshold skips the fewest repeats per
// batch that reach it.
constexpr double kProbeBar = detail::kFastRepeatShare;
// Calls closer than this are one batch: a cold call waits for the one before (200 us of work).
constexpr auto kGap = std::chrono::microseconds(150);
constexpr int kLongRun = 32;   // a batch this long is no cold or hot batch of this work
constexpr int kSoakRuns = 8;   // this many long batches: the soak has begun
using detail::kProbeBatches;  // the probed batches per case (runner.hpp)

// When an adversary starts to skip: after `runs` batches of at least `min_run` launches.
struct AfterTheSoak {  // sustained mode's soak: ~50 batches of ~100 launches
  static constexpr int min_run = kLongRun, runs = kSoakRuns;
};
// Hot mode: honest for its first 5 batches of 2 launches or more, what the harness ran before
// its first timed sample when the hot probe came first: the escape check's batch (~25 launches
// of this work) and the probe's 4 batches (CUPTI's 3 traced calls, back to back, may count as
// one more: it then skips in the probe's last batch only, 1 fast repeat under the bar of 2).
struct AfterTheFirstHotBatches {
  static constexpr int min_run = 2, runs = 1 + kProbeBatches;
};

__global__ void write_first_only(const float* in, float* out) { out[0] = in[0]; }  // not all poison

// How many of a batch's repeats (launches after its first) each adversary skips.
struct Honest {
  static int skips(int) { return 0; }
};
struct AtTheProbeBar {
  static int skips(int repeats) { return static_cast<int>(std::ceil(kProbeBar * repeats)); }
};
struct OneInFour {  // the old hot margin's escape (issue 38): first launch 1.33x the repeats, under 1.5x
  static int skips(int repeats) { return repeats / 4; }
};

template <class Tell, class Policy>
struct SkipsOnceTold {
  SkipsOnceTold(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last > kGap) {  // a new batch: the one before has its length
      long_runs += run >= Tell::min_run;
      previous = run;
      run = 0;
    }
    last = now;
    if (skips_at(run++)) {
      ++skipped;
      write_first_only<<<1, 1, 0, s>>>(w.in.data(), w.out.data());
    } else {
      detail::launch_spin(kWorkNs, sink.data(), s);
      copy_kernel<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
    }
    BENCH_CHECK_LAUNCH();
  }
  // Position p of a batch as long as the one before (L launches): skip k of its repeats, spread
  // over positions 1 to L - 2 (1 + j (L - 2) / k for j < k), never the last, whose outputs
  // every check reads.
  bool skips_at(int p) const {
    const int length = previous;
    if (long_runs < Tell::runs || length < Tell::min_run || p < 1 || p > length - 2) return false;
    const int k = std::min(Policy::skips(length - 1), length - 2);
    for (int j = 0; j < k; ++j)
      if (1 + static_cast<int64_t>(j) * (length - 2) / k == p) return true;
    return false;
  }
  std::chrono::steady_clock::time_point last{};
  int run = 0, previous = 0, long_runs = 0;
  DeviceBuffer<unsigned long long> sink{1};
  static inline long skipped = 0;  // by every instance: what a run through the Runner skipped
};
template <class Policy>
using SkipsWhenSustained = SkipsOnceTold<AfterTheSoak, Policy>;
template <class Policy>
using SkipsAfterItsFirstHotBatches = SkipsOnceTold<AfterTheFirstHotBatches, Policy>;

BENCH_EXAMPLE(test, sustained_skips, SmallCopy)
    .stateful<SkipsWhenSustained<Honest>>(Role::baseline, "honest")
    .stateful<SkipsWhenSustained<OneInFour>>(Role::step, "skips_1_in_4_when_sustained")
    .stateful<SkipsWhenSustained<AtTheProbeBar>>(Role::optimized, "skips_at_the_bar_when_sustained")
    .reference(copy_reference)
    .device_reference(device_copy_reference)
    .tolerance(exact())
    .mode(Mode::sustained);

BENCH_EXAMPLE(test, hot_skips_after_first_batches, SmallCopy)
    .stateful<SkipsAfterItsFirstHotBatches<Honest>>(Role::baseline, "honest")
    .stateful<SkipsAfterItsFirstHotBatches<AtTheProbeBar>>(Role::optimized, "skips_at_the_bar_after_5_batches")
    .reference(copy_reference)
    .device_reference(device_copy_reference)
    .tolerance(exact())
    .mode(Mode::hot);

// The adversary's tell works only where a sustained batch is long and a hot one short: measured.
void expect_batches_the_tell_sees(const detail::CaseRun& r) {
  EXPECT_GE(r.batch, kLongRun) << "sustained batches of " << r.batch << " launches: too short for the tell";
  EXPECT_GE(phase_seconds(r, "soak"), kSustainedSoakSeconds);
}

// Outside the Runner, by the host clock: an adversary's calls in batches, each followed by a sync
// and a harness's untimed gap, as the Runner makes them.
template <class Adversary>
struct CallPattern {
  explicit CallPattern(const std::string& example)
      : w(detail::build_workload(*find_example(example), true)),
        work((detail::fill_inputs(w, 7, nullptr), *static_cast<const SmallCopy*>(w.object.get()))),
        adversary(work, nullptr) {}
  void batch(int launches) {
    for (int i = 0; i < launches; ++i) adversary(work, nullptr);
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(2 * kGap);  // a harness's untimed work between batches
  }
  // One batch into poisoned outputs: its skips. Its last launch must write the right answer
  // whatever it skipped, or an output check, not the probe, would catch it.
  long skips_in_a_checked_batch(int launches) {
    const long before = Adversary::skipped;
    BENCH_CUDA_CHECK(cudaMemset(work.out.data(), 0xff, work.n * sizeof(float)));
    batch(launches);
    std::vector<float> in(work.n), out(work.n);
    BENCH_CUDA_CHECK(cudaMemcpy(in.data(), work.in.data(), work.n * sizeof(float), cudaMemcpyDeviceToHost));
    BENCH_CUDA_CHECK(cudaMemcpy(out.data(), work.out.data(), work.n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(in, out) << "the batch's outputs are wrong: an output check would catch it, not the probe";
    return Adversary::skipped - before;
  }
  detail::WorkloadInstance w;
  const SmallCopy& work;
  Adversary adversary;
};

TEST(Sustained, Control_TheAdversarySkipsAtTheBarOnlyAfterASoak) {
  // Cold (one call, then a sync), hot (batches of 5), a soak (batches of 100), then one timed
  // batch of 100 launches.
  using Adversary = SkipsWhenSustained<AtTheProbeBar>;
  CallPattern<Adversary> calls("sustained_skips");
  const long before = Adversary::skipped;
  for (int i = 0; i < 20; ++i) calls.batch(1);
  for (int i = 0; i < 20; ++i) calls.batch(5);
  EXPECT_EQ(Adversary::skipped - before, 0) << "it skipped in cold or hot batches";
  constexpr int kBatch = 100;
  for (int i = 0; i < kSoakRuns + 1; ++i) calls.batch(kBatch);
  const long in_batch = calls.skips_in_a_checked_batch(kBatch);
  const int bar = static_cast<int>(std::ceil(kProbeBar * (kBatch - 1)));
  EXPECT_EQ(in_batch, bar) << "skips in one sustained batch of " << kBatch;
  EXPECT_GE(static_cast<double>(in_batch) / (kBatch - 1), kProbeBar);
}

TEST(Sustained, HonestVariantIsMeasuredCheckedAndProbedAmongItsSamples) {
  const auto r = run_case("sustained_skips", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  expect_batches_the_tell_sees(r);
  // Four probed batches, each as long as a timed one: their repeats are 4 (batch - 1).
  EXPECT_EQ(r.probed_repeats, kProbeBatches * (r.batch - 1));
  EXPECT_EQ(r.fast_repeats, 0);
  // Sustained mode holds the drawn samples' outputs and checks them after sampling ends.
  EXPECT_EQ(r.sample_check, "device-deferred");
  EXPECT_GE(r.compared_samples, 1);
  EXPECT_GE(r.verified_samples, 1);  // the secret host-checked sample
  EXPECT_TRUE(r.suspect.empty()) << r.suspect;
}

TEST(Sustained, TheAdversaryIsHonestAndMeasuredInColdAndHotMode) {
  const long before = SkipsWhenSustained<AtTheProbeBar>::skipped;
  for (const Mode mode : {Mode::cold, Mode::hot}) {
    detail::options().mode = mode;
    const auto r = run_case("sustained_skips", "optimized");
    detail::options().mode.reset();
    EXPECT_EQ(outcome(r), "measured") << to_string(mode);
    if (mode == Mode::hot) EXPECT_LT(r.batch, kLongRun) << "hot batches long enough to look sustained";
  }
  EXPECT_EQ(SkipsWhenSustained<AtTheProbeBar>::skipped - before, 0);
}

TEST(Sustained, Row18_SkippingRepeatsAtTheProbeBarOnlyInSustainedBatchesFails) {
  const long before = SkipsWhenSustained<AtTheProbeBar>::skipped;
  const auto r = run_case("sustained_skips", "optimized");
  EXPECT_NE(outcome(r).find("FAILED: the variant skips work on inputs it has already seen"), std::string::npos)
      << outcome(r);
  EXPECT_NE(outcome(r).find("probed sustained batches"), std::string::npos) << outcome(r);
  expect_batches_the_tell_sees(r);
  EXPECT_EQ(r.probed_repeats, kProbeBatches * (r.batch - 1));
  // Every probed batch met its skips: 4 k, k the fewest that reach the bar in one batch.
  EXPECT_EQ(r.fast_repeats, kProbeBatches * AtTheProbeBar::skips(r.batch - 1));
  EXPECT_GT(SkipsWhenSustained<AtTheProbeBar>::skipped - before, 0);
}

TEST(Sustained, Row18_SkippingOneRepeatInFourOnlyInSustainedBatchesFails) {
  // Under the timed batches' 1.5x first-launch margin: only the probe can catch it.
  const auto r = run_case("sustained_skips", "skips_1_in_4_when_sustained");
  EXPECT_NE(outcome(r).find("FAILED: the variant skips work on inputs it has already seen"), std::string::npos)
      << outcome(r);
  expect_batches_the_tell_sees(r);
}

// ---- hot mode: honest for its first few batches, then at the bar ------------------------------
TEST(HotProbe, Control_TheAdversarySkipsAtTheBarOnlyAfterItsFirstBatches) {
  // Single calls with a sync between (verification, warm-up), its first 5 batches of 5 (honest),
  // then one batch of 5.
  using Adversary = SkipsAfterItsFirstHotBatches<AtTheProbeBar>;
  CallPattern<Adversary> calls("hot_skips_after_first_batches");
  const long before = Adversary::skipped;
  constexpr int kBatch = 5;  // a hot batch of this work (~1 ms)
  for (int i = 0; i < 20; ++i) calls.batch(1);
  for (int i = 0; i < AfterTheFirstHotBatches::runs; ++i) calls.batch(kBatch);
  EXPECT_EQ(Adversary::skipped - before, 0) << "it skipped in single calls or its first batches";
  const long in_batch = calls.skips_in_a_checked_batch(kBatch);
  EXPECT_EQ(in_batch, AtTheProbeBar::skips(kBatch - 1)) << "skips in one hot batch of " << kBatch;
  EXPECT_GE(static_cast<double>(in_batch) / (kBatch - 1), kProbeBar);
}

TEST(HotProbe, HonestVariantIsMeasuredAndProbedAmongItsSamples) {
  const auto r = run_case("hot_skips_after_first_batches", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_GE(r.batch, 2);
  // Four probed batches, each as long as a timed one (no cap): their repeats are 4 (batch - 1).
  EXPECT_EQ(r.probed_repeats, kProbeBatches * (r.batch - 1));
  EXPECT_EQ(r.fast_repeats, 0);
  EXPECT_TRUE(r.suspect.empty()) << r.suspect;
}

TEST(HotProbe, Row18_SkippingRepeatsAtTheProbeBarAfterItsFirstHotBatchesFails) {
  // Before the timed samples the harness now runs 1 or 2 of the batches it counts (the escape
  // check's; CUPTI's traced calls), so it is honest for at most 4 more: samples and probes. Probes
  // sit at distinct positions, each in front of its own sample, so at most 2 of the 4 fall in
  // those 4 batches and at least 2 meet its skips, k each: FAILED whenever 2k reach the bar.
  using Adversary = SkipsAfterItsFirstHotBatches<AtTheProbeBar>;
  const long before = Adversary::skipped;
  const auto r = run_case("hot_skips_after_first_batches", "optimized");
  const int probed = kProbeBatches * (r.batch - 1), k = AtTheProbeBar::skips(r.batch - 1);
  ASSERT_GE(2 * k, detail::fast_repeats_bar(probed))
      << "hot batches of " << r.batch << " (" << outcome(r)
      << "): two probed batches of its skips no longer reach the bar";
  EXPECT_NE(outcome(r).find("FAILED: the variant skips work on inputs it has already seen"), std::string::npos)
      << outcome(r);
  EXPECT_NE(outcome(r).find("probed hot batches"), std::string::npos) << outcome(r);
  EXPECT_EQ(r.probed_repeats, probed);
  // 2, 3 or 4 probed batches met its k skips; the bar is 2 (4% of 16 repeats at batches of 5).
  EXPECT_GE(r.fast_repeats, std::max(2 * k, detail::fast_repeats_bar(probed)));
  EXPECT_LE(r.fast_repeats, kProbeBatches * k);
  EXPECT_GT(Adversary::skipped - before, 0);
}

// ---- deferred device checks (sustained mode) --------------------------------------------------
// A device reference as slow as a timed batch (20 ms of spin, then the copy): checked between
// batches, as every mode did before, it leaves the GPU idle about half the sampling time.
constexpr uint64_t kSlowReferenceNs = 20'000'000;
void slow_device_reference(const SmallCopy& w, cudaStream_t s) {
  static auto* sink = new DeviceBuffer<unsigned long long>(1);  // kept for the process
  detail::launch_spin(kSlowReferenceNs, sink->data(), s);
  device_copy_reference(w, s);
}

// Counts batches by the host clock as SkipsOnceTold does (calls under kGap apart are one batch)
// and decides per batch, after its first 10, whether to misbehave: `Spoils` picks the batches.
template <class Spoils>
struct SpoilsSustainedBatches {
  SpoilsSustainedBatches(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last > kGap) {
      ++batches;
      spoiling = batches > 10 && spoils(batches);
      spoiled_batches += spoiling;
    }
    last = now;
    detail::launch_spin(kWorkNs, sink.data(), s);
    copy_kernel<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
    // Every launch of a spoiled batch, so its last, the one any check reads, is spoiled.
    if (spoiling) spoil_one<<<1, 1, 0, s>>>(w.out.data(), static_cast<int64_t>(position() % static_cast<uint64_t>(w.n)));
    BENCH_CHECK_LAUNCH();
  }
  Spoils spoils;
  std::mt19937_64 position{std::random_device{}()};
  std::chrono::steady_clock::time_point last{};
  long batches = 0, spoiled_batches = 0;
  bool spoiling = false;
  DeviceBuffer<unsigned long long> sink{1};
};
struct NoBatch {
  bool operator()(long) { return false; }
};

__global__ void bump_first_input(float* in) { in[0] += 1.0f; }

// Honest until 1.3 s after its first batch of kLongRun launches or more (the soak's first: cold
// and hot batches of this work are shorter), then adds 1 to its first input after every copy:
// from about the 15th timed sample on, after samples have been held for later checks.
struct ChangesItsInputsMidSampling {
  ChangesItsInputsMidSampling(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last > kGap) {
      if (run >= kLongRun && soak_seen == std::chrono::steady_clock::time_point{}) soak_seen = last;
      run = 0;
    }
    last = now;
    ++run;
    detail::launch_spin(kWorkNs, sink.data(), s);
    copy_kernel<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
    if (soak_seen != std::chrono::steady_clock::time_point{} && now - soak_seen > std::chrono::milliseconds(1300))
      bump_first_input<<<1, 1, 0, s>>>(const_cast<float*>(w.in.data()));
    BENCH_CHECK_LAUNCH();
  }
  std::chrono::steady_clock::time_point last{}, soak_seen{};
  int run = 0;
  DeviceBuffer<unsigned long long> sink{1};
};

BENCH_EXAMPLE(test, sustained_deferred_checks, SmallCopy)
    .stateful<SpoilsSustainedBatches<NoBatch>>(Role::baseline, "honest")
    .stateful<ChangesItsInputsMidSampling>(Role::step, "changes_its_inputs_mid_sampling")
    .stateful<SpoilsSustainedBatches<OneInTwentyAtRandom>>(Role::optimized, "spoils_one_batch_in_20_at_random")
    .reference(copy_reference)
    .device_reference(slow_device_reference)
    .tolerance(exact())
    .mode(Mode::sustained);

// The timed batches' summed time over the samples phase's wall time: how busy sampling kept the
// GPU (the gaps between batches, probes and checks run at once make up the rest).
double duty_cycle(const detail::CaseRun& r) {
  double timed = 0;
  for (double t : r.samples) timed += t * r.batch;
  for (double t : r.dropped) timed += t * r.batch;
  return timed / phase_seconds(r, "samples");
}

TEST(DeferredChecks, HonestVariantIsDeviceCheckedAfterSamplingAndKeepsTheGpuBusy) {
  const auto r = run_case("sustained_deferred_checks", "baseline");
  ASSERT_EQ(outcome(r), "measured");
  expect_batches_the_tell_sees(r);
  EXPECT_EQ(r.sample_check, "device-deferred");
  EXPECT_GT(r.compared_samples, 0);
  EXPECT_GT(r.deferred_samples, 0);
  // Every device check but the first (run at once to measure a check's cost) was held: the slots
  // cover every check the timeout allows.
  EXPECT_EQ(r.compared_samples, r.deferred_samples + 1);
  EXPECT_EQ(r.compare_host_passes, 0);
  EXPECT_GE(r.verified_samples, 1);  // the secret host check stays
  EXPECT_LE(r.escape_5pct, 0.01);
  // The held checks ran in their own phase, each at least the reference's 20 ms.
  EXPECT_GE(phase_seconds(r, "deferred_checks"), r.deferred_samples * kSlowReferenceNs * 1e-9);
  const double duty = duty_cycle(r);
  std::printf("deferred checks: %d of %zu samples held, samples phase %.3f s, deferred_checks %.3f s, "
              "duty cycle %.3f\n", r.deferred_samples, r.samples.size(), phase_seconds(r, "samples"),
              phase_seconds(r, "deferred_checks"), duty);
  EXPECT_GE(duty, 0.8);
}

TEST(DeferredChecks, Control_InterleavedChecksLeaveTheGpuIdleBetweenBatches) {
  // The same case with its checks run between batches, as before this change: the 20 ms
  // reference after each 20 ms batch. Shows the duty-cycle bar above measures the checks' gaps.
  detail::options().interleaved_checks = true;
  const auto r = run_case("sustained_deferred_checks", "baseline");
  detail::options().interleaved_checks = false;
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_EQ(r.sample_check, "device");
  EXPECT_EQ(r.deferred_samples, 0);
  EXPECT_LT(phase_seconds(r, "deferred_checks"), 0) << "no deferred phase when checks are interleaved";
  const double duty = duty_cycle(r);
  std::printf("interleaved checks: %d of %zu samples compared, samples phase %.3f s, duty cycle %.3f\n",
              r.compared_samples, r.samples.size(), phase_seconds(r, "samples"), duty);
  EXPECT_LT(duty, 0.7);
}

TEST(DeferredChecks, Control_TheSpoilerReallySpoilsOneBatchInTwenty) {
  // Outside the Runner: batches 20-39, 40-59, ..., 100-119 hold one spoiled batch each. The
  // adversary counts batches by the host clock, so a host stall over kGap between two launches of
  // one batch (a busy machine: ./bench test runs tests side by side) counts it twice; seen once
  // on an H200 host (120 for 119). A few extra batches only start the run 120-139, which may
  // hold a sixth spoiled batch; the control's point, one spoiled batch in every run of 20, holds.
  CallPattern<SpoilsSustainedBatches<OneInTwentyAtRandom>> calls("sustained_deferred_checks");
  for (int i = 0; i < 119; ++i) calls.batch(3);
  EXPECT_GE(calls.adversary.batches, 119);
  EXPECT_LE(calls.adversary.batches, 125) << "more batches than host stalls explain";
  EXPECT_GE(calls.adversary.spoiled_batches, 5);
  EXPECT_LE(calls.adversary.spoiled_batches, 6);
}

TEST(DeferredChecks, Row2_SpoilingOneBatchInTwentyAtFullSpeedFailsNamingTheSample) {
  // Every run FAILS. Which check sees a spoiled batch varies: the secret host check, or the first
  // drawn sample's check run at once, name no deferred check. So a run caught that way is
  // repeated, up to three in all, until a deferred check is the one that sees it.
  std::string last;
  for (int run = 0; run < 3; ++run) {
    const auto r = run_case("sustained_deferred_checks", "optimized");
    last = outcome(r);
    ASSERT_NE(last.find("FAILED: timed sample"), std::string::npos) << last;
    ASSERT_NE(last.find("1 outside tolerance"), std::string::npos) << last;
    if (last.find("its deferred device check found outputs unlike the device reference") != std::string::npos) return;
  }
  FAIL() << "in three runs no deferred device check caught the spoiled batch; the last: " << last;
}

TEST(DeferredChecks, Row4_ChangingItsInputsDuringASampleFailsAtOnce) {
  const auto r = run_case("sustained_deferred_checks", "changes_its_inputs_mid_sampling");
  EXPECT_NE(outcome(r).find("FAILED: timed sample"), std::string::npos) << outcome(r);
  EXPECT_NE(outcome(r).find("the variant modified its inputs (checksum changed)"), std::string::npos) << outcome(r);
  // Caught in the samples phase, before any held sample was checked.
  EXPECT_LT(phase_seconds(r, "deferred_checks"), 0);
}

}  // namespace
}  // namespace bench::testing
