// `bench list` and `bench run`, and the locations and GPU check every command shares.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>

#include "bench/device_info.hpp"
#include "chapter_process.hpp"
#include "commands.hpp"
#include "lookup.hpp"

namespace bench::tools {

std::string resolve_build_dir(const Locations& where) {
  return where.build_dir.empty() ? default_build_dir().string() : where.build_dir;
}

std::string resolve_expectations_dir(const Locations& where) {
  if (!where.expectations_dir.empty()) return where.expectations_dir;
  return (std::filesystem::path(build_info().source_dir) / "expectations").string();
}

bool gpu_available(std::string* why) {
  if (const char* assume = std::getenv("BENCH_ASSUME_GPU"); assume && std::string(assume) == "1")
    return true;
  return cuda_device_count(why) > 0;
}

std::string no_such_chapter(const std::string& chapter, const std::filesystem::path& build_dir) {
  const std::filesystem::path chapters = std::filesystem::path(build_info().source_dir) / "chapters";
  std::error_code ec;
  if (!std::filesystem::is_directory(chapters / chapter, ec)) {
    std::vector<std::string> known;
    for (const auto& entry : std::filesystem::directory_iterator(chapters, ec))
      if (entry.is_directory() && entry.path().filename().string().rfind("ch", 0) == 0)
        known.push_back(entry.path().filename().string());
    std::sort(known.begin(), known.end());
    std::string list;
    for (const auto& name : known) list += (list.empty() ? "" : " ") + name;
    return chapter + " is not a chapter of the suite (" + chapters.string() + " has: " + list + ")";
  }
  std::string why = chapter + " is not built (no " + chapter_binary(build_dir, chapter).string() + ")";
  std::ifstream reason(build_dir / "chapters" / chapter / "NOT_BUILT");
  if (std::string line; reason && std::getline(reason, line)) why += ": " + line;
  return why;
}

int list_command(const ListOptions& options, std::ostream& out, std::ostream& err) {
  const std::filesystem::path build_dir = resolve_build_dir(options.where);
  std::vector<std::string> chapters = built_chapters(build_dir);
  if (!options.chapter.empty()) chapters = {options.chapter};
  // A chapter whose dependency is missing (ch04 without NCCL) is not built; its CMakeLists
  // writes the reason to chapters/<chNN>/NOT_BUILT, shown here instead of its cases.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(build_dir / "chapters", ec)) {
    const std::string name = entry.path().filename().string();
    if (!options.chapter.empty() && name != options.chapter) continue;
    std::ifstream reason(entry.path() / "NOT_BUILT");
    std::string why;
    if (!reason || !std::getline(reason, why)) continue;
    out << fmt::format("{} (not built: {})\n", name, why);
    std::erase(chapters, name);
  }
  if (chapters.empty() && options.chapter.empty()) {
    err << "bench list: no chapter binaries under " << (build_dir / "chapters").string() << "\n";
    return kExitFailed;
  }
  int status = kExitOk;
  for (const auto& chapter : chapters) {
    std::string error;
    const auto binary = chapter_binary(build_dir, chapter);
    const auto points = point_args(options.points.axes, options.points.sweep);
    // Each case with the rung it runs, from one process: a case named by its role shows it,
    // "ch15/moe_dispatch/optimized (cluster_permute)".
    const auto cases = listed_variants(binary, &error, points);
    if (!error.empty()) {
      err << "bench list: " << error << "\n";
      status = kExitFailed;
      continue;
    }
    out << fmt::format("{} ({} cases)\n", chapter, cases.size());
    for (const auto& [name, rung] : cases)
      out << "  " << name << (rung != variant_of(name) ? " (" + rung + ")" : "") << "\n";
  }
  return status;
}

int run_command(const RunOptions& options, std::ostream& out, std::ostream& err) {
  const auto binary = chapter_binary(resolve_build_dir(options.where), options.chapter);
  if (!std::filesystem::is_regular_file(binary)) {
    err << "bench run: " << no_such_chapter(options.chapter, resolve_build_dir(options.where)) << "\n";
    return kExitUsage;
  }
  std::vector<std::string> argv = {binary.string()};
  const auto points = point_args(options.points.axes, options.points.sweep);
  argv.insert(argv.end(), points.begin(), points.end());
  if (!options.examples.empty()) {
    // The names are checked against the binary's own list (as compare does) and the filter is
    // built from the full names they matched: ^(ch07/a|ch07/b)/.
    const auto [examples, cases_of, list_error] =
        chapter_examples(binary, options.examples, points);
    if (!list_error.empty()) {
      err << "bench run: " << list_error << "\n";
      return kExitFailed;
    }
    if (const auto unmatched = unmatched_names(examples, options.examples); !unmatched.empty()) {
      err << "bench run: "
          << no_such_examples(unmatched, {options.chapter}, options.points.axes,
                              options.points.sweep)
          << "\n";
      return kExitUsage;
    }
    if (options.variant.empty()) {
      argv.push_back(fmt::format("--benchmark_filter=^({})/", fmt::join(examples, "|")));
    } else {
      // --variant by the case's name or by the rung a role-named case runs, within each example:
      // ^(ch15/moe_dispatch/optimized|...)(/|$).
      const auto own = own_variant_names(binary, points);
      std::set<std::string> wanted;  // example/variant, as the cases are named
      for (const auto& example : examples)
        for (const auto& name : cases_of.at(example))
          if (variant_of(name) == options.variant || rung_of(own, name) == options.variant)
            wanted.insert(example + "/" + variant_of(name));
      if (wanted.empty()) {
        err << "bench run: no case of the examples selected has the variant " << options.variant
            << " (`bench list --chapter " << options.chapter << "` shows each case's)\n";
        return kExitUsage;
      }
      argv.push_back(fmt::format("--benchmark_filter=^({})(/|$)", fmt::join(wanted, "|")));
    }
  }
  argv.insert(argv.end(), options.harness_args.begin(), options.harness_args.end());
  out << std::flush;
  const ProcessResult result = run_process(argv, false);
  if (!result.ok()) err << "bench run: " << binary.string() << " " << result.describe() << "\n";
  return result.started && !result.signaled ? result.exit_code : kExitFailed;
}

}  // namespace bench::tools
