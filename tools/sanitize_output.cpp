// Reading compute-sanitizer's text. Every line it writes starts with its prefix "=========";
// a report is a top-level line ("========= Invalid __global__ read of size 4 bytes") followed by
// indented details ("=========     at kernel(float *)+0x70 in /src/file.cu:12"). The "at" line
// has had two shapes: "<function>+0x<offset> in <file>:<line>" (compute-sanitizer 2022 and
// later) and "0x<offset> in <file>:<line>:<function>" (earlier, and cuda-memcheck); without
// -lineinfo the file and line are missing from either. Racecheck's analysis report puts the
// first location in the report line itself ("Error: Race reported between Write access at
// ..."), the other access on an indented "and Read access at ..." line.
#include "sanitize_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <sstream>

namespace bench::tools {
namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

// A device location, the text after "at ". False when the text is not one ("kernel launch time").
bool parse_location(std::string text, SanitizerFinding& f) {
  static const std::regex hazards(R"(\s*\[\d+ hazards?\]$)");
  static const std::regex current(R"(^(.+)\+0x[0-9a-fA-F]+(?: in (.+):(\d+))?$)");
  static const std::regex legacy_with_line(R"(^0x[0-9a-fA-F]+ in ([^:]+):(\d+):(.+)$)");
  static const std::regex legacy(R"(^0x[0-9a-fA-F]+ in (.+)$)");
  text = std::regex_replace(trim(text), hazards, "");
  std::smatch m;
  if (std::regex_match(text, m, current)) {
    f.function = trim(m.str(1));
    if (m[2].matched) f.file = m.str(2), f.line = std::stoi(m.str(3));
    return true;
  }
  if (std::regex_match(text, m, legacy_with_line)) {
    f.file = m.str(1), f.line = std::stoi(m.str(2)), f.function = trim(m.str(3));
    return true;
  }
  if (std::regex_match(text, m, legacy)) {
    f.function = trim(m.str(1));
    return true;
  }
  return false;
}

// "Error: ", "WARNING: ", "Internal Sanitizer Error: " in front of a report or a tool message.
std::string strip_severity(const std::string& content, std::string* severity) {
  static const std::regex prefix(R"(^(Internal Sanitizer Error|Error|ERROR|Warning|WARNING|WARN|INFO):\s*)",
                                 std::regex::icase);
  std::smatch m;
  if (!std::regex_search(content, m, prefix)) return content;
  if (severity) *severity = m.str(1);
  return m.suffix();
}

// The first line of a report, by tool: memcheck (memory errors, hardware exceptions, API errors,
// leaks), initcheck, synccheck, racecheck (analysis and hazard reports).
bool is_report(const std::string& body) {
  static const std::regex report(
      R"(^(Invalid |Misaligned |Out-of-range |Uninitialized |Unused memory|Barrier error|Divergent )"
      R"(|Program hit |Malloc/Free error|Leaked |Hardware exception|Warp |Lane |Host API |Illegal )"
      R"(|Device-side |Stack overflow|Race reported between|Potential \w+ hazard|.* hazard detected))");
  return std::regex_search(body, report);
}

// A warning that the selected tool cannot check this program at all. compute-sanitizer 2025.3
// prints it for racecheck, synccheck and initcheck on a binary with dynamic parallelism (-rdc,
// device-side launches: ch12), counts it as one error (racecheck: one warning hazard), and runs
// the program with its device code unchecked; NVIDIA's known limitations say those three tools
// do not support CUDA dynamic parallelism. A feature the tool merely skips inside a program it
// otherwise checks is not this.
bool is_unsupported_program(const std::string& body) {
  static const std::regex message(R"(^CUDA Dynamic Parallelism is not supported by the selected tool)",
                                  std::regex::icase);
  return std::regex_search(body, message);
}

// The sanitizer's own trouble: an error that is not a report, or a known message without one.
bool is_tool_error(const std::string& severity, const std::string& body) {
  static const std::regex error(R"(^(Error|Internal Sanitizer Error)$)", std::regex::icase);
  static const std::regex message(
      R"(^(Target application terminated before|No attachable process|Unable to |Could not |Failed to |Sanitizer ))");
  return std::regex_match(severity, error) || std::regex_search(body, message);
}

}  // namespace

