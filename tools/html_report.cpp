// The HTML report: SVG written by hand (fmt), so the page needs nothing but a browser, works
// offline and reads with scripts disabled (hover details are SVG <title> elements).
#include "html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

#include "curves.hpp"
#include "expectations_update.hpp"
#include "report.hpp"
#include "results.hpp"

namespace bench::tools {
namespace {

// At most how wide `chars` characters of the SVGs' 11 px sans-serif text are: 7 px each (bytes
// counted, so a multi-byte character only widens the bound). Columns of names are sized by it.
constexpr int text_px(std::size_t chars) { return 7 * static_cast<int>(chars); }

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* status_colour(Status status) {
  switch (status) {
    case Status::pass: return "#2e7d32";
    case Status::improved: return "#1565c0";
    case Status::regressed: return "#c62828";
    case Status::no_speedup: return "#ef6c00";
    case Status::failed: return "#6a1b9a";
    case Status::skipped: return "#757575";
    case Status::new_entry: return "#00838f";
    case Status::info: return "#455a64";
  }
  return "#000";
}

// A log-scale axis from [low, high] onto [from, to] pixels, widened to whole decades.
struct LogAxis {
  double low, high, from, to;
  LogAxis(double lo, double hi, double f, double t) : from(f), to(t) {
    low = std::pow(10.0, std::floor(std::log10(lo)));
    high = std::pow(10.0, std::ceil(std::log10(hi)));
    if (high <= low) high = low * 10;
  }
  double operator()(double v) const {
    return from + (to - from) * (std::log10(v) - std::log10(low)) / (std::log10(high) - std::log10(low));
  }
  std::vector<double> decades() const {
    std::vector<double> out;
    for (double d = low; d <= high * 1.0001; d *= 10) out.push_back(d);
    return out;
  }
};

std::string number(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

std::string svg_open(int width, int height, const std::string& label) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                     "role=\"img\" aria-label=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n",
                     width, height, width, height, escape(label));
}

// "4× " for a machine of several GPUs, whose hardware key says so ("4x_h100_80gb_hbm3"): the GPU's
// name alone would read like the single-GPU machine's. Empty for one GPU.
std::string gpu_count_prefix(const std::string& hardware_key) {
  const auto x = hardware_key.find("x_");
  const bool several = x != std::string::npos && x > 0 &&
                       std::all_of(hardware_key.begin(), hardware_key.begin() + x,
                                   [](char c) { return c >= '0' && c <= '9'; });
  return several ? hardware_key.substr(0, x) + "× " : "";
}

std::string run_title(const ReportRun& run) {
  const std::string gpu = context_string(run.context, "gpu_name");
  const std::string sha = context_string(run.context, "git_sha");
  const std::string date = context_string(run.context, "date");
  return fmt::format("{}{} · {} · {}", gpu_count_prefix(run.card.hardware_key),
                     gpu.empty() ? run.card.hardware_key : gpu, date.substr(0, 16),
                     sha.substr(0, 12));
}

// The device name less the vendor: "NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3".
std::string name_without_vendor(const std::string& name) {
  const std::string vendor = "NVIDIA ";
  return name.rfind(vendor, 0) == 0 ? name.substr(vendor.size()) : name;
}

// The GPU as a reader names it, for a column header: the device name less the vendor and the words
// that only tell boards of one chip apart (memory size and kind, form factor), so "NVIDIA H100
// 80GB HBM3" is "H100", "NVIDIA A100-SXM4-80GB" "A100", and a machine of four H100s "4× H100".
// Without a device name in the run's context, the hardware key.
std::string short_gpu_name(const ReportRun& run) {
  const std::string name = name_without_vendor(context_string(run.context, "gpu_name"));
  if (name.empty()) return run.card.hardware_key;
  auto board_word = [](const std::string& w) {
    const bool gigabytes =
        w.size() > 2 && w.compare(w.size() - 2, 2, "GB") == 0 &&
        std::all_of(w.begin(), w.end() - 2, [](char c) { return c >= '0' && c <= '9'; });
    return gigabytes || w.rfind("HBM", 0) == 0 || w.rfind("PCIe", 0) == 0 ||
           w.rfind("SXM", 0) == 0 || w.rfind("NVL", 0) == 0;
  };
  std::string chip;
  std::size_t start = 0;
  while (start < name.size()) {
    const std::size_t end = std::min(name.find_first_of(" -", start), name.size());
    const std::string word = name.substr(start, end - start);
    if (board_word(word)) break;
    if (!word.empty()) chip += (chip.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return gpu_count_prefix(run.card.hardware_key) + (chip.empty() ? name : chip);
}

// Each GPU's column label in the side-by-side table, keyed by hardware key: its short name, unless
// two of the page's GPUs share it (an H100 SXM beside an H100 PCIe), when they get their full
// device names, or failing that their hardware keys.
std::map<std::string, std::string> gpu_labels(
    const std::vector<std::string>& gpus, const std::map<std::string, const ReportRun*>& latest) {
  auto unique = [&](auto label_of) {
    std::map<std::string, std::string> labels;
    std::set<std::string> seen;
    for (const auto& gpu : gpus)
      if (!seen.insert(labels[gpu] = label_of(*latest.at(gpu))).second)
        return std::map<std::string, std::string>{};
    return labels;
  };
  if (auto labels = unique(short_gpu_name); !labels.empty()) return labels;
  auto full_name = [](const ReportRun& run) {
    const std::string name = name_without_vendor(context_string(run.context, "gpu_name"));
    return gpu_count_prefix(run.card.hardware_key) + (name.empty() ? run.card.hardware_key : name);
  };
  if (auto labels = unique(full_name); !labels.empty()) return labels;
  return unique([](const ReportRun& run) { return run.card.hardware_key; });
}

// ---- speedups -------------------------------------------------------------------------------
std::string speedup_svg(const Scorecard& card) {
  std::vector<const ScoredRow*> rows;
  for (const auto& row : card.rows)
    if (row.kind == RowKind::pair || row.kind == RowKind::example) rows.push_back(&row);
  double lo = INFINITY, hi = 0;
  for (const auto* r : rows) {
    if (r->speedup) lo = std::min(lo, r->speedup->low), hi = std::max(hi, r->speedup->high);
    if (r->expected_speedup) lo = std::min(lo, *r->expected_speedup * 0.8), hi = std::max(hi, *r->expected_speedup * 1.2);
  }
  if (rows.empty()) return "<p>No example was scored.</p>\n";
  if (!(hi > 0)) lo = 0.5, hi = 2;  // nothing measured: the rows still show their status
  lo = std::max(std::min(lo, 1.0), 0.01);
  // One outlier (an 800x zero-copy lesson among 1-10x ones) would squeeze every other row into
  // the left of the axis: the axis stops at 30x the median speedup (at least 10x), and a row past
  // it is drawn as an arrow at the edge, its real figure in the text beside the chart.
  std::vector<double> estimates;
  for (const auto* r : rows)
    if (r->speedup) estimates.push_back(r->speedup->estimate);
  if (!estimates.empty()) {
    std::nth_element(estimates.begin(), estimates.begin() + estimates.size() / 2, estimates.end());
    hi = std::min(hi, std::max(10.0, 30 * estimates[estimates.size() / 2]));
  }
  // The names' column is as wide as the longest name (text_px), so a long example point
  // ("ch17/moe_gating/tokens:8192/config:deepseek_v3") is not cut at the SVG's left edge.
  std::size_t longest = 0;
  for (const auto* r : rows) longest = std::max(longest, r->example.size());
  const int label_width = std::max(250, text_px(longest) + 16), plot_width = 560, row_height = 22,
            top = 24;
  const int height = top + row_height * static_cast<int>(rows.size()) + 30;
  const LogAxis x(lo, hi, label_width, label_width + plot_width);
  std::string svg = svg_open(label_width + plot_width + 250, height, "speedup of each example with its 95% interval");
  for (double d : x.decades()) {
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}×</text>\n",
                       x(d), top - 6, height - 24, height - 10, number(d));
  }
  svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#999\" stroke-dasharray=\"3,3\"/>\n",
                     x(1.0), top - 6, height - 24);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ScoredRow& r = *rows[i];
    const double y = top + row_height * (i + 0.5);
    const char* colour = status_colour(r.status);
    svg += fmt::format("<g class=\"speedup-row\" data-example=\"{}\" data-status=\"{}\">", escape(r.example),
                       to_string(r.status));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
                       label_width - 8, y, escape(r.example));
    // The band the pair is judged in, when it is a speedup band.
    if (r.expected_speedup && r.basis != ScoreBasis::optimized_time) {
      const double band_low = r.band_low.value_or(*r.expected_speedup * (1 - r.tolerance.value_or(0)));
      const double band_high = r.band_high.value_or(*r.expected_speedup * (1 + r.tolerance.value_or(0)));
      if (band_low > 0 && band_low < x.high)  // cut at the axis's end, like the whisker
        svg += fmt::format("<rect class=\"band\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#000\" "
                           "fill-opacity=\"0.08\"/>",
                           x(band_low), y - 8, std::max(1.0, x(std::min(band_high, x.high)) - x(band_low)), 16);
      if (*r.expected_speedup <= x.high)
        svg += fmt::format("<line class=\"expected\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" "
                           "stroke=\"#555\"/>",
                           x(*r.expected_speedup), y - 8, y + 8);
    }
    std::string figure;
    if (r.speedup) {
      const auto& s = *r.speedup;
      // A pair scored by a metric names it beside its ratio: "p99_decode_latency_us 2.31×".
      const std::string metric = r.metric ? escape(r.metric->name) + " " : "";
      const std::string title =
          fmt::format("<title>{}: {}{:.3g}× [{:.3g}, {:.3g}] {}{}</title>", escape(r.example),
                      metric, s.estimate, s.low, s.high, to_string(r.status),
                      r.reason.empty() ? "" : " — " + escape(r.reason));
      figure = fmt::format(" {}{:.2f}× [{:.2f}, {:.2f}]", metric, s.estimate, s.low, s.high);
      svg += fmt::format("<line class=\"whisker\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                         "stroke-width=\"2\"/>",
                         x(std::clamp(s.low, x.low, x.high)), x(std::min(s.high, x.high)), y, y, colour);
      if (s.estimate > x.high)  // past the axis: an arrow at its end
        svg += fmt::format("<path class=\"estimate clipped\" d=\"M{0:.1f},{1:.1f} l-9,-5 v10 z\" fill=\"{2}\">{3}</path>",
                           x(x.high) + 2, y, colour, title);
      else
        svg += fmt::format("<circle class=\"estimate\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\">{}</circle>",
                           x(std::max(s.estimate, lo)), y, colour, title);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" dominant-baseline=\"middle\" fill=\"{}\">{}{}</text></g>\n",
                       label_width + plot_width + 8, y, colour, to_string(r.status), figure);
  }
  return svg + "</svg>\n";
}

