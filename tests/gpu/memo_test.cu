// docs/validity.md row 18: variants that remember. Two adversaries seen on an H100 (4.9x and
// 4.3x, verified, before the defence) are planted here and run through the real Runner:
//   - remembers_inputs: hashes a few input values on the device and skips its work when they
//     match the previous call's;
//   - a baseline that keeps (input hash -> output) in device memory that outlives its workload,
//     and an optimized variant that serves those stored answers instead of computing.
// Each test first shows, outside the Runner, that the adversary really skips or serves when
// it meets inputs it has seen: otherwise a passing test would prove nothing. A third skips its
// work on every other call, whatever the inputs, and must fail the per-sample output check.
#include <map>

#include "bench/stats.hpp"
#include "harness_fixture.hpp"
#include "workload.hpp"

namespace bench::testing {
namespace {

constexpr int64_t kWorkNs = 200'000;  // the honest work: 200 us, so skipping it is a 4x+ "speedup"

// The honest work: every block waits kWorkNs, then the grid copies. `skip` (may be null) makes
// it return at once.
__global__ void slow_copy(const float* in, float* out, int64_t n, const int* skip) {
  if (skip != nullptr && *skip) return;
  if (threadIdx.x == 0) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < kWorkNs);
  }
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}

// ---- skips when its inputs are unchanged since its previous call ---------------------------
__global__ void compare_with_last(const float* in, int64_t n, unsigned long long* last, int* skip,
                                  unsigned long long* skips) {
  const unsigned long long h = sampled_hash(in, n);
  *skip = h == *last;
  if (*skip) ++*skips;
  *last = h;
}

struct RemembersInputs {
  RemembersInputs(const SmallCopy&, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes()));
    BENCH_CUDA_CHECK(cudaMemset(skip.data(), 0, skip.bytes()));
  }
  void operator()(const SmallCopy& w, cudaStream_t s) {
    compare_with_last<<<1, 1, 0, s>>>(w.in.data(), w.n, state.data(), skip.data(), state.data() + 1);
    slow_copy<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, skip.data());
    BENCH_CHECK_LAUNCH();
  }
  unsigned long long skips() const {
    unsigned long long host = 0;
    BENCH_CUDA_CHECK(cudaMemcpy(&host, state.data() + 1, sizeof host, cudaMemcpyDeviceToHost));
    return host;
  }
  DeviceBuffer<unsigned long long> state{2};  // last hash, skips so far
  DeviceBuffer<int> skip{1};
};

void honest_slow_copy(const SmallCopy& w, cudaStream_t s) {
  slow_copy<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, nullptr);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(test, memo_inputs_cold, SmallCopy)
    .baseline("honest", honest_slow_copy)
    .stateful<RemembersInputs>(Role::optimized, "remembers_inputs")
    .reference(copy_reference);

BENCH_EXAMPLE(test, memo_inputs_hot, SmallCopy)
    .baseline("honest", honest_slow_copy)
    .stateful<RemembersInputs>(Role::optimized, "remembers_inputs")
    .reference(copy_reference)
    .mode(Mode::hot);

// ---- serves answers memoised by another variant ----------------------------------------------
// Device memory that outlives every workload: (hash, output) slots, filled round-robin by the
// baseline, read by the optimized variant.
constexpr int kSlots = 8;
struct AnswerStore {
  int64_t n = 0;
  DeviceBuffer<unsigned long long> hashes{kSlots + 1};  // slot hashes, then the served count
  DeviceBuffer<float> answers;
  DeviceBuffer<int> hit{1};  // the slot that matched, or -1
  int next = 0;
};
AnswerStore& store(int64_t n) {
  static std::map<int64_t, AnswerStore> stores;
  AnswerStore& a = stores[n];
  if (a.n != n) {
    a.n = n;
    a.answers = DeviceBuffer<float>(kSlots * n);
    BENCH_CUDA_CHECK(cudaMemset(a.hashes.data(), 0, a.hashes.bytes()));
  }
  return a;
}

