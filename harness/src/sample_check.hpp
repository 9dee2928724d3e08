// Internal: checking timed samples on the device (docs/validity.md row 2, device-checked
// samples). After a timed sample the variant's outputs are copied aside, the example's device
// reference runs on the same inputs (still in place, their checksum proves them unchanged) and
// one kernel per output compares the two under the example's tolerance; only a handful of
// counts come back to the host. A check costs a few passes over the outputs and one device
// reference, against a CPU reference's 0.5-2.6 s at ch07's 1 GiB, so nearly every sample can
// have one.
#pragma once

#include <cuda_runtime.h>

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

// verify.cpp's verdict on the counts of one device comparison: no element non-finite where the
// reference is finite, and none outside exact/allclose, or a relative L2 error within bound.
bool device_comparison_passes(const DeviceComparison& c, Tolerance resolved);

// Device copies of a timing workload's outputs, and the device check of one sample with them.
// Off, with the reason, when the example has no device reference or the copies would take
// more than a quarter of the free device memory.
class DeviceCheck {
 public:
  DeviceCheck(const ExampleDef& e, const WorkloadInstance& w);
  ~DeviceCheck();
  DeviceCheck(const DeviceCheck&) = delete;
  DeviceCheck& operator=(const DeviceCheck&) = delete;

  bool on() const { return why_off_.empty(); }
  const std::string& why_off() const { return why_off_; }
  void turn_off(std::string why) { why_off_ = std::move(why); }

  // After a timed sample (run number `run`, inputs checksummed to `inputs` before it): whether
  // the inputs are unchanged and every output matches the device reference. On anything but
  // `match` the variant's own outputs are in place for the host check to judge.
  enum class Verdict { match, inputs_changed, outputs_differ };
  Verdict check(uint64_t inputs, int run, cudaStream_t s);

 private:
  const ExampleDef& e_;
  const WorkloadInstance& w_;
  std::string why_off_;
  struct Held {  // one per output of the workload, in buffer order
    const Buffer* output;
    void* copy;           // the variant's outputs, held aside while the reference runs
    Tolerance tolerance;  // the example's, resolved for the output's dtype
  };
  std::vector<Held> held_;
  DeviceComparison* sums_ = nullptr;  // one per output
};

}  // namespace bench::detail