// ---- roofline -------------------------------------------------------------------------------
std::string ceiling_unit(const Roof& r) { return r.bandwidth ? "GB/s" : "TFLOP/s"; }

}  // namespace

std::vector<RooflinePoint> roofline_points(const Scorecard& card, std::vector<std::string>* not_placed) {
  std::vector<RooflinePoint> points;
  std::set<std::string> seen;
  auto add = [&](const std::optional<CaseResult>& c, const ScoredRow& row) {
    if (!c || c->outcome != Outcome::measured || !seen.insert(c->name).second) return;
    if (c->flops > 0 && c->bytes > 0 && c->median_us > 0) {
      RooflinePoint p{c->example, c->variant, c->role, c->flops / c->bytes, c->flops / (c->median_us * 1e-6) / 1e12,
                      c->median_us, std::nullopt};
      p.compute_ceiling = c->compute_ceiling;
      if (&*c == &*row.subject) p.pct_ceiling = row.pct_ceiling, p.ceiling_name = row.ceiling_name;
      points.push_back(p);
    } else if (not_placed) {
      not_placed->push_back(c->name);
    }
  };
  for (const auto& row : card.rows) {
    add(row.baseline, row);
    add(row.subject, row);
  }
  return points;
}

std::vector<Roof> roofs(const Expectations& x) {
  // Each ceiling the roofline draws, with the name a reader knows it by.
  static const std::pair<const char*, const char*> kBandwidth[] = {
      {"hbm_copy_gbps", "HBM copy"}, {"l2_gbps", "L2"}, {"smem_gbps", "Shared memory"}};
  // Tensor-core roofs twice: the burst (short or gapped GEMMs) and the power-limited level.
  static const std::pair<const char*, const char*> kCompute[] = {
      {"fp32_tflops", "FP32"},          {"tf32_tflops", "TF32 sustained"}, {"tf32_burst_tflops", "TF32 burst"},
      {"bf16_tflops", "BF16 sustained"}, {"bf16_burst_tflops", "BF16 burst"}, {"fp8_tflops", "FP8 sustained"},
      {"fp8_burst_tflops", "FP8 burst"}};
  std::vector<Roof> out;
  for (bool bandwidth : {true, false})
    for (const auto& [name, label] : bandwidth ? std::span<const std::pair<const char*, const char*>>(kBandwidth)
                                                     : std::span<const std::pair<const char*, const char*>>(kCompute))
      if (auto it = x.ceilings.find(name); it != x.ceilings.end() && it->second.value > 0)
        out.push_back({name, it->second.value, bandwidth, label});
  return out;
}

Scorecard latest_per_point(const std::vector<const ReportRun*>& runs,
                           std::vector<std::size_t>* from) {
  Scorecard merged;
  if (runs.empty()) return merged;
  merged.hardware_key = runs.back()->card.hardware_key;
  std::map<std::string, std::size_t> newest;  // example point -> the newest run that has it
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& r : runs[i]->card.rows) newest[r.example] = i;
  std::vector<std::pair<const ScoredRow*, std::size_t>> rows;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& r : runs[i]->card.rows)
      if (newest[r.example] == i) rows.emplace_back(&r, i);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first->example.substr(0, a.first->example.find('/')) <
           b.first->example.substr(0, b.first->example.find('/'));
  });
  for (const auto& [row, run] : rows) {
    merged.rows.push_back(*row);
    if (from) from->push_back(run);
  }
  return merged;
}

