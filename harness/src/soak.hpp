// Internal: when sustained mode's soak may stop (docs/architecture.md, step 6). The soak runs
// back-to-back batches until the board's power limiter has reached its steady state for this
// work, judged from the batches' own event times: between kSustainedSoakMinSeconds, so a board
// already hot from the case before still settles into this work, and kSustainedSoakMaxSeconds
// (bench.hpp), the fixed soak it replaced, so a board whose batches never show it settled is
// soaked as before.
//
// Heating shows in the batch times: as the board nears its power limit the limiter lowers the
// SM clock and the same batch takes longer, so a cold board's soak rises and a hot board's is
// flat from its first batch. The limiter's clock also wanders by a couple of percent over tenths
// of a second while the board is steady, so "flat" cannot mean flatter than that.
#pragma once

#include <span>
#include <vector>

#include "bench/bench.hpp"

namespace bench::detail {

// The soak's batches are judged in windows of about this much work (each window's median
// batch): one batch is too noisy to tell a trend from, and the rule needs several windows
// within the minimum soak.
inline constexpr double kSoakWindowSeconds = 40e-3;

// The rule (soak_settled). `windows` windows of kSoakWindowSeconds span the minimum soak, so a
// board steady from the start settles there. `spread` is twice the limiter's wander, room for
// the windows' own noise on top of it: less would keep a steady board soaking to the cap.
// `trend` is how far the medians of the soak's two halves may differ: a steady board's halves,
// each the median of several windows, agree closer than its windows do, while a board heating
// through its soak differs by more the longer it soaks. What it lets through is a rise the
// windows' noise hides over the minimum's windows; what is left of it then falls on the first
// tenths of a second of a sampling window of a second or more, not on its median.
struct SoakRule {
  int windows = 5;
  double spread = 0.04;
  double trend = 0.01;
};

// Whether the board has settled, from the medians of the soak's windows so far, oldest first:
//   - at least rule.windows of them;
//   - the last rule.windows agree: (max - min) / median <= rule.spread;
//   - and are not all rising, or all falling, one after another (a slow drift within the
//     spread is still a drift);
//   - and the soak as a whole shows no trend: the median of its later half is within
//     rule.trend of the median of its earlier half (odd counts leave the middle window out).
// The last is over the whole soak, not the last windows only, on purpose: a board that heated
// during its soak (times rose) soaks to the cap unless the flat part, once the rise ended, is
// most of the soak's earlier half; one that was steady from the start settles after
// rule.windows; a short transient at the start (the first batch after the idle gap before the
// soak, at a higher clock) is outvoted by the medians after a window or two.
bool soak_settled(std::span<const double> window_medians, const SoakRule& rule = {});

// Whether the soak stops after a batch that ended elapsed_s after it began: at the cap, or once
// settled and past the minimum.
bool soak_done(double elapsed_s, bool settled, double min_s = kSustainedSoakMinSeconds,
               double max_s = kSustainedSoakMaxSeconds);

// How many of the case's batches make one window: kSoakWindowSeconds of batches of
// batch_seconds (the escape check's time of one batch), at least 1.
int soak_batches_per_window(double batch_seconds);

// The soak's batch times, grouped into windows of batches_per_window batches.
class SoakWindows {
 public:
  explicit SoakWindows(int batches_per_window)
      : per_window_(batches_per_window < 1 ? 1 : batches_per_window) {}
  // One batch's time; a window's median is taken when its last batch comes.
  void add(double batch_seconds);
  bool settled(const SoakRule& rule = {}) const { return soak_settled(medians_, rule); }
  // One per whole window, oldest first.
  const std::vector<double>& medians() const { return medians_; }

 private:
  int per_window_;
  std::vector<double> open_;  // batches of the window not yet whole
  std::vector<double> medians_;
};

}  // namespace bench::detail
