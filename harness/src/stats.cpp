// Statistics shared by the harness (stopping, throttling) and the compare driver (bootstrap).
#include "bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace bench::stats {

double quantile(std::span<const double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

void RunningMedian::add(double value) {
  if (lower_.empty() || value <= lower_.front()) {
    lower_.push_back(value);
    std::push_heap(lower_.begin(), lower_.end());
  } else {
    upper_.push_back(value);
    std::push_heap(upper_.begin(), upper_.end(), std::greater<>());
  }
  // Rebalance so that the lower half holds the middle element (odd) or the lower middle (even).
  if (lower_.size() > upper_.size() + 1) {
    std::pop_heap(lower_.begin(), lower_.end());
    upper_.push_back(lower_.back());
    lower_.pop_back();
    std::push_heap(upper_.begin(), upper_.end(), std::greater<>());
  } else if (upper_.size() > lower_.size()) {
    std::pop_heap(upper_.begin(), upper_.end(), std::greater<>());
    lower_.push_back(upper_.back());
    upper_.pop_back();
    std::push_heap(lower_.begin(), lower_.end());
  }
}

double RunningMedian::median() const {
  if (lower_.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (lower_.size() > upper_.size()) return lower_.front();
  // quantile()'s interpolation at the midpoint, written the same way so the two agree exactly.
  return lower_.front() + 0.5 * (upper_.front() - lower_.front());
}

double relative_noise(std::span<const double> values) {
  if (values.size() < 2) return std::numeric_limits<double>::infinity();
  const double med = median(values);
  std::vector<double> deviations;
  deviations.reserve(values.size());
  for (double v : values) deviations.push_back(std::abs(v - med));
  const double mad = median(deviations);
  return med > 0 ? 1.4826 * mad / med : std::numeric_limits<double>::infinity();
}

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::converged: return "converged";
    case StopReason::timeout: return "timeout";
    case StopReason::max_samples: return "max_samples";
  }
  return "unknown";
}

StopReason should_stop(const StopRule& rule, std::span<const double> samples,
                       double elapsed_wall_s) {
  const auto n = static_cast<int>(samples.size());
  if (n >= rule.max_samples) return StopReason::max_samples;
  double total = 0;
  for (double s : samples) total += s;
  if (n >= rule.min_samples && total >= rule.min_time_s &&
      relative_noise(samples) <= rule.max_noise)
    return StopReason::converged;
  // The timeout never cuts below the minimum sample count: a median of two samples is not one.
  if (elapsed_wall_s >= rule.timeout_s && n >= std::min(rule.min_samples, 5))
    return StopReason::timeout;
  return StopReason::none;
}

ThrottleResult apply_throttle_rule(std::span<const double> sm_mhz, double tolerance,
                                   std::size_t min_keep) {
  ThrottleResult result;
  result.reference_mhz = quantile(sm_mhz, 0.9);
  const double floor_mhz = (1.0 - tolerance) * result.reference_mhz;
  for (std::size_t i = 0; i < sm_mhz.size(); ++i)
    (sm_mhz[i] >= floor_mhz ? result.kept : result.dropped).push_back(i);
  if (!result.dropped.empty() && result.kept.size() < min_keep) {
    result.too_many_throttled = true;
    result.kept.clear();
    result.dropped.clear();
    for (std::size_t i = 0; i < sm_mhz.size(); ++i) result.kept.push_back(i);
  }
  return result;
}

Interval speedup_interval(std::span<const double> baseline, std::span<const double> optimized,
                          int resamples, uint64_t seed) {
  Interval out;
  if (baseline.empty() || optimized.empty()) return out;
  out.estimate = median(baseline) / median(optimized);
  std::mt19937_64 rng(seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(resamples));
  std::vector<double> a(baseline.size()), b(optimized.size());
  std::uniform_int_distribution<std::size_t> pick_a(0, baseline.size() - 1);
  std::uniform_int_distribution<std::size_t> pick_b(0, optimized.size() - 1);
  for (int r = 0; r < resamples; ++r) {
    for (auto& x : a) x = baseline[pick_a(rng)];
    for (auto& x : b) x = optimized[pick_b(rng)];
    ratios.push_back(median(a) / median(b));
  }
  out.low = quantile(ratios, 0.025);
  out.high = quantile(ratios, 0.975);
  return out;
}

std::optional<Clusters> two_clusters(std::span<const double> samples) {
  std::vector<double> x(samples.begin(), samples.end());
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  const std::size_t least = std::max<std::size_t>(2, static_cast<std::size_t>(std::ceil(kClusterMinShare * n)));
  if (n < 2 * least) return std::nullopt;
  std::size_t split = 0;
  double widest = 0;
  for (std::size_t j = least; j + least <= n; ++j) {
    if (x[j - 1] <= 0) continue;
    if (const double gap = x[j] / x[j - 1]; gap > widest) widest = gap, split = j;
  }
  if (widest < kClusterGap) return std::nullopt;
  const std::span<const double> fast(x.data(), split), slow(x.data() + split, n - split);
  return Clusters{static_cast<double>(split) / n, median(fast), median(slow)};
}

}  // namespace bench::stats
