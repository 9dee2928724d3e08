// Shared by the GPU tests: a small copy workload and a way to run one registered case through
// the real Runner (the code path chapter binaries use).
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "bench/bench.hpp"
#include "bench/device_info.hpp"
#include "options.hpp"
#include "registry.hpp"
#include "runner.hpp"

namespace bench::testing {

struct SmallCopy {
  int64_t n;
  DeviceSpan<const float> in;
  DeviceSpan<float> out;
  explicit SmallCopy(Setup& s)
      : n(s.size("n", 1 << 20, 10'007)),
        in(s.input<float>("in", n, uniform(-1, 1))),
        out(s.output<float>("out", n)) {
    s.bytes(2.0 * n * sizeof(float));
  }
};

inline void copy_reference(const SmallCopy& w, HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) out[i] = in[i];
}

// SmallCopy's device reference (threshold_test.cu, sustained_test.cu): with one, timed samples are
// checked on the device (sample_check.hpp).
inline void device_copy_reference(const SmallCopy& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.out.data(), w.in.data(), w.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

static __global__ void copy_kernel(const float* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}

// What a cheap memoising adversary looks at (memo_test.cu, threshold_test.cu): 64 input values
// spread over the buffer, hashed.
inline __device__ unsigned long long sampled_hash(const float* in, int64_t n) {
  unsigned long long h = 0xcbf29ce484222325ull;
  for (int k = 0; k < 64; ++k) h = (h ^ __float_as_uint(in[k * (n / 64)])) * 0x100000001b3ull;
  return h;
}

// The spoilers of docs/validity.md row 2 (threshold_test.cu, sustained_test.cu): one element of
// a correct output made wrong, at full speed (relative L2 ~2e-3 at n = 2^20, outside exact()).
static __global__ void spoil_one(float* out, int64_t i) { out[i] += 1.0f; }

// Spoils one call (or batch) in each run of 20, from the 20th on, at an offset drawn afresh for
// each run: 5% of them, where no fixed schedule of checks could expect it.
struct OneInTwentyAtRandom {
  bool operator()(long call) {
    if (call % 20 == 0) offset = static_cast<long>(draw() % 20);
    return call % 20 == offset;
  }
  std::mt19937_64 draw{std::random_device{}()};
  long offset = -1;
};

inline void launch_copy(const SmallCopy& w, cudaStream_t s) {
  copy_kernel<<<264, 256, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

// The host seconds a case spent in one phase (runner.cpp's Phase names), or -1 if it had none.
inline double phase_seconds(const detail::CaseRun& r, const std::string& name) {
  for (const auto& [phase, seconds] : r.phase_seconds)
    if (phase == name) return seconds;
  return -1;
}

inline detail::Runner& runner() {
  static detail::Runner r(query_device(0), {});
  return r;
}

inline const detail::ExampleDef* find_example(const std::string& example) {
  for (const auto* e : detail::sorted_examples())
    if (e->chapter == "test" && e->name == example) return e;
  ADD_FAILURE() << "no example test/" << example;
  return nullptr;
}

// Runs chapter/example/variant, registered with BENCH_EXAMPLE in a test file, with a short
// sampling budget.
inline detail::CaseRun run_case(const std::string& example, const std::string& variant,
                                int min_samples = 10) {
  auto& o = detail::options();
  o.stop.min_samples = min_samples;
  o.stop.min_time_s = 0;
  o.stop.max_noise = 0.02;
  o.stop.timeout_s = 1.0;
  for (const auto* e : detail::sorted_examples())
    if (e->chapter == "test" && e->name == example)
      for (const auto& v : e->variants)
        if (v.name == variant) return runner().run(*e, v);
  ADD_FAILURE() << "no case test/" << example << "/" << variant;
  return {};
}

inline std::string outcome(const detail::CaseRun& r) {
  switch (r.outcome) {
    case detail::CaseRun::Outcome::measured:
      return "measured";
    case detail::CaseRun::Outcome::skipped:
      return "SKIPPED: " + r.message;
    case detail::CaseRun::Outcome::failed:
      return "FAILED: " + r.message;
  }
  return "?";
}

}  // namespace bench::testing
