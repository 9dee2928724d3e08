// `bench sanitize`: every example's verification under compute-sanitizer's memcheck, racecheck,
// synccheck and initcheck, each example and tool in a process of its own (a crash, or a tool that
// destroys the context on the first error, hides nothing else). The chapter binary runs with
// --bench_verify_only: the two checked runs at the verification size and nothing of the timing
// machinery. docs/sanitize.md says how to read the output.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "bench/device_info.hpp"
#include "chapter_process.hpp"
#include "commands.hpp"
#include "lookup.hpp"
#include "results.hpp"
#include "sanitize_output.hpp"

namespace bench::tools {
namespace {

namespace fs = std::filesystem;

// compute-sanitizer's exit code when it found something (a chapter binary never exits with it).
constexpr int kFoundExitCode = 86;

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// BENCH_COMPUTE_SANITIZER, else PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, then the folder of the
// nvcc that built this tree. Empty (and *error) when none has it.
std::string find_sanitizer(std::string* error) {
  if (const char* path = std::getenv("BENCH_COMPUTE_SANITIZER"); path && *path) {
    if (is_executable(path)) return path;
    *error = fmt::format("BENCH_COMPUTE_SANITIZER={} is not an executable file", path);
    return {};
  }
  std::vector<fs::path> dirs = path_dirs();
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(fs::path(home) / "bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  dirs.push_back(fs::path(BENCH_NVCC).parent_path());
  for (const auto& dir : dirs)  // the toolkit keeps the real one in <cuda>/compute-sanitizer/
    for (const fs::path& candidate :
         {dir / "compute-sanitizer", dir / ".." / "compute-sanitizer" / "compute-sanitizer"})
      if (is_executable(candidate)) return fs::weakly_canonical(candidate).string();
  std::string searched;
  for (const auto& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir.string();
  *error = "compute-sanitizer not found (searched PATH, $CUDA_HOME/bin, /usr/local/cuda/bin and the nvcc's folder: " +
           searched + "): install the CUDA toolkit's compute-sanitizer or set BENCH_COMPUTE_SANITIZER=/path/to/it";
  return {};
}

// "compute-sanitizer 2024.1.1 (...)": the last line of its --version, for the header and the report.
std::string sanitizer_version(const std::string& sanitizer) {
  const ProcessResult p = run_process({sanitizer, "--version"}, true);
  const std::string last = tail_lines(p.out, 1);
  return p.ok() && !last.empty() ? last : "version unknown (--version: " + p.describe() + ")";
}

// The sanitizer's lines that reached the console (before or besides its log file).
std::string sanitizer_lines(const std::string& console) {
  std::string out;
  std::istringstream in(console);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("=========", 0) == 0 || line.rfind("Error", 0) == 0 ||
        line.rfind("Internal Sanitizer Error", 0) == 0)
      out += line + "\n";
  return out;
}

// compute-sanitizer expands `%p` (its pid) and `%q{VAR}` in --log-file's argument and reads `%%` as
// a literal `%`: a reports directory whose path holds a `%` would otherwise send the log elsewhere.
std::string log_file_argument(const fs::path& log) {
  std::string escaped;
  for (const char c : log.string()) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  return escaped;
}

struct Run {
  std::string example, tool;
  SanitizeResult result;
  std::vector<std::string> notes;  // lines of the sanitizer's that are neither reports nor errors
  std::vector<std::string> command;
  fs::path log;
  double seconds = 0;
};

// What one sanitizer process checks: an example, or one point of an example with axes
// ("ch20/transformer_decode/batch:1"), and the cases listed there. A point is a process of its own,
// so a slow example's points each get the whole --timeout and a line of their own.
struct Unit {
  std::string key;                      // the example, or its point key
  std::string example;                  // the --benchmark_filter's example
  std::vector<std::string> point_args;  // the chapter binary's flags that select exactly this point
  std::vector<std::string> cases;
};

std::vector<Unit> units_of(const std::string& example, const std::vector<std::string>& cases) {
  std::vector<Unit> units;
  for (const auto& name : cases) {
    const std::string key = example_of(name);
    auto unit =
        std::find_if(units.begin(), units.end(), [&](const Unit& u) { return u.key == key; });
    if (unit == units.end()) {
      Unit u{key, example, {}, {}};
      std::vector<std::string> filters;  // NAME=VALUE for each of the point's axes
      for (const auto& [axis, value] : axes_of(point_of(key)))
        filters.push_back(axis + "=" + value);
      // Swept, since the point may not be a default one; its filters leave only it.
      if (!filters.empty()) u.point_args = point_args(filters, /*sweep=*/true);
      units.push_back(std::move(u));
      unit = units.end() - 1;
    }
    unit->cases.push_back(name);
  }
  return units;
}

Run sanitize_one(const std::string& sanitizer, const std::string& tool, const fs::path& binary,
                 const Unit& unit, const SanitizeOptions& options, const fs::path& logs) {
  Run run{unit.key, tool, {}, {}, {}, {}, 0};
  std::string stem = unit.key + "." + tool;  // ch20.transformer_decode.batch-1.racecheck
  std::replace(stem.begin(), stem.end(), '/', '.');
  std::replace(stem.begin(), stem.end(), ':', '-');
  run.log = logs / (stem + ".log");
  const fs::path results = logs / (stem + ".json");
  fs::remove(run.log), fs::remove(results);
  // No kernel-name filter: under racecheck any filter broke ch15 and ch20 on compute-sanitizer
  // 2025.3.1 (docs/sanitize.md), so every tool checks every kernel, the libraries' too.
  run.command = {sanitizer,
                 "--tool",
                 tool,
                 "--log-file",
                 log_file_argument(run.log),
                 "--print-limit",
                 std::to_string(options.print_limit),
                 "--show-backtrace",
                 "no",
                 "--check-exit-code",
                 "no",
                 "--error-exitcode",
                 std::to_string(kFoundExitCode)};
  run.command.insert(run.command.end(), options.sanitizer_args.begin(), options.sanitizer_args.end());
  std::string filter = "--benchmark_filter=^" + unit.example + "/";
  if (!options.variants.empty()) {  // the variants of the unit's cases, as the cases are named
    std::vector<std::string> variants;
    for (const auto& name : unit.cases)
      if (const std::string v = variant_of(name);
          std::find(variants.begin(), variants.end(), v) == variants.end())
        variants.push_back(v);
    filter += fmt::format("({})(/|$)", fmt::join(variants, "|"));
  }
  run.command.insert(run.command.end(), {binary.string(), filter});
  run.command.insert(run.command.end(), unit.point_args.begin(), unit.point_args.end());
  run.command.insert(run.command.end(), {"--benchmark_out=" + results.string(),
                                         "--benchmark_out_format=json", "--bench_verify_only"});
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult p = run_process(run.command, true, options.timeout_s);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  SanitizeEvidence e;
  e.started = p.started, e.signaled = p.signaled, e.exit_code = p.exit_code, e.how = p.describe();
  e.timed_out = p.timed_out, e.timeout_s = options.timeout_s;
  e.error_exit_code = kFoundExitCode;
  e.stderr_tail = tail_lines(p.err, 2);
  e.log_written = fs::exists(run.log);
  e.output = parse_sanitizer_output(read_text(run.log) + "\n" + sanitizer_lines(p.out) + sanitizer_lines(p.err));
  e.expected_cases = unit.cases;
  try {
    ResultsFile file;
    merge_run(file, json::parse(null_non_finite(read_text(results))), logs / "no-samples");
    for (const auto& c : extract_cases(file, RowsWanted::verify_only)) {
      if (c.outcome == Outcome::failed)
        e.failed_cases.emplace_back(c.name, c.message);
      else if (c.outcome == Outcome::skipped)
        e.skipped_cases.emplace_back(c.name, c.message);
      else if (c.verified)
        e.verified_cases.push_back(c.name);
      else
        e.failed_cases.emplace_back(c.name, "reported without verification");
    }
  } catch (const json::exception&) {
    // No or half a results file: the process died, and judge() says so.
  }
  run.result = judge(e);
  run.notes = e.output.unrecognised;
  // Paths under the source tree read better relative to it.
  if (run.result.finding) {
    std::string& file = run.result.finding->file;
    const std::string source = build_info().source_dir + "/";
    if (file.rfind(source, 0) == 0) file.erase(0, source.size());
  }
  return run;
}

json report_json(const std::string& sanitizer, const std::string& version,
                 const std::vector<std::string>& tools, const std::vector<Run>& runs,
                 int exit_code) {
  json j = {{"format", "cudabench-sanitize-1"},
            {"sanitizer", sanitizer},
            {"sanitizer_version", version},
            {"tools", tools},
            {"runs", json::array()},
            {"exit_code", exit_code}};
  for (const auto& run : runs) {
    json r = {{"example", run.example},
              {"tool", run.tool},
              {"verdict", to_string(run.result.verdict)},
              {"reason", run.result.reason},
              {"errors", run.result.errors},
              {"skipped_by_tool", run.result.skipped},
              {"seconds", run.seconds},
              {"log", run.log.string()},
              {"notes", run.notes},
              {"command", run.command}};
    if (const auto& f = run.result.finding)
      r["finding"] = {
          {"what", f->what}, {"function", f->function}, {"file", f->file}, {"line", f->line}, {"details", f->details}};
    j["runs"].push_back(r);
  }
  return j;
}

std::string report_markdown(const std::vector<std::string>& tools, const std::vector<Run>& runs) {
  std::vector<std::string> examples;
  std::map<std::pair<std::string, std::string>, const Run*> cell;
  for (const auto& run : runs) {
    if (std::find(examples.begin(), examples.end(), run.example) == examples.end()) examples.push_back(run.example);
    cell[{run.example, run.tool}] = &run;
  }
  std::string md = "# bench sanitize\n\n| example |";
  for (const auto& tool : tools) md += " " + tool + " |";
  md += "\n| --- |";
  for (std::size_t i = 0; i < tools.size(); ++i) md += " --- |";
  md += "\n";
  for (const auto& example : examples) {
    md += "| " + example + " |";
    for (const auto& tool : tools) {
      const auto it = cell.find({example, tool});
      md += " " + (it == cell.end() ? std::string("-") : std::string(to_string(it->second->result.verdict))) + " |";
    }
    md += "\n";
  }
  md += "\n";
  for (const auto& run : runs)
    if (run.result.verdict != SanitizeVerdict::clean)
      md +=
          fmt::format("- **{} / {}**: {} (log: `{}`)\n", run.example, run.tool, describe(run.result), run.log.string());
  return md;
}

void write_text(const fs::path& file, const std::string& text) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error(file.string() + ": cannot be written");
}

}  // namespace

int sanitize_command(const SanitizeOptions& options, std::ostream& out, std::ostream& err) {
  const fs::path build_dir = resolve_build_dir(options.where);
  const std::vector<std::string> chapters = options.all ? built_chapters(build_dir) : options.chapters;
  if (chapters.empty()) {
    err << "bench sanitize: say what to check: --chapter chNN or --all (no chapter binaries under "
        << (build_dir / "chapters").string() << ")\n";
    return kExitUsage;
  }
  // Every chapter is listed first, so that a misspelt --example is refused before anything runs.
  std::vector<ChapterExamples> listed;
  std::vector<std::string> selected;
  const std::vector<std::string> points = point_args(options.points.axes, options.points.sweep);
  for (const auto& chapter : chapters) {
    if (!fs::is_regular_file(chapter_binary(build_dir, chapter))) {
      err << "bench sanitize: " << no_such_chapter(chapter, build_dir) << "\n";
      return kExitUsage;
    }
    listed.push_back(
        chapter_examples(chapter_binary(build_dir, chapter), options.examples, points));
    if (!listed.back().error.empty()) {
      err << "bench sanitize: " << listed.back().error << "\n";
      return kExitFailed;
    }
    selected.insert(selected.end(), listed.back().examples.begin(), listed.back().examples.end());
  }
  if (const auto unmatched = unmatched_names(selected, options.examples); !unmatched.empty()) {
    err << "bench sanitize: "
        << no_such_examples(unmatched, chapters, options.points.axes, options.points.sweep) << "\n";
    return kExitUsage;
  }
  if (!options.variants.empty()) {
    // Only the cases of the variants asked, by the name the case carries or by the variant's own
    // name ("cluster_permute" for ch15/moe_dispatch's "optimized"); an example that has none of
    // them is left out. A name that no selected example's case answers to is refused, as an
    // example name that matches none is.
    const auto asked = [&](const std::string& name) {
      return std::find(options.variants.begin(), options.variants.end(), name) !=
             options.variants.end();
    };
    std::set<std::string> answered, there;  // names the cases answer to; how they are shown
    for (std::size_t c = 0; c < chapters.size(); ++c) {
      const auto own = own_variant_names(chapter_binary(build_dir, chapters[c]), points);
      auto& chapter = listed[c];
      std::vector<std::string> kept;
      for (const auto& example : chapter.examples) {
        auto& cases = chapter.cases_of[example];
        std::erase_if(cases, [&](const std::string& name) {
          const std::string variant = variant_of(name), own_name = rung_of(own, name);
          answered.insert(variant), answered.insert(own_name);
          there.insert(own_name == variant ? variant : variant + " (" + own_name + ")");
          return !asked(variant) && !asked(own_name);
        });
        if (!cases.empty()) kept.push_back(example);
      }
      chapter.examples = std::move(kept);
    }
    std::vector<std::string> missing;
    for (const auto& name : options.variants)
      if (!answered.count(name)) missing.push_back(name);
    if (!missing.empty()) {
      err << fmt::format(
          "bench sanitize: no case of the examples selected has the variant {} (their variants: "
          "{})\n",
          fmt::join(missing, ", "), fmt::join(there, ", "));
      return kExitUsage;
    }
  }
  const std::vector<std::string> tools = options.tools.empty() ? kSanitizerTools : options.tools;
  std::string error;
  const std::string sanitizer = find_sanitizer(&error);
  if (sanitizer.empty()) {
    err << "bench sanitize: " << error << "\n";
    return kExitUsage;
  }
  if (!gpu_available(&error)) {
    err << "bench sanitize: no CUDA device: " << error << "\n";
    return kExitFailed;
  }
  const fs::path reports =
      options.reports_dir.empty() ? build_dir / "reports" / "sanitize" : fs::path(options.reports_dir);
  const fs::path logs = reports / "logs";
  fs::create_directories(logs);
  std::string tool_list;
  for (const auto& tool : tools) tool_list += (tool_list.empty() ? "" : ", ") + tool;
  const std::string version = sanitizer_version(sanitizer);
  out << "bench sanitize: " << sanitizer << " (" << version << ") with " << tool_list
      << "; each example's (or axis point's) verification runs (--bench_verify_only) in a process "
         "per tool; logs in "
      << logs.string() << "\n"
      << std::flush;

  std::vector<Run> runs;
  for (std::size_t c = 0; c < chapters.size(); ++c) {
    const fs::path binary = chapter_binary(build_dir, chapters[c]);
    auto& [examples, cases_of, list_error] = listed[c];
    std::vector<Unit> units;
    for (const auto& example : examples)
      for (auto& unit : units_of(example, cases_of[example])) units.push_back(std::move(unit));
    for (std::size_t i = 0; i < units.size(); ++i) {
      const std::size_t cases = units[i].cases.size();
      out << fmt::format("[{}/{}] {} ({} case{})\n", i + 1, units.size(), units[i].key, cases,
                         cases == 1 ? "" : "s")
          << std::flush;
      for (const auto& tool : tools) {
        runs.push_back(sanitize_one(sanitizer, tool, binary, units[i], options, logs));
        const Run& run = runs.back();
        out << fmt::format("  {:<10} {} ({:.1f} s)\n", tool, describe(run.result), run.seconds);
        const bool reported = run.result.verdict == SanitizeVerdict::found ||
                              run.result.verdict == SanitizeVerdict::library;
        if (reported && !run.result.reason.empty()) out << fmt::format("  {:<10} {}\n", "", run.result.reason);
        if (reported || run.result.verdict == SanitizeVerdict::failed)
          out << fmt::format("  {:<10} log: {}\n", "", run.log.string());
        out << std::flush;
      }
    }
  }

  std::map<SanitizeVerdict, int> count;
  for (const auto& run : runs) ++count[run.result.verdict];
  const int bad = count[SanitizeVerdict::found] + count[SanitizeVerdict::failed];
  // A library-only run checked the example's kernels too, and found nothing in them.
  const bool checked_nothing = count[SanitizeVerdict::clean] + count[SanitizeVerdict::library] == 0 && bad == 0;
  const int exit_code = bad > 0 || checked_nothing ? kExitFailed : kExitOk;
  out << fmt::format("\nsanitize: {} runs: {} clean, {} found, {} failed, {} refused, {} skipped\n", runs.size(),
                     count[SanitizeVerdict::clean], count[SanitizeVerdict::found], count[SanitizeVerdict::failed],
                     count[SanitizeVerdict::refused], count[SanitizeVerdict::skipped]);
  if (const int library = count[SanitizeVerdict::library]; library > 0)
    out << fmt::format("  {} run(s) reported errors in library code only (no line information: not code this tree "
                       "compiled), not counted against the examples; their logs say what\n",
                       library);
  std::map<std::string, std::pair<int, std::string>> refused;  // by tool: how often, the first reason
  for (const auto& run : runs)
    if (run.result.verdict == SanitizeVerdict::refused && refused[run.tool].first++ == 0)
      refused[run.tool].second = run.result.reason;
  for (const auto& [tool, what] : refused)
    out << fmt::format("  {} refused by compute-sanitizer (the reason follows) for {} example(s), not checked: {}\n", tool,
                       what.first, what.second);
  if (checked_nothing) out << "  nothing was checked\n";
  try {
    const fs::path json_path = reports / "sanitize.json", md_path = reports / "sanitize.md";
    write_text(json_path, report_json(sanitizer, version, tools, runs, exit_code).dump(2) + "\n");
    write_text(md_path, report_markdown(tools, runs));
    out << "JSON report: " << json_path.string() << "\nMarkdown report: " << md_path.string() << "\n";
  } catch (const std::exception& e) {
    err << "bench sanitize: " << e.what() << "\n";
    return kExitFailed;
  }
  return exit_code;
}

}  // namespace bench::tools