std::string no_roofline_reason(const ReportRun& run) {
  std::vector<std::string> not_placed;
  roofline_points(run.card, &not_placed);
  std::string names;
  for (std::size_t i = 0; i < not_placed.size() && i < 3; ++i)
    names += (i ? ", " : "") + not_placed[i];
  if (not_placed.size() > 3) names += ", ...";
  return fmt::format(
      "no case of {} has both flops and bytes in its cost model, so there is no roofline to draw "
      "({} measured case(s) without{}{})",
      run.source, not_placed.size(), names.empty() ? "" : ": ", names);
}

namespace {

// Each ceiling its own line style: memory levels warm colours, compute roofs cool ones; a burst
// roof is its sustained roof's colour, dashed.
std::string ceiling_stroke(const std::string& name) {
  static const std::map<std::string, std::pair<const char*, const char*>> styles = {
      {"hbm_copy_gbps", {"#795548", ""}},   {"l2_gbps", {"#e65100", "8,3"}},
      {"smem_gbps", {"#b8860b", "2,3"}},    {"fp32_tflops", {"#2e7d32", ""}},
      {"tf32_tflops", {"#00838f", ""}},     {"tf32_burst_tflops", {"#00838f", "8,3"}},
      {"bf16_tflops", {"#3949ab", ""}},     {"bf16_burst_tflops", {"#3949ab", "8,3"}},
      {"fp8_tflops", {"#ad1457", ""}},      {"fp8_burst_tflops", {"#ad1457", "8,3"}}};
  const auto it = styles.find(name);
  const auto [colour, dash] = it == styles.end() ? std::pair<const char*, const char*>{"#555", ""} : it->second;
  return fmt::format("stroke=\"{}\" stroke-width=\"1.6\"{}", colour,
                     *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "");
}
std::string ceiling_colour(const std::string& name) {
  const std::string stroke = ceiling_stroke(name);
  return stroke.substr(8, 7);
}
std::string ceiling_text(const Roof& r) { return fmt::format("{} {} {}", r.label, number(r.value), ceiling_unit(r)); }

// The four kinds of variant, each its own marker.
const char* variant_colour(const std::string& role) {
  if (role == "baseline") return "#90a4ae";
  if (role == "step") return "#ef6c00";
  if (role == "vendor") return "#1e88e5";
  return "#263238";  // optimized
}
std::string marker(const std::string& role, double cx, double cy, const std::string& attributes,
                   const std::string& inner) {
  const char* fill = variant_colour(role);
  if (role == "step")
    return fmt::format("<path {} d=\"M{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f} z\" fill=\"{}\">{}</path>", attributes,
                       cx, cy - 5, cx + 4.5, cy + 4, cx - 4.5, cy + 4, fill, inner);
  if (role == "vendor")
    return fmt::format("<rect {} x=\"{:.1f}\" y=\"{:.1f}\" width=\"8\" height=\"8\" fill=\"{}\">{}</rect>", attributes,
                       cx - 4, cy - 4, fill, inner);
  return fmt::format("<circle {} cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" stroke=\"#fff\">{}</circle>",
                     attributes, cx, cy, role == "baseline" ? 4 : 5, fill, inner);
}
int rung_rank(const std::string& role) { return role == "baseline" ? 0 : role == "optimized" ? 2 : 1; }

}  // namespace

