// tools/timeline.hpp's table. The figures are medians of each position's start offset and
// duration over the calls (offsets are from each call's first start, so calls line up), and the
// gaps and the busy time are computed from those medians, as one representative call.
#include "timeline.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <vector>

#include "bench/stats.hpp"

namespace bench::tools {
namespace {

struct Row {
  std::string kind, name;
  long long stream = 0;
  double start_us = 0, duration_us = 0;
  double end_us() const { return start_us + duration_us; }
};

std::vector<Row> rows_of(const nlohmann::json& call) {
  if (!call.is_array()) throw std::invalid_argument("a traced call is not a list of activities");
  std::vector<Row> rows;
  for (const auto& a : call) {
    if (!a.is_object() || !a.contains("what") || !a.contains("start_ns") ||
        !a.contains("duration_ns"))
      throw std::invalid_argument("an activity lacks what, start_ns or duration_ns: " + a.dump());
    rows.push_back({a.value("kind", std::string()), a.at("what").get<std::string>(),
                    a.value("stream", 0LL), a.at("start_ns").get<double>() * 1e-3,
                    a.at("duration_ns").get<double>() * 1e-3});
  }
  return rows;
}

bool same_sequence(const std::vector<Row>& a, const std::vector<Row>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Row& x, const Row& y) {
    return x.kind == y.kind && x.name == y.name;
  });
}

}  // namespace

std::string short_kernel_name(const std::string& name) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  std::string text = status == 0 && demangled ? demangled.get() : name;
  // A template function's demangled name starts with its return type ("void "), and a kernel in
  // an unnamed namespace with "(anonymous namespace)::", which says nothing in a timeline and
  // would otherwise read as the parameter list.
  if (text.rfind("void ", 0) == 0) text.erase(0, 5);
  for (const std::string anonymous = "(anonymous namespace)::";;) {
    const std::size_t at = text.find(anonymous);
    if (at == std::string::npos) break;
    text.erase(at, anonymous.size());
  }
  // The parameter list starts at the first '(' outside template arguments, which may hold
  // parenthesised values ("kernel<(int)3>(float*)").
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<')
      ++depth;
    else if (text[i] == '>')
      --depth;
    else if (text[i] == '(' && depth == 0 && i > 0) {
      text.resize(i);
      break;
    }
  }
  if (text.size() > kTimelineNameChars) text = text.substr(0, kTimelineNameChars - 3) + "...";
  return text;
}

std::string timeline_table(const nlohmann::json& timeline) {
  if (!timeline.is_object() || !timeline.contains("traced_calls") ||
      !timeline.at("traced_calls").is_array() || timeline.at("traced_calls").empty())
    throw std::invalid_argument("not a --bench_timeline file: no traced_calls");
  std::vector<std::vector<Row>> calls;
  for (const auto& call : timeline.at("traced_calls")) calls.push_back(rows_of(call));
  const bool steady = std::all_of(calls.begin(), calls.end(),
                                  [&](const auto& c) { return same_sequence(c, calls[0]); });

  std::string out =
      fmt::format("{} on {}: {} traced calls, ", timeline.value("case", std::string("?")),
                  timeline.value("gpu_name", std::string("?")), calls.size());
  std::vector<Row> rows = calls[0];
  if (steady && calls.size() > 1) {
    out += "the same activities in each; medians over the calls\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<double> starts, durations;
      for (const auto& c : calls)
        starts.push_back(c[i].start_us), durations.push_back(c[i].duration_us);
      rows[i].start_us = stats::median(starts);
      rows[i].duration_us = stats::median(durations);
    }
  } else {
    out += steady ? "one call\n" : "their sequences of activities differ: the first call alone\n";
  }
  // Medians of starts need not keep the calls' start order; the gaps and the union need it.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.start_us < b.start_us; });

  out += fmt::format("{:>4} {:>7}  {:<{}} {:>11} {:>11} {:>9}\n", "#", "stream", "name",
                     kTimelineNameChars, "start us", "duration us", "gap us");
  // The rows are in start order, so the span starts at the first row's start; latest_end is the
  // latest end so far (the first row's start before any row).
  const double span_start = rows.empty() ? 0 : rows.front().start_us;
  double latest_end = span_start, busy = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const std::string name =
        r.kind == "kernel" || r.kind.empty() ? short_kernel_name(r.name) : r.name;
    // Busy time is the union of the intervals: only what reaches past every earlier end counts.
    const double gap = std::max(0.0, r.start_us - latest_end);
    busy += std::max(0.0, r.end_us() - std::max(latest_end, r.start_us));
    latest_end = std::max(latest_end, r.end_us());
    out += fmt::format("{:>4} {:>7}  {:<{}} {:>11.2f} {:>11.2f} {:>9.2f}\n", i, r.stream, name,
                       kTimelineNameChars, r.start_us, r.duration_us, gap);
  }
  const double span = latest_end - span_start;
  out += fmt::format("span {:.2f} us, busy {:.2f} us, idle {:.2f} us; {} activities, {} calls\n",
                     span, busy, std::max(0.0, span - busy), rows.size(), calls.size());
  return out;
}

}  // namespace bench::tools
