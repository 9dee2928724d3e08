// Reading Google Benchmark rows into cases, and the merged results file of a compare run.
#include "results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "bench/expectations.hpp"
#include "bench/stats.hpp"

namespace bench::tools {
namespace {

constexpr std::string_view kFormatName = "cudabench-results";

// Google Benchmark appends "/iterations:1", "/manual_time", "/repeats:N" ... to case names.
bool is_gb_suffix(std::string_view segment) {
  for (std::string_view key : {"iterations:", "repeats:", "min_time:", "min_warmup_time:", "threads:"})
    if (segment.substr(0, key.size()) == key) return true;
  return segment == "manual_time" || segment == "real_time" || segment == "process_time";
}

double number_or(const json& row, const char* key, double fallback) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : fallback;
}

double to_microseconds(double value, const std::string& unit) {
  if (unit == "ns") return value / 1e3;
  if (unit == "ms") return value * 1e3;
  if (unit == "s") return value * 1e6;
  return value;  // "us"
}

// "role=baseline;fp=...;mode=cold" -> fields of the case.
void apply_label(CaseResult& c, const std::string& label) {
  std::istringstream parts(label);
  for (std::string part; std::getline(parts, part, ';');) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "role") c.role = value;
    else if (key == "impl")
      c.impl = value;
    else if (key == "fp") c.fingerprint = value;
    else if (key == "mode") c.mode = value;
    else if (key == "stop") c.stop = value;
    else if (key == "bw") c.bw_ceiling = value;
    else if (key == "compute") c.compute_ceiling = value;
    else if (key == "host_bound") c.host_bound = value == "1";
    else if (key == "gpus") c.min_gpus = std::max(1, std::atoi(value.c_str()));
    else if (key == "throttled") c.throttled_all = value == "all";
    else if (key == "suspect") c.suspect = value;
    else if (key == "escape") c.escape_method = value;
    else if (key == "checks")
      c.sample_check = value;
    else if (key == "scored_by") {
      const auto colon = value.rfind(':');
      c.scored_by = ScoredMetric{value.substr(0, colon),
                                 colon == std::string::npos ? "" : value.substr(colon + 1)};
    } else if (key == "metrics")
      for (std::istringstream names(value); std::getline(names, part, ',');) c.metric_names.push_back(part);
  }
}

std::string default_role(const std::string& variant) {
  if (variant == "baseline" || variant == "optimized" || variant == "vendor") return variant;
  return "step";
}

bool is_aggregate(const json& row) {
  if (auto it = row.find("run_type"); it != row.end() && it->is_string())
    return *it == "aggregate";
  return row.contains("aggregate_name");
}

// The error of a row, GB 1.7 (error_occurred/error_message) or 1.8 (also skipped/skip_message).
std::optional<std::pair<Outcome, std::string>> row_error(const json& row) {
  std::string message;
  bool skipped = false;
  if (row.value("error_occurred", false)) message = row.value("error_message", std::string());
  else if (row.contains("skip_message")) message = row.value("skip_message", std::string()), skipped = true;
  else if (row.value("skipped", false)) skipped = true;
  else return std::nullopt;
  for (auto [tag, outcome] : {std::pair{std::string_view("SKIPPED: "), Outcome::skipped},
                              std::pair{std::string_view("FAILED: "), Outcome::failed}})
    if (message.rfind(tag, 0) == 0) return std::pair{outcome, message.substr(tag.size())};
  return std::pair{skipped ? Outcome::skipped : Outcome::failed, message};
}

// Why a row holds no measurement, or "" when it does: a `--bench_profile` row (`bench profile`:
// one launch under a profiler, never timed), a `--bench_timeline` row (`bench profile --tool
// timeline`: calls traced through CUPTI, not timed by the harness) or a `--bench_verify_only` row
// (`bench sanitize`: the verification runs alone). All carry a zero time that must never be scored.
std::string untimed_reason(const std::string& mode) {
  if (mode == "profile") return "comes from a --bench_profile run (one untimed launch under a profiler): not a measurement";
  if (mode == "timeline")
    return "comes from a --bench_timeline run (calls traced through CUPTI, untimed): not a "
           "measurement";
  if (mode == "verify")
    return "comes from a --bench_verify_only run (the verification alone, as bench sanitize runs it): not a measurement";
  return {};
}

std::string untimed_row_reason(const json& row) {
  CaseResult c;
  apply_label(c, row.value("label", std::string()));
  return untimed_reason(c.mode);
}