// The roofline of `run` with its points already placed (roofline_points).
static std::string roofline_of(const ReportRun& run, const std::vector<RooflinePoint>& points) {
  const std::vector<Roof> lines = run.expectations ? roofs(*run.expectations) : std::vector<Roof>{};
  if (points.empty()) return "<p>No case has both flops and bytes in its cost model: nothing to place.</p>\n";
  auto label_of = [&](const std::string& name) {
    for (const auto& r : lines)
      if (r.name == name) return r.label;
    return name;
  };
  // The shape: each memory level rises until it meets the highest compute roof the cases use
  // (the highest of all when no case names one); each compute roof starts where the top
  // (fastest) memory level meets it.
  std::set<std::string> used;
  for (const auto& p : points) used.insert(p.compute_ceiling);
  double top_roof = 0, any_roof = 0, top_bw = 0, low_bw = INFINITY, low_roof = INFINITY;
  for (const auto& r : lines) {
    if (r.bandwidth) {
      top_bw = std::max(top_bw, r.value), low_bw = std::min(low_bw, r.value);
    } else {
      any_roof = std::max(any_roof, r.value), low_roof = std::min(low_roof, r.value);
      if (used.count(r.name)) top_roof = std::max(top_roof, r.value);
    }
  }
  if (top_roof == 0) top_roof = any_roof;
  double x_lo = INFINITY, x_hi = 0, y_lo = INFINITY, y_hi = 0;
  for (const auto& p : points) {
    x_lo = std::min(x_lo, p.intensity), x_hi = std::max(x_hi, p.intensity);
    y_lo = std::min(y_lo, p.tflops), y_hi = std::max(y_hi, p.tflops);
  }
  y_hi = std::max(y_hi, any_roof);
  if (top_roof > 0 && top_bw > 0) {  // room for every knee
    x_hi = std::max(x_hi, top_roof * 1000 / low_bw);
    x_lo = std::min(x_lo, low_roof * 1000 / top_bw);
  }
  const int left = 60, top = 20, width = 640, height = 400, margin = 200;
  const LogAxis x(x_lo / 2, x_hi * 2, left, left + width);
  const LogAxis y(y_lo / 2, y_hi * 1.5, top + height, top);

  // Each example's points in order (baseline, steps, optimized; vendor apart), numbered in that order.
  std::vector<std::string> examples;
  std::map<std::string, std::vector<const RooflinePoint*>> of_example;
  for (const auto& p : points) {
    if (!of_example.count(p.example)) examples.push_back(p.example);
    of_example[p.example].push_back(&p);
  }
  std::vector<const RooflinePoint*> numbered;
  for (const auto& e : examples) {
    auto& chain = of_example[e];
    std::stable_sort(chain.begin(), chain.end(), [](const RooflinePoint* a, const RooflinePoint* b) {
      return (a->role == "vendor") < (b->role == "vendor") ||
             ((a->role == "vendor") == (b->role == "vendor") && rung_rank(a->role) < rung_rank(b->role));
    });
    numbered.insert(numbered.end(), chain.begin(), chain.end());
  }

  // The key under the plot: one row per number. Each text column is as wide as its longest cell
  // (text_px), so a long rung name ("persistent_multicast") never runs into the intensity beside
  // it; the SVG widens when the key needs it.
  std::vector<std::vector<std::string>> key_rows = {
      {"#", "example", "variant", "flop/B", "TFLOP/s", "% of its ceiling"}};
  for (std::size_t i = 0; i < numbered.size(); ++i) {
    const RooflinePoint& p = *numbered[i];
    std::string pct = "–";
    if (p.pct_ceiling) {
      pct = fmt::format("{:.1f}%{}", *p.pct_ceiling,
                        p.ceiling_name.empty() ? "" : " of " + label_of(p.ceiling_name));
    } else {
      for (const auto& r : lines)
        if (r.name == p.compute_ceiling)
          pct = fmt::format("{:.1f}% of {}", 100 * p.tflops / r.value, r.label);
    }
    key_rows.push_back({std::to_string(i + 1), p.example, p.variant,
                        fmt::format("{:.3g}", p.intensity), fmt::format("{:.4g}", p.tflops), pct});
  }
  auto widest = [&](std::size_t column) {
    std::size_t chars = 0;
    for (const auto& row : key_rows) chars = std::max(chars, row[column].size());
    return text_px(chars);
  };
  // Left edges of #, example, variant and the percent; right edges of the two numbers.
  const int example_x = left + 28, variant_x = example_x + widest(1) + 12;
  const int intensity_end = variant_x + widest(2) + 12 + widest(3),
            tflops_end = intensity_end + 12 + widest(4);
  const int pct_x = tflops_end + 30;
  const int key_top = top + height + 74, key_row = 14;
  std::string svg = svg_open(std::max(left + width + margin, pct_x + widest(5) + 10),
                             key_top + key_row * (static_cast<int>(numbered.size()) + 1) + 8,
                             "roofline: " + run_title(run));
  for (double d : x.decades())
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/><text x=\"{0:.1f}\" "
                       "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       x(d), top, top + height, top + height + 14, number(d));
  for (double d : y.decades())
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/><text x=\"{3}\" "
                       "y=\"{2:.1f}\" text-anchor=\"end\" dominant-baseline=\"middle\">{4}</text>\n",
                       left, left + width, y(d), left - 4, number(d));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (flop/byte, from the cost "
                     "model)</text>\n<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">achieved "
                     "TFLOP/s</text>\n",
                     left + width / 2, top + height + 34, top + height / 2);
  svg += "<clipPath id=\"plot\"><rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(top) + "\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\"/></clipPath>\n<g clip-path=\"url(#plot)\">\n";
  // A memory level of B GB/s is the slope rate = intensity x B / 1000 TFLOP/s, up to the roof;
  // its name is written along it, at the first place along the line where it covers no point
  // (with the number beside it) and no other level's name. The levels are parallel lines a few
  // pixels apart, so each name is tested in its own frame: u along the slope, v across it (SVG's
  // y down), where its text covers u in [0, length] and v in [-15, -2] (dy -4, an 11 px font).
  std::vector<std::pair<double, double>> dots;
  for (const RooflinePoint* p : numbered) dots.emplace_back(x(p->intensity), y(p->tflops));
  struct SlopeLabel {
    double ax, ay, cos_t, sin_t, length;
    std::pair<double, double> frame(double px, double py) const {
      const double dx = px - ax, dy = py - ay;
      return {dx * cos_t + dy * sin_t, -dx * sin_t + dy * cos_t};
    }
  };
  std::vector<SlopeLabel> slope_labels;
  for (const auto& r : lines) {
    if (!r.bandwidth || top_roof <= 0) continue;
    const double knee = top_roof * 1000 / r.value;
    const double from = std::min(std::max(x.low, y.low * 1000 / r.value), knee / 10);
    const double px0 = x(from), py0 = y(from * r.value / 1000), px1 = x(knee), py1 = y(top_roof);
    const double angle = std::atan2(py1 - py0, px1 - px0) * 180 / M_PI;
    const double run = std::hypot(px1 - px0, py1 - py0), length = 6.6 * ceiling_text(r).size();
    SlopeLabel label{0, 0, std::cos(angle * M_PI / 180), std::sin(angle * M_PI / 180), length};
    auto at = [&](double f) { label.ax = px0 + f * (px1 - px0), label.ay = py0 + f * (py1 - py0); };
    auto clear_here = [&] {
      for (const auto& [dx, dy] : dots) {
        const auto [u, v] = label.frame(dx, dy);
        if (u > -14 && u < length + 14 && v > -29 && v < 12) return false;
      }
      for (const auto& other : slope_labels) {
        const auto [u, v] = label.frame(other.ax, other.ay);
        if (u < length && u + other.length > 0 && std::abs(v) < 14) return false;
      }
      return true;
    };
    // The first place where the name fits before the knee and covers nothing; the last candidate
    // may run past the knee; where every place is taken, the first.
    double chosen = 0.15;
    for (double f : {0.15, 0.3, 0.45, 0.6, 0.75, 0.05, 0.9}) {
      at(f);
      if ((f * run + length <= run || f == 0.9) && clear_here()) {
        chosen = f;
        break;
      }
    }
    at(chosen);
    slope_labels.push_back(label);
    const double lx = label.ax, ly = label.ay;
    svg += fmt::format("<polyline class=\"roof\" data-ceiling=\"{}\" points=\"{:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"none\" "
                       "{}><title>{} = {} GB/s, up to {} TFLOP/s at {:.3g} flop/B</title></polyline>\n",
                       r.name, px0, py0, px1, py1, ceiling_stroke(r.name), r.name, number(r.value), number(top_roof),
                       knee);
    svg += fmt::format("<text class=\"ceiling-label\" data-ceiling=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" dy=\"-4\" "
                       "transform=\"rotate({:.1f} {:.1f} {:.1f})\" fill=\"{}\">{}</text>\n",
                       r.name, lx, ly, angle, lx, ly, ceiling_colour(r.name), escape(ceiling_text(r)));
  }
  std::vector<const Roof*> compute;
  for (const auto& r : lines)
    if (!r.bandwidth) compute.push_back(&r);
  std::sort(compute.begin(), compute.end(), [](const Roof* a, const Roof* b) { return a->value > b->value; });
  for (const Roof* r : compute) {
    const double from = top_bw > 0 ? std::max(x.low, r->value * 1000 / top_bw) : x.low;
    svg += fmt::format("<line class=\"roof\" data-ceiling=\"{}\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                       "{}><title>{} = {} TFLOP/s</title></line>\n",
                       r->name, x(from), y(r->value), x(x.high), y(r->value), ceiling_stroke(r->name), r->name,
                       number(r->value));
  }
  // Each example's rungs joined in order, the arrow at its last rung.
  for (const auto& e : examples) {
    std::string at;
    for (const RooflinePoint* p : of_example[e])
      if (p->role != "vendor") at += fmt::format("{}{:.1f},{:.1f}", at.empty() ? "" : " ", x(p->intensity), y(p->tflops));
    if (at.find(' ') != std::string::npos)
      svg += fmt::format("<polyline class=\"rungs\" data-example=\"{}\" points=\"{}\" fill=\"none\" stroke=\"#90a4ae\" "
                         "stroke-width=\"1\" marker-end=\"url(#head)\"/>\n",
                         escape(e), at);
  }
  svg += "</g>\n<defs><marker id=\"head\" markerWidth=\"8\" markerHeight=\"8\" refX=\"7\" refY=\"4\" orient=\"auto\">"
         "<path d=\"M0,0 L8,4 L0,8 z\" fill=\"#90a4ae\"/></marker></defs>\n";
  // The compute roofs named in the right margin at their height, moved down a line where two
  // would overlap (a burst roof sits close above its sustained one).
  double last_y = -INFINITY;
  for (const Roof* r : compute) {
    const double ly = std::max(y(r->value) + 4, last_y + 12);
    last_y = ly;
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" {3}/><text class=\"ceiling-label\" "
                       "data-ceiling=\"{4}\" x=\"{5}\" y=\"{6:.1f}\" fill=\"{7}\">{8}</text>\n",
                       left + width + 4, left + width + 20, ly - 4, ceiling_stroke(r->name), r->name, left + width + 24,
                       ly, ceiling_colour(r->name), escape(ceiling_text(*r)));
  }
  if (lines.empty())
    svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#c62828\">no ceilings for {}:</text><text x=\"{}\" y=\"{}\" "
                       "fill=\"#c62828\">run ./bench calibrate</text>\n",
                       left + width + 10, top + 12, escape(run.card.hardware_key), left + width + 10, top + 26);
  // The points, each with its number beside it: the first of six places round the point that
  // overprints no other number and no memory level's name. Where a cluster of points (a chapter's
  // memory-bound examples share an intensity) leaves none of them free, the number goes farther
  // out, on rings of growing radius inside the plot, joined to its point by a thin leader line;
  // only where every ring is taken too does it overprint, at the first place. A number is a box
  // w wide and 9 px high, (lx, ly) its baseline's left end.
  struct NumberBox {
    double x, y, w;
  };
  std::vector<NumberBox> placed;
  auto clear_at = [&](double lx, double ly, double w) {
    if (lx < left || lx + w > left + width || ly - 9 < top || ly > top + height) return false;
    for (const auto& b : placed)
      if (lx < b.x + b.w + 2 && b.x < lx + w + 2 && std::abs(b.y - ly) < 11) return false;
    for (const auto& label : slope_labels) {  // nor on a memory level's name
      const auto [u, v] = label.frame(lx + w / 2, ly - 4);
      if (u > -w / 2 - 2 && u < label.length + w / 2 + 2 && v > -21 && v < 4) return false;
    }
    return true;
  };
  for (std::size_t i = 0; i < numbered.size(); ++i) {
    const RooflinePoint& p = *numbered[i];
    const double cx = x(p.intensity), cy = y(p.tflops);
    svg += marker(p.role, cx, cy,
                  fmt::format("class=\"point\" data-n=\"{}\" data-case=\"{}/{}\"", i + 1, escape(p.example),
                              escape(p.variant)),
                  fmt::format("<title>{}. {}/{}: {} at {:.3g} flop/B, {:.4g} TFLOP/s{}</title>", i + 1, escape(p.example),
                              escape(p.variant), format_duration_us(p.median_us), p.intensity, p.tflops,
                              p.pct_ceiling ? fmt::format(", {:.1f}% of its ceiling", *p.pct_ceiling) : "")) +
           "\n";
    const std::string n = std::to_string(i + 1);
    const double w = 6.0 * n.size();
    double lx = cx + 6, ly = cy - 4;
    bool found = false;
    for (auto [dx, dy] : {std::pair{6.0, -4.0}, {6.0, 10.0}, {-6.0 - w, -4.0}, {-6.0 - w, 10.0}, {-w / 2, -8.0},
                          {-w / 2, 16.0}})
      if (clear_at(cx + dx, cy + dy, w)) {
        lx = cx + dx, ly = cy + dy, found = true;
        break;
      }
    // The rings: the number's centre r px from the point, upper right first; twelve directions
    // on the inner rings, and as many as keep neighbouring places ~25 px apart farther out, where
    // a dense cluster (a page of ~200 cases, GEMM and attention rungs at 1000 TFLOP/s) needs them.
    for (double r = 20; !found && r <= 200; r += 12) {
      const int directions = std::max(12, static_cast<int>(2 * M_PI * r / 25));
      for (int k = 0; !found && k < directions; ++k) {
        const double a = (k * 360.0 / directions - 45) * M_PI / 180, ux = std::cos(a),
                     uy = std::sin(a);
        if (clear_at(cx + r * ux - w / 2, cy + r * uy + 4, w)) {
          lx = cx + r * ux - w / 2, ly = cy + r * uy + 4, found = true;
          svg += fmt::format("<line class=\"leader\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                             "stroke=\"#90a4ae\" stroke-width=\"0.6\"/>\n",
                             cx + 5 * ux, cy + 5 * uy, cx + (r - 7) * ux, cy + (r - 7) * uy);
        }
      }
    }
    placed.push_back({lx, ly, w});
    svg += fmt::format("<text class=\"point-number\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\" fill=\"#37474f\">{}</text>\n",
                       lx, ly, n);
  }
  // The legend of variants present, then the key: one row per number.
  std::set<std::string> roles;
  for (const auto& p : points) roles.insert(p.role == "baseline" || p.role == "step" || p.role == "vendor" ? p.role : "optimized");
  int lx = left;
  for (const char* role : {"baseline", "step", "optimized", "vendor"}) {
    if (!roles.count(role)) continue;
    svg += marker(role, lx + 5, top + height + 50, "class=\"variant-legend\"", "") +
           fmt::format("<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n", lx + 13, top + height + 50, role);
    lx += 90;
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555\">the line joins each example's rungs, baseline first</text>\n", lx + 10,
                     top + height + 54);
  const int cols[] = {left, example_x, variant_x, intensity_end, tflops_end, pct_x};
  auto key_line = [&](std::size_t row, const std::string& attributes) {
    std::string line = "<g " + attributes + ">";
    for (std::size_t c = 0; c < key_rows[row].size(); ++c)
      line += fmt::format("<text x=\"{}\" y=\"{}\"{}>{}</text>", cols[c],
                          key_top + key_row * static_cast<int>(row),
                          c == 3 || c == 4 ? " text-anchor=\"end\"" : "", escape(key_rows[row][c]));
    return line + "</g>\n";
  };
  svg += key_line(0, "class=\"key-head\" font-weight=\"bold\"");
  for (std::size_t i = 0; i < numbered.size(); ++i)
    svg += key_line(
        i + 1, fmt::format("class=\"key-row\" data-n=\"{}\" fill=\"{}\"", i + 1,
                           numbered[i]->role == "baseline" ? "#546e7a"
                                                           : variant_colour(numbered[i]->role)));
  return svg + "</svg>\n";
}

