// `bench compare`: run each example of the chosen chapters in its own process (or read a saved
// results file), score the pairs, print the table, write the reports, and optionally accept the
// numbers into the expectations file.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "bench/expectations.hpp"
#include "chapter_process.hpp"
#include "commands.hpp"
#include "expectations_update.hpp"
#include "html_report.hpp"
#include "lookup.hpp"
#include "report.hpp"
#include "results.hpp"
#include "scoring.hpp"

namespace bench::tools {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& file, const std::string& text) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error(file.string() + ": cannot be written");
}

// The chapters to run, each with its selected examples, listed before anything runs: every
// chapter must exist and be built, and every --example name must match, or nothing runs (and
// on a machine without a GPU, a bad name is reported before the missing GPU is).
struct Plan {
  std::vector<std::string> points;  // the chapter binaries' --bench_sweep / --bench_axis flags
  std::vector<std::pair<std::string, ChapterExamples>> listed;
};

// Returns false (after printing why) when a chapter is not in the suite or not built, or an
// --example name matches no example of the chapters.
bool plan_chapters(const CompareOptions& options, ExampleCatalog& catalog, Plan& plan, std::ostream& err) {
  const fs::path build_dir = resolve_build_dir(options.where);
  const std::vector<std::string> chapters = options.all ? built_chapters(build_dir) : options.chapters;
  if (chapters.empty()) {
    err << "bench compare: no chapter binaries under " << (build_dir / "chapters").string() << "\n";
    return false;
  }
  plan.points = point_args(options.points.axes, options.points.sweep);
  std::vector<std::string> selected;
  bool listed_all = true;
  for (const auto& chapter : chapters) {
    const fs::path binary = chapter_binary(build_dir, chapter);
    if (!fs::is_regular_file(binary)) {
      err << "bench compare: " << no_such_chapter(chapter, build_dir) << "\n";
      return false;
    }
    plan.listed.emplace_back(chapter, chapter_examples(binary, options.examples, plan.points));
    const auto& examples = plan.listed.back().second.examples;
    selected.insert(selected.end(), examples.begin(), examples.end());
    listed_all = listed_all && plan.listed.back().second.error.empty();
    // Only a listing of every point is the whole chapter (expectations name sweep points too).
    if (options.examples.empty() && options.points.sweep && options.points.axes.empty() &&
        plan.listed.back().second.error.empty())
      catalog.add(chapter, plan.listed.back().second);
  }
  // A chapter that could not list its cases is a crash record below; a name may be one of its.
  if (const auto unmatched = unmatched_names(selected, options.examples);
      listed_all && !unmatched.empty()) {
    err << "bench compare: "
        << no_such_examples(unmatched, chapters, options.points.axes, options.points.sweep) << "\n";
    return false;
  }
  if (listed_all && selected.empty() && !options.points.axes.empty()) {
    err << "bench compare: --axis selects no case of " << chapters.front()
        << (chapters.size() > 1 ? "..." : "")
        << " (`bench list --sweep` names every point; add --sweep for points that are not "
           "defaults)\n";
    return false;
  }
  return true;
}

// Runs every selected example of every planned chapter, printing one progress line per example.
// An interrupt (Ctrl-C, or a SIGTERM from `timeout`) stops the run after passing it on to the
// example that was running: that example's line names the case it was in, and what finished
// before it is kept to be saved and scored. Returns the signal that stopped the run, 0 if none.
int run_chapters(const CompareOptions& options, const Plan& plan, ResultsFile& results,
                 std::ostream& out) {
  const InterruptScope interrupts;
  const fs::path build_dir = resolve_build_dir(options.where);
  std::vector<std::string> args = plan.points;  // the points, then the flags given after --
  // The chapters read their ceilings (each case's percent of ceiling in the results) from the
  // same files this command scores against: with --expectations-dir, those there, not the tree's.
  if (!options.where.expectations_dir.empty())
    args.push_back("--bench_expectations_dir=" + options.where.expectations_dir);
  args.insert(args.end(), options.harness_args.begin(), options.harness_args.end());
  for (const auto& [chapter, listing] : plan.listed) {
    const auto& [examples, cases_of, list_error] = listing;
    const fs::path binary = chapter_binary(build_dir, chapter);
    if (!list_error.empty()) {
      results.crashes.push_back({chapter + "/(list)", "could not list cases", list_error, {}});
      out << fmt::format("{}: could not list its cases: {}\n", chapter, list_error);
      continue;
    }
    // Repetitions go round the examples, not example by example: each run of an example is a fresh
    // process at a different moment, so slow drifts of the host (a VM's memory path) land between
    // runs, where the update's reproduction check sees them.
    for (int rep = 1; rep <= options.repetitions; ++rep)
      for (std::size_t i = 0; i < examples.size(); ++i) {
        const auto summary = run_example(binary, examples[i], cases_of.at(examples[i]), args, results);
        if (const int signal = InterruptScope::signal()) {
          // Stopped from outside, not failed: no crash record for it. Its cases are scored only
          // if its process got to write them.
          if (!results.crashes.empty() && results.crashes.back().example == examples[i])
            results.crashes.pop_back();
          out << fmt::format(
                     "[{}/{}] {}: interrupted by signal {} ({}) after {:.1f} s, "
                     "{}{} of {} cases finished; nothing after it runs\n",
                     i + 1, examples.size(), examples[i], signal, ::strsignal(signal),
                     summary.seconds,
                     summary.running_case.empty() ? "" : "in " + summary.running_case + ", ",
                     summary.cases_ended, cases_of.at(examples[i]).size())
              << std::flush;
          return signal;
        }
        const std::string how = summary.process.ok() ? "" : fmt::format(", {}: {}", summary.process.describe(),
                                                                        tail_lines(summary.process.err, 1));
        const std::string run = options.repetitions > 1 ? fmt::format(" (run {}/{})", rep, options.repetitions) : "";
        out << fmt::format("[{}/{}] {}{}: {} of {} cases in {:.1f} s{}\n", i + 1, examples.size(), examples[i], run,
                           summary.cases_reported, cases_of.at(examples[i]).size(), summary.seconds, how)
            << std::flush;
      }
  }
  return 0;
}

