// `bench report`: saved results files scored against their GPUs' expectations and drawn into one
// HTML page (tools/html_report.cpp): no GPU needed. Several files of one GPU are merged, each
// example point's newest result shown; an example measured in two or more of them gets a history.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <system_error>

#include "commands.hpp"
#include "html_report.hpp"
#include "results.hpp"

namespace bench::tools {

namespace fs = std::filesystem;

int report_command(const ReportOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<ReportRun> runs;
  // A file given twice would be merged with itself and drawn as two runs of history.
  std::set<fs::path> given;
  for (const auto& file : options.files) {
    std::error_code ignored;
    if (!given.insert(fs::weakly_canonical(file, ignored)).second) {
      err << "bench report: " << file << " is given twice; name each results file once\n";
      return kExitUsage;
    }
  }
  for (const auto& file : options.files) {
    ReportRun run;
    run.source = file;
    try {
      const ResultsFile results = load_results_to_score(file);
      run.context = results.context;
      const std::string key = results.context.value("hardware_key", std::string("unknown"));
      run.expectations = load_expectations_for(resolve_expectations_dir(options.where), key);
      run.card = score(extract_cases(results), run.expectations, key);
    } catch (const std::exception& e) {  // ResultsError names the file; a malformed expectations file too
      err << "bench report: " << e.what() << "\n";
      return kExitUsage;
    }
    runs.push_back(std::move(run));
  }
  // Oldest first, so a GPU's history reads left to right whatever order the files came in.
  std::stable_sort(runs.begin(), runs.end(), [](const ReportRun& a, const ReportRun& b) {
    return a.context.value("date", std::string()) < b.context.value("date", std::string());
  });
  // The SVG is the newest run's GPU, its runs merged as on the page. With no case to place it
  // would be an empty plot: refused before anything is written.
  ReportRun roofline_run;
  if (!options.svg.empty()) {
    std::vector<const ReportRun*> of_gpu;
    for (const auto& run : runs)
      if (run.card.hardware_key == runs.back().card.hardware_key) of_gpu.push_back(&run);
    roofline_run = runs.back();
    roofline_run.card = latest_per_point(of_gpu);
    if (roofline_points(roofline_run.card).empty()) {
      err << "bench report: --svg " << options.svg << ": " << no_roofline_reason(roofline_run)
          << "\n";
      return kExitUsage;
    }
  }
  auto write = [&](const std::string& path, const std::string& text) {
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file) throw std::runtime_error(path + ": cannot be written");
    out << path << "\n";
  };
  try {
    write(options.html, html_report(runs));
    if (!options.svg.empty()) write(options.svg, roofline_svg(roofline_run));
  } catch (const std::exception& e) {
    err << "bench report: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace bench::tools