std::string roofline_svg(const ReportRun& run) { return roofline_of(run, roofline_points(run.card)); }

namespace {

std::string provenance_html(const ReportRun& run) {
  std::string html = "<table class=\"provenance\">\n";
  const std::pair<const char*, const char*> keys[] = {
      {"GPU", "gpu_name"},          {"hardware key", "hardware_key"}, {"driver release", "driver_release"},
      {"driver (CUDA version it supports)", "driver_version"}, {"CUDA runtime", "runtime_version"},
      {"nvcc", "nvcc_version"},     {"ECC", "ecc"},
      {"SM clock (kHz)", "sm_clock_khz"}, {"memory clock (kHz)", "memory_clock_khz"},
      {"git SHA", "git_sha"},       {"date", "date"},                 {"machine", "machine_id"},
      {"command", "bench_command"}, {"first chapter binary's command", "command_line"}};
  for (const auto& [label, key] : keys) {
    const std::string value = context_string(run.context, key);
    html += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", label, value.empty() ? "<i>not recorded</i>" : escape(value));
  }
  html += fmt::format("<tr><th>results</th><td>{}</td></tr>\n</table>\n", escape(run.source));
  return html;
}

// When several runs of the GPU were given: which run each example point's rows come from.
std::string merged_from_html(const std::vector<const ReportRun*>& runs,
                             const std::vector<std::size_t>& from, const Scorecard& merged) {
  if (runs.size() < 2) return {};
  std::vector<std::set<std::string>> points(runs.size());
  for (std::size_t i = 0; i < from.size(); ++i) points[from[i]].insert(merged.rows[i].example);
  std::string html = fmt::format(
      "<p>This page merges {} runs (the provenance above is the newest's); each example "
      "point shows its newest result:</p>\n<ol class=\"merged\">\n",
      runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    html += fmt::format("<li>{} — {}: {} example point(s)</li>\n", escape(run_title(*runs[i])),
                        escape(runs[i]->source), points[i].size());
  return html + "</ol>\n";
}

// What makes one side's samples less trustworthy than its interval says (VALIDITY rows 11 and
// 12): samples dropped because the SM clock had fallen, every sample throttled (all kept, so the
// median includes them), more noise than an expectations update accepts as is (5%), or too few
// samples checked to catch a 5% spoiler with 99% (row 2). Empty when there is nothing to say.
std::string sample_flags(const CaseResult& c) {
  std::vector<std::string> flags;
  if (c.throttled_all)
    flags.push_back(fmt::format("every sample throttled (SM clock down to {:.0f} MHz), all kept", c.min_sm_mhz));
  else if (c.dropped_throttled > 0)
    flags.push_back(fmt::format("{} of {} samples dropped, SM clock throttled (lowest {:.0f} MHz)", c.dropped_throttled,
                                c.dropped_throttled + c.sample_count, c.min_sm_mhz));
  if (c.noise > UpdatePolicy{}.max_noise) flags.push_back(fmt::format("noisy ({:.1f}%)", 100 * c.noise));
  if (auto checks = checks_short_of_bar(c); !checks.empty()) flags.push_back("checks: " + checks);
  std::string out;
  for (const auto& f : flags) out += (out.empty() ? "" : "; ") + f;
  return out;
}

// Every flagged case of the run, listed under the provenance so nobody has to find them in the rows.
std::string flags_html(const Scorecard& card) {
  std::string items;
  std::set<std::string> seen;  // a baseline shared by several rows is listed once
  for (const auto& r : card.rows)
    for (const auto* side : {&r.baseline, &r.subject})
      if (*side && seen.insert((*side)->name).second)
        if (const auto flags = sample_flags(**side); !flags.empty())
          items += fmt::format("<li data-flag=\"{}\">{}: {}</li>\n", escape((*side)->name), escape((*side)->name),
                               escape(flags));
  if (items.empty())
    return "<p class=\"flags\">No case had throttled, dropped or noisy samples, or checks short of "
           "the bar.</p>\n";
  return "<p>Flagged samples:</p>\n<ul class=\"flags\">\n" + items + "</ul>\n";
}

// The table of compare.md (report.cpp's cells) plus the ceiling the % is against and the note.
// It scrolls inside its own box on a narrow window; the page's script (kTableScript) sorts it
// by a clicked header and filters it by the box above it, and without scripts it reads as is.
std::string rows_table(const Scorecard& card) {
  std::string html =
      "<div class=\"table-tools\"><input type=\"search\" class=\"row-filter\" placeholder=\"filter "
      "rows "
      "(example, status, ...)\" aria-label=\"filter rows\" /></div>\n<div "
      "class=\"table-wrap\"><table "
      "class=\"rows sortable\"><thead><tr>";
  for (const char* column : table_header()) html += fmt::format("<th>{}</th>", escape(column));
  html += "<th>ceiling</th><th>note</th></tr></thead><tbody>\n";
  for (const auto& r : card.rows) {
    // A case past 101% of its ceiling (within the allowance) is flagged first, naming the ceiling.
    std::string note = r.ceiling_note.empty() ? r.reason : r.ceiling_note + (r.reason.empty() ? "" : ". " + r.reason);
    for (const auto* side : {&r.baseline, &r.subject})
      if (*side)
        if (const auto flags = sample_flags(**side); !flags.empty())
          note = fmt::format("{}: {}. {}", (*side)->variant, flags, note);
    const auto cells = table_cells(r);
    html += fmt::format("<tr data-status=\"{}\">", to_string(r.status));
    for (std::size_t i = 0; i < cells.size(); ++i)
      html += i == 6 ? fmt::format("<td style=\"color:{}\">{}</td>", status_colour(r.status),
                                   escape(cells[i]))
                     : "<td>" + escape(cells[i]) + "</td>";
    html += "<td>" + escape(r.ceiling_name) + "</td><td class=\"note\">" + escape(note) +
            "</td></tr>\n";
  }
  return html + "</tbody></table></div>\n";
}

// Sorting (click a header; again to reverse; numbers by value) and filtering of every
// table.sortable, in a few lines: the page stays one file that fetches nothing.
constexpr const char* kTableScript = R"(<script>
document.querySelectorAll('table.sortable').forEach(function (table) {
  var body = table.tBodies[0];
  table.querySelectorAll('th').forEach(function (th, col) {
    th.style.cursor = 'pointer';
    th.title = 'sort by ' + th.textContent;
    th.addEventListener('click', function () {
      var up = th.dataset.sorted !== 'up';
      table.querySelectorAll('th').forEach(function (h) { delete h.dataset.sorted; });
      th.dataset.sorted = up ? 'up' : 'down';
      var key = function (tr) {
        var text = tr.cells[col].textContent.trim(), n = parseFloat(text);
        return isNaN(n) ? text.toLowerCase() : n;
      };
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) return typeof x === 'number' ? -1 : 1;
        return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
      }).forEach(function (tr) { body.appendChild(tr); });
    });
  });
  var box = table.parentNode.previousElementSibling;
  var filter = box && box.querySelector('.row-filter');
  if (filter) filter.addEventListener('input', function () {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    Array.from(body.rows).forEach(function (tr) {
      var text = tr.textContent.toLowerCase();
      tr.style.display = words.every(function (w) { return text.indexOf(w) >= 0; }) ? '' : 'none';
    });
  });
});
</script>
)";

