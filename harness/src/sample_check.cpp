// Checking timed samples on the device: the schedule, its worst case, and the check itself.
#include "sample_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/check.hpp"
#include "verify.hpp"

namespace bench::detail {

namespace {
// The held copies may take this share of the device memory free when the case starts; past it
// the samples keep the CPU reference's random checks (a workload that large is rare: ch07's
// 1 GiB copies hold 1 GiB of an H100's ~79).
constexpr double kHeldShareOfFree = 0.25;
}  // namespace

double device_check_probability(int sample) {
  return sample <= 0 ? 1.0 : std::min(1.0, kDeviceChecks / sample);
}

double worst_case_escape(std::vector<double> chances, double share) {
  if (chances.empty()) return 1.0;
  std::sort(chances.begin(), chances.end());
  const auto bad = static_cast<std::size_t>(std::ceil(share * static_cast<double>(chances.size())));
  double escape = 1.0;
  for (std::size_t i = 0; i < std::min(bad, chances.size()); ++i) escape *= 1.0 - std::clamp(chances[i], 0.0, 1.0);
  return escape;
}

bool device_comparison_passes(const DeviceComparison& c, Tolerance t) {
  if (c.non_finite != 0) return false;
  if (t.kind == Tolerance::Kind::relative_l2) return c.ref2 > 0 && std::sqrt(c.err2 / c.ref2) <= t.bound;
  return c.mismatches == 0;
}

DeviceCheck::DeviceCheck(const ExampleDef& e, const WorkloadInstance& w) : e_(e), w_(w) {
  if (!e.device_reference) {
    why_off_ = "no device reference";
    return;
  }
  std::size_t held_bytes = 0, outputs = 0;
  for (const auto& b : w.buffers())
    if (!b.is_input) held_bytes += b.bytes(), ++outputs;
  std::size_t free = 0, total = 0;
  BENCH_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (static_cast<double>(held_bytes) > kHeldShareOfFree * static_cast<double>(free)) {
    why_off_ = fmt::format("held outputs of {:.2f} GiB would take over a quarter of the {:.2f} GiB free",
                           held_bytes / double(1ull << 30), free / double(1ull << 30));
    return;
  }
  for (const auto& b : w.buffers()) {
    if (b.is_input) continue;
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&p, b.bytes()));
    held_.push_back(p);
  }
  BENCH_CUDA_CHECK(cudaMalloc(&sums_, outputs * sizeof(DeviceComparison)));
}

DeviceCheck::~DeviceCheck() {
  for (void* p : held_) cudaFree(p);
  cudaFree(sums_);
}

DeviceCheck::Verdict DeviceCheck::check(uint64_t inputs, int run, cudaStream_t s) {
  // A variant that changed its inputs would be compared with a reference of the changed inputs.
  if (input_checksum(w_, s) != inputs) return Verdict::inputs_changed;
  std::size_t k = 0;
  for (const auto& b : w_.buffers())
    if (!b.is_input)
      BENCH_CUDA_CHECK(cudaMemcpyAsync(held_[k++], b.device, b.bytes(), cudaMemcpyDeviceToDevice, s));
  // Poisoned first, so an output the reference leaves unwritten cannot compare the variant's
  // values with themselves.
  poison_outputs(w_, run + 1, s);
  e_.device_reference(w_.object.get(), s);
  BENCH_CUDA_CHECK(cudaMemsetAsync(sums_, 0, k * sizeof(DeviceComparison), s));
  k = 0;
  for (const auto& b : w_.buffers()) {
    if (b.is_input) continue;
    launch_compare(held_[k], b.device, b.dtype, b.count, resolve(e_.tolerance, b.dtype), sums_ + k, s);
    ++k;
  }
  std::vector<DeviceComparison> sums(k);
  BENCH_CUDA_CHECK(cudaMemcpyAsync(sums.data(), sums_, k * sizeof(DeviceComparison), cudaMemcpyDeviceToHost, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  bool pass = true;
  k = 0;
  for (const auto& b : w_.buffers())
    if (!b.is_input) pass = pass && device_comparison_passes(sums[k++], resolve(e_.tolerance, b.dtype));
  if (pass) return Verdict::match;
  k = 0;  // put the variant's outputs back: the host check judges them, not the reference's
  for (const auto& b : w_.buffers())
    if (!b.is_input)
      BENCH_CUDA_CHECK(cudaMemcpyAsync(b.device, held_[k++], b.bytes(), cudaMemcpyDeviceToDevice, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  return Verdict::outputs_differ;
}

}  // namespace bench::detail