std::string SanitizerFinding::where() const {
  if (function.empty()) return {};
  if (file.empty()) return "in " + function + " (no line information)";
  return fmt::format("in {} at {}:{}", function, file, line);
}

SanitizerOutput parse_sanitizer_output(std::string_view text) {
  static const std::regex summary(R"(^(\w+) SUMMARY:\s*(\d+)?)");  // ERROR, RACECHECK, LEAK
  static const std::regex racecheck_totals(R"(\((\d+) errors?, (\d+) warnings?\))");
  static const std::regex skipped(
      R"(^(\d+) errors? (?:was|were) skipped \(error buffer overflow\))");
  SanitizerOutput out;
  SanitizerFinding* open = nullptr;  // the report the indented lines belong to
  std::istringstream in{std::string(text)};
  for (std::string raw; std::getline(in, raw);) {
    std::string_view rest = raw;
    bool prefixed = false;
    if (rest.rfind("=========", 0) == 0) rest.remove_prefix(9), prefixed = true;
    const std::string content = trim(rest);
    if (content.empty()) {
      open = nullptr;
      continue;
    }
    const std::size_t indent = rest.find_first_not_of(' ');
    const bool top_level = prefixed ? indent <= 1 : indent == 0;
    if (!top_level) {
      if (open) open->details.push_back(content);
      continue;
    }
    open = nullptr;
    std::smatch m;
    if (content == "COMPUTE-SANITIZER" || content == "CUDA-MEMCHECK") continue;
    if (std::regex_search(content, m, skipped)) {
      out.skipped_count = out.skipped_count.value_or(0) + std::stol(m.str(1));
      continue;
    }
    if (std::regex_search(content, m, summary)) {
      // "ERROR SUMMARY: 96 errors were not printed ..." follows the count past --print-limit.
      if (content.find("not printed") != std::string::npos) continue;
      if (m[2].matched && m.str(1) == "ERROR") out.error_count = std::stol(m.str(2));
      if (m[2].matched && m.str(1) == "RACECHECK") {
        std::smatch totals;  // past --print-limit, more were found than displayed
        out.hazard_count = std::regex_search(content, totals, racecheck_totals)
                               ? std::stol(totals.str(1)) + std::stol(totals.str(2))
                               : std::stol(m.str(2));
      }
      continue;
    }
    std::string severity;
    const std::string body = strip_severity(content, &severity);
    if (is_report(body)) {
      out.findings.push_back({content, {}, {}, 0, {}});
      open = &out.findings.back();
    } else if (is_unsupported_program(body)) {
      out.unsupported.push_back(content);
    } else if (is_tool_error(severity, body)) {
      out.tool_errors.push_back(content);
    } else {
      out.unrecognised.push_back(content);
    }
  }
  // Locations: a race report carries its first one in its own line; the others in an "at" detail.
  for (auto& f : out.findings) {
    if (const auto at = f.what.find(" access at "); at != std::string::npos) {
      parse_location(f.what.substr(at + 11), f);
      f.what.erase(at + 7);  // "... between Write access"
      if (!f.details.empty() && f.details.front().rfind("and ", 0) == 0)
        f.what += " " + f.details.front().substr(0, f.details.front().find(" at "));  // "and Read access"
      continue;
    }
    for (const auto& d : f.details) {
      const auto at = d.rfind("at ", 0) == 0 ? 0 : d.find(" at ");
      if (at == std::string::npos) continue;
      if (parse_location(d.substr(at == 0 ? 3 : at + 4), f)) break;
    }
  }
  return out;
}

std::string refusal_reason(const SanitizerOutput& output) {
  static const std::regex refusal(
      R"(not supported|unsupported|not available|not enabled|cannot be used|no longer supported|unknown tool|invalid value)",
      std::regex::icase);
  for (const auto& line : output.tool_errors)
    if (std::regex_search(line, refusal)) return line;
  if (!output.unsupported.empty()) return output.unsupported.front();
  for (const auto& line : output.unrecognised) {  // a refusal printed without "Error:", not a warning
    std::string severity;
    strip_severity(line, &severity);
    if (severity.empty() && std::regex_search(line, refusal)) return line;
  }
  return {};
}