// One small chart per example: its baseline and optimized medians across the runs of one GPU,
// each relative to what the expectations file records for that side (to its first run when it
// records nothing), so 1.0 is "as expected" and the optimized side's band is 1 +- tolerance: a
// slower run is a dark dot above the band.
std::string history_html(const std::vector<const ReportRun*>& runs) {
  std::map<std::string, std::vector<std::pair<double, double>>> series;  // example -> (baseline, optimized) per run
  std::vector<std::string> order;
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& r : runs[i]->card.rows) {
      if (r.kind != RowKind::pair) continue;
      auto& s = series[r.example];
      if (s.empty()) order.push_back(r.example);
      s.resize(runs.size(), {0.0, 0.0});
      s[i] = {r.baseline && r.baseline->outcome == Outcome::measured ? r.baseline->median_us : 0.0,
              r.subject && r.subject->outcome == Outcome::measured ? r.subject->median_us : 0.0};
    }
  // A history needs two runs: an example measured in one run only has no chart.
  std::erase_if(order, [&](const std::string& example) {
    return std::count_if(series[example].begin(), series[example].end(),
                         [](const auto& sides) { return sides.first > 0 || sides.second > 0; }) < 2;
  });
  if (order.empty()) return {};
  const ReportRun& latest = *runs.back();
  std::string html = "<p>Each side's median over its recorded median (grey: baseline, dark: optimized; 1 = as "
                     "recorded, above 1 = slower); the green band is the optimized side's tolerance. Runs are "
                     "numbered oldest first (list below).</p>\n<div class=\"history\">\n";
  const int w = 300, h = 130, left = 40, top = 18, plot_h = 84;
  for (const auto& example : order) {
    auto& s = series[example];
    s.resize(runs.size(), {0.0, 0.0});
    double reference[2] = {0, 0}, tolerance = 0;
    const ExampleExpectation* e = nullptr;
    if (latest.expectations)
      if (auto it = latest.expectations->examples.find(example); it != latest.expectations->examples.end()) e = &it->second;
    for (int side = 0; side < 2; ++side) {
      if (e)
        if (auto v = e->variants.find(side == 0 ? "baseline" : "optimized"); v != e->variants.end()) reference[side] = v->second.median_us;
      for (const auto& point : s)
        if (reference[side] <= 0) reference[side] = side == 0 ? point.first : point.second;
    }
    if (e) tolerance = e->tolerance;
    double lo = 1 - std::max(tolerance, 0.2), hi = 1 + std::max(tolerance, 0.2);
    for (const auto& [b, o] : s) {
      if (b > 0 && reference[0] > 0) lo = std::min(lo, b / reference[0]), hi = std::max(hi, b / reference[0]);
      if (o > 0 && reference[1] > 0) lo = std::min(lo, o / reference[1]), hi = std::max(hi, o / reference[1]);
    }
    auto px = [&](std::size_t i) { return left + (runs.size() > 1 ? (w - left - 10) * double(i) / (runs.size() - 1) : 0.0); };
    auto py = [&](double ratio) { return top + plot_h * (hi - ratio) / (hi - lo); };
    std::string svg = svg_open(w, h, "history of " + example);
    svg += fmt::format("<text x=\"4\" y=\"12\" font-weight=\"bold\">{}</text>\n", escape(example));
    if (tolerance > 0)
      svg += fmt::format("<rect class=\"band\" x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"#2e7d32\" "
                         "fill-opacity=\"0.15\"><title>optimized: recorded {} +-{:.0f}%</title></rect>\n",
                         left, py(1 + tolerance), w - left - 10, py(1 - tolerance) - py(1 + tolerance),
                         format_duration_us(reference[1]), 100 * tolerance);
    for (double tick : {lo, 1.0, hi})
      svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1f}\" "
                         "text-anchor=\"end\" dominant-baseline=\"middle\" font-size=\"9\">{:.2f}</text>\n",
                         left, w - 10, py(tick), py(tick), left - 3, py(tick), tick);
    for (int side = 0; side < 2; ++side) {
      std::string pts;
      const char* colour = side == 0 ? "#90a4ae" : "#263238";
      for (std::size_t i = 0; i < s.size(); ++i) {
        const double us = side == 0 ? s[i].first : s[i].second;
        if (us <= 0 || reference[side] <= 0) continue;
        pts += fmt::format("{:.1f},{:.1f} ", px(i), py(us / reference[side]));
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>{} run {}: {} ({:.3f} of "
                           "{})</title></circle>",
                           px(i), py(us / reference[side]), colour, side == 0 ? "baseline" : "optimized", i + 1,
                           format_duration_us(us), us / reference[side], format_duration_us(reference[side]));
      }
      svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\"/>\n", pts, colour);
    }
    for (std::size_t i = 0; i < runs.size(); ++i)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{}<title>{}</title></text>",
                         px(i), top + plot_h + 14, i + 1, escape(run_title(*runs[i])));
    html += svg + "</svg>\n";
  }
  html += "</div>\n<ol class=\"runs\">";
  for (const auto* r : runs) html += "<li>" + escape(run_title(*r)) + " — " + escape(r->source) + "</li>";
  return html + "</ol>\n";
}