__global__ void remember_answer(const float* in, const float* out, int64_t n, unsigned long long* hash_slot,
                                float* answer_slot) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *hash_slot = sampled_hash(in, n);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    answer_slot[i] = out[i];
}

__global__ void look_up(const float* in, int64_t n, unsigned long long* hashes, int* hit) {
  const unsigned long long h = sampled_hash(in, n);
  *hit = -1;
  for (int k = 0; k < kSlots; ++k)
    if (hashes[k] == h) *hit = k;
  if (*hit >= 0) ++hashes[kSlots];  // served
}

__global__ void serve_or_compute(const float* in, float* out, int64_t n, const int* hit, const float* answers) {
  if (*hit < 0) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = answers[*hit * n + i];
}

void computes_and_remembers(const SmallCopy& w, cudaStream_t s) {
  AnswerStore& a = store(w.n);
  honest_slow_copy(w, s);
  remember_answer<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, a.hashes.data() + a.next,
                                      a.answers.data() + a.next * w.n);
  BENCH_CHECK_LAUNCH();
  a.next = (a.next + 1) % kSlots;
}

unsigned long long served(int64_t n) {
  unsigned long long host = 0;
  BENCH_CUDA_CHECK(cudaMemcpy(&host, store(n).hashes.data() + kSlots, sizeof host, cudaMemcpyDeviceToHost));
  return host;
}

const detail::ExampleDef& example(const std::string& name) {
  for (const auto* e : detail::sorted_examples())
    if (e->chapter == "test" && e->name == name) return *e;
  throw std::runtime_error("no example test/" + name);
}

// The optimized variant below computes only on a miss: slow_copy would overwrite the served
// answer, so on a hit it must not run. The flag that says so is the lookup's own.
__global__ void hit_to_skip(const int* hit, int* skip) { *skip = *hit >= 0; }

void serves_remembered_skipping(const SmallCopy& w, cudaStream_t s) {
  AnswerStore& a = store(w.n);
  static DeviceBuffer<int> skip(1);
  look_up<<<1, 1, 0, s>>>(w.in.data(), w.n, a.hashes.data(), a.hit.data());
  hit_to_skip<<<1, 1, 0, s>>>(a.hit.data(), skip.data());
  serve_or_compute<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, a.hit.data(), a.answers.data());
  slow_copy<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, skip.data());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(test, memo_across_variants, SmallCopy)
    .baseline("computes_and_remembers", computes_and_remembers)
    .optimized("serves_remembered", serves_remembered_skipping)
    .reference(copy_reference);

// ---- keyed on call counts: works on the verification runs, then on every other call only ----
struct SkipsOddCalls {
  SkipsOddCalls(const SmallCopy&, cudaStream_t) {}
  void operator()(const SmallCopy& w, cudaStream_t s) {
    if (calls++ < 2 || calls % 2 == 0) honest_slow_copy(w, s);
  }
  int64_t calls = 0;
};

BENCH_EXAMPLE(test, memo_call_count, SmallCopy)
    .baseline("honest", honest_slow_copy)
    .stateful<SkipsOddCalls>(Role::optimized, "skips_odd_calls")
    .reference(copy_reference);