CaseResult case_from_row(const json& row, const std::string& name, RowsWanted wanted) {
  CaseResult c;
  c.name = name;
  c.example = example_of(name);
  c.variant = variant_of(name);
  apply_label(c, row.value("label", std::string()));
  if (c.role.empty()) c.role = default_role(c.variant);
  if (auto error = row_error(row)) {
    c.outcome = error->first;
    c.message = error->second;
    return c;
  }
  const bool wanted_untimed = wanted == RowsWanted::verify_only && c.mode == "verify";
  if (auto why = untimed_reason(c.mode); !why.empty() && !wanted_untimed) {  // parse_results refuses such files; a live run gets FAILED
    c.outcome = Outcome::failed;
    c.message = why;
    return c;
  }
  c.median_us = to_microseconds(number_or(row, "real_time", 0), row.value("time_unit", "ns"));
  c.p10_us = number_or(row, "p10_us", c.median_us);
  c.p90_us = number_or(row, "p90_us", c.median_us);
  c.noise = number_or(row, "noise", 0);
  c.bytes = number_or(row, "bytes", 0);
  c.flops = number_or(row, "flops", 0);
  c.gbps = number_or(row, "gbps", 0);
  c.l2_write_slack_bytes = number_or(row, "l2_write_slack_bytes", 0);
  c.tflops = number_or(row, "tflops", 0);
  if (row.contains("pct_ceiling")) c.pct_ceiling = number_or(row, "pct_ceiling", 0);
  c.verified = number_or(row, "verified", 0) == 1;
  c.max_abs_err = number_or(row, "max_abs_err", 0);
  c.rel_l2_err = number_or(row, "rel_l2_err", 0);
  c.sample_count = static_cast<int64_t>(number_or(row, "samples", 0));
  c.dropped_throttled = static_cast<int64_t>(number_or(row, "dropped_throttled", 0));
  c.min_sm_mhz = number_or(row, "min_sm_mhz", 0);
  if (row.contains("escape_5pct")) c.escape_5pct = number_or(row, "escape_5pct", 0);
  c.checked_samples = static_cast<int64_t>(number_or(row, "verified_samples", 0) +
                                           number_or(row, "compared_samples", 0));
  c.timed_samples = c.sample_count + c.dropped_throttled;
  for (const auto& metric : c.metric_names)
    if (row.contains(metric)) c.metrics[metric] = number_or(row, metric.c_str(), 0);
  return c;
}

// Folds the attached sample file (and its fingerprint) into the case.
void attach_samples(CaseResult& c, const json& sample_file) {
  if (auto it = sample_file.find("samples"); it != sample_file.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_number()) c.samples.push_back(v.get<double>());
  if (c.fingerprint.empty() && sample_file.contains("fingerprint"))
    c.fingerprint = sample_file["fingerprint"].value("hash", std::string());
  if (auto it = sample_file.find("input_seed"); it != sample_file.end() && it->is_number_unsigned())
    c.input_seed = std::to_string(it->get<uint64_t>());
  if (auto it = sample_file.find("scored_metric"); it != sample_file.end() && it->is_object())
    if (auto values = it->find("samples"); values != it->end() && values->is_array())
      for (const auto& v : *values)
        if (v.is_number()) c.metric_samples.push_back(v.get<double>());
}

}  // namespace

std::string context_string(const json& context, const char* key) {
  auto it = context.find(key);
  return it != context.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string strip_gb_suffixes(std::string_view gb_name) {
  std::string name(gb_name);
  for (auto slash = name.rfind('/'); slash != std::string::npos; slash = name.rfind('/')) {
    if (!is_gb_suffix(std::string_view(name).substr(slash + 1))) break;
    name.resize(slash);
  }
  return name;
}

namespace {
// The parts of a name between slashes.
std::vector<std::string_view> parts_of(std::string_view name) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = name.find('/', start);
    parts.push_back(name.substr(start, end == name.npos ? name.npos : end - start));
    if (end == name.npos) return parts;
    start = end + 1;
  }
}
std::string join_parts(const std::vector<std::string_view>& parts, std::size_t from,
                       std::size_t skip) {
  std::string out;
  for (std::size_t i = from; i < parts.size(); ++i)
    if (i != skip) out += std::string(out.empty() ? "" : "/") + std::string(parts[i]);
  return out;
}
}  // namespace

std::string example_of(std::string_view case_name) {
  const auto parts = parts_of(case_name);
  if (parts.size() < 3) return join_parts(parts, 0, parts.size() - 1);  // not chNN/example/variant
  return join_parts(parts, 0, 2);
}

std::string variant_of(std::string_view case_name) {
  const auto parts = parts_of(case_name);
  return std::string(parts.size() >= 3 ? parts[2] : parts.back());
}