// One curve (curves.hpp) as two panels side by side: the speedup against the axis (with its
// interval, and a line at 1x), and the optimized side's percent of its ceiling (a line at 100%).
// The axis values are evenly spaced: the declared values are usually powers of two.
std::string curve_svg(const Curve& c) {
  constexpr int kPanel = 300, kHeight = 170, kTop = 22, kLeft = 46, kGap = 70;
  const int width = kLeft + 2 * kPanel + kGap + 20, height = kTop + kHeight + 40;
  const std::size_t n = c.points.size();
  auto x = [&](std::size_t i, int panel) {
    return kLeft + panel * (kPanel + kGap) +
           (n == 1 ? kPanel / 2.0 : 10 + (kPanel - 20) * double(i) / double(n - 1));
  };
  double top_speedup = 1.5, top_pct = 110;
  for (const auto& p : c.points) {
    if (p.row->speedup) top_speedup = std::max(top_speedup, p.row->speedup->high * 1.1);
    if (p.row->pct_ceiling) top_pct = std::max(top_pct, *p.row->pct_ceiling * 1.05);
  }
  auto y = [&](double v, double top) { return kTop + kHeight - kHeight * std::max(0.0, v) / top; };
  std::string svg = svg_open(width, height, "curve " + c.title());
  const std::pair<const char*, double> panels[] = {{"speedup (x)", top_speedup},
                                                   {"% of ceiling (optimized)", top_pct}};
  for (int panel = 0; panel < 2; ++panel) {
    const auto& [label, top] = panels[panel];
    const int left = kLeft + panel * (kPanel + kGap);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n",
        left, kTop, kPanel, kHeight);
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n", left, kTop - 6, label);
    const double mark = panel == 0 ? 1.0 : 100.0;  // no speedup; the ceiling
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 3\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
        left, y(mark, top), left + kPanel, y(mark, top), left - 4, y(mark, top) + 3,
        panel == 0 ? "1x" : "100%");
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{}</text>\n",
                       left - 4, kTop + 8, number(top));
    std::string path;
    for (std::size_t i = 0; i < n; ++i) {
      const ScoredRow& r = *c.points[i].row;
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
          x(i, panel), kTop + kHeight + 14, escape(c.points[i].value));
      const std::optional<double> v =
          panel == 0 ? (r.speedup ? std::optional<double>(r.speedup->estimate) : std::nullopt)
                     : r.pct_ceiling;
      if (!v) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", x(i, panel), y(*v, top));
      if (panel == 0)
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
            "stroke=\"#90a4ae\"/>\n",
            x(i, panel), y(r.speedup->low, top), y(r.speedup->high, top));
      const std::string rate = c.points[i].rate();
      svg += fmt::format(
          "<circle class=\"curve-point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" "
          "fill=\"{}\"><title>{}:{}: "
          "{}{}, {}</title></circle>\n",
          x(i, panel), y(*v, top), status_colour(r.status), escape(c.axis),
          escape(c.points[i].value),
          panel == 0 ? fmt::format("{:.3g}x", *v)
                     : fmt::format("{:.1f}% of {}", *v, r.ceiling_name),
          rate.empty() ? "" : ", " + rate, to_string(r.status));
    }
    if (!path.empty()) svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#263238\"/>\n";
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n",
                    left + kPanel / 2, kTop + kHeight + 30, escape(c.axis));
  }
  return svg + "</svg>\n";
}