// ---- declares no outputs: nothing a sample could leave poisoned, nothing to verify ------------
// Its one input is read and its work done, but a workload without an output has no answer to
// check; only a calibration (calibrate's event_pair_us) may be one.
struct InputOnly {
  int64_t n;
  DeviceSpan<const float> in;
  explicit InputOnly(Setup& s) : n(s.size("n", 1 << 20, 10'007)), in(s.input<float>("in", n, uniform(-1, 1))) {}
};

__global__ void read_only(const float* in, int64_t n, float* sink) {
  float sum = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    sum += in[i];
  if (sum == 12345.678f) *sink = sum;  // never true on uniform(-1, 1) inputs: keeps the loads
}

void read_inputs(const InputOnly& w, cudaStream_t s) {
  read_only<<<264, 256, 0, s>>>(w.in.data(), w.n, nullptr);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(test, no_outputs, InputOnly)
    .baseline("reads_inputs", read_inputs)
    .reference([](const InputOnly&, HostData&) {});

// Builds the example's timing-size workload outside the Runner, with fixed inputs.
detail::WorkloadInstance workload_with_fixed_inputs(const std::string& name, cudaStream_t s) {
  detail::WorkloadInstance w = detail::build_workload(example(name), /*verifying=*/false);
  detail::fill_inputs(w, 12345, s);
  return w;
}

TEST(Memoisation, Control_RemembersInputsSkipsARepeatedCall) {
  cudaStream_t s = nullptr;
  auto w = workload_with_fixed_inputs("memo_inputs_cold", s);
  const auto& copy = *static_cast<const SmallCopy*>(w.object.get());
  RemembersInputs adversary(copy, s);
  adversary(copy, s);
  adversary(copy, s);
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(adversary.skips(), 1u);  // the second call on the same inputs did nothing
}

TEST(Memoisation, Row18_SkippingOnSeenInputsGainsNothingInColdSamples) {
  const auto honest = run_case("memo_inputs_cold", "baseline");
  const auto r = run_case("memo_inputs_cold", "optimized");
  ASSERT_EQ(outcome(honest), "measured");
  ASSERT_EQ(outcome(r), "measured");
  // Every timed sample met fresh inputs, so every one did the 200 us of work.
  EXPECT_GT(stats::quantile(r.samples, 0.1), 0.8 * kWorkNs * 1e-9);
  EXPECT_NEAR(stats::median(r.samples), stats::median(honest.samples), 0.1 * stats::median(honest.samples));
}

TEST(Memoisation, Row18_SkippingOnSeenInputsFailsInHotBatches) {
  const auto honest = run_case("memo_inputs_hot", "baseline");
  EXPECT_EQ(outcome(honest), "measured");
  const auto r = run_case("memo_inputs_hot", "optimized");
  EXPECT_NE(outcome(r).find("FAILED: the variant"), std::string::npos) << outcome(r);
  EXPECT_NE(outcome(r).find("memoisation"), std::string::npos) << outcome(r);
}

TEST(Memoisation, Control_AStoredAnswerIsServedForTheSameInputs) {
  cudaStream_t s = nullptr;
  auto w = workload_with_fixed_inputs("memo_across_variants", s);
  const auto& copy = *static_cast<const SmallCopy*>(w.object.get());
  const auto before = served(copy.n);
  computes_and_remembers(copy, s);
  serves_remembered_skipping(copy, s);
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(served(copy.n) - before, 1u);
}

TEST(Memoisation, Row18_AnswersMemoisedByAnotherVariantAreNeverServed) {
  const int64_t n = 1 << 20;  // SmallCopy's timing size
  const auto baseline = run_case("memo_across_variants", "baseline");
  ASSERT_EQ(outcome(baseline), "measured");
  const auto before = served(n);
  const auto r = run_case("memo_across_variants", "optimized");
  ASSERT_EQ(outcome(r), "measured");
  EXPECT_EQ(served(n), before) << "the optimized variant met inputs the baseline had computed on";
  EXPECT_GT(stats::quantile(r.samples, 0.1), 0.8 * kWorkNs * 1e-9);
  EXPECT_EQ(baseline.fingerprint_hash, r.fingerprint_hash);  // same problem, different inputs
  EXPECT_NE(baseline.seed, r.seed);
}

TEST(Memoisation, Row18_ATimedSampleThatWritesNothingFails) {
  const auto r = run_case("memo_call_count", "optimized");
  EXPECT_NE(outcome(r).find("wrote none of its outputs"), std::string::npos) << outcome(r);
}

TEST(Memoisation, Row18_AWorkloadWithoutOutputsFails) {
  const auto r = run_case("no_outputs", "baseline");
  EXPECT_NE(outcome(r).find("declares no outputs"), std::string::npos) << outcome(r);
}

}  // namespace
}  // namespace bench::testing
