// harness/src/soak.cpp: when sustained mode's soak may stop (soak.hpp).
#include "soak.hpp"

#include <algorithm>
#include <cmath>

#include "bench/stats.hpp"

namespace bench::detail {

bool soak_settled(std::span<const double> m, const SoakRule& rule) {
  const std::size_t k = static_cast<std::size_t>(std::max(rule.windows, 2));
  if (m.size() < k) return false;
  const auto last = m.last(k);
  const double level = stats::median(last);
  if (!(level > 0)) return false;
  const auto [low, high] = std::minmax_element(last.begin(), last.end());
  if ((*high - *low) / level > rule.spread) return false;
  bool rising = true, falling = true;
  for (std::size_t i = 1; i < k; ++i) {
    rising = rising && last[i] > last[i - 1];
    falling = falling && last[i] < last[i - 1];
  }
  if (rising || falling) return false;
  const std::size_t half = m.size() / 2;
  const double earlier = stats::median(m.first(half)), later = stats::median(m.last(half));
  return std::abs(later - earlier) / stats::median(m) <= rule.trend;
}

bool soak_done(double elapsed_s, bool settled, double min_s, double max_s) {
  return elapsed_s >= max_s || (settled && elapsed_s >= min_s);
}

int soak_batches_per_window(double batch_seconds) {
  if (!(batch_seconds > 0)) return 1;
  return std::max(1, static_cast<int>(std::lround(kSoakWindowSeconds / batch_seconds)));
}

void SoakWindows::add(double batch_seconds) {
  open_.push_back(batch_seconds);
  if (static_cast<int>(open_.size()) < per_window_) return;
  medians_.push_back(stats::median(open_));
  open_.clear();
}

}  // namespace bench::detail