const char* to_string(SanitizeVerdict verdict) {
  switch (verdict) {
    case SanitizeVerdict::clean:
      return "clean";
    case SanitizeVerdict::found:
      return "found";
    case SanitizeVerdict::library:
      return "library";
    case SanitizeVerdict::refused:
      return "refused";
    case SanitizeVerdict::failed:
      return "failed";
    case SanitizeVerdict::skipped:
      return "skipped";
  }
  return "?";
}

SanitizeResult judge(const SanitizeEvidence& e) {
  SanitizeResult r;
  const SanitizerOutput& o = e.output;
  // The summary counts each unsupported-program warning as an error (or a hazard), and the
  // sanitizer's internal errors too: racecheck's "Internal Sanitizer Error: The Sanitizer failed
  // to handle a hardware exception." came with "1 hazard displayed (1 error, 0 warnings)" and no
  // report. Neither is a finding. Only those are forgiven, each distinct line once (the log and
  // the console may both carry it), and none when a line was left unread: a plain "Error: ..." in
  // a shape this parser does not know may be a report, and its count stands.
  std::vector<std::string> internal;
  for (const auto& line : o.tool_errors)
    if (line.rfind("Internal Sanitizer Error", 0) == 0 &&
        std::find(internal.begin(), internal.end(), line) == internal.end())
      internal.push_back(line);
  const long excused = static_cast<long>(o.unsupported.size()) +
                       (o.unrecognised.empty() ? static_cast<long>(internal.size()) : 0L);
  auto beyond_excused = [&](const std::optional<long>& count) -> std::optional<long> {
    if (!count) return std::nullopt;
    return std::max<long>(*count - excused, 0);
  };
  const std::optional<long> error_count = beyond_excused(o.error_count);
  const std::optional<long> hazard_count = beyond_excused(o.hazard_count);
  r.errors = error_count.value_or(hazard_count.value_or(static_cast<long>(o.findings.size())));
  r.skipped = o.skipped_count.value_or(0);
  auto verdict = [&](SanitizeVerdict v, std::string reason) {
    r.verdict = v;
    r.reason = std::move(reason);
    return r;
  };
  if (!e.started) return verdict(SanitizeVerdict::failed, "compute-sanitizer " + e.how);
  const bool exited = !e.signaled;
  const std::string unchecked =
      o.unsupported.empty() ? std::string() : "device code not checked: " + o.unsupported.front();
  // Every error counted is displayed and in library code: not a finding against the example. The
  // run is then judged as if clean (a timeout, a failed case, a crash still fail it), and what
  // would be `clean` is `library`.
  bool library_only = false;
  if (!o.findings.empty()) {
    r.finding = o.findings.front();
    r.errors = std::max<long>(r.errors, static_cast<long>(o.findings.size()));
    const bool shown_in_libraries = std::all_of(o.findings.begin(), o.findings.end(),
                                                [](const SanitizerFinding& f) { return f.in_library_code(); });
    const long shown = static_cast<long>(o.findings.size());
    library_only = shown_in_libraries && r.errors <= shown && r.skipped == 0;
    if (!library_only) {  // shown only in libraries, the rest may be anyone's: say how to see them
      if (!shown_in_libraries) return verdict(SanitizeVerdict::found, unchecked);
      std::string unseen;
      if (r.errors > shown)
        unseen =
            fmt::format("{} more were not printed (`bench sanitize --print-limit {}` prints them)",
                        r.errors - shown, std::max<long>(1000, r.errors));
      if (r.skipped > 0)
        unseen +=
            fmt::format("{}{} the tool dropped unseen", unseen.empty() ? "" : "; ", r.skipped);
      return verdict(
          SanitizeVerdict::found,
          fmt::format("the {} shown are in library code (no line information); {}", shown, unseen));
    }
  }
  // Counted or signalled by the exit code, but printed in a form this parser does not know:
  // still a finding, named by the first line it did not recognise. After an unsupported-program
  // warning or an internal error the exit code says nothing (they count): the summary's counts
  // decide, and counting no more than those leaves the run to be judged below (refused, skipped or
  // failed; without a summary line the exit code decides).
  const bool exit_says_found = exited && e.error_exit_code != 0 && e.exit_code == e.error_exit_code &&
                               (excused == 0 || (!error_count && !hazard_count));
  if (!library_only && (exit_says_found || error_count.value_or(0) > 0 || hazard_count.value_or(0) > 0)) {
    SanitizerFinding f;
    f.what = !o.unrecognised.empty() ? o.unrecognised.front()
             : e.log_written ? std::string("compute-sanitizer reported errors; the log says what")
                             : std::string(
                                   "compute-sanitizer reported errors, and wrote no log where "
                                   "--log-file asked");
    r.finding = f;
    r.errors = std::max<long>(r.errors, 1);
    return verdict(SanitizeVerdict::found, unchecked);
  }
  // Killed: what it printed before found nothing, and nothing after the kill can be trusted.
  if (e.timed_out)
    return verdict(SanitizeVerdict::failed,
                   fmt::format("did not finish in {:g} s and was killed: a hang under this tool, or a run slower "
                               "than the limit (--timeout)",
                               e.timeout_s));
  if (auto why = refusal_reason(o); !why.empty()) return verdict(SanitizeVerdict::refused, why);
  if (exited && e.exit_code == kNoDeviceExitCode) return verdict(SanitizeVerdict::skipped, "no CUDA device");
  if (!o.tool_errors.empty()) return verdict(SanitizeVerdict::failed, "compute-sanitizer: " + o.tool_errors.front());
  if (!e.failed_cases.empty())
    return verdict(
        SanitizeVerdict::failed,
        fmt::format("{} failed: {}", e.failed_cases.front().first, e.failed_cases.front().second));
  const bool exit_ok = exited && (e.exit_code == 0 || (library_only && e.exit_code == e.error_exit_code));
  if (!exit_ok)
    return verdict(SanitizeVerdict::failed, e.how + (e.stderr_tail.empty() ? "" : ": " + e.stderr_tail));
  // Nothing above read a report, but a run is clean only if its log was read whole: the tool ends
  // every log with its summary line. No log (written elsewhere, or never opened) or no summary
  // (cut short) leaves nothing checked that could be read.
  if (!e.log_written)
    return verdict(SanitizeVerdict::failed,
                   "compute-sanitizer wrote no log where --log-file asked");
  if (!o.error_count && !o.hazard_count)
    return verdict(SanitizeVerdict::failed,
                   "compute-sanitizer's log has no summary line: cut short?");
  // A sanitizer that exits 0 without running the program would pass everything: every case must
  // have reported.
  std::vector<std::string> missing;
  for (const auto& name : e.expected_cases) {
    auto is = [&](const auto& entry) { return entry.first == name; };
    if (std::find(e.verified_cases.begin(), e.verified_cases.end(), name) == e.verified_cases.end() &&
        std::none_of(e.skipped_cases.begin(), e.skipped_cases.end(), is))
      missing.push_back(name);
  }
  if (!missing.empty())
    return verdict(SanitizeVerdict::failed, fmt::format("{} of {} cases never reported (first: {}); the program "
                                                        "did not run them",
                                                        missing.size(), e.expected_cases.size(), missing.front()));
  if (e.verified_cases.empty() && !e.skipped_cases.empty())
    return verdict(SanitizeVerdict::skipped, e.skipped_cases.front().second);
  const SanitizeVerdict clean = library_only ? SanitizeVerdict::library : SanitizeVerdict::clean;
  if (!e.skipped_cases.empty())
    return verdict(clean, fmt::format("{} of {} cases skipped: {}", e.skipped_cases.size(),
                                      e.expected_cases.size(), e.skipped_cases.front().second));
  return verdict(clean, unchecked);
}

std::string describe(const SanitizeResult& r) {
  switch (r.verdict) {
    case SanitizeVerdict::clean:
      return r.reason.empty() ? "clean" : "clean (" + r.reason + ")";
    case SanitizeVerdict::found:
    case SanitizeVerdict::library: {
      std::string line = (r.verdict == SanitizeVerdict::found ? "FOUND " : "in library code only: ") + r.finding->what;
      if (const std::string where = r.finding->where(); !where.empty()) line += " " + where;
      if (r.errors > 1) line += fmt::format(" ({} errors)", r.errors);
      if (r.skipped > 0)
        line += fmt::format(" and {} more the tool found but dropped (its error buffer overflowed)",
                            r.skipped);
      return line;
    }
    case SanitizeVerdict::refused:
      return "refused: " + r.reason;
    case SanitizeVerdict::failed:
      return "FAILED: " + r.reason;
    case SanitizeVerdict::skipped:
      return "skipped: " + r.reason;
  }
  return "?";
}

}  // namespace bench::tools
