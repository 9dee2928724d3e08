// tools/html_report.hpp: one self-contained HTML page (inline SVG, one inline script that sorts and
// filters the table, nothing fetched) from scored runs: provenance, each example's speedup with its
// interval and band, a roofline per GPU under that GPU's measured ceilings, and history when
// several runs of one GPU are given. `bench compare --html` and `bench report` write it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/expectations.hpp"
#include "scoring.hpp"

namespace bench::tools {

// One scored run: where it came from, its context (GPU, driver, git SHA, date) and the
// expectations of its GPU (std::nullopt: none yet).
struct ReportRun {
  std::string source;
  nlohmann::json context = nlohmann::json::object();
  Scorecard card;
  std::optional<Expectations> expectations;
};

// A case on the roofline: arithmetic intensity from its cost model, achieved rate from its median.
struct RooflinePoint {
  std::string example, variant, role;
  double intensity = 0;  // flops per byte
  double tflops = 0;     // achieved
  double median_us = 0;
  std::optional<double> pct_ceiling;
  std::string ceiling_name;     // the ceiling pct_ceiling is against (the scored side only)
  std::string compute_ceiling;  // the case's compute roof (an expectations key), may be empty
};
// Every measured case of the card's rows whose cost model has both flops and bytes; the others
// cannot be placed (their intensity is 0 or undefined) and are listed instead.
std::vector<RooflinePoint> roofline_points(const Scorecard& card, std::vector<std::string>* not_placed = nullptr);

// A roof line: a bandwidth ceiling (GB/s, a slope: rate = intensity x bandwidth) or a compute
// ceiling (TFLOP/s, flat), from the expectations file's `ceilings`.
struct Roof {
  std::string name;   // the expectations key, e.g. bf16_burst_tflops
  double value = 0;
  bool bandwidth = false;
  std::string label;  // for the reader, e.g. "BF16 burst"
};
std::vector<Roof> roofs(const Expectations& expectations);

// Several runs of one GPU (oldest first) as one scorecard: each example point's rows come from
// the newest run that scored that point, so `bench report ch16.json ch09.json` shows both
// chapters. Rows keep their run's order, chapters in ascending order. `from`, when given, gets
// the index of the run each row came from.
Scorecard latest_per_point(const std::vector<const ReportRun*>& runs,
                           std::vector<std::size_t>* from = nullptr);

// Why `run` has no roofline to draw (no case with both flops and bytes), for `--svg`'s refusal:
// "no case of <source> has both flops and bytes in its cost model (N cases without: a, b, ...)".
std::string no_roofline_reason(const ReportRun& run);
std::string roofline_svg(const ReportRun& run);
std::string html_report(const std::vector<ReportRun>& runs);

}  // namespace bench::tools
