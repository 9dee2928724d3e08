#include "options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>

namespace bench::detail {

Options& options() {
  static Options o;
  return o;
}

uint64_t process_seed() {
  static const uint64_t seed = [] {
    if (options().seed) return *options().seed;
    std::random_device entropy;
    return (uint64_t{entropy()} << 32) ^ entropy();
  }();
  return seed;
}

bool under_cuda_tool(std::string* what) {
  // Nsight Compute, Nsight Systems and compute-sanitizer load their collectors through the CUDA
  // injection hook or a preload, and name themselves in the environment they start us with.
  // Seen under ncu 2025.3.1: NV_COMPUTE_PROFILER_PERFWORKS_DIR.
  for (const char* name : {"CUDA_INJECTION64_PATH", "NV_COMPUTE_PROFILER_PERFWORKS_DIR", "NSYS_PROFILING_SESSION_ID"})
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      if (what) *what = fmt::format("{}={}", name, value);
      return true;
    }
  // compute-sanitizer 2025.3 sets none of those (H100, CUDA 13.0), but puts its own folder first
  // on the library path of the process it starts; Nsight Compute does the same with its own.
  for (const char* name : {"LD_PRELOAD", "LD_LIBRARY_PATH"})
    if (const char* paths = std::getenv(name))
      for (const char* tool : {"compute-sanitizer", "nsight-compute", "nsight-systems", "nsys"})
        if (std::strstr(paths, tool) != nullptr) {
          if (what) *what = fmt::format("{} names {}", name, tool);
          return true;
        }
  return false;
}

double case_time_limit_s() {
  const Options& o = options();
  if (o.case_timeout_s) return *o.case_timeout_s;
  if (under_cuda_tool()) return 0;
  return o.smoke ? 60 : 300;
}

std::string options_help() {
  return fmt::format(
      "cudabench harness flags:\n"
      "  --bench_min_samples=N     fewest kept samples per case (default 20)\n"
      "  --bench_min_time=S        fewest seconds of measured time per case (default 0.05)\n"
      "  --bench_max_noise=F       stop once relative noise (1.4826 MAD/median) <= F (0.01)\n"
      "  --bench_timeout=S         stop sampling a case after S seconds of wall time (3)\n"
      "  --bench_mode=cold|hot|sustained  override every example's sampling mode\n"
      "  --bench_seed=N            fix the process's input seed (default: a fresh random one);\n"
      "                            each variant and each sample still draws its own inputs\n"
      "  --bench_samples_out=DIR   write each case's raw samples to DIR/<case>.json\n"
      "  --bench_progress=FILE     append \"start <case>\" and \"end <case>\" to FILE as cases "
      "run\n"
      "                            (bench compare names the case an interruption stopped)\n"
      "  --bench_expectations_dir=DIR  where <hardware_key>.json ceilings are read from\n"
      "  --bench_smoke             a quick run: few samples, no soak, every check made\n"
      "  --bench_profile           verify and warm up, then ONE untimed launch between\n"
      "                            cudaProfilerStart/Stop for ncu or nsys (bench profile)\n"
      "  --bench_timeline=PATH     verify and warm up, then trace {} untimed calls through\n"
      "                            CUPTI and write their kernels, copies and memsets to PATH\n"
      "                            as JSON (bench profile --tool timeline)\n"
      "  --bench_verify_only       only the two checked runs at the verification size, then\n"
      "                            report the case verified, untimed (bench sanitize)\n"
      "  --bench_list_variants     print each case's name, role and the variant's own name\n"
      "                            (the rung an .../optimized case runs), run nothing\n"
      "  --bench_interleaved_checks  sustained mode: device-check each drawn sample right\n"
      "                            after it, not after sampling ends (an A/B of the gaps)\n"
      "  --bench_sustained_window=S  sustained mode: sample exactly S seconds of board time,\n"
      "                            whatever the noise (default: stop at 1% noise after 1 s,\n"
      "                            or at the timeout)\n"
      "  --bench_sustained_soak=S  sustained mode: soak S seconds before sampling (default 1)\n"
      "  --bench_sweep             every point of each example's axes, not only its defaults\n"
      "  --bench_axis=NAME=V[,V]   only points whose axis NAME is one of the values (repeat\n"
      "                            for more axes; a value no default point has is taken with\n"
      "                            the other axes at their defaults); examples without that\n"
      "                            axis are left out\n"
      "  --bench_case_timeout=S    end the process, naming the case, when one case runs longer\n"
      "                            than S seconds (a hung kernel); 0: no limit (default 300,\n"
      "                            60 with --bench_smoke, none under a profiler or sanitizer)\n",
      kTimelineCalls);
}

