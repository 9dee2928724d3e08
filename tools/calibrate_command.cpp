// `bench calibrate`: run the calibrate binary, turn each case's counter into a ceiling, and
// store the ceilings with update_ceilings (atomic, every other entry kept).
#include "calibrate_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "../calibrate/ceilings.hpp"
#include "bench/device_info.hpp"
#include "bench/expectations.hpp"
#include "bench/stats.hpp"
#include "chapter_process.hpp"
#include "expectations_write.hpp"
#include "results.hpp"

namespace bench::tools {
namespace {

namespace fs = std::filesystem;
using calibration::CeilingSpec;
using calibration::Counter;

std::string case_of(const CeilingSpec& spec) { return fmt::format("calibrate/{}/baseline", spec.name); }

// The figure a case stands for, from the pooled median (bytes or flops over time, or time).
// A ceiling is the most this GPU was seen to do, so it comes from the fast end of the samples:
// their 10th-percentile time (robust to one lucky sample). The median would put the ceiling
// under what examples reach: at the power limit a GEMM's rate moves from one run to the next by
// more than the noise, and a median-based ceiling made a later run look impossible
// (docs/expectations.md).
double figure(const CeilingSpec& spec, const CaseResult& c) {
  const double us = c.p10_us > 0 ? c.p10_us : c.median_us;
  const double seconds = us * 1e-6;
  switch (spec.counter) {
    case Counter::gbps: return c.bytes / seconds / 1e9;
    case Counter::tflops: return c.flops / seconds / 1e12;
    case Counter::time_us: return us / spec.per;
  }
  return 0;
}

std::string hardware_key_of(const ResultsFile& results) {
  if (auto it = results.context.find("hardware_key"); it != results.context.end() && it->is_string())
    return it->get<std::string>();
  return query_device(0).hardware_key;
}

// The key of the file a ceiling is stored in on `hardware_key` (ceiling_files).
std::string file_key(const std::string& ceiling, const std::string& hardware_key) {
  for (const auto& spec : calibration::kCeilings)
    if (spec.name == ceiling && spec.gpus > 1) return hardware_key;
  return single_gpu_key(hardware_key);
}

// One ceiling's figure from one GPU's runs: the median over repetitions of each run's figure,
// the median of their noise and the runs' spread ((max - min) / median); or, when a run did not
// measure and verify it, why not (`skipped`: it was SKIPPED, e.g. p2p on one GPU).
struct BoardFigure {
  double value = 0, noise = 0, spread = 0;
  std::string failure;
  bool skipped = false;
};
BoardFigure board_figure(const CeilingSpec& spec, const std::vector<CaseResult>& reps,
                         int repetitions) {
  BoardFigure f;
  const auto bad = std::find_if(reps.begin(), reps.end(), [](const CaseResult& c) {
    return c.outcome != Outcome::measured || !c.verified;
  });
  if (reps.size() != static_cast<std::size_t>(repetitions) || bad != reps.end()) {
    f.skipped = bad != reps.end() && bad->outcome == Outcome::skipped;
    f.failure = bad == reps.end() ? "FAILED: the case did not report"
                : bad->outcome == Outcome::measured
                    ? "FAILED: not verified"
                    : (f.skipped ? "SKIPPED: " : "FAILED: ") + bad->message;
    return f;
  }
  std::vector<double> values, noises;
  for (const auto& c : reps) values.push_back(figure(spec, c)), noises.push_back(c.noise);
  f.value = stats::median(values);
  f.noise = stats::median(noises);
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  f.spread = (*hi - *lo) / f.value;
  return f;
}

// CUDA_VISIBLE_DEVICES naming each of the `count` GPUs this process sees, one at a time: the
// entries of the list it was given, if any ("2,3": "2" and "3"), else their indices.
std::vector<std::string> one_device_each(const std::optional<std::string>& given, int count) {
  std::vector<std::string> names;
  if (given && !given->empty()) {
    std::stringstream list(*given);
    for (std::string e; std::getline(list, e, ',');) names.push_back(e);
  }
  names.resize(std::max<std::size_t>(names.size(), count));
  for (int g = 0; g < count; ++g)
    if (names[g].empty()) names[g] = std::to_string(g);
  return names;
}

}  // namespace

std::size_t best_board(const CeilingSpec& spec, const std::vector<double>& figures) {
  const auto best = spec.counter == Counter::time_us
                        ? std::min_element(figures.begin(), figures.end())
                        : std::max_element(figures.begin(), figures.end());
  return static_cast<std::size_t>(best - figures.begin());
}

std::vector<CeilingSpec> select_ceilings(const std::vector<std::string>& prefixes,
                                         std::string* error) {
  const auto named = [&](std::string_view name) {
    return prefixes.empty() ||
           std::any_of(prefixes.begin(), prefixes.end(),
                       [&](const std::string& p) { return name.substr(0, p.size()) == p; });
  };
  std::vector<CeilingSpec> chosen;
  for (const auto& spec : calibration::kCeilings) {
    const bool other_form =
        std::any_of(calibration::kFasterOf.begin(), calibration::kFasterOf.end(),
                    [&](const auto& pair) { return pair.other == spec.name && named(pair.name); });
    if (named(spec.name) || other_form) chosen.push_back(spec);
  }
  for (const auto& p : prefixes) {
    const bool used =
        std::any_of(calibration::kCeilings.begin(), calibration::kCeilings.end(),
                    [&](const CeilingSpec& s) { return s.name.substr(0, p.size()) == p; });
    if (!used) *error = fmt::format("--only {}: no ceiling starts with '{}'", p, p);
  }
  return chosen;
}

void keep_faster(std::map<std::string, Ceiling>& measured, std::ostream& out) {
  for (const auto& pair : calibration::kFasterOf) {
    auto a = measured.find(std::string(pair.name)), b = measured.find(std::string(pair.other));
    if (a == measured.end() || b == measured.end()) continue;
    Ceiling& kept = a->second;
    const Ceiling& other = b->second;
    const bool other_faster = other.value > kept.value;
    out << fmt::format("{}: {} {:.0f} {}, {} {:.0f}: storing {}'s\n", pair.name, pair.what,
                       kept.value, kept.unit, pair.other_what, other.value,
                       other_faster ? pair.other_what : pair.what);
    kept.method = fmt::format("the faster of {} ({:.0f} {}) and {} ({:.0f}); {}: {}; {}: {}",
                              pair.what, kept.value, kept.unit, pair.other_what, other.value,
                              pair.what, kept.method, pair.other_what, other.method);
    if (other_faster) {
      kept.value = other.value;
      kept.noise = other.noise;
    }
  }
}

std::map<fs::path, std::map<std::string, Ceiling>> ceiling_files(
    const fs::path& dir, const std::string& hardware_key,
    const std::map<std::string, Ceiling>& measured) {
  std::map<fs::path, std::map<std::string, Ceiling>> files;
  for (const auto& [name, ceiling] : measured)
    files[dir / (file_key(name, hardware_key) + ".json")][name] = ceiling;
  return files;
}

int calibrate_command(const CalibrateOptions& options, std::ostream& out, std::ostream& err) {
  std::string error;
  const std::vector<CeilingSpec> chosen = select_ceilings(options.only, &error);
  if (!error.empty() || options.repetitions < 1) {
    err << "bench calibrate: " << (error.empty() ? "--repetitions must be >= 1" : error) << "\n";
    return kExitUsage;
  }
  const fs::path binary = fs::path(resolve_build_dir(options.where)) / "calibrate" / "calibrate";
  const fs::path dir = resolve_expectations_dir(options.where);

  if (options.dry_run) {
    std::string why, key = "<hardware_key>";
    if (gpu_available(&why) && cuda_device_count() > 0) key = query_device(0).hardware_key;
    out << fmt::format("bench calibrate would run {} ({}) and write {} ceiling(s) to {}:\n",
                       binary.string(), fs::is_regular_file(binary) ? "built" : "NOT BUILT",
                       chosen.size(), dir.string());
    for (const auto& spec : chosen) {
      const std::string file = file_key(std::string(spec.name), key) + ".json";
      std::string method(spec.method);
      for (const auto& pair : calibration::kFasterOf)
        if (pair.name == spec.name)
          method += fmt::format(" (stored: the faster of it and {})", pair.other);
      out << fmt::format("  {:<27} {:<8} {:<47} {:<20} {}\n", spec.name, spec.unit, case_of(spec),
                         file, method);
    }
    return kExitOk;
  }

  if (!fs::is_regular_file(binary)) {
    err << "bench calibrate: the calibrate binary is not built (no " << binary.string() << ")\n";
    return kExitUsage;
  }
  std::string why;
  if (!gpu_available(&why)) {
    err << "bench calibrate: no CUDA device: " << why << "\n";
    return kExitFailed;
  }

  // The GPUs each one-GPU ceiling is measured on: the first the process sees, or with
  // --every-gpu each of them in turn (CUDA_VISIBLE_DEVICES naming one), board -1 meaning "as
  // given". The boards of one model differ by a few percent, and a case on a faster board would
  // read above 100% of a slower board's ceiling: the fastest board's figure is stored. Ceilings
  // of several GPUs (p2p) then run once more with every GPU visible.
  std::vector<int> boards{-1};
  if (const int devices = cuda_device_count(); options.every_gpu && devices > 1) {
    boards.clear();
    for (int g = 0; g < devices; ++g) boards.push_back(g);
  }
  const bool every_gpu = boards.front() >= 0;
  auto runs_on = [&](const CeilingSpec& spec) {
    return every_gpu && spec.gpus <= 1 ? boards : std::vector<int>{-1};
  };
  // Each board's run sees that GPU alone; the run of every GPU (-1) and whatever follows see what
  // this process was given.
  const char* given_env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> given =
      given_env ? std::optional<std::string>(given_env) : std::nullopt;
  const std::vector<std::string> device_of =
      one_device_each(given, static_cast<int>(boards.size()));
  auto show_only = [&](int board) {
    if (board >= 0)
      ::setenv("CUDA_VISIBLE_DEVICES", device_of[board].c_str(), 1);
    else if (given)
      ::setenv("CUDA_VISIBLE_DEVICES", given->c_str(), 1);
    else
      ::unsetenv("CUDA_VISIBLE_DEVICES");
  };
  std::vector<int> order = boards;
  if (every_gpu) order.push_back(-1);

  // One process per repetition runs every selected case (separate processes, not Google
  // Benchmark repetitions: a repeated run must reproduce from a fresh start, and GB's
  // aggregate rows carry NaN coefficients of variation that are not valid JSON).
  std::map<int, std::map<std::string, std::vector<CaseResult>>>
      runs;                         // board -> case -> one result per repetition
  std::map<int, std::string> keys;  // board -> the hardware key it reported
  int status = kExitOk;
  for (const int board : order) {
    std::vector<CeilingSpec> specs;
    for (const auto& spec : chosen) {
      const auto on = runs_on(spec);
      if (std::find(on.begin(), on.end(), board) != on.end()) specs.push_back(spec);
    }
    if (specs.empty()) continue;
    std::string filter = "--benchmark_filter=^calibrate/(";
    for (std::size_t i = 0; i < specs.size(); ++i)
      filter += (i ? "|" : "") + std::string(specs[i].name);
    filter += ")/";
    const fs::path json_file =
        fs::temp_directory_path() / fmt::format("bench-calibrate-{}.json", ::getpid());
    std::vector<std::string> argv = {binary.string(), filter,
                                     "--benchmark_out=" + json_file.string(),
                                     "--benchmark_out_format=json"};
    argv.insert(argv.end(), options.harness_args.begin(), options.harness_args.end());
    if (every_gpu) {
      show_only(board);
      out << (board >= 0 ? fmt::format("GPU {} of {} (CUDA_VISIBLE_DEVICES={}):\n", board,
                                       boards.size(), device_of[board])
                         : std::string("every GPU, for the ceilings of several GPUs:\n"));
    }
    for (int rep = 0; rep < options.repetitions; ++rep) {
      out << std::flush;
      const ProcessResult process = run_process(argv, /*capture=*/false);
      if (!process.ok()) status = kExitFailed;
      try {
        const ResultsFile results = load_results(json_file);
        if (!keys.count(board)) keys[board] = hardware_key_of(results);
        for (auto& c : extract_cases(results)) runs[board][c.name].push_back(std::move(c));
      } catch (const std::exception& e) {
        err << "bench calibrate: run " << rep + 1 << " of the calibrate binary ("
            << process.describe() << ") left no results: " << e.what() << "\n";
        status = kExitFailed;
      }
      fs::remove(json_file);
    }
  }
  if (every_gpu) show_only(-1);
  // The machine's key (several GPUs: "4x_h100_80gb_hbm3") from the run that saw every GPU; a
  // one-GPU run's key is the one-GPU file's, where its ceilings go anyway (ceiling_files).
  const std::string hardware_key = keys.count(-1) ? keys[-1]
                                   : keys.empty() ? ""
                                                  : keys.begin()->second;

  const std::string date = utc_now(kIsoUtc);
  std::map<std::string, Ceiling> measured;
  out << fmt::format("\n{:<27} {:>10} {:<8} {:>7} {:>8}  {}\n", "ceiling", "value", "unit", "noise",
                     "spread", "outcome");
  for (const auto& spec : chosen) {
    // The stored figure is the median over repetitions of each run's median; its noise the
    // median of the runs' noise; the spread (max - min) / median says how well runs agree.
    // Over several boards: the best board's.
    const std::vector<int> on = runs_on(spec);
    std::vector<BoardFigure> figures;
    for (const int board : on)
      figures.push_back(board_figure(spec, runs[board][case_of(spec)], options.repetitions));
    const auto failed = std::find_if(figures.begin(), figures.end(),
                                     [](const BoardFigure& f) { return !f.failure.empty(); });
    if (failed != figures.end()) {
      if (!failed->skipped) status = kExitFailed;
      const std::string where =
          on.size() > 1 ? fmt::format(" on GPU {}", on[failed - figures.begin()]) : "";
      out << fmt::format("{:<27} {:>10} {:<8} {:>7} {:>8}  {}{} (not stored)\n", spec.name, "-",
                         spec.unit, "-", "-", failed->failure, where);
      continue;
    }
    std::vector<double> values;
    for (const auto& f : figures) values.push_back(f.value);
    const std::size_t best = best_board(spec, values);
    const BoardFigure& f = figures[best];
    std::string method(spec.method), boards_seen;
    if (on.size() > 1) {
      for (std::size_t i = 0; i < values.size(); ++i)
        boards_seen += fmt::format("{}{:.4g}", i ? ", " : "", values[i]);
      method += fmt::format("; the best of {} GPUs of one machine (GPU {}; all: {} {})", on.size(),
                            on[best], boards_seen, spec.unit);
    }
    measured[std::string(spec.name)] =
        Ceiling{f.value, std::string(spec.unit), f.noise, method, date};
    const std::string spread =
        options.repetitions > 1 ? fmt::format("{:.1f}%", 100.0 * f.spread) : "-";
    out << fmt::format("{:<27} {:>10.4g} {:<8} {:>6.2f}% {:>8}  measured{}\n", spec.name, f.value,
                       spec.unit, 100 * f.noise, spread,
                       on.size() > 1 ? fmt::format(" on GPU {} (GPUs 0..{}: {})", on[best],
                                                   on.size() - 1, boards_seen)
                                     : "");
  }

  // A ceiling is the most this GPU was seen to do. The copy kernel and cudaMemcpyAsync are two
  // ways to copy; whichever is faster on this card bounds every copy-like example (which one
  // wins differs by card: docs/expectations.md). Likewise the two read forms, and the two FP8
  // GEMMs (at 8192^3 ch19's persistent E4M3 kernel beats cuBLASLt's FP8):
  // calibration::kFasterOf.
  keep_faster(measured, out);

  if (measured.empty()) {
    err << "bench calibrate: nothing measured, nothing written\n";
    return kExitFailed;
  }
  // On a machine of several GPUs, one GPU's ceilings go to that GPU's one-GPU file (ceiling_files).
  for (const auto& [file, ceilings] : ceiling_files(dir, hardware_key, measured)) {
    try {
      const std::optional<Expectations> before = load_expectations(file);
      update_ceilings(file, ceilings);
      out << fmt::format("\nwrote {} ceiling(s) to {}{}\n", ceilings.size(), file.string(),
                         before ? "" : " (new file)");
      if (file.stem() != hardware_key)
        out << fmt::format(
            "  one GPU's ceilings, measured on one of {}'s GPUs: read from {} there too\n",
            hardware_key, file.filename().string());
      if (before)
        for (const auto& line : diff_expectations(*before, load_expectations(file).value()))
          out << "  " << line << "\n";
    } catch (const std::exception& e) {
      err << "bench calibrate: cannot update " << file.string() << ": " << e.what() << "\n";
      return kExitFailed;
    }
  }
  return status;
}

}  // namespace bench::tools