std::string base_example_of(std::string_view name) {
  const auto parts = parts_of(name);
  return parts.size() >= 2 ? std::string(parts[0]) + "/" + std::string(parts[1])
                           : std::string(name);
}

std::string point_of(std::string_view point_key) {
  const auto parts = parts_of(point_key);
  return join_parts(parts, 2, parts.size());
}

std::vector<std::pair<std::string, std::string>> axes_of(std::string_view point) {
  std::vector<std::pair<std::string, std::string>> out;
  if (point.empty()) return out;
  for (auto part : parts_of(point)) {
    const auto colon = part.find(':');
    out.emplace_back(std::string(part.substr(0, colon)),
                     colon == part.npos ? std::string() : std::string(part.substr(colon + 1)));
  }
  return out;
}

std::string null_non_finite(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (std::string_view token : {"-nan", "-inf", "nan", "inf"}) {
      const bool word_end = i + token.size() >= text.size() || !std::isalnum(static_cast<unsigned char>(text[i + token.size()]));
      if (text.substr(i, token.size()) == token && word_end) {
        out += "null";
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

ResultsFile parse_results(std::string_view text, const std::string& source_name) {
  auto fail = [&](std::size_t offset, const std::string& what) -> ResultsError {
    const TextPosition at = text_position(text, offset);
    return ResultsError(fmt::format("{}:{}:{}: {}", source_name, at.line, at.column, what));
  };
  json doc;
  try {
    doc = json::parse(null_non_finite(text));
  } catch (const json::parse_error& e) {
    throw fail(e.byte > 0 ? e.byte - 1 : 0, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    throw fail(0, "expected a results file: an object with a \"benchmarks\" array "
                  "(Google Benchmark JSON or a file saved by `bench compare --save-results`)");
  ResultsFile out;
  if (doc.contains("context") && doc["context"].is_object()) out.context = doc["context"];
  for (const auto& row : doc["benchmarks"]) {
    if (!row.is_object() || !row.contains("name") || !row["name"].is_string())
      throw fail(0, "every entry of \"benchmarks\" needs a string \"name\"");
    if (auto why = untimed_row_reason(row); !why.empty())
      throw ResultsError(fmt::format("{}: {} {}; rerun without it", source_name,
                                     strip_gb_suffixes(row["name"].get<std::string>()), why));
    out.benchmarks.push_back(row);
  }
  if (doc.value("format", std::string()) == kFormatName && doc.contains("crashes"))
    for (const auto& c : doc["crashes"]) {
      Crash crash{c.value("example", std::string()), c.value("how", std::string()),
                  c.value("stderr_tail", std::string()), {}, c.value("skipped", false)};
      for (const auto& name : c.value("cases", json::array())) crash.cases.push_back(name.get<std::string>());
      out.crashes.push_back(std::move(crash));
    }
  return out;
}

ResultsFile load_results(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ResultsError(file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_results(text.str(), file.string());
}

ResultsFile load_results_to_score(const std::filesystem::path& file) {
  ResultsFile results = load_results(file);
  if (results.benchmarks.empty() && results.crashes.empty())
    throw ResultsError(file.string() + ": holds no results (its \"benchmarks\" array is empty and it records no "
                                       "crash): nothing to score");
  return results;
}

json to_json(const ResultsFile& results) {
  json crashes = json::array();
  for (const auto& c : results.crashes)
    crashes.push_back({{"example", c.example}, {"how", c.how}, {"stderr_tail", c.stderr_tail}, {"cases", c.cases}, {"skipped", c.skipped}});
  return {{"format", kFormatName}, {"version", 1}, {"context", results.context},
          {"benchmarks", results.benchmarks}, {"crashes", crashes}};
}

std::string utc_now(const char* format) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, format, &utc);
  return text;
}

std::string run_results_name(const std::vector<std::string>& chapters,
                             const std::string& hardware_key, const std::string& utc) {
  auto safe = [](std::string text) {
    for (char& c : text) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return text;
  };
  std::string name = "results";
  for (const auto& chapter : chapters) name += "_" + safe(chapter);
  return name + "_" + safe(hardware_key.empty() ? "unknown" : hardware_key) + "_" + utc + ".json";
}

void save_results(const std::filesystem::path& file, const ResultsFile& results) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << to_json(results).dump(1) << "\n";
  if (!out) throw ResultsError(file.string() + ": cannot be written");
}

void merge_run(ResultsFile& into, const json& gb_output, const std::filesystem::path& samples_dir) {
  if (into.context.empty() && gb_output.contains("context")) into.context = gb_output["context"];
  if (!gb_output.contains("benchmarks")) return;
  // Attach each case's samples once, to its last iteration row (the file holds the samples of
  // the last repetition the process ran).
  std::map<std::string, std::size_t> last_row;
  for (const auto& row : gb_output["benchmarks"]) {
    into.benchmarks.push_back(row);
    if (!is_aggregate(row) && !row_error(row))
      last_row[strip_gb_suffixes(row.value("name", std::string()))] = into.benchmarks.size() - 1;
  }
  for (const auto& [name, index] : last_row) {
    std::string file_name = name;
    std::replace(file_name.begin(), file_name.end(), '/', '.');
    std::ifstream in(samples_dir / (file_name + ".json"));
    if (!in) continue;
    try {
      into.benchmarks[index]["bench_samples"] = json::parse(in);
    } catch (const json::parse_error&) {
      // A half-written sample file (the process died while writing it) adds nothing.
    }
  }
}

std::vector<CaseResult> extract_cases(const ResultsFile& results, RowsWanted wanted) {
  std::vector<CaseResult> cases;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::vector<double>> rep_medians, rep_metric_medians;
  for (const auto& row : results.benchmarks) {
    if (is_aggregate(row)) continue;
    const std::string name = strip_gb_suffixes(row.value("name", std::string()));
    CaseResult c = case_from_row(row, name, wanted);
    auto [it, inserted] = index.try_emplace(name, cases.size());
    if (inserted) cases.push_back(c);
    CaseResult& pooled = cases[it->second];
    if (c.outcome != Outcome::measured) {
      if (pooled.outcome == Outcome::measured || inserted) pooled = c;  // an error wins
      continue;
    }
    rep_medians[name].push_back(c.median_us);
    if (!inserted && c.escape_5pct &&
        (!pooled.escape_5pct || *c.escape_5pct > *pooled.escape_5pct)) {
      pooled.escape_5pct = c.escape_5pct;  // the worst run's checks stand for the case
      pooled.checked_samples = c.checked_samples;
      pooled.timed_samples = c.timed_samples;
      pooled.sample_check = c.sample_check;
    }
    if (c.scored_by && c.metrics.count(c.scored_by->name))
      rep_metric_medians[name].push_back(c.metrics[c.scored_by->name]);
    if (row.contains("bench_samples")) attach_samples(pooled, row["bench_samples"]);
  }
  for (auto& c : cases) {
    auto reps = rep_medians.find(c.name);
    if (c.outcome == Outcome::measured && reps != rep_medians.end() && reps->second.size() > 1) {
      c.run_medians_us = reps->second;
      c.median_us = stats::median(reps->second);  // repetitions: the median of their medians
    }
    if (c.outcome == Outcome::measured && !c.samples.empty())
      c.median_us = stats::median(c.samples), c.noise = stats::relative_noise(c.samples);
    if (auto runs = rep_metric_medians.find(c.name);
        c.outcome == Outcome::measured && runs != rep_metric_medians.end()) {
      if (runs->second.size() > 1) {
        c.run_metric_medians = runs->second;
        c.metrics[c.scored_by->name] = stats::median(runs->second);
      }
      if (!c.metric_samples.empty()) c.metrics[c.scored_by->name] = stats::median(c.metric_samples);
    }
  }
  for (const auto& crash : results.crashes) {
    std::vector<std::string> names = crash.cases;
    // A process that ended badly after reporting every case leaves nothing missing; one that
    // reported nothing and listed nothing still fails its example.
    const bool example_seen = std::any_of(cases.begin(), cases.end(),
                                          [&](const CaseResult& c) { return c.example == crash.example; });
    if (names.empty() && !example_seen) names.push_back(crash.example + "/?");
    for (const auto& name : names) {
      // Reported by another run (repetitions) but missing from this one: the case still fails.
      if (auto seen = index.find(name); seen != index.end()) {
        CaseResult& c = cases[seen->second];
        if (c.outcome == Outcome::measured) {
          c.outcome = crash.skipped ? Outcome::skipped : Outcome::failed;
          c.message = "a repetition's process " + crash.how + (crash.stderr_tail.empty() ? "" : ": " + crash.stderr_tail);
        }
        continue;
      }
      CaseResult c;
      c.name = name;
      c.example = example_of(name);
      c.variant = variant_of(name);
      c.role = default_role(c.variant);
      c.outcome = crash.skipped ? Outcome::skipped : Outcome::failed;
      c.message = "process " + crash.how + (crash.stderr_tail.empty() ? "" : ": " + crash.stderr_tail);
      index[name] = cases.size();
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace bench::tools
