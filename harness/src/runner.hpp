// Internal: measuring one case (one variant of one example) as docs/architecture.md describes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/device_info.hpp"
#include "bench/stats.hpp"
#include "sampler.hpp"

namespace bench::detail {

// VALIDITY row 18's probe (runner.cpp): kProbeBatches batches, each as long as a timed hot or
// sustained batch, with an event after every launch; the case FAILS when at least
// kFastRepeatShare of the probed repeats (and at least 2) run under half the median repeat. Here
// so that the tests planting an adversary at that bar read the bar itself.
inline constexpr int kProbeBatches = 4;
inline constexpr double kFastRepeatShare = 0.04;
// The fast repeats among `probed` that fail the case.
inline int fast_repeats_bar(std::size_t probed) {
  return std::max(2, static_cast<int>(std::ceil(kFastRepeatShare * static_cast<double>(probed))));
}

// One case's run through the Runner: its samples and checks, as the chapter binary reports them
// (tools/results.hpp's CaseResult is the same run as bench reads it back from the JSON).
struct CaseRun {
  enum class Outcome { measured, skipped, failed } outcome = Outcome::measured;
  std::string message;                 // why skipped or failed
  Mode mode = Mode::cold;
  std::vector<double> samples;         // kept sample times, seconds
  std::vector<double> dropped;         // samples dropped as throttled, seconds
  std::vector<double> sm_mhz;          // the clock next to every sample, kept and dropped
  bool throttle_kept_all = false;      // too many throttled samples to drop them
  stats::StopReason stop = stats::StopReason::none;
  int batch = 1;
  double first_call_s = 0, warm_call_s = 0;
  double wall_event_ratio = 0;
  double timer_floor_s = 0;           // subtracted from cold samples
  uint64_t seed = 0;                   // the case's input seed (each sample derives its own)
  double fresh_repeat_ratio = 0;       // hot batches: first launch / a repeat (memoisation check)
  // How escaped work was looked for: "cupti" (every activity of the traced calls accounted for)
  // or "wall-clock ratio (<why CUPTI was not available>)".
  std::string escape_method;
  int traced_calls = 0;                // calls whose every kernel, copy and memset was accounted for
  int verified_samples = 0;            // timed samples whose output was checked (the last included)
  int fast_samples_verified = 0;       // of those, checked because they ran under half the median
  double verify_seconds = 0;           // host time spent checking timed samples
  // Device-checked samples (docs/validity.md row 2): outputs compared with the device reference
  // on the device. `sample_check` says how the samples were checked: "device" (each right after
  // its sample), "device-deferred" (sustained mode: held until sampling ends, runner.cpp; with
  // how many ran at once when the held slots ran out), or "cpu (<why the device check was off>)"
  // for the CPU reference's random checks alone.
  int compared_samples = 0;
  int deferred_samples = 0;            // of those, held until sampling ended
  double compare_seconds = 0;          // host time spent in device checks
  int compare_host_passes = 0;         // device mismatches the host check then passed
  std::string sample_check;
  // The worst case over where a variant puts them: the probability that a variant corrupting
  // 5% of the timed samples escaped every check, from each sample's chance of being checked.
  double escape_5pct = 1;
  int probed_repeats = 0;              // hot and sustained batches: repeats timed one by one (memoisation probe)
  int fast_repeats = 0;                // of those, under half the median repeat
  std::string suspect;                 // non-empty: two separate clusters of sample times
  double max_abs_err = 0, rel_l2_err = 0;
  std::string fingerprint, fingerprint_hash;
  double bytes = 0, flops = 0;
  std::string bandwidth_ceiling, compute_ceiling;
  // Of `bytes`, how many an honest launch may leave in L2 as dirty lines when its stop event
  // fires (up to the L2's size, and no more than the outputs): they reach DRAM after the timed
  // window, so a DRAM ceiling bounds only the rest (docs/validity.md row 15). Divided by the batch
  // in hot and sustained modes, where each launch writes back the one before it.
  double l2_write_slack_bytes = 0;
  std::vector<Metric> metrics;         // a stateful variant's own extra figures
  // An example scored by a metric (ExampleDef::scored_metric): its value after each kept sample,
  // in the order of `samples` (its entry in `metrics` is their median).
  std::vector<double> scored_values;
  // Host wall seconds of each phase of the case, in order: verify, build, warmup, escape_check,
  // soak, samples, deferred_checks, final_check (the NVTX ranges of the same names; soak and
  // deferred_checks in sustained mode only).
  std::vector<std::pair<std::string, double>> phase_seconds;
};

class Runner {
 public:
  Runner(DeviceInfo device, std::map<std::string, double> ceilings);
  CaseRun run(const ExampleDef& example, const VariantDef& variant);
  const DeviceInfo& device() const { return device_; }
  const std::map<std::string, double>& ceilings() const { return ceilings_; }
  // Set once a sticky CUDA error has lost the context; every later case fails with it.
  const std::string& context_lost() const { return context_lost_; }

 private:
  void measure(const ExampleDef& example, const VariantDef& variant, CaseRun& result);
  DeviceInfo device_;
  std::map<std::string, double> ceilings_;
  std::unique_ptr<Sampler> sampler_;
  std::string context_lost_;
};

// Thrown by the checks: the case is FAILED with this message.
class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace bench::detail
