// tools/sanitize_output.hpp: reading compute-sanitizer's text output (`bench sanitize`), and the
// verdict on one example under one tool. Pure functions of text, so the CPU tests cover them on
// canned output (tests/tools/sanitize_output_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench::tools {

// The tools `bench sanitize` runs, in order.
inline const std::vector<std::string> kSanitizerTools = {"memcheck", "racecheck", "synccheck", "initcheck"};

// One error or hazard report: its first line and where it happened.
struct SanitizerFinding {
  std::string
      what;  // "Invalid __global__ read of size 4 bytes", "Error: Race reported between Write access and Read access"
  std::string function;  // the device function from the "at" line, as printed (kernel name and parameters); empty for a
                         // host API error
  std::string file;      // source file of the "at" line (needs -lineinfo); empty when not known
  int line = 0;
  std::vector<std::string> details;  // the indented lines under the report ("by thread ...", "Address ...")
  // "in kernel(...) at file.cu:12", "in kernel(...) (no line information)", or "" for a host API error.
  std::string where() const;
  // In device code with no line information. Everything this tree compiles has -lineinfo
  // (cmake/BenchChapter.cmake), so that is code it did not compile: a prebuilt library's kernel
  // (cuBLASLt's nvjet_*, cuDNN's, NCCL's).
  bool in_library_code() const { return !function.empty() && file.empty(); }
};

// What one compute-sanitizer run printed.
struct SanitizerOutput {
  std::vector<SanitizerFinding> findings;  // in the order printed (at most --print-limit of them)
  std::optional<long> error_count;         // "ERROR SUMMARY: N errors"
  // "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)": E + W, every hazard the tool
  // found; only the first --print-limit of them are displayed (and parsed into findings).
  std::optional<long> hazard_count;
  // "N errors were skipped (error buffer overflow).": reports the tool found but dropped, past the
  // records it keeps per launch. Not in error_count, which counts instead one "Error buffer
  // overflow" warning per launch that overflowed (ch15's moe_dispatch under initcheck: 1,028
  // counted, 615,424 skipped).
  std::optional<long> skipped_count;
  std::vector<std::string> tool_errors;    // the sanitizer's own errors ("Error: Device not supported")
  // Warnings that the tool cannot check this program ("Warning: CUDA Dynamic Parallelism is not
  // supported by the selected tool": racecheck, synccheck and initcheck on a binary built for
  // dynamic parallelism). The program still runs, its device code unchecked, and the tool counts
  // each such warning in its summary as one error (racecheck: one hazard, a warning).
  std::vector<std::string> unsupported;
  std::vector<std::string> unrecognised;   // other top-level lines (notes, warnings the parser does not know)
};

// Parses compute-sanitizer text: its log file, or console lines carrying its "=========" prefix.
// Lines without the prefix are read too (a log written with --prefix ""), top-level when they are
// not indented.
SanitizerOutput parse_sanitizer_output(std::string_view text);

// Why the sanitizer refused to run this tool here ("Error: Device not supported"), or "" when it
// did not refuse: a tool error naming something unsupported or unavailable, or a warning that
// the tool does not support the program (SanitizerOutput::unsupported).
std::string refusal_reason(const SanitizerOutput& output);

// library: every error the tool counted is displayed, and every one is in library code (no line
// information): reported, but not a finding against the example's own kernels.
enum class SanitizeVerdict { clean, found, library, refused, failed, skipped };
const char* to_string(SanitizeVerdict verdict);  // "clean", "found", "library", "refused", "failed", "skipped"

// What is known about one sanitizer process that ran one example's cases with --bench_verify_only.
struct SanitizeEvidence {
  SanitizerOutput output;  // parsed from its log and the prefixed lines of its console
  bool started = true;     // false: compute-sanitizer could not be executed
  bool signaled = false;
  bool timed_out = false;                   // killed when its time limit (timeout_s) ran out
  double timeout_s = 0;
  int exit_code = 0;                        // compute-sanitizer's exit code (the program's, unless errors were found)
  int error_exit_code = 0;                  // what --error-exitcode was set to
  std::string how;                          // "exit code 3", "killed by signal 9 (Killed)"
  std::string stderr_tail;                  // the last lines of its console
  // Its --log-file exists: a run that wrote none checked nothing that could be read.
  bool log_written = true;
  std::vector<std::string> expected_cases;  // the cases the example registers
  std::vector<std::string> verified_cases;  // reported without error (verification passed)
  std::vector<std::pair<std::string, std::string>> failed_cases;   // case, message
  std::vector<std::pair<std::string, std::string>> skipped_cases;  // case, reason
};

struct SanitizeResult {
  SanitizeVerdict verdict = SanitizeVerdict::clean;
  std::optional<SanitizerFinding> finding;  // the first, when verdict is found
  long errors = 0;                          // how many the sanitizer counted (0 when unknown)
  long skipped = 0;    // and dropped uncounted (SanitizerOutput::skipped_count)
  std::string reason;  // refused, failed or skipped: why; clean: what was not run; found: what was not checked
};

inline constexpr int kNoDeviceExitCode = 77;  // the harness's "SKIPPED: no CUDA device" exit

// The verdict: found beats everything (a finding often fails the case that hit it); then refused,
// then the sanitizer's own errors and the program's failures; then skipped when every case was.
// An unsupported-program warning is a refusal, not a finding, though the tool counts it as an
// error: what else it reported (initcheck still checks host API copies) is still found. The
// sanitizer's internal error ("Internal Sanitizer Error: ...") is not a finding either, though the
// summary counts it: a run that displayed no report, left no line unread and counted no more than
// its internal errors is refused, skipped or failed. Clean needs the log, ending in its summary.
SanitizeResult judge(const SanitizeEvidence& evidence);

// One line for the console: "clean", "FOUND Invalid __global__ read ... in k(...) at f.cu:3 (4 errors)".
std::string describe(const SanitizeResult& result);

}  // namespace bench::tools
