// Curves along an example's axes, and their crossovers (curves.hpp).
#include "curves.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "results.hpp"

namespace bench::tools {

bool CurvePoint::pays() const { return row->speedup && row->speedup->low > kMinimumClearSpeedup; }

std::string CurvePoint::rate() const {
  if (!row->subject) return {};
  const CaseResult& c = *row->subject;
  const bool compute =
      row->ceiling_name.find("tflops") != std::string::npos || (c.bytes <= 0 && c.flops > 0);
  if (compute && c.flops > 0) return fmt::format("{:.1f} TFLOP/s", c.tflops);
  if (c.bytes > 0) return fmt::format("{:.0f} GB/s", c.gbps);
  return {};
}

std::string Curve::title() const {
  return example + " against " + axis + (fixed.empty() ? "" : " at " + fixed);
}

namespace {

bool numeric(const std::string& text, double* value) {
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

std::string speedup_text(const ScoredRow& row) {
  return row.speedup ? fmt::format("{:.2f}x", row.speedup->estimate) : to_string(row.status);
}

std::string find_crossover(const Curve& c) {
  for (std::size_t i = 1; i < c.points.size(); ++i) {
    const CurvePoint &a = c.points[i - 1], &b = c.points[i];
    if (!a.row->speedup || !b.row->speedup || a.pays() == b.pays()) continue;
    return fmt::format("{} paying between {}:{} ({}) and {}:{} ({})", a.pays() ? "stops" : "starts",
                       c.axis, a.value, speedup_text(*a.row), c.axis, b.value,
                       speedup_text(*b.row));
  }
  return {};
}

}  // namespace

std::vector<Curve> curves(const Scorecard& card) {
  // Each example's pairs, in the card's order, with their points parsed.
  std::vector<std::string> examples;
  std::map<
      std::string,
      std::vector<std::pair<const ScoredRow*, std::vector<std::pair<std::string, std::string>>>>>
      of;
  for (const auto& row : card.rows) {
    if (row.kind != RowKind::pair) continue;
    const std::string point = point_of(row.example);
    if (point.empty()) continue;
    const std::string example = base_example_of(row.example);
    if (!of.count(example)) examples.push_back(example);
    of[example].emplace_back(&row, axes_of(point));
  }
  std::vector<Curve> out;
  for (const auto& example : examples) {
    const auto& rows = of[example];
    for (std::size_t a = 0; a < rows.front().second.size(); ++a) {
      const std::string axis = rows.front().second[a].first;
      std::vector<std::string> order;  // the fixed parts, in first-seen order
      std::map<std::string, Curve> by_fixed;
      for (const auto& [row, axes] : rows) {
        if (axes.size() <= a || axes[a].first != axis) continue;
        std::string fixed;
        for (std::size_t i = 0; i < axes.size(); ++i)
          if (i != a) fixed += (fixed.empty() ? "" : "/") + axes[i].first + ":" + axes[i].second;
        auto [it, fresh] = by_fixed.try_emplace(fixed, Curve{example, axis, fixed, {}, {}});
        if (fresh) order.push_back(fixed);
        it->second.points.push_back({axes[a].second, row});
      }
      for (const auto& fixed : order) {
        Curve& c = by_fixed[fixed];
        if (c.points.size() < 2) continue;
        double x = 0, y = 0;
        const bool numbers = std::all_of(c.points.begin(), c.points.end(),
                                         [&](const CurvePoint& p) { return numeric(p.value, &x); });
        if (numbers)
          std::stable_sort(c.points.begin(), c.points.end(),
                           [&](const CurvePoint& p, const CurvePoint& q) {
                             numeric(p.value, &x), numeric(q.value, &y);
                             return x < y;
                           });
        c.crossover = find_crossover(c);
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

std::string curves_markdown(const std::vector<Curve>& curves) {
  if (curves.empty()) return {};
  std::string out = "\n## Curves\n";
  for (const auto& c : curves) {
    out += fmt::format(
        "\n### {}\n\n| {} | speedup [95% CI] | optimized | % of ceiling | status |\n| --- | --- | "
        "--- | --- | --- |\n",
        c.title(), c.axis);
    for (const auto& p : c.points) {
      const ScoredRow& r = *p.row;
      const std::string speedup = r.speedup
                                      ? fmt::format("{:.2f}x [{:.2f}, {:.2f}]", r.speedup->estimate,
                                                    r.speedup->low, r.speedup->high)
                                      : "-";
      const std::string pct =
          r.pct_ceiling ? fmt::format("{:.1f}% of {}", *r.pct_ceiling, r.ceiling_name) : "-";
      const std::string rate = p.rate();
      out += fmt::format("| {} | {} | {} | {} | {} |\n", p.value, speedup,
                         rate.empty() ? "-" : rate, pct, to_string(r.status));
    }
    out += "\n" +
           (c.crossover.empty()
                ? std::string("No crossover: the optimization ") +
                      (c.points.front().pays() ? "pays at every point." : "pays at no point.")
                : "Crossover: the optimization " + c.crossover + ".") +
           "\n";
  }
  return out;
}

std::string crossover_lines(const std::vector<Curve>& curves) {
  std::string out;
  for (const auto& c : curves)
    if (!c.crossover.empty()) out += fmt::format("  {}: {}\n", c.title(), c.crossover);
  return out.empty() ? out : "crossovers:\n" + out;
}

}  // namespace bench::tools
