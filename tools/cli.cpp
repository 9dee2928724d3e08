// The `bench` command line (CLI11). Parsing only: each subcommand's work is in its own file.
// A subcommand is an options struct, a block below and a <name>_command.cpp.
#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <ostream>
#include <regex>

#include "calibrate_command.hpp"
#include "commands.hpp"
#include "sanitize_output.hpp"

namespace bench::tools {
namespace {

// "ch7" or "copy" would silently match nothing later; reject it here as bad usage.
std::string check_chapter(const std::string& value) {
  static const std::regex chapter("ch[0-9]{2}");
  return std::regex_match(value, chapter) ? std::string() : "expected a chapter like ch07, got " + value;
}

// --example a,b (or repeated): each name is "name" or "chNN/name". One value per --example, as
// --chapter's, so that the `--` before the chapter binaries' flags is not taken for a name.
void add_example_option(CLI::App* command, std::vector<std::string>& examples) {
  command
      ->add_option("--example", examples,
                   "only these examples, comma-separated (name or chNN/name); a name that matches "
                   "none is an error")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check([](const std::string& name) {
        return name.empty() ? std::string("an empty example name") : std::string();
      });
}

// --axis NAME=V[,V] (repeatable) and --sweep: which points of the examples' axes.
void add_point_options(CLI::App* command, PointOptions& points) {
  command
      ->add_option(
          "--axis", points.axes,
          "only points whose axis NAME is one of the values: NAME=V[,V] (repeat for more axes); "
          "a value no default point has is taken with the other axes at their defaults; "
          "examples without that axis are left out")
      ->allow_extra_args(false)
      ->check([](const std::string& v) {
        const auto eq = v.find('=');
        return eq == std::string::npos || eq == 0 || eq + 1 == v.size()
                   ? "expected NAME=VALUE[,VALUE...], got " + v
                   : std::string();
      });
  command->add_flag("--sweep", points.sweep,
                    "every point of each example's axes, not only its default points");
}

std::string join(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"bench: run, score and compare cudabench chapters (see README.md)", "bench"};
  app.require_subcommand(1);
  app.fallthrough();
  Locations where;
  app.add_option("--build-dir", where.build_dir, "build tree holding chapters/chNN/chNN (default: this bench's build)");
  app.add_option("--expectations-dir", where.expectations_dir,
                 "folder of <hardware_key>.json, for scoring and for the chapters' ceilings "
                 "(default: <source>/expectations)");

  ListOptions list;
  auto* list_cmd = app.add_subcommand("list", "list chapters and their cases");
  list_cmd->add_option("--chapter", list.chapter, "only this chapter (chNN)")->check(check_chapter);
  add_point_options(list_cmd, list.points);

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "run a chapter binary (Google Benchmark output)");
  run_cmd->add_option("--chapter", run.chapter, "chapter (chNN)")->required()->check(check_chapter);
  add_example_option(run_cmd, run.examples);
  add_point_options(run_cmd, run.points);
  run_cmd->add_option("--variant", run.variant,
                      "only this variant of each example, by the case's name or the rung a "
                      "role-named case runs (`bench list`; needs --example)");
  run_cmd->add_option("harness_args", run.harness_args, "after --: flags for the chapter binary");