// A live run's results in a file of its own (results.hpp, run_results_name; a second run in the
// same second gets "_2" before ".json"), copied to results.json as the latest. Returns the file.
fs::path save_run_results(const fs::path& reports_dir, const CompareOptions& options,
                          const ResultsFile& results) {
  const std::string name =
      run_results_name(options.all ? std::vector<std::string>{"all"} : options.chapters,
                       context_string(results.context, "hardware_key"), utc_now(kCompactUtc));
  fs::path file = reports_dir / name;
  for (int n = 2; fs::exists(file); ++n)
    file = reports_dir / (name.substr(0, name.size() - 5) + "_" + std::to_string(n) + ".json");
  save_results(file, results);
  fs::copy_file(file, reports_dir / "results.json", fs::copy_options::overwrite_existing);
  return file;
}

void report_update(const UpdateResult& update, const fs::path& file, std::ostream& out) {
  for (const auto& why : update.refused) out << "  refused " << why << "\n";
  if (update.accepted.empty()) {
    out << "expectations: nothing accepted, " << file.string() << " unchanged\n";
    return;
  }
  out << fmt::format("expectations: {} example(s) accepted into {}\n", update.accepted.size(), file.string());
  for (const auto& line : update.diff) out << "  " << line << "\n";
}

}  // namespace