namespace {
bool parse_double(std::string_view text, double* out) {
  std::string s(text);
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}
}  // namespace

std::string parse_options(int* argc, char** argv) {
  Options& o = options();
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.rfind("--bench_", 0) != 0) {
      argv[kept++] = argv[i];
      continue;
    }
    const auto eq = arg.find('=');
    const std::string_view key = arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2);
    const std::string_view value = eq == std::string_view::npos ? "" : arg.substr(eq + 1);
    double number = 0;
    auto need_number = [&](double min) -> std::string {
      if (!parse_double(value, &number) || number < min)
        return fmt::format("{}: expected a number >= {}, got '{}'", arg, min, value);
      return {};
    };
    // A number of seconds > 0 (the sustained window and soak: zero would mean no samples, or no
    // soak while claiming one).
    auto need_seconds = [&](std::optional<double>* into) -> std::string {
      std::string why = need_number(0);
      if (why.empty() && number <= 0)
        why = fmt::format("{}: expected a number of seconds > 0", arg);
      if (why.empty()) *into = number;
      return why;
    };
    std::string error;
    if (key == "bench_min_samples") {
      if ((error = need_number(1)).empty()) o.stop.min_samples = static_cast<int>(number);
    } else if (key == "bench_min_time") {
      if ((error = need_number(0)).empty()) o.stop.min_time_s = number;
    } else if (key == "bench_max_noise") {
      if ((error = need_number(0)).empty()) o.stop.max_noise = number;
    } else if (key == "bench_timeout") {
      if ((error = need_number(0)).empty()) o.stop.timeout_s = number;
    } else if (key == "bench_seed") {
      if ((error = need_number(0)).empty()) o.seed = static_cast<uint64_t>(number);
    } else if (key == "bench_mode") {
      if (value == "cold") o.mode = Mode::cold;
      else if (value == "hot") o.mode = Mode::hot;
      else if (value == "sustained") o.mode = Mode::sustained;
      else error = fmt::format("{}: expected cold, hot or sustained", arg);
    } else if (key == "bench_samples_out") {
      o.samples_out = value;
    } else if (key == "bench_progress") {
      o.progress_file = value;
    } else if (key == "bench_expectations_dir") {
      o.expectations_dir = value;
    } else if (key == "bench_smoke") {
      o.smoke = true;
      o.stop.min_samples = 3;
      o.stop.min_time_s = 0;
      o.stop.timeout_s = 0.2;
    } else if (key == "bench_profile") {
      o.profile = true;
    } else if (key == "bench_timeline") {
      if (value.empty()) error = fmt::format("{}: expected --bench_timeline=PATH", arg);
      o.timeline = value;
    } else if (key == "bench_verify_only") {
      o.verify_only = true;
    } else if (key == "bench_list_variants") {
      o.list_variants = true;
    } else if (key == "bench_interleaved_checks") {
      o.interleaved_checks = true;
    } else if (key == "bench_sustained_window") {
      error = need_seconds(&o.sustained_window_s);
    } else if (key == "bench_sustained_soak") {
      error = need_seconds(&o.sustained_soak_s);
    } else if (key == "bench_case_timeout") {
      if ((error = need_number(0)).empty()) o.case_timeout_s = number;
    } else if (key == "bench_sweep") {
      o.points.sweep = true;
    } else if (key == "bench_axis") {  // name=v1,v2 (docs/writing-an-example.md, "Axes")
      const auto assign = value.find('=');
      std::vector<std::string> values;
      for (std::size_t start = assign + 1; assign != value.npos && start <= value.size();) {
        const std::size_t end = std::min(value.find(',', start), value.size());
        values.emplace_back(value.substr(start, end - start));
        start = end + 1;
      }
      if (assign == value.npos || assign == 0 ||
          std::any_of(values.begin(), values.end(), [](const auto& v) { return v.empty(); }))
        error = fmt::format("{}: expected --bench_axis=NAME=VALUE[,VALUE...]", arg);
      else
        o.points.filters.emplace_back(std::string(value.substr(0, assign)), std::move(values));
    } else if (key == "bench_help") {
      error = options_help();
    } else {
      error = fmt::format("unknown flag {}\n{}", arg, options_help());
    }
    if (!error.empty()) return error;
  }
  // Each of the three ends a case at its own point, with its own report: at most one of them.
  if (int(o.profile) + int(o.verify_only) + int(!o.timeline.empty()) > 1)
    return "--bench_profile, --bench_timeline and --bench_verify_only exclude each other";
  *argc = kept;
  argv[kept] = nullptr;
  return {};
}

}  // namespace bench::detail
