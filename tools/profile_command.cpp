// `bench profile <case>`: one case of a chapter binary under Nsight Compute (ncu) or Nsight
// Systems (nsys). The binary runs with --bench_profile: it verifies and warms up as usual, then
// makes exactly one launch of the variant between cudaProfilerStart and cudaProfilerStop, and
// the tool is told to capture only that range. With --tool timeline no tool runs: the binary
// traces a few calls itself through CUPTI (--bench_timeline) and the table of their kernels is
// printed (timeline.hpp). docs/profiling.md has the details.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>

#include "chapter_process.hpp"
#include "commands.hpp"
#include "lookup.hpp"
#include "timeline.hpp"

namespace bench::tools {
namespace {

namespace fs = std::filesystem;

// BENCH_NCU / BENCH_NSYS, else PATH, else the CUDA toolkit's bin/. Empty (and *error) if none.
std::string find_tool(const std::string& tool, std::string* error) {
  const std::string env = tool == "ncu" ? "BENCH_NCU" : "BENCH_NSYS";
  const std::string what = tool == "ncu" ? "Nsight Compute" : "Nsight Systems";
  if (const char* path = std::getenv(env.c_str()); path && *path) {
    if (is_executable(path)) return path;
    *error = fmt::format("{}={} is not an executable file; point it at the {} executable ({})",
                         env, path, tool, what);
    return {};
  }
  std::vector<fs::path> dirs = path_dirs();
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const auto& dir : dirs)
    if (is_executable(dir / tool)) return (dir / tool).string();
  *error = fmt::format(
      "{} ({}) not found on PATH or in /usr/local/cuda/bin: install it (the CUDA toolkit's "
      "nsight-{} component, or NVIDIA's standalone {} package) or set {}=/path/to/{}",
      tool, what, tool == "ncu" ? "compute" : "systems", what, env, tool);
  return {};
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The registered cases closest to a name that is not one of them, nearest first.
std::vector<std::string> near_matches(const std::string& name, const std::vector<std::string>& cases) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  const std::size_t limit = std::max<std::size_t>(3, name.size() / 3);
  for (const auto& c : cases)
    if (const std::size_t d = edit_distance(name, c); d <= limit || example_of(c) == example_of(name))
      scored.emplace_back(d, c);
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 5; ++i) out.push_back(scored[i].second);
  return out;
}