int compare_command(const CompareOptions& options, std::ostream& out, std::ostream& err) {
  ResultsFile results;
  const bool live = options.from_results.empty();
  int interrupted = 0;  // the signal that stopped a live run early
  // Every example key of the expectations read below must name an example of the suite.
  ExampleCatalog catalog(resolve_build_dir(options.where));
  if (!live) {
    try {
      results = load_results_to_score(options.from_results);
    } catch (const ResultsError& e) {
      err << "bench compare: " << e.what() << "\n";
      return kExitUsage;
    }
    std::vector<std::string> saved;
    for (const auto& c : extract_cases(results)) saved.push_back(c.example);
    if (const auto unmatched = unmatched_names(saved, options.examples); !unmatched.empty()) {
      err << "bench compare: " << no_such_examples(unmatched, {options.from_results}) << "\n";
      return kExitUsage;
    }
  } else {
    // Bad names first (exit 2), then the GPU (exit 1): listing needs no GPU.
    Plan plan;
    if (!plan_chapters(options, catalog, plan, err)) return kExitUsage;
    std::string why;
    if (!gpu_available(&why)) {
      err << "bench compare: no CUDA device: " << why << "; score a saved run with --from-results FILE\n";
      return kExitFailed;
    }
    const auto started = std::chrono::steady_clock::now();
    interrupted = run_chapters(options, plan, results, out);
    // How long the chapters took, build aside: the figure a user weighs a compare by (issue 39
    // bounds ch16's), kept in the results so a saved run still says it.
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out << fmt::format("chapters ran in {:.0f} s\n", seconds);
    // The context is the first chapter binary's: the run's own command is what a reader needs.
    results.context["bench_command"] = options.command_line;
    results.context["compare_seconds"] = seconds;
    if (interrupted) results.context["interrupted_by_signal"] = interrupted;
  }
  const fs::path reports_dir = fs::path(resolve_build_dir(options.where)) / "reports";
  try {
    if (!options.save_results.empty()) {
      save_results(options.save_results, results);
      out << "results saved to " << options.save_results << "\n";
    } else if (live) {
      const fs::path saved = save_run_results(reports_dir, options, results);
      out << "results saved to " << saved.string() << " (and as the latest, "
          << (reports_dir / "results.json").string() << ")\n";
    }
  } catch (const std::exception& e) {
    err << "bench compare: " << e.what() << "\n";
    return kExitFailed;
  }

  std::vector<CaseResult> cases = extract_cases(results);
  // Only the selected examples are scored, so only they can be accepted by an update.
  if (!live)
    std::erase_if(cases, [&](const CaseResult& c) {
      return !example_selected(c.example, options.examples) ||
             !point_selected(c.example, options.points.axes);
    });
  const std::string key = results.context.value("hardware_key", std::string("unknown"));
  const fs::path expectations_dir = resolve_expectations_dir(options.where);
  const fs::path expectations_file = expectations_dir / (key + ".json");
  std::optional<Expectations> expectations;
  std::vector<fs::path> sources;
  try {
    expectations = load_expectations_for(expectations_dir, key, &sources, catalog.check());
  } catch (const ExpectationsError& e) {
    err << "bench compare: " << e.what() << "\n";
    return kExitUsage;
  }
  if (!results.context.contains("hardware_key"))  // an interrupt before any chapter reported
    out << "expectations: not read: no chapter finished, so this run names no GPU";
  else if (!expectations)
    out << "expectations: none for " << key << " (" << expectations_file.string() << " does not exist): every example is NEW";
  else
    for (size_t i = 0; i < sources.size(); ++i)
      out << (i == 0 ? "expectations: " : ", and what it lacks from ") << sources[i].string();
  out << "\n\n";
  const Scorecard card = score(cases, expectations, key);
  out << format_table(card);
  if (interrupted)
    out << fmt::format(
        "interrupted by signal {} ({}): exit code {}; "
        "the table holds only what finished before it\n",
        interrupted, ::strsignal(interrupted), 128 + interrupted);

  std::string json_path = options.json_report, markdown_path = options.markdown_report;
  bool svg_refused = false;  // --svg with no case to place: exit 2 once the rest is written
  if (live && json_path.empty()) json_path = (reports_dir / "compare.json").string();
  if (live && markdown_path.empty()) markdown_path = (reports_dir / "compare.md").string();
  try {
    if (!json_path.empty()) write_text(json_path, report_json(card).dump(2) + "\n");
    if (!options.html_report.empty() || !options.svg_roofline.empty()) {
      const ReportRun run{live ? "this run" : options.from_results, results.context, card, expectations};
      if (!options.html_report.empty()) write_text(options.html_report, html_report({run}));
      if (!options.svg_roofline.empty() && roofline_points(card).empty()) {
        // The other reports and an update still go ahead: the run is not lost for an SVG.
        err << "bench compare: --svg " << options.svg_roofline
            << " not written: " << no_roofline_reason(run) << "\n";
        svg_refused = true;
      } else if (!options.svg_roofline.empty()) {
        write_text(options.svg_roofline, roofline_svg(run));
      }
    }
    if (!markdown_path.empty()) {
      std::string markdown = format_markdown(card);
      if (!options.html_report.empty())
        markdown += "\nRoofline, speedup intervals and provenance: [" + fs::path(options.html_report).filename().string() +
                    "](" + fs::absolute(options.html_report).string() + ")\n";
      write_text(markdown_path, markdown);
    }
    if (!json_path.empty()) out << "JSON report: " << json_path << "\n";
    if (!markdown_path.empty()) out << "Markdown report: " << markdown_path << "\n";
    if (!options.html_report.empty()) out << "HTML report: " << options.html_report << "\n";
    if ((options.update_expectations || options.add_machine) && interrupted) {
      out << "expectations: not updated: the run was interrupted before every example had run\n";
    } else if (options.update_expectations || options.add_machine) {
      UpdatePolicy policy;
      policy.command = options.command_line;
      policy.add_machine = options.add_machine;
      policy.record_outcomes = options.record_outcomes;
      for (const auto& [file, part] : update_targets(expectations_dir, card))
        report_update(update_expectations_file(file, part, results.context, policy, catalog.check()), file,
                      out);
    }
  } catch (const std::exception& e) {
    err << "bench compare: " << e.what() << "\n";
    return kExitFailed;
  }
  if (interrupted) return 128 + interrupted;  // as a shell reports a process the signal ended
  return svg_refused ? kExitUsage : card.exit_code();
}

}  // namespace bench::tools
