// tools/curves.hpp: how an example's speedup and fraction of the ceiling change along one of its
// axes (docs/reports.md, "Curves"), and where the optimization stops paying. The Markdown and
// HTML reports draw them from a scored run; nothing is measured here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scoring.hpp"

namespace bench::tools {

struct CurvePoint {
  std::string value;     // the axis value, as in the case name
  const ScoredRow* row;  // the point's baseline/optimized pair
  bool pays() const;     // the speedup's whole interval is above kMinimumClearSpeedup
  std::string rate()
      const;  // the optimized side's GB/s or TFLOP/s (what its ceiling counts), "" if none
};

// One example's pairs along one axis, the other axes held at `fixed` ("s:4096/d:64", "" when the
// example has one axis). Points in the axis's numeric order (declaration order for words).
struct Curve {
  std::string example;  // chNN/<example>
  std::string axis;
  std::string fixed;
  std::vector<CurvePoint> points;
  // Where the optimized side stops (or starts) paying between two neighbouring points:
  // "stops paying between batch:4 (1.15x) and batch:8 (0.99x)"; empty when it never changes.
  std::string crossover;
  std::string title() const;  // "ch18/flash_decoding against batch" (+ " at s:4096/d:64")
};

// Every curve of the card: for each example with axes, each axis along which two or more of its
// scored pairs differ with every other axis equal.
std::vector<Curve> curves(const Scorecard& card);

// The Markdown section (empty when there is no curve): a table per curve and its crossover.
std::string curves_markdown(const std::vector<Curve>& curves);
// One line per curve with a crossover, for the terminal table (empty when none).
std::string crossover_lines(const std::vector<Curve>& curves);

}  // namespace bench::tools
