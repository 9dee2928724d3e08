// `bench expectations show|diff|validate`: reading expectations files without running anything.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "bench/expectations.hpp"
#include "commands.hpp"
#include "expectations_write.hpp"
#include "lookup.hpp"

namespace bench::tools {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> files_or_all(const ExpectationsOptions& options) {
  if (!options.files.empty()) return options.files;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(resolve_expectations_dir(options.where), ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Expectations load_existing(const std::string& file, const ExampleCheck& example = {}) {
  auto x = load_expectations(file, example);
  if (!x) throw ExpectationsError(file + ": no such file");
  return *x;
}

void show(const std::string& file, const Expectations& x, std::ostream& out) {
  out << fmt::format("{}: {} ({})\n", file, x.hardware_key, x.device.name);
  out << fmt::format("  ceilings ({})\n", x.ceilings.size());
  for (const auto& [name, c] : x.ceilings)
    out << fmt::format("    {:<20} {:>10.4g} {:<8} noise {:.1f}%  {}\n", name, c.value, c.unit, 100 * c.noise, c.date);
  out << fmt::format("  examples ({})\n", x.examples.size());
  for (const auto& [name, e] : x.examples) {
    out << fmt::format("    {:<32} speedup {:.2f}x +-{:.0f}%", name, e.speedup, 100 * e.tolerance);
    if (e.pct_ceiling) out << fmt::format(", {:.1f}% of ceiling", *e.pct_ceiling);
    out << fmt::format("  ({} {})\n", e.provenance.git_sha, e.provenance.date);
    for (const auto& [variant, v] : e.variants)
      out << fmt::format("      {:<28} {:.2f} us, noise {:.1f}%\n", variant, v.median_us, 100 * v.noise);
  }
}

}  // namespace

int expectations_command(const ExpectationsOptions& options, std::ostream& out, std::ostream& err) {
  if (options.action == "diff") {
    if (options.files.size() != 2) {
      err << "bench expectations diff: give two files, OLD NEW\n";
      return kExitUsage;
    }
    try {
      const auto lines = diff_expectations(load_existing(options.files[0]), load_existing(options.files[1]));
      for (const auto& line : lines) out << line << "\n";
      if (lines.empty()) out << "no differences\n";
      return kExitOk;
    } catch (const ExpectationsError& e) {
      err << e.what() << "\n";
      return kExitUsage;
    }
  }
  const auto files = files_or_all(options);
  if (files.empty()) {
    err << "bench expectations " << options.action << ": no files in "
        << resolve_expectations_dir(options.where) << "\n";
    return options.action == "validate" ? kExitOk : kExitFailed;
  }
  int status = kExitOk;
  // validate checks every example key against the examples the built chapters list.
  ExampleCatalog catalog(resolve_build_dir(options.where));
  for (const auto& file : files) {
    try {
      const bool validate = options.action == "validate";
      const Expectations x = load_existing(file, validate ? catalog.check() : ExampleCheck{});
      if (!validate) {
        show(file, x, out);
        continue;
      }
      out << fmt::format("ok {}: {} ceilings, {} examples", file, x.ceilings.size(), x.examples.size());
      // A check that could not be made is said, not passed over.
      if (const auto unchecked = catalog.take_unchecked(); !unchecked.empty())
        out << "; example keys not checked against the suite for " << describe_unchecked(unchecked);
      out << "\n";
    } catch (const ExpectationsError& e) {
      catalog.take_unchecked();
      err << e.what() << "\n";
      status = kExitUsage;
    }
  }
  return status;
}

}  // namespace bench::tools
