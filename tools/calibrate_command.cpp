// `bench calibrate`: run the calibrate binary, turn each case's counter into a ceiling, and
// store the ceilings with update_ceilings (atomic, every other entry kept).
#include "calibrate_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
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
// under what examples reach: on an H100 at its power limit, cuBLASLt BF16 ran between 707 and
// 831 TFLOP/s from one run to the next, and a median-based ceiling of 765 made a later 823 look
// impossible.
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

}  // namespace

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

  // One process per repetition runs every selected case (separate processes, not Google
  // Benchmark repetitions: a repeated run must reproduce from a fresh start, and GB's
  // aggregate rows carry NaN coefficients of variation that are not valid JSON).
  std::string filter = "--benchmark_filter=^calibrate/(";
  for (std::size_t i = 0; i < chosen.size(); ++i) filter += (i ? "|" : "") + std::string(chosen[i].name);
  filter += ")/";
  const fs::path json_file = fs::temp_directory_path() / fmt::format("bench-calibrate-{}.json", ::getpid());
  std::vector<std::string> argv = {binary.string(), filter, "--benchmark_out=" + json_file.string(),
                                   "--benchmark_out_format=json"};
  argv.insert(argv.end(), options.harness_args.begin(), options.harness_args.end());
  std::map<std::string, std::vector<CaseResult>> runs;  // case name -> one result per repetition
  std::string hardware_key;
  int status = kExitOk;
  for (int rep = 0; rep < options.repetitions; ++rep) {
    out << std::flush;
    const ProcessResult process = run_process(argv, /*capture=*/false);
    if (!process.ok()) status = kExitFailed;
    try {
      const ResultsFile results = load_results(json_file);
      if (hardware_key.empty()) hardware_key = hardware_key_of(results);
      for (auto& c : extract_cases(results)) runs[c.name].push_back(std::move(c));
    } catch (const std::exception& e) {
      err << "bench calibrate: run " << rep + 1 << " of the calibrate binary (" << process.describe()
          << ") left no results: " << e.what() << "\n";
      status = kExitFailed;
    }
    fs::remove(json_file);
  }

  const std::string date = utc_now(kIsoUtc);
  std::map<std::string, Ceiling> measured;
  out << fmt::format("\n{:<27} {:>10} {:<8} {:>7} {:>8}  {}\n", "ceiling", "value", "unit", "noise",
                     "spread", "outcome");
  for (const auto& spec : chosen) {
    const auto& reps = runs[case_of(spec)];
    const auto bad = std::find_if(reps.begin(), reps.end(), [](const CaseResult& c) {
      return c.outcome != Outcome::measured || !c.verified;
    });
    if (reps.size() != static_cast<std::size_t>(options.repetitions) || bad != reps.end()) {
      const bool skipped = bad != reps.end() && bad->outcome == Outcome::skipped;
      if (!skipped) status = kExitFailed;
      const std::string what = bad == reps.end() ? "FAILED: the case did not report"
                               : bad->outcome == Outcome::measured ? "FAILED: not verified"
                               : (skipped ? "SKIPPED: " : "FAILED: ") + bad->message;
      out << fmt::format("{:<27} {:>10} {:<8} {:>7} {:>8}  {} (not stored)\n", spec.name, "-",
                         spec.unit, "-", "-", what);
      continue;
    }
    // The stored figure is the median over repetitions of each run's median; its noise the
    // median of the runs' noise; the spread (max - min) / median says how well runs agree.
    std::vector<double> values, noises;
    for (const auto& c : reps) values.push_back(figure(spec, c)), noises.push_back(c.noise);
    const double value = stats::median(values);
    const double noise = stats::median(noises);
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    const std::string spread = reps.size() > 1 ? fmt::format("{:.1f}%", 100.0 * (*hi - *lo) / value) : "-";
    measured[std::string(spec.name)] = Ceiling{value, std::string(spec.unit), noise, std::string(spec.method), date};
    out << fmt::format("{:<27} {:>10.4g} {:<8} {:>6.2f}% {:>8}  measured\n", spec.name, value,
                       spec.unit, 100 * noise, spread);
  }

  // A ceiling is the most this GPU was seen to do. The copy kernel and cudaMemcpyAsync are two
  // ways to copy; whichever is faster on this card bounds every copy-like example (on an H100
  // the kernel measured 2942 GB/s and the copy engine path 3031 GB/s in the same run). Likewise
  // the two read forms (on an H200 the contiguous-chunk form read 3% faster than the sweep), and
  // the two FP8 GEMMs (at 8192^3 ch19's persistent E4M3 kernel ran 1.05x cuBLASLt's FP8 on an
  // H200 and 1.06x on an H100, in the same runs): calibration::kFasterOf.
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
