// tools/commands.hpp: one function per `bench` subcommand, each returning the process exit
// code (0 fine, 1 something failed or regressed, 2 bad usage or bad input files). cli.cpp
// parses the command line into these option structs.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace bench::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

struct Locations {
  std::string build_dir;          // empty: the build this bench executable belongs to
  std::string expectations_dir;   // empty: <source dir>/expectations
};

// Which points of the examples' axes (docs/writing-an-example.md, "Axes"): each example's
// default points, every point with --sweep; --axis NAME=V[,V] (repeatable) keeps the points
// whose axis NAME has one of the values and leaves out examples without that axis.
struct PointOptions {
  std::vector<std::string> axes;  // "NAME=V[,V]", one per --axis
  bool sweep = false;
};

struct ListOptions {
  Locations where;
  std::string chapter;
  PointOptions points;
};
int list_command(const ListOptions& options, std::ostream& out, std::ostream& err);

struct RunOptions {
  Locations where;
  std::string chapter, variant;
  std::vector<std::string> examples;      // --example a,b: "name" or "chNN/name"; empty: all
  std::vector<std::string> harness_args;  // after "--", passed to the chapter binary
  PointOptions points;
};
int run_command(const RunOptions& options, std::ostream& out, std::ostream& err);

struct CompareOptions {
  Locations where;
  std::vector<std::string> chapters;
  bool all = false;
  std::vector<std::string> examples;  // --example a,b: "name" or "chNN/name"; empty: all
  std::string json_report, markdown_report;
  std::string html_report, svg_roofline;  // --html FILE (self-contained page), --svg FILE (the roofline)
  std::string from_results, save_results;
  bool update_expectations = false;
  bool add_machine = false;  // --add-machine: append this machine to host-dependent entries
  std::vector<std::string> record_outcomes;  // --record-outcome a,b: NO_SPEEDUP/SKIPPED written as expected
  int repetitions = 1;  // each example run this often, each time in a fresh process; samples pooled
  std::vector<std::string> harness_args;
  std::string command_line;  // for provenance
  PointOptions points;
};
int compare_command(const CompareOptions& options, std::ostream& out, std::ostream& err);

// `bench report FILE.json... --html OUT [--svg OUT]`: saved results, no GPU needed.
struct ReportOptions {
  Locations where;
  std::vector<std::string> files;
  std::string html, svg;
};
int report_command(const ReportOptions& options, std::ostream& out, std::ostream& err);

struct ExpectationsOptions {
  Locations where;
  std::string action;  // show | diff | validate
  std::vector<std::string> files;
};
int expectations_command(const ExpectationsOptions& options, std::ostream& out, std::ostream& err);

int env_command(const Locations& where, std::ostream& out, std::ostream& err);

struct ProfileOptions {
  Locations where;
  std::string case_name;                // chNN/<example>/<variant>
  std::string tool = "ncu";  // ncu | nsys (BENCH_NCU / BENCH_NSYS override the path) | timeline
  std::string set;                      // ncu section set; empty: "full"
  std::string output;  // report path; empty: <build>/reports/profile/<case>[.timeline.json]
  std::vector<std::string> tool_args;   // after "--", passed to the tool before the binary
};
int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err);

struct SanitizeOptions {
  Locations where;
  std::vector<std::string> chapters;
  bool all = false;
  std::vector<std::string> examples;         // --example a,b: "name" or "chNN/name"; empty: all
  std::vector<std::string> tools;            // empty: memcheck, racecheck, synccheck, initcheck
  // --variant a,b: only the cases of these variants, by the case name's variant (baseline,
  // optimized, or a step's or vendor's own name) or by the rung a role-named case runs
  // (`bench list` shows both); empty: every case
  std::vector<std::string> variants;
  PointOptions points;      // which axis points; each point is a process of its own
  std::string reports_dir;  // sanitize.json, sanitize.md and logs/ (empty: <build>/reports/sanitize)
  std::vector<std::string> sanitizer_args;   // after "--", passed to compute-sanitizer before the program
  // Each sanitizer process's limit: a hang under one tool (or a run far slower than the rest) is
  // killed and reported, and the other runs still happen. The longest clean run measured so far
  // (docs/sanitize.md) is far under the default.
  double timeout_s = 600;
  // How many reports the sanitizer prints (--print-limit): enough that a run whose reports are all
  // in library code can be told apart from one that also has ours (ch10/persistent_gemm's
  // racecheck counted 79 in cuBLASLt's kernels).
  int print_limit = 100;
};
int sanitize_command(const SanitizeOptions& options, std::ostream& out, std::ostream& err);

// Shared by the commands.
std::string resolve_build_dir(const Locations& where);
std::string resolve_expectations_dir(const Locations& where);
// True when a CUDA device is present, or BENCH_ASSUME_GPU=1 is set (tests only: it lets the
// fake chapter binary be driven on a machine with no GPU). `why` gets the reason otherwise.
bool gpu_available(std::string* why);
// Why `chapter` (already of the form chNN) has no binary in `build_dir`: not a chapter of the
// suite (no chapters/chNN in the source tree; the message lists those there), or not built
// (with its NOT_BUILT reason when its CMakeLists wrote one).
std::string no_such_chapter(const std::string& chapter, const std::filesystem::path& build_dir);

}  // namespace bench::tools