  CompareOptions compare;
  auto* compare_cmd = app.add_subcommand("compare", "run examples in isolation, score speedups against expectations");
  // One value per --chapter (repeat it for more): a chapter list swallowed the `--` that starts
  // the chapter binaries' flags, and `--chapter ch07 -- --bench_smoke` was refused.
  auto* chapter_opt = compare_cmd->add_option("--chapter", compare.chapters, "chapter to compare (chNN; repeat for more)")
                          ->check(check_chapter)
                          ->allow_extra_args(false);
  auto* all_opt = compare_cmd->add_flag("--all", compare.all, "every built chapter");
  auto* from_opt = compare_cmd->add_option("--from-results", compare.from_results,
                                           "rescore a saved results file (no GPU needed)");
  all_opt->excludes(chapter_opt);
  from_opt->excludes(chapter_opt)->excludes(all_opt);
  add_example_option(compare_cmd, compare.examples);
  add_point_options(compare_cmd, compare.points);
  compare_cmd->add_option("--json", compare.json_report, "write the JSON report here");
  compare_cmd->add_option("--markdown", compare.markdown_report, "write the Markdown report here");
  compare_cmd->add_option("--html", compare.html_report, "write a self-contained HTML report here (roofline, speedups)");
  compare_cmd->add_option("--svg", compare.svg_roofline, "write the roofline alone as an SVG file here");
  compare_cmd->add_option(
      "--save-results", compare.save_results,
      "write the merged results file here (default: "
      "<build>/reports/results_<chapters>_<gpu>_<time>.json, copied to results.json)");
  compare_cmd->add_flag("--update-expectations", compare.update_expectations,
                        "accept verified, quiet results into expectations/<hardware_key>.json");
  compare_cmd->add_flag("--add-machine", compare.add_machine,
                        "append this machine's figures to the `machines` of every host-dependent example "
                        "(a variant declared host_bound), whose band is their spread; nothing else changes")
      ->excludes("--update-expectations");
  compare_cmd->add_option("--record-outcome", compare.record_outcomes,
                          "with --update-expectations: for these examples (comma-separated), record an honest "
                          "NO_SPEEDUP, or an optimized side SKIPPED by design, as this GPU's expected outcome "
                          "(docs/expectations.md)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->needs("--update-expectations");
  compare_cmd->add_option("--repetitions", compare.repetitions,
                          "run each example N times, each in a fresh process (interleaved), and pool the samples; "
                          "with --update-expectations every run must reproduce the speedup within the tolerance written")
      ->check(CLI::PositiveNumber)
      ->excludes(from_opt);
  compare_cmd->add_option("harness_args", compare.harness_args, "after --: flags for the chapter binaries");

  ExpectationsOptions expectations;
  auto* expectations_cmd = app.add_subcommand("expectations", "inspect expectations files");
  expectations_cmd->require_subcommand(1);
  // What each action does (tools/expectations_command.cpp), and what its files are.
  struct Action {
    const char *name, *help, *files;
  };
  const Action actions[] = {
      {"show",
       "print each file's hardware key and device, its ceilings (value, unit, noise, date) and its "
       "examples "
       "(speedup +- tolerance, % of ceiling, provenance, each variant's median and noise)",
       "files (default: every .json in the expectations folder)"},
      {"diff",
       "compare two files field by field and print each difference on a line: `+ path: value` only "
       "in NEW, "
       "`~ path: old -> new` changed, `- path: value` only in OLD (or `no differences`); exits 0 "
       "either way, "
       "2 when a file is missing or malformed",
       "exactly two files: OLD NEW"},
      {"validate",
       "parse each file strictly (JSON syntax, duplicate keys, format_version, required and unknown "
       "keys, value types and ranges, hardware_key against the file name, example keys against the "
       "built chapters' examples) and print `ok FILE: N ceilings, M examples` (naming any chapter whose "
       "keys could not be checked, as not built), or FILE:LINE:COLUMN and what was expected; exits 2 if "
       "any is not valid",
       "files (default: every .json in the expectations folder)"},
  };
  for (const auto& action : actions) {
    auto* sub = expectations_cmd->add_subcommand(action.name, action.help);
    sub->add_option("files", expectations.files, action.files);
    sub->callback([&expectations, name = action.name] { expectations.action = name; });
  }

  auto* env_cmd = app.add_subcommand("env", "hardware key, device facts, driver, build info");

  CalibrateOptions calibrate;
  auto* calibrate_cmd =
      app.add_subcommand("calibrate",
                         "measure this GPU's ceilings into expectations/<hardware_key>.json (on "
                         "several GPUs: the links there, one GPU's ceilings in the one-GPU file)");
  calibrate_cmd->add_flag("--dry-run", calibrate.dry_run, "list what would be measured and where it would be stored");
  calibrate_cmd->add_option("--only", calibrate.only, "only ceilings whose names start with these (e.g. hbm,bf16)")
      ->delimiter(',');
  calibrate_cmd->add_option("--repetitions", calibrate.repetitions, "run each case this often and report the spread");
  calibrate_cmd->add_flag(
      "--every-gpu", calibrate.every_gpu,
      "on several GPUs: measure each one-GPU ceiling on every one, store the best board's");
  calibrate_cmd->add_option("harness_args", calibrate.harness_args, "after --: flags for the calibrate binary");

  ProfileOptions profile;
  auto* profile_cmd = app.add_subcommand("profile",
                                         "one case under Nsight Compute or Nsight Systems: "
                                         "verified, warmed up, then one launch captured; "
                                         "or its kernel timeline through CUPTI (--tool timeline)");
  profile_cmd->add_option("case", profile.case_name, "the case, chNN/<example>/<variant> (`bench list`)")->required();
  profile_cmd
      ->add_option(
          "--tool", profile.tool,
          "ncu (default; BENCH_NCU overrides the path), nsys (BENCH_NSYS), or timeline: no tool, "
          "the binary traces 5 calls through CUPTI and a table of their kernels, streams, "
          "starts, durations and gaps is printed")
      ->check(CLI::IsMember({"ncu", "nsys", "timeline"}));
  profile_cmd->add_option("--set", profile.set, "ncu section set (default full; basic is quicker)");
  profile_cmd->add_option(
      "--output,-o", profile.output,
      "report path (default <build>/reports/profile/<case>; .timeline.json for timeline)");
  profile_cmd->add_option("tool_args", profile.tool_args, "after --: flags for the tool, placed before the binary");

  SanitizeOptions sanitize;
  auto* sanitize_cmd = app.add_subcommand(
      "sanitize", "every example's verification under compute-sanitizer: memcheck, racecheck, synccheck, initcheck");
  auto* sanitize_chapter_opt = sanitize_cmd->add_option("--chapter", sanitize.chapters, "chapter to check (chNN; repeat for more)")
                                   ->check(check_chapter)
                                   ->allow_extra_args(false);  // as compare's: keep `--` for the flags after it
  sanitize_cmd->add_flag("--all", sanitize.all, "every built chapter")->excludes(sanitize_chapter_opt);
  add_example_option(sanitize_cmd, sanitize.examples);
  add_point_options(sanitize_cmd, sanitize.points);
  sanitize_cmd
      ->add_option("--variant", sanitize.variants,
                   "only these variants, comma-separated, by the case name's (baseline, optimized, "
                   "a step's or vendor's name) or the rung a role-named case runs (`bench list`)")
      ->delimiter(',')
      ->allow_extra_args(false);
  sanitize_cmd->add_option("--tool", sanitize.tools, "only these tools, comma-separated (default: all four)")
      ->delimiter(',')
      ->check(CLI::IsMember(kSanitizerTools));
  sanitize_cmd->add_option("--timeout", sanitize.timeout_s,
                           "seconds one sanitizer process may run before it is killed and reported (default 600)")
      ->check(CLI::PositiveNumber);
  sanitize_cmd->add_option("--print-limit", sanitize.print_limit,
                           "reports the sanitizer prints per run, the rest only counted (default 100)")
      ->check(CLI::PositiveNumber);
  sanitize_cmd->add_option("--reports-dir", sanitize.reports_dir,
                           "where sanitize.json, sanitize.md and the logs go (default <build>/reports/sanitize)");
  sanitize_cmd->add_option("sanitizer_args", sanitize.sanitizer_args,
                           "after --: flags for compute-sanitizer, placed before the program");

  ReportOptions report;
  auto* report_cmd = app.add_subcommand("report", "an HTML report (roofline, speedups, history) from saved results files");
  report_cmd
      ->add_option("files", report.files,
                   "results files (build/<preset>/reports/results_*.json, --save-results); one "
                   "GPU's are merged, newest result per point")
      ->required();
  report_cmd->add_option("--html", report.html, "the HTML file to write")->required();
  report_cmd->add_option("--svg", report.svg, "also write the latest run's roofline as an SVG file");

  // An unknown first word is named, with the subcommands (CLI11 would say only that one is required).
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : " ") + sub->get_name();
      known |= sub->get_name() == args[1];
    }
    if (!known) {
      err << "bench: unknown subcommand '" << args[1] << "' (subcommands: " << names << "; bench --help)\n";
      return kExitUsage;
    }
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;  // --help is not an error
  }

  if (*list_cmd) return list_command({where, list.chapter, list.points}, out, err);
  if (*run_cmd) {
    if (!run.variant.empty() && run.examples.empty()) {
      err << "bench run: --variant needs --example\n";
      return kExitUsage;
    }
    run.where = where;
    return run_command(run, out, err);
  }
  // A profiled run makes one untimed launch, a timeline run a few traced ones, a verify-only run
  // none: never a measurement to score.
  for (const auto* harness_args : {&compare.harness_args, &calibrate.harness_args})
    for (const auto& arg : *harness_args) {
      if (arg.rfind("--bench_profile", 0) == 0) {
        err << "bench: --bench_profile makes no measurement; use `bench profile <case>`\n";
        return kExitUsage;
      }
      if (arg.rfind("--bench_timeline", 0) == 0) {
        err << "bench: --bench_timeline makes no measurement; use `bench profile <case> --tool "
               "timeline`\n";
        return kExitUsage;
      }
      if (arg.rfind("--bench_verify_only", 0) == 0) {
        err << "bench: --bench_verify_only makes no measurement; `bench sanitize` is what uses it\n";
        return kExitUsage;
      }
      // docs/validity.md row 18: a known seed lets a variant meet inputs an earlier process saw.
      if (harness_args == &compare.harness_args && arg.rfind("--bench_seed", 0) == 0) {
        err << "bench: compare draws a fresh secret input seed in every process, so that no variant can "
               "serve answers remembered from an earlier run; --bench_seed is for reproducing a run of a "
               "chapter binary by hand\n";
        return kExitUsage;
      }
    }
  if (*profile_cmd) {
    profile.where = where;
    return profile_command(profile, out, err);
  }
  if (*report_cmd) {
    report.where = where;
    return report_command(report, out, err);
  }
  if (*sanitize_cmd) {
    if (sanitize.chapters.empty() && !sanitize.all) {
      err << "bench sanitize: say what to check: --chapter chNN or --all\n";
      return kExitUsage;
    }
    sanitize.where = where;
    return sanitize_command(sanitize, out, err);
  }
  if (*compare_cmd) {
    if (compare.chapters.empty() && !compare.all && compare.from_results.empty()) {
      err << "bench compare: say what to compare: --chapter chNN, --all or --from-results FILE\n";
      return kExitUsage;
    }
    compare.where = where;
    compare.command_line = join(args);
    return compare_command(compare, out, err);
  }
  if (*expectations_cmd) {
    expectations.where = where;
    return expectations_command(expectations, out, err);
  }
  if (*env_cmd) return env_command(where, out, err);
  if (*calibrate_cmd) {
    calibrate.where = where;
    return calibrate_command(calibrate, out, err);
  }
  return kExitUsage;
}

}  // namespace bench::tools
