// Internal: checking timed samples on the device (docs/validity.md row 2, device-checked
// samples). After a timed sample the variant's outputs are copied aside, the example's device
// reference runs on the same inputs (still in place, their checksum proves them unchanged) and
// one kernel per output compares the two under the example's tolerance; only a handful of
// counts come back to the host. A check costs a few passes over the outputs and one device
// reference, against a CPU reference's seconds at ch07's 1 GiB (docs/validity.md has the
// figure), so nearly every sample can have one.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "device_kernels.hpp"
#include "workload.hpp"

namespace bench::detail {

// Timed sample i (from 1) is device-checked with probability min(1, kDeviceChecks / i), drawn by
// a generator the variant cannot see. A variant that corrupts a share f of n samples, wherever
// it puts them, meets a check probability of at least min(1, K / n) at each, so escapes them all
// with probability at most (1 - K / n)^(f n) <= exp(-f K): with K = 93, under 1% at f = 5%.
// Every sample up to the 93rd is checked, then about 93 / i: 93 (1 + ln(n / 93)) checks for n.
inline constexpr double kDeviceChecks = 93;
double device_check_probability(int sample);

// The worst case over where a variant puts its bad samples: with ceil(share * n) of them on the
// samples least likely to be checked, the probability that none of them is. `chances` holds
// each timed sample's probability of being checked, by any check.
double worst_case_escape(std::vector<double> chances, double share);

// The held copies of a case's outputs may take this share of the device memory free when the
// case starts; past it the samples keep the CPU reference's random checks (a workload that large
// is rare: ch07's 1 GiB copies hold 1 GiB of an H100's ~79). Sustained mode holds several sets
// (below), all under this one cap.
inline constexpr double kHeldShareOfFree = 0.25;
// The sets of held outputs that fit under that cap (0: not even one), at most kMaxHeldSlots: a
// case whose outputs are a few bytes needs no thousands of allocations.
inline constexpr int kMaxHeldSlots = 1024;
int held_slots_cap(std::size_t held_bytes, std::size_t free_bytes);

// Device checks cost at most this share of the sampling time, kCompareBudgetFloorSeconds at least.
// A memory-bound case's check is a few passes over its outputs, about what sampling spends around
// each sample, so the share is never what stops it. The floor is for a device reference much
// slower than the variant's sample (a prefill step's reference GEMMs, an MoE layer's grouped
// reference): under a floor of a fraction of a second such cases had most samples without any
// chance of a check and escape_5pct 1.0 (docs/validity.md row 2 has the measured counts). With
// 15 s a case, the checks the 93-check rule asks for fit wherever one check costs up to
// 15 s / (93 (1 + ln(n / 93))) for n >= 93 samples; past that escape_5pct says what is left
// unchecked. 10 s was a few checks short for ch01's training_step (docs/validity.md, row 2).
// The cost lands only on such cases, at most 15 s each.
inline constexpr double kCompareBudgetShare = 2.0;
inline constexpr double kCompareBudgetFloorSeconds = 15.0;

// The device checks device_check_probability() asks for over `samples` timed samples, rounded
// up: how many sets of held outputs sustained mode allocates before its samples.
int expected_device_checks(int samples);

// Where and whether a timed sample gets its device check (runner.cpp), kept free of CUDA so the
// unit tests drive it.
//
// Interleaved (cold, hot, host mode, or --bench_interleaved_checks): a check runs right after its
// sample, and one more is allowed while those run so far cost at most the budget, as before.
//
// Deferred (sustained mode): a sample drawn for a check has its outputs copied into a held slot
// and is checked after sampling ends, so no device reference runs between timed batches and the
// board stays at its power limit. The budget then counts what is owed too: the checks run so far
// plus each held one at the last measured cost of a check. The first drawn sample is checked at
// once, through the same procedure as a held one, to measure that cost. When every slot is held
// the sample is checked at once as in interleaved mode: its chance of a check is the same either
// way, so escape_5pct is unchanged by where checks run.
class DeviceCheckPlan {
 public:
  DeviceCheckPlan(bool deferred, int slots) : deferred_(deferred), slots_(deferred ? slots : 0) {}
  enum class Where {
    at_once,          // checked right after its sample (interleaved, or every slot held)
    measure_at_once,  // deferred mode's first: held and checked at once, to measure a check
    deferred,         // held until sampling ends
  };
  // `spent`: seconds device checks have cost so far; `sampling`: the sampling time so far.
  bool within_budget(double spent, double sampling) const;
  // Sample i's (from 1) chance of a device check: device_check_probability(i) within budget,
  // else 0.
  double chance(int sample, double spent, double sampling) const;
  Where place() const;
  void held() { ++held_; }
  void ran(double seconds) {  // one check finished: the cost of the next ones
    check_seconds_ = seconds;
    measured_ = true;
  }
  void fell_back() { ++at_once_for_want_of_slots_; }

