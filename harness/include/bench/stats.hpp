// bench/stats.hpp: the statistics the harness and the compare driver share. Host-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bench::stats {

// Linear-interpolated quantile, q in [0, 1], of unsorted values. Empty input gives NaN.
double quantile(std::span<const double> values, double q);
inline double median(std::span<const double> values) { return quantile(values, 0.5); }

// The median of a growing set of values, equal to median() of all values added so far, at
// O(log n) an addition instead of a sort of them all (the runner asks after every timed
// sample). Two heaps: the lower half (a max-heap) and the upper half (a min-heap).
class RunningMedian {
 public:
  void add(double value);
  std::size_t size() const { return lower_.size() + upper_.size(); }
  double median() const;  // NaN when empty

 private:
  std::vector<double> lower_, upper_;  // lower_.size() == upper_.size() or one more
};

// Robust relative noise: 1.4826 * MAD / median (the MAD scaled to a standard deviation for
// normal data, divided by the median). One outlier in twenty samples barely moves it.
double relative_noise(std::span<const double> values);

// When to stop sampling (docs/architecture.md, "adaptive stopping").
struct StopRule {
  int min_samples = 20;
  double min_time_s = 0.05;   // of measured (event) time accumulated over the kept samples
  double max_noise = 0.01;    // relative_noise at or under this counts as converged
  double timeout_s = 3.0;     // wall time spent sampling one case
  int max_samples = 20000;
};
enum class StopReason { none, converged, timeout, max_samples };
const char* to_string(StopReason reason);
// `samples` are the kept sample times in seconds; `elapsed_wall_s` the wall time since sampling
// began.
StopReason should_stop(const StopRule& rule, std::span<const double> samples,
                       double elapsed_wall_s);

// Throttle rule: a sample whose SM clock (MHz, measured next to it) is below
// (1 - tolerance) * the reference clock is dropped. The reference is the 90th percentile of the
// clocks seen, so one idle-clock sample cannot become the reference. If dropping would leave
// fewer than `min_keep` samples nothing is dropped and the result says so.
struct ThrottleResult {
  std::vector<std::size_t> kept;     // indices into the inputs
  std::vector<std::size_t> dropped;  // indices into the inputs
  double reference_mhz = 0.0;
  bool too_many_throttled = false;   // would have dropped too many: kept everything
};
ThrottleResult apply_throttle_rule(std::span<const double> sm_mhz, double tolerance = 0.10,
                                   std::size_t min_keep = 5);

// Two clearly separate clusters of sample times: the sorted samples split at their widest gap
// (ratio of neighbours), with at least 10% of them and 2 samples on each side and the slower
// side's fastest at least 1.5x the faster side's slowest. A variant that does its work on some
// samples only looks like this; one honest distribution, with a tail of outliers, does not.
struct Clusters {
  double fast_share = 0;   // fraction of samples in the faster cluster
  double fast_median = 0, slow_median = 0;
};
inline constexpr double kClusterGap = 1.5;
inline constexpr double kClusterMinShare = 0.10;
std::optional<Clusters> two_clusters(std::span<const double> samples);

// Speedup of `optimized` over `baseline` as the ratio of medians, with a percentile bootstrap
// 95% confidence interval from resampling both sample sets (deterministic for a given seed).
struct Interval {
  double estimate = 0.0;
  double low = 0.0;
  double high = 0.0;
};
Interval speedup_interval(std::span<const double> baseline, std::span<const double> optimized,
                          int resamples = 2000, uint64_t seed = 0x5eed);

}  // namespace bench::stats