// How a shell would need the argument written, for the printed command line.
std::string shell_quote(const std::string& arg) {
  static const std::regex plain("[A-Za-z0-9_./=:,+@%-]+");
  if (std::regex_match(arg, plain)) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Prints the exact command line, then runs it.
ProcessResult run_printed(const std::vector<std::string>& argv, std::ostream& out) {
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + shell_quote(a);
  out << "bench profile: " << command << "\n" << std::flush;
  return run_process(argv, false);
}

// The chapter binary's arguments that select exactly this case and make its untimed run
// (`mode_flag`: --bench_profile, or --bench_timeline=PATH).
std::vector<std::string> case_args(const fs::path& binary, const std::string& case_name,
                                   bool has_point, const std::string& mode_flag) {
  std::vector<std::string> args = {binary.string(), "--benchmark_filter=^" + case_name + "(/|$)",
                                   mode_flag};
  if (has_point) args.push_back("--bench_sweep");  // the point may not be a default one
  return args;
}

// --tool timeline: the binary traces the case's calls (--bench_timeline) into `output`
// (.timeline.json appended unless it ends in .json), then the table of what they ran.
int timeline_run(const fs::path& binary, const std::string& case_name, bool has_point,
                 const fs::path& output, std::ostream& out, std::ostream& err) {
  const fs::path file =
      output.extension() == ".json" ? output : fs::path(output.string() + ".timeline.json");
  std::error_code ignored;
  fs::remove(file, ignored);  // a file left by an earlier run must not pass for this one's
  const ProcessResult result = run_printed(
      case_args(binary, case_name, has_point, "--bench_timeline=" + file.string()), out);
  if (!result.ok()) {
    err << "bench profile: " << binary.filename().string() << " " << result.describe() << "\n";
    return kExitFailed;
  }
  // The binary exits 0 with the case FAILED or SKIPPED (its output above says why): then no file.
  std::ifstream in(file);
  if (!in) {
    err << "bench profile: the case wrote no " << file.string() << " (its output above says why)\n";
    return kExitFailed;
  }
  try {
    out << timeline_table(nlohmann::json::parse(in)) << "bench profile: timeline " << file.string()
        << "\n";
  } catch (const std::exception& e) {  // nlohmann's parse_error, timeline_table's invalid_argument
    err << "bench profile: " << file.string() << ": " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err) {
  // chNN/<example>/<variant>, then the axis point if the example has axes (any point:
  // --bench_sweep).
  static const std::regex case_pattern("(ch[0-9]{2})/[^/]+/[^/]+(/[^/:]+:[^/:]+)*");
  std::smatch m;
  if (!std::regex_match(options.case_name, m, case_pattern)) {
    err << "bench profile: expected one case like ch07/copy_coalescing/optimized, got '"
        << options.case_name << "' (`bench list` shows the cases)\n";
    return kExitUsage;
  }
  const bool timeline = options.tool == "timeline";
  if (timeline && !options.tool_args.empty()) {
    err << "bench profile: --tool timeline runs no tool, so there is nothing to pass flags to "
           "after --\n";
    return kExitUsage;
  }
  if (options.tool != "ncu" && !options.set.empty()) {
    err << "bench profile: --set is a Nsight Compute section set; it does not apply to --tool "
        << options.tool << "\n";
    return kExitUsage;
  }
  const std::string chapter = m[1];
  const fs::path build_dir = resolve_build_dir(options.where);
  const fs::path binary = chapter_binary(build_dir, chapter);
  if (!fs::is_regular_file(binary)) {
    const auto built = built_chapters(build_dir);
    std::string have;
    for (const auto& c : built) have += " " + c;
    err << "bench profile: " << chapter << " is not built (no " << binary.string() << "; built:"
        << (have.empty() ? " none" : have) << ")\n";
    return kExitUsage;
  }
  std::string list_error;
  const auto cases = list_cases(binary, &list_error, {"--bench_sweep"});
  if (!list_error.empty()) {
    err << "bench profile: " << list_error << "\n";
    return kExitFailed;
  }
  std::string case_name = options.case_name;
  // A role-named case asked for by the rung it runs (ch15/moe_dispatch/cluster_permute/...): the
  // case is named by its role (.../optimized/...), which --bench_list_variants gives.
  if (std::find(cases.begin(), cases.end(), case_name) == cases.end()) {
    const std::string asked = variant_of(case_name);
    const std::string prefix = base_example_of(case_name);  // chNN/<example>
    for (const auto& [name, own] : own_variant_names(binary, {"--bench_sweep"}))
      if (own == asked && own != variant_of(name) && name.rfind(prefix + "/", 0) == 0) {
        std::string by_role = case_name;  // the third component replaced by the role
        const std::size_t from = prefix.size() + 1;
        by_role.replace(from, asked.size(), variant_of(name));
        out << "bench profile: " << case_name << " is " << by_role << "\n";
        case_name = by_role;
        break;
      }
  }
  // A case of an example with axes named without its point: its one default point, if it has one.
  if (std::find(cases.begin(), cases.end(), case_name) == cases.end()) {
    std::vector<std::string> at_defaults;
    for (const auto& c : list_cases(binary, nullptr))
      if (c.rfind(case_name + "/", 0) == 0) at_defaults.push_back(c);
    if (at_defaults.size() == 1) {
      out << "bench profile: " << case_name << " at its default point: " << at_defaults[0] << "\n";
      case_name = at_defaults[0];
    }
  }
  const bool has_point = !point_of(example_of(case_name)).empty();
  if (std::find(cases.begin(), cases.end(), case_name) == cases.end()) {
    err << "bench profile: no case " << case_name << " in " << binary.string() << "\n";
    const auto near = near_matches(case_name, cases);
    if (!near.empty()) {
      err << "did you mean:\n";
      for (const auto& c : near) err << "  " << c << "\n";
    }
    // The example exists but not the variant: perhaps the optimized or baseline side was named by
    // the label its README uses (ch16's wgmma_pingpong), where the case is named by its role.
    const std::string example = example_of(case_name);
    if (std::any_of(cases.begin(), cases.end(), [&](const auto& c) { return example_of(c) == example; }))
      err << "the baseline and optimized sides are named by their role (" << example << "/baseline, "
          << example << "/optimized); a step by its own name\n";
    err << "`bench list --chapter " << chapter << "` lists every case of " << chapter << "\n";
    return kExitUsage;
  }
  std::string tool_error;
  const std::string tool = timeline ? "" : find_tool(options.tool, &tool_error);
  if (!timeline && tool.empty()) {
    err << "bench profile: " << tool_error << "\n";
    return kExitUsage;
  }
  std::string why;
  if (!gpu_available(&why)) {
    err << "bench profile: no CUDA device: " << why << "\n";
    return kExitFailed;
  }

  std::string file = case_name;
  std::replace(file.begin(), file.end(), '/', '.');
  const fs::path output = options.output.empty() ? build_dir / "reports" / "profile" / file
                                                 : fs::path(options.output);
  if (output.has_parent_path()) fs::create_directories(output.parent_path());
  if (timeline) return timeline_run(binary, case_name, has_point, output, out, err);
  std::vector<std::string> argv = {tool};
  if (options.tool == "ncu") {
    // --clock-control none: ncu locks the SM clock to base by default, and this suite never
    // changes GPU clocks. --cache-control all: caches flushed before the profiled kernel.
    argv.insert(argv.end(), {"--profile-from-start", "off", "--clock-control", "none",
                             "--cache-control", "all", "--set",
                             options.set.empty() ? "full" : options.set, "--force-overwrite",
                             "-o", output.string()});
  } else {
    argv.insert(argv.end(), {"profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                             "--trace=cuda,nvtx", "--force-overwrite=true", "-o", output.string()});
  }
  argv.insert(argv.end(), options.tool_args.begin(), options.tool_args.end());
  const std::vector<std::string> selected =
      case_args(binary, case_name, has_point, "--bench_profile");
  argv.insert(argv.end(), selected.begin(), selected.end());

  const ProcessResult result = run_printed(argv, out);
  if (!result.ok()) {
    err << "bench profile: " << options.tool << " " << result.describe() << "\n";
    return kExitFailed;
  }
  const std::string extension = options.tool == "ncu" ? ".ncu-rep" : ".nsys-rep";
  const std::string report = output.extension() == extension ? output.string() : output.string() + extension;
  if (!fs::is_regular_file(report)) {  // e.g. nsys left only a .qdstrm it could not import
    err << "bench profile: " << options.tool << " exited 0 but wrote no " << report
        << " (its output above says why)\n";
    return kExitFailed;
  }
  out << "bench profile: report " << report << "\n"
      << (options.tool == "ncu" ? "  read it: ncu --import " + shell_quote(report) + " --print-summary per-kernel\n"
                                : "  read it: nsys stats --report cuda_gpu_kern_sum " + shell_quote(report) + "\n");
  return kExitOk;
}

}  // namespace bench::tools
