// Reports of a scorecard. The table and the Markdown share one row model, so they never
// disagree about what a cell says.
#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include "curves.hpp"

namespace bench::tools {
namespace {

constexpr std::array<const char*, 11> kHeader = {
    "example", "variant", "baseline", "median", "speedup [95% CI]", "expected",
    "status",  "throughput", "% ceil", "verified", "noise b/v"};

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

// In the unit of the ceiling the % column is against (`ceiling_name`, scoring.cpp), so that a case
// declaring both bytes and flops (a decode attention held to HBM) shows GB/s beside its % of the
// read ceiling, not a TFLOP/s figure the % does not describe. Without a ceiling: flops first.
std::string throughput(const CaseResult& c, const std::string& ceiling_name) {
  const bool by_bandwidth = !ceiling_name.empty() && ceiling_name == c.bw_ceiling;
  if (c.bytes > 0 && by_bandwidth) return fmt::format("{:.0f} GB/s", c.gbps);
  if (c.flops > 0 && (c.bytes <= 0 || c.compute_ceiling.size()))
    return fmt::format("{:.1f} TFLOP/s", c.tflops);
  if (c.bytes > 0) return fmt::format("{:.0f} GB/s", c.gbps);
  return "";
}

std::array<std::string, 11> cells(const ScoredRow& row) {
  std::array<std::string, 11> out;
  out[0] = row.example;
  // A pair's subject is named by its role ("optimized"); the rung it runs follows, as its label
  // gives it: "optimized (cluster_permute)".
  const std::string impl = row.subject ? row.subject->impl : "";
  out[1] = row.kind == RowKind::step             ? row.variant + " (step)"
           : row.kind == RowKind::vendor         ? row.variant + " (vendor)"
           : impl.empty() || impl == row.variant ? row.variant
                                                 : row.variant + " (" + impl + ")";
  if (row.baseline && row.baseline->outcome == Outcome::measured)
    out[2] = format_duration_us(row.baseline->median_us);
  if (row.subject && row.subject->outcome == Outcome::measured)
    out[3] = format_duration_us(row.subject->median_us);
  // A pair scored by a metric names it: "p99_decode_latency_us 2.31x [2.20, 2.43]".
  if (row.speedup)
    out[4] = fmt::format("{}{:.2f}x [{:.2f}, {:.2f}]", row.metric ? row.metric->name + " " : "",
                         row.speedup->estimate, row.speedup->low, row.speedup->high);
  if (row.versus_vendor) out[4] += fmt::format(" opt={:.2f}x vendor", *row.versus_vendor);
  // The expected column shows what the status was judged on (tools/scoring.cpp).
  if (row.basis == ScoreBasis::optimized_time && row.band_low)
    out[5] = fmt::format("opt {}-{}", format_duration_us(*row.band_low), format_duration_us(*row.band_high));
  else if (row.basis == ScoreBasis::machine_spread && row.band_low)
    out[5] = fmt::format("{:.2f}x-{:.2f}x (machines)", *row.band_low, *row.band_high);
  else if (row.expected_speedup)
    out[5] = fmt::format("{:.2f}x +-{:.0f}%", *row.expected_speedup, 100 * row.tolerance.value_or(0));
  out[6] = to_string(row.status);
  if (row.as_recorded) {
    if (out[5].empty()) out[5] = "(recorded)";
    out[6] += " (recorded)";
  }
  if (row.subject && row.subject->outcome == Outcome::measured) {
    out[7] = throughput(*row.subject, row.ceiling_name);
    if (row.pct_ceiling) out[8] = fmt::format("{:.1f}%", *row.pct_ceiling);
    out[9] = row.baseline->verified && row.subject->verified ? "yes" : "NO";
    out[10] = percent(row.baseline->noise) + "/" + percent(row.subject->noise);
  }
  return out;
}

std::string summary_line(const Scorecard& card) {
  std::string out;
  for (const auto& [status, n] : card.counts())
    if (status != Status::info) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, to_string(status));
  return fmt::format("{} (exit code {})", out.empty() ? "nothing scored" : out, card.exit_code());
}

nlohmann::json case_json(const CaseResult& c) {
  nlohmann::json j = {{"name", c.name}, {"role", c.role}, {"fingerprint", c.fingerprint}};
  if (!c.impl.empty()) j["impl"] = c.impl;
  if (c.outcome != Outcome::measured) {
    j["outcome"] = c.outcome == Outcome::failed ? "failed" : "skipped";
    j["message"] = c.message;
    return j;
  }
  j.update({{"outcome", "measured"}, {"median_us", c.median_us}, {"p10_us", c.p10_us},
            {"p90_us", c.p90_us}, {"noise", c.noise}, {"samples", c.sample_count},
            {"gbps", c.gbps}, {"tflops", c.tflops}, {"verified", c.verified}, {"mode", c.mode},
            {"stop", c.stop}});
  if (!c.metrics.empty()) j["metrics"] = c.metrics;
  if (c.escape_5pct)
    j["checks"] = {{"checked_samples", c.checked_samples},
                   {"timed_samples", c.timed_samples},
                   {"how", c.sample_check},
                   {"escape_5pct", *c.escape_5pct}};
  return j;
}

// The variants' own figures (bench::Metric), e.g. a critical kernel's latency, one line per
// row that has any: "  ch11/stream_priority optimized: critical_latency_us baseline 4474, optimized 1962".
std::string metrics_lines(const Scorecard& card) {
  std::string out;
  for (const auto& row : card.rows) {
    if (!row.subject || row.subject->metrics.empty()) continue;
    for (const auto& [name, value] : row.subject->metrics) {
      std::string line = fmt::format("  {} {}: {}", row.example, row.variant, name);
      if (row.baseline)
        if (auto it = row.baseline->metrics.find(name); it != row.baseline->metrics.end())
          line += fmt::format(" baseline {:.4g},", it->second);
      out += fmt::format("{} {} {:.4g}\n", line, row.variant, value);
    }
  }
  return out;
}

// The cases short of validity row 2's bar, each once (a baseline shared by several rows is one
// case), with checks_short_of_bar's sentence. Their status stands: nothing wrong was found, but
// less was looked at.
struct ShortChecked {
  const CaseResult* side;
  std::string why;
};
std::vector<ShortChecked> short_checked(const Scorecard& card) {
  std::vector<ShortChecked> out;
  std::set<std::string> seen;
  for (const auto& row : card.rows)
    for (const auto* side :
         {row.baseline ? &*row.baseline : nullptr, row.subject ? &*row.subject : nullptr})
      if (side && seen.insert(side->name).second)
        if (std::string why = checks_short_of_bar(*side); !why.empty())
          out.push_back({side, std::move(why)});
  return out;
}

std::string check_lines(const Scorecard& card) {
  std::string out;
  const auto cases = short_checked(card);
  for (const auto& c : cases)
    out += fmt::format("  {} {}: checks: {}\n", c.side->example, c.side->variant, c.why);
  if (!cases.empty())
    out += fmt::format("  checks: {} case(s) short of catching a 5% spoiler with 99% (above)\n", cases.size());
  return out;
}

}  // namespace

