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
  std::size_t held_bytes = 0;
  for (const auto& b : w.buffers())
    if (!b.is_input) held_bytes += b.bytes();
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
    held_.push_back({&b, p, resolve(e.tolerance, b.dtype)});
  }
  BENCH_CUDA_CHECK(cudaMalloc(&sums_, held_.size() * sizeof(DeviceComparison)));
}

DeviceCheck::~DeviceCheck() {
  for (const Held& h : held_) cudaFree(h.copy);
  cudaFree(sums_);
}

DeviceCheck::Verdict DeviceCheck::check(uint64_t inputs, int run, cudaStream_t s) {
  // A variant that changed its inputs would be compared with a reference of the changed inputs.
  if (input_checksum(w_, s) != inputs) return Verdict::inputs_changed;
  for (const Held& h : held_)
    BENCH_CUDA_CHECK(cudaMemcpyAsync(h.copy, h.output->device, h.output->bytes(), cudaMemcpyDeviceToDevice, s));
  // Poisoned first, so an output the reference leaves unwritten cannot compare the variant's
  // values with themselves.
  poison_outputs(w_, run + 1, s);
  e_.device_reference(w_.object.get(), s);
  BENCH_CUDA_CHECK(cudaMemsetAsync(sums_, 0, held_.size() * sizeof(DeviceComparison), s));
  for (std::size_t k = 0; k < held_.size(); ++k)
    launch_compare(held_[k].copy, held_[k].output->device, held_[k].output->dtype, held_[k].output->count,
                   held_[k].tolerance, sums_ + k, s);
  std::vector<DeviceComparison> sums(held_.size());
  BENCH_CUDA_CHECK(cudaMemcpyAsync(sums.data(), sums_, sums.size() * sizeof(DeviceComparison), cudaMemcpyDeviceToHost, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  bool pass = true;
  for (std::size_t k = 0; k < held_.size(); ++k) pass = pass && device_comparison_passes(sums[k], held_[k].tolerance);
  if (pass) return Verdict::match;
  // Put the variant's outputs back: the host check judges them, not the reference's.
  for (const Held& h : held_)
    BENCH_CUDA_CHECK(cudaMemcpyAsync(h.output->device, h.copy, h.output->bytes(), cudaMemcpyDeviceToDevice, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  return Verdict::outputs_differ;
}

}  // namespace bench::detail