std::string curves_html(const Scorecard& card) {
  const auto all = curves(card);
  if (all.empty()) return {};
  std::string html =
      "<h3>Curves</h3>\n<p>For each example with an axis: the speedup against the axis (whisker: "
      "its 95% interval; "
      "dashed: 1x) and the optimized side's percent of its ceiling (dashed: 100%), the other axes "
      "held. Dot colours "
      "are the statuses.</p>\n";
  for (const auto& c : all) {
    html += fmt::format("<h4 class=\"curve\">{}</h4>\n", escape(c.title())) + curve_svg(c);
    html +=
        "<p>" +
        (c.crossover.empty() ? std::string("No crossover along this axis.")
                             : "<b>Crossover</b>: the optimization " + escape(c.crossover) + ".") +
        "</p>\n";
  }
  return html;
}

// Given runs of several GPUs: one table with a row per example point and variant and, for each
// GPU, the speedup with its interval, the status and the percent of that GPU's ceiling, so the
// same lesson reads across GPUs at a glance (a dash where a GPU has no such row). Sortable and
// filterable like the rows table.
std::string side_by_side_html(const std::vector<std::string>& gpus,
                              const std::map<std::string, std::string>& labels,
                              const std::vector<Scorecard>& cards) {
  std::vector<std::pair<std::string, std::string>> keys;  // (example, variant) in first-seen order
  std::map<std::pair<std::string, std::string>, std::vector<const ScoredRow*>> by_key;
  for (std::size_t g = 0; g < cards.size(); ++g)
    for (const auto& r : cards[g].rows) {
      const auto key = std::make_pair(r.example, table_cells(r)[1]);
      auto& slot = by_key[key];
      if (slot.empty()) {
        keys.push_back(key);
        slot.assign(cards.size(), nullptr);
      }
      slot[g] = &r;
    }
  std::string html =
      "<section class=\"side-by-side\">\n<h2>GPUs side by side</h2>\n<p>Each example point's newest result on "
      "each GPU given: the speedup with its 95% interval, the status, and the percent of that GPU's own "
      "ceiling. Each GPU's full section follows.</p>\n<div class=\"table-tools\"><input type=\"search\" "
      "class=\"row-filter\" placeholder=\"filter rows\" aria-label=\"filter rows\" /></div>\n"
      "<div class=\"table-wrap\"><table class=\"gpus sortable\"><thead><tr><th>example</th><th>variant</th>";
  // Headed by the GPU's name as a reader knows it; data-gpu keeps its hardware key, which the
  // sections below are keyed by.
  for (const auto& gpu : gpus)
    html += fmt::format(
        "<th data-gpu=\"{0}\">{1} speedup</th><th data-gpu=\"{0}\">{1} status</th>"
        "<th data-gpu=\"{0}\">{1} % ceil</th>",
        escape(gpu), escape(labels.at(gpu)));
  html += "</tr></thead><tbody>\n";
  for (const auto& key : keys) {
    html += "<tr><td>" + escape(key.first) + "</td><td>" + escape(key.second) + "</td>";
    for (const ScoredRow* r : by_key[key]) {
      if (r == nullptr) {
        html += "<td>-</td><td>-</td><td>-</td>";
        continue;
      }
      const auto cells = table_cells(*r);
      html += fmt::format("<td>{}</td><td style=\"color:{}\">{}</td><td>{}</td>", escape(cells[4]),
                          status_colour(r->status), escape(cells[6]), escape(cells[8]));
    }
    html += "</tr>\n";
  }
  return html + "</tbody></table></div>\n</section>\n";
}

}  // namespace

std::string html_report(const std::vector<ReportRun>& runs) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cudabench "
      "report</title>\n<style>\n"
      "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-"
      "size:12px;margin:.5em 0}"
      "th,td{border:1px solid #ddd;padding:2px 6px;text-align:left}h2{margin-top:1.6em}.history "
      "svg{margin:4px}\n"
      ".table-wrap{max-width:100%;overflow-x:auto}table.rows td{white-space:nowrap}table.rows "
      "td.note{white-space:normal;"
      "min-width:16em;max-width:32em}svg{max-width:100%;height:auto}\n"
      "</style></head><body>\n<h1>cudabench report</h1>\n";
  // The latest run of each GPU gets the full page; every GPU with several runs gets a history.
  std::map<std::string, std::vector<const ReportRun*>> by_gpu;
  std::vector<std::string> gpus;
  for (const auto& run : runs) {
    if (!by_gpu.count(run.card.hardware_key)) gpus.push_back(run.card.hardware_key);
    by_gpu[run.card.hardware_key].push_back(&run);
  }
  if (gpus.size() > 1) {
    std::vector<Scorecard> cards;
    std::map<std::string, const ReportRun*> latest;
    for (const auto& gpu : gpus) {
      cards.push_back(latest_per_point(by_gpu[gpu]));
      latest[gpu] = by_gpu[gpu].back();
    }
    html += side_by_side_html(gpus, gpu_labels(gpus, latest), cards);
  }
  for (const auto& gpu : gpus) {
    const auto& of_gpu = by_gpu[gpu];
    // The page shows each example point's newest result over all the runs given for this GPU.
    std::vector<std::size_t> from;
    ReportRun latest = *of_gpu.back();
    latest.card = latest_per_point(of_gpu, &from);
    html += fmt::format("<section data-gpu=\"{}\">\n<h2>{}</h2>\n", escape(gpu), escape(run_title(latest)));
    html += provenance_html(latest) + merged_from_html(of_gpu, from, latest.card) +
            flags_html(latest.card);
    if (!latest.expectations)
      html += fmt::format("<p><b>No expectations file for {}</b>: every example is NEW and no ceiling is drawn.</p>\n",
                          escape(gpu));
    html += "<h3>Speedups</h3>\n<p>Dot: the speedup; whisker: its 95% bootstrap interval; grey box: the band the "
            "example is judged in; tick: the expected speedup. Examples judged by the optimized side's time "
            "(host-bound baselines) show no band here: see the table.</p>\n" +
            speedup_svg(latest.card);
    std::vector<std::string> not_placed;
    const auto points = roofline_points(latest.card, &not_placed);
    html += "<h3 id=\"roofline-" + escape(gpu) + "\">Roofline</h3>\n<p>Each case at its arithmetic intensity (the cost model's flops over bytes) and "
            "achieved rate, numbered as in the key under it; a thin line joins each example's rungs in "
            "order; lines are this GPU's measured ceilings, each memory level rising to the highest compute roof "
            "the cases use.</p>\n" +
            roofline_of(latest, points);
    if (!not_placed.empty()) {
      html += "<p>Not on the roofline (no flops or no bytes in the cost model): ";
      for (std::size_t i = 0; i < not_placed.size(); ++i) html += (i ? ", " : "") + escape(not_placed[i]);
      html += "</p>\n";
    }
    html += curves_html(latest.card);
    html += "<h3>Every row</h3>\n" + rows_table(latest.card);
    if (const std::string history = of_gpu.size() > 1 ? history_html(of_gpu) : ""; !history.empty())
      html += "<h3 id=\"history-" + escape(gpu) + "\">History (" + std::to_string(of_gpu.size()) +
              " runs)</h3>\n" + history;
    html += "</section>\n";
  }
  return html + kTableScript + "</body></html>\n";
}

}  // namespace bench::tools
