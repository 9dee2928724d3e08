// Checking timed samples on the device: the schedule, its worst case, and the check itself.
#include "sample_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/check.hpp"
#include "verify.hpp"

namespace bench::detail {

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

int held_slots_cap(std::size_t held_bytes, std::size_t free_bytes) {
  if (held_bytes == 0) return kMaxHeldSlots;
  const double fit = std::floor(kHeldShareOfFree * static_cast<double>(free_bytes) /
                                static_cast<double>(held_bytes));
  return static_cast<int>(std::min(fit, static_cast<double>(kMaxHeldSlots)));
}

int expected_device_checks(int samples) {
  double sum = 0;
  for (int i = 1; i <= samples; ++i) sum += device_check_probability(i);
  return static_cast<int>(std::ceil(sum - 1e-9));
}

bool DeviceCheckPlan::within_budget(double spent, double sampling) const {
  // Interleaved, held_ is 0 and this is the rule as it was: one more check while those run so
  // far cost at most the budget. Deferred, the held ones are owed at the last measured cost.
  const double owed = spent + held_ * check_seconds_;
  return owed <= std::max(kCompareBudgetFloorSeconds, kCompareBudgetShare * sampling);
}

double DeviceCheckPlan::chance(int sample, double spent, double sampling) const {
  return within_budget(spent, sampling) ? device_check_probability(sample) : 0.0;
}

DeviceCheckPlan::Where DeviceCheckPlan::place() const {
  if (!deferred_) return Where::at_once;
  if (!measured_) return Where::measure_at_once;
  return held_ < slots_ ? Where::deferred : Where::at_once;
}

bool device_comparison_passes(const DeviceComparison& c, Tolerance t) {
  if (c.non_finite != 0) return false;
  if (t.kind == Tolerance::Kind::relative_l2) return c.ref2 > 0 && std::sqrt(c.err2 / c.ref2) <= t.bound;
  return c.mismatches == 0;
}

namespace {
constexpr std::size_t kSlotAlignment = 256;  // each output's copy starts on its own 256 bytes
std::size_t aligned(std::size_t bytes) {
  return (bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}
}  // namespace

std::size_t DeviceReference::f32_bytes(const ExampleDef& e, const WorkloadInstance& w) {
  std::size_t bytes = 0;
  if (e.device_reference_writes_f32)
    for (const auto& b : w.buffers())
      if (!b.is_input) bytes += aligned(static_cast<std::size_t>(b.count) * sizeof(float));
  return bytes;
}

DeviceReference::DeviceReference(const ExampleDef& e, const WorkloadInstance& w) : e_(e), w_(w) {
  if (overwrites_outputs()) return;
  // Whole floats: every array's length is rounded up to kSlotAlignment bytes.
  f32_block_ = DeviceBuffer<float>(
      static_cast<int64_t>(std::max(f32_bytes(e, w), sizeof(float)) / sizeof(float)));
  std::size_t offset = 0;
  for (const auto& b : w.buffers()) {
    if (b.is_input) continue;
    f32_.arrays.emplace_back(
        b.name, reinterpret_cast<float*>(reinterpret_cast<char*>(f32_block_.data()) + offset));
    offset += aligned(static_cast<std::size_t>(b.count) * sizeof(float));
  }
}

void DeviceReference::run(int run, cudaStream_t s) {
  if (overwrites_outputs()) {
    poison_outputs(w_, run, s);
  } else {
    for (const auto& b : w_.buffers())  // 0xFF bytes: NaN, which no tolerance passes
      if (!b.is_input)
        BENCH_CUDA_CHECK(cudaMemsetAsync(f32_[b.name], 0xFF, b.count * sizeof(float), s));
  }
  e_.device_reference(w_.object.get(), f32_, s);
}

const void* DeviceReference::values(const Buffer& output) const {
  return overwrites_outputs() ? output.device : f32_[output.name];
}

DType DeviceReference::dtype(const Buffer& output) const {
  return overwrites_outputs() ? output.dtype : DType::f32;
}

HostCopy DeviceReference::to_host(const Buffer& output, cudaStream_t s) const {
  if (overwrites_outputs()) return copy_to_host(output, s);
  Buffer wide = output;
  wide.dtype = DType::f32;
  wide.device = f32_[output.name];
  return copy_to_host(wide, s);
}

DeviceCheck::DeviceCheck(const ExampleDef& e, const WorkloadInstance& w) : e_(e), w_(w) {
  if (!e.device_reference) {
    why_off_ = "no device reference";
    return;
  }
  for (const auto& b : w.buffers()) {
    if (b.is_input) continue;
    outputs_.push_back({&b, slot_bytes_, resolve(e.tolerance, b.dtype)});
    slot_bytes_ += aligned(b.bytes());
  }
  std::size_t free = 0, total = 0;
  BENCH_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  // The FP32 form's arrays come out of the same free memory, before any slot: under the same
  // quarter, so a reference too large for the card turns the checks off, with the reason.
  const std::size_t reference_bytes = DeviceReference::f32_bytes(e, w);
  if (reference_bytes > kHeldShareOfFree * static_cast<double>(free)) {
    why_off_ = fmt::format(
        "the FP32 device reference's {:.2f} GiB would take over a quarter of the {:.2f} GiB free",
        reference_bytes / double(1ull << 30), free / double(1ull << 30));
    return;
  }
  free -= reference_bytes;
  cap_ = held_slots_cap(slot_bytes_, free);
  if (cap_ < 1) {
    why_off_ =
        fmt::format("held outputs of {:.2f} GiB would take over a quarter of the {:.2f} GiB free",
                    slot_bytes_ / double(1ull << 30), free / double(1ull << 30));
    return;
  }
  reference_.emplace(e, w);
  void* first = nullptr;  // slot 0: every device check needs it, so failing here fails the case
  BENCH_CUDA_CHECK(cudaMalloc(&first, std::max<std::size_t>(slot_bytes_, 1)));
  slots_.push_back(static_cast<char*>(first));
  BENCH_CUDA_CHECK(cudaMalloc(&sums_, outputs_.size() * sizeof(DeviceComparison)));
}

DeviceCheck::~DeviceCheck() {
  for (char* slot : slots_) cudaFree(slot);
  cudaFree(sums_);
}

int DeviceCheck::reserve(int slots) {
  while (static_cast<int>(slots_.size()) < std::min(slots, cap_)) {
    void* p = nullptr;
    // The cap was set against the memory free when the case began; the variant may allocate
    // lazily since, so a failed allocation ends the reservation rather than the case.
    if (cudaMalloc(&p, std::max<std::size_t>(slot_bytes_, 1)) != cudaSuccess) {
      cudaGetLastError();
      break;
    }
    slots_.push_back(static_cast<char*>(p));
  }
  return static_cast<int>(slots_.size());
}

void DeviceCheck::hold(int slot, cudaStream_t s) {
  for (const Output& o : outputs_)
    BENCH_CUDA_CHECK(cudaMemcpyAsync(slots_.at(slot) + o.offset, o.buffer->device,
                                     o.buffer->bytes(), cudaMemcpyDeviceToDevice, s));
}

DeviceCheck::Verdict DeviceCheck::check(uint64_t inputs, int run, cudaStream_t s) {
  // A variant that changed its inputs would be compared with a reference of the changed inputs.
  if (input_checksum(w_, s) != inputs) return Verdict::inputs_changed;
  hold(0, s);
  return judge_held(0, run, s);
}

DeviceCheck::Verdict DeviceCheck::judge_held(int slot, int run, cudaStream_t s) {
  char* held = slots_.at(slot);
  // Poisoned first, so an output the reference leaves unwritten cannot compare the variant's
  // values with themselves.
  reference_->run(run + 1, s);
  BENCH_CUDA_CHECK(cudaMemsetAsync(sums_, 0, outputs_.size() * sizeof(DeviceComparison), s));
  for (std::size_t k = 0; k < outputs_.size(); ++k) {
    const Buffer& b = *outputs_[k].buffer;
    launch_compare(held + outputs_[k].offset, b.dtype, reference_->values(b), reference_->dtype(b),
                   b.count, outputs_[k].tolerance, sums_ + k, s);
  }
  std::vector<DeviceComparison> sums(outputs_.size());
  BENCH_CUDA_CHECK(cudaMemcpyAsync(sums.data(), sums_, sums.size() * sizeof(DeviceComparison), cudaMemcpyDeviceToHost, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  bool pass = true;
  for (std::size_t k = 0; k < outputs_.size(); ++k)
    pass = pass && device_comparison_passes(sums[k], outputs_[k].tolerance);
  if (pass) return Verdict::match;
  // Put the variant's outputs back: the host check judges them, not the reference's.
  for (const Output& o : outputs_)
    BENCH_CUDA_CHECK(cudaMemcpyAsync(o.buffer->device, held + o.offset, o.buffer->bytes(),
                                     cudaMemcpyDeviceToDevice, s));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  return Verdict::outputs_differ;
}

}  // namespace bench::detail