  bool deferred() const { return deferred_; }
  int held_count() const { return held_; }
  int slots() const { return slots_; }
  int at_once_for_want_of_slots() const { return at_once_for_want_of_slots_; }

 private:
  bool deferred_;
  int slots_;
  int held_ = 0;
  bool measured_ = false;
  double check_seconds_ = 0;
  int at_once_for_want_of_slots_ = 0;
};

// verify.cpp's verdict on the counts of one device comparison: no element non-finite where the
// reference is finite, and none outside exact/allclose, or a relative L2 error within bound.
bool device_comparison_passes(const DeviceComparison& c, Tolerance resolved);

// The example's device reference bound to one workload: where it writes and how its values are
// read back. The plain form writes over the workload's outputs (the variant's values must be
// copied aside first); the FP32 form (ExampleDef::device_reference_writes_f32) writes into FP32
// arrays of the outputs' lengths that this object owns, leaving the outputs alone. Either way
// what it writes is poisoned first, so an element the reference leaves unwritten cannot pass.
class DeviceReference {
 public:
  DeviceReference(const ExampleDef& e, const WorkloadInstance& w);
  DeviceReference(const DeviceReference&) = delete;
  DeviceReference& operator=(const DeviceReference&) = delete;

  bool overwrites_outputs() const { return !e_.device_reference_writes_f32; }
  // Device memory the FP32 form's arrays take for this workload (0 for the plain form).
  static std::size_t f32_bytes(const ExampleDef& e, const WorkloadInstance& w);
  // Poisons what the reference writes (run `run`'s pattern; the FP32 arrays always NaN), then
  // enqueues the reference on `s`.
  void run(int run, cudaStream_t s);
  // After run(): the reference's values for one of the workload's outputs, on the device.
  const void* values(const Buffer& output) const;
  DType dtype(const Buffer& output) const;
  HostCopy to_host(const Buffer& output, cudaStream_t s) const;

 private:
  const ExampleDef& e_;
  const WorkloadInstance& w_;
  ReferenceOutputs f32_;        // the FP32 form's arrays, one per output, in buffer order
  DeviceBuffer<float> f32_block_;  // one allocation holding them
};

// Device copies of a timing workload's outputs ("slots"), and the device check of a sample with
// them. Off, with the reason, when the example has no device reference or one set of copies would
// take more than kHeldShareOfFree of the free device memory. Slot 0 is allocated with the check
// and serves checks run at once; reserve() adds slots for sustained mode's deferred checks, up to
// the same cap counted over all of them.
class DeviceCheck {
 public:
  DeviceCheck(const ExampleDef& e, const WorkloadInstance& w);
  ~DeviceCheck();
  DeviceCheck(const DeviceCheck&) = delete;
  DeviceCheck& operator=(const DeviceCheck&) = delete;

  bool on() const { return why_off_.empty(); }
  const std::string& why_off() const { return why_off_; }
  void turn_off(std::string why) { why_off_ = std::move(why); }

  // Allocates slots until there are `slots` (slot 0 included) or the cap holds no more; returns
  // how many there are. Called before sampling: a cudaMalloc between timed batches would be a gap.
  int reserve(int slots);
  int slots() const { return static_cast<int>(slots_.size()); }
  int slots_cap() const { return cap_; }

  // After a timed sample (run number `run`, inputs checksummed to `inputs` before it): whether
  // the inputs are unchanged and every output matches the device reference. On anything but
  // `match` the variant's own outputs are in place for the host check to judge.
  enum class Verdict { match, inputs_changed, outputs_differ };
  Verdict check(uint64_t inputs, int run, cudaStream_t s);

  // Deferred checks: hold() copies the outputs into `slot` (device to device, queued on `s`, no
  // sync); judge_held() later runs the device reference on the inputs now in place, which the
  // caller has refilled from the sample's seed and proved equal by their checksum, and compares
  // its outputs with the held ones. On `outputs_differ` the held outputs are back in place.
  void hold(int slot, cudaStream_t s);
  Verdict judge_held(int slot, int run, cudaStream_t s);

 private:
  const ExampleDef& e_;
  const WorkloadInstance& w_;
  std::string why_off_;
  struct Output {  // one per output of the workload, in buffer order
    const Buffer* buffer;
    std::size_t offset;   // of its copy within a slot
    Tolerance tolerance;  // the example's, resolved for the output's dtype
  };
  std::vector<Output> outputs_;
  std::optional<DeviceReference> reference_;  // when the example has one
  std::size_t slot_bytes_ = 0;        // one set of copies, each output's aligned
  std::vector<char*> slots_;          // one allocation per set
  int cap_ = 0;                       // held_slots_cap at construction
  DeviceComparison* sums_ = nullptr;  // one per output
};

}  // namespace bench::detail