std::string checks_short_of_bar(const CaseResult& c) {
  constexpr double kEscapeBar = 0.01;
  if (c.outcome != Outcome::measured || !c.escape_5pct || *c.escape_5pct <= kEscapeBar) return {};
  return fmt::format(
      "{} of {} timed samples checked ({}): a variant spoiling 5% of them would escape every "
      "check with probability up to {:.2g} (the bar: {})",
      c.checked_samples, c.timed_samples,
      c.sample_check.empty() ? "how: not recorded" : c.sample_check, *c.escape_5pct, kEscapeBar);
}

const std::array<const char*, 11>& table_header() { return kHeader; }
std::array<std::string, 11> table_cells(const ScoredRow& row) { return cells(row); }

std::string format_duration_us(double us) {
  if (us >= 1e6) return fmt::format("{:.2f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f} ms", us / 1e3);
  return fmt::format("{:.1f} us", us);
}

std::string format_table(const Scorecard& card) {
  std::vector<std::array<std::string, 11>> lines = {{}};
  std::copy(kHeader.begin(), kHeader.end(), lines[0].begin());
  for (const auto& row : card.rows) lines.push_back(cells(row));
  std::array<std::size_t, 11> width{};
  for (const auto& line : lines)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  std::string out;
  for (const auto& line : lines) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) text += fmt::format("{:<{}}  ", line[i], width[i]);
    out += text.substr(0, text.find_last_not_of(' ') + 1) + "\n";
  }
  for (const auto& row : card.rows)
    if (!row.reason.empty())
      out += fmt::format("  {} {}: {}: {}\n", row.example, row.variant, to_string(row.status), row.reason);
  for (const auto& row : card.rows)
    if (!row.ceiling_note.empty())
      out += fmt::format("  {} {}: note: {}\n", row.example, row.variant, row.ceiling_note);
  out += metrics_lines(card);
  out += check_lines(card);
  out += crossover_lines(curves(card));
  return out + summary_line(card) + "\n";
}

std::string format_markdown(const Scorecard& card) {
  std::string out = fmt::format("# bench compare: {}\n\n|", card.hardware_key);
  for (const char* h : kHeader) out += fmt::format(" {} |", h);
  out += "\n|";
  for (std::size_t i = 0; i < kHeader.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& row : card.rows) {
    out += "|";
    for (const auto& cell : cells(row)) out += fmt::format(" {} |", cell);
    out += "\n";
  }
  bool any_bullet = false;  // the first reason or note opens the list with a blank line
  for (const auto& row : card.rows)
    if (!row.reason.empty()) {
      if (!any_bullet) out += "\n";
      any_bullet = true;
      out += fmt::format("- **{}** `{}/{}`: {}\n", to_string(row.status), row.example, row.variant, row.reason);
    }
  for (const auto& row : card.rows)
    if (!row.ceiling_note.empty()) {
      if (!any_bullet) out += "\n";
      any_bullet = true;
      out += fmt::format("- note `{}/{}`: {}\n", row.example, row.variant, row.ceiling_note);
    }
  for (const auto& c : short_checked(card)) {
    if (!any_bullet) out += "\n";
    any_bullet = true;
    out += fmt::format("- checks `{}/{}`: {}\n", c.side->example, c.side->variant, c.why);
  }
  out += curves_markdown(curves(card));  // an example's points, grouped along each axis
  return out + "\n" + summary_line(card) + "\n";
}

nlohmann::json report_json(const Scorecard& card) {
  nlohmann::json rows = nlohmann::json::array();
  static constexpr const char* kKinds[] = {"pair", "step", "vendor", "example"};
  for (const auto& row : card.rows) {
    nlohmann::json j = {{"example", row.example}, {"variant", row.variant},
                        {"kind", kKinds[static_cast<int>(row.kind)]},
                        {"status", to_string(row.status)}, {"reason", row.reason}};
    if (row.baseline) j["baseline"] = case_json(*row.baseline);
    if (row.subject) j["subject"] = case_json(*row.subject);
    if (row.speedup)
      j["speedup"] = {{"estimate", row.speedup->estimate}, {"low", row.speedup->low},
                      {"high", row.speedup->high}, {"from_medians_only", row.speedup_from_medians_only}};
    if (row.expected_speedup)
      j["expected"] = {{"speedup", *row.expected_speedup}, {"tolerance", row.tolerance.value_or(0)}};
    if (row.kind == RowKind::pair) j["scored_by"] = to_string(row.basis);
    if (row.metric) j["metric"] = {{"name", row.metric->name}, {"better", row.metric->better}};
    if (row.band_low) j["band"] = {{"low", *row.band_low}, {"high", *row.band_high},
                                   {"unit", row.basis == ScoreBasis::optimized_time ? "us" : "x"}};
    if (row.expected_us) j["expected"]["optimized_us"] = *row.expected_us;
    if (row.pct_ceiling) j["pct_ceiling"] = {{"value", *row.pct_ceiling}, {"ceiling", row.ceiling_name}};
    if (!row.ceiling_note.empty()) j["ceiling_note"] = row.ceiling_note;
    if (row.versus_vendor) j["optimized_vs_vendor"] = *row.versus_vendor;
    if (row.as_recorded) j["as_recorded"] = true;
    rows.push_back(std::move(j));
  }
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [status, n] : card.counts())
    if (status != Status::info) counts[to_string(status)] = n;
  return {{"hardware_key", card.hardware_key}, {"rows", rows}, {"counts", counts},
          {"exit_code", card.exit_code()}};
}

}  // namespace bench::tools
