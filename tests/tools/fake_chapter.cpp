// A stand-in for a chapter binary, host-only, for the crash-isolation test (VALIDITY row 13):
// it answers --benchmark_list_tests (and --bench_list_variants: its baselines run "naive", its
// optimized cases "tuned"), writes Google Benchmark JSON and sample files for the
// example its filter names, and aborts for ch99/crasher as a sticky CUDA error or a segfault
// would end a real one. Asked for no JSON (`bench run`), it prints the filter it was given.
// With FAKE_CHAPTER_HANG_IN=<example> it finishes that example's baseline, then stays in its
// optimized case (writing FAKE_CHAPTER_HANGING, if set, once it is there) until a signal ends it,
// as a long or hung case holds a real one; --bench_progress gets the harness's lines. With
// --bench_timeline=PATH it writes a planted two-call timeline there (two streams overlapping, then
// a gap before a copy), unless FAKE_CHAPTER_NO_TIMELINE is set, as a case that failed writes none.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::vector<std::string> kExamples = {"ch99/first", "ch99/crasher", "ch99/last"};

std::string flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return {};
}

bool has_flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == name) return true;
  return false;
}

// With --bench_sweep or --bench_axis (and only then, so the other tests see three examples), an
// example with an axis: ch99/sized at n:1 (its default point) and n:2 (--bench_sweep), chosen as
// the harness chooses them; an --bench_axis naming another axis leaves out every other example.
std::vector<std::string> points_of_sized(int argc, char** argv) {
  std::vector<std::string> points = {"n:1"};
  if (has_flag(argc, argv, "--bench_sweep")) points.push_back("n:2");
  const std::string axis = flag(argc, argv, "--bench_axis");  // one filter is enough here
  if (!axis.empty()) {
    if (axis.rfind("n=", 0) != 0) return {};
    std::erase_if(points, [&](const std::string& p) { return ("n=" + p.substr(2)) != axis; });
  }
  return points;
}
bool points_asked(int argc, char** argv) {
  return has_flag(argc, argv, "--bench_sweep") || !flag(argc, argv, "--bench_axis").empty();
}

nlohmann::json row(const std::string& name, const std::string& role, double median_us,
                   const std::filesystem::path& samples_dir) {
  std::mt19937 rng(static_cast<unsigned>(median_us));
  std::normal_distribution<double> noise(median_us, median_us * 0.01);
  std::vector<double> samples(40);
  for (double& s : samples) s = noise(rng);
  std::string file = name;
  for (char& c : file) c = c == '/' ? '.' : c;
  if (!samples_dir.empty()) {  // `bench sanitize` asks for none
    std::filesystem::create_directories(samples_dir);
    std::ofstream(samples_dir / (file + ".json"))
        << nlohmann::json{{"name", name}, {"unit", "us"}, {"samples", samples},
                          {"fingerprint", {{"hash", "00000000000000aa"}}}}.dump();
  }
  return {{"name", name + "/iterations:1/manual_time"}, {"run_type", "iteration"},
          {"iterations", 1}, {"real_time", median_us}, {"cpu_time", median_us}, {"time_unit", "us"},
          {"noise", 0.01}, {"samples", 40}, {"verified", 1},
          {"label", "role=" + role + ";fp=00000000000000aa;mode=cold;stop=converged"}};
}

}  // namespace

int main(int argc, char** argv) {
  if (has_flag(argc, argv, "--bench_list_variants")) {  // the rungs its role-named cases run
    const auto line = [](const std::string& c, const std::string& role) {
      std::cout << c << "/" << role << " " << role << " "
                << (role == "baseline" ? "naive" : "tuned") << "\n";
    };
    if (flag(argc, argv, "--bench_axis").empty())
      for (const auto& e : kExamples) line(e, "baseline"), line(e, "optimized");
    if (points_asked(argc, argv))
      for (const auto& p : points_of_sized(argc, argv)) {
        std::cout << "ch99/sized/baseline/" << p << " baseline naive\n"
                  << "ch99/sized/optimized/" << p << " optimized tuned\n";
      }
    return 0;
  }
  if (!flag(argc, argv, "--benchmark_list_tests").empty()) {
    if (flag(argc, argv, "--bench_axis").empty())
      for (const auto& e : kExamples) std::cout << e << "/baseline/iterations:1/manual_time\n"
                                                << e << "/optimized/iterations:1/manual_time\n";
    if (points_asked(argc, argv))
      for (const auto& p : points_of_sized(argc, argv))
        std::cout << "ch99/sized/baseline/" << p << "/iterations:1/manual_time\n"
                  << "ch99/sized/optimized/" << p << "/iterations:1/manual_time\n";
    return 0;
  }
  const std::string filter = flag(argc, argv, "--benchmark_filter");  // "^ch99/<example>/"
  if (const std::string timeline = flag(argc, argv, "--bench_timeline"); !timeline.empty()) {
    if (std::getenv("FAKE_CHAPTER_NO_TIMELINE")) return 0;
    const auto activity = [](const char* kind, const char* what, int stream, int start_ns,
                             int duration_ns) {
      return nlohmann::json{{"kind", kind},         {"what", what},
                            {"device", 0},          {"stream", stream},
                            {"start_ns", start_ns}, {"duration_ns", duration_ns}};
    };
    nlohmann::json calls = nlohmann::json::array();
    for (int call = 0; call < 2; ++call)
      calls.push_back({activity("kernel", "_Z10chain_stepPKfPfli", 7, 0, 10000 + 1000 * call),
                       activity("kernel", "_Z10chain_stepPKfPfli", 8, 5000, 10000 - 1000 * call),
                       activity("copy", "copy of 4096 bytes", 7, 20000, 2000)});
    std::ofstream(timeline) << nlohmann::json{{"case", filter.substr(1, filter.find('(') - 1)},
                                              {"gpu_name", "Test GPU"},
                                              {"calls", 2},
                                              {"traced_calls", calls}};
    return 0;
  }
  if (flag(argc, argv, "--benchmark_out").empty()) {  // `bench run`: show what it was asked to run
    std::cout << "filter " << filter << "\n";
    return 0;
  }
  // "^ch99/<example>/", or from `bench sanitize --variant` "^ch99/<example>/(<v>|<w>)(/|$)": then
  // only those variants' rows are written, as a real chapter's filter leaves only their cases.
  const std::size_t alternatives = filter.find("/(");
  const std::string example = alternatives == std::string::npos
                                  ? filter.substr(1, filter.size() - 2)
                                  : filter.substr(1, alternatives - 1);
  std::vector<std::string> variants;
  if (alternatives != std::string::npos) {
    std::stringstream list(filter.substr(alternatives + 2, filter.find(')') - alternatives - 2));
    for (std::string v; std::getline(list, v, '|');) variants.push_back(v);
  }
  if (example == "ch99/crasher") {
    std::cerr << "FATAL: sticky CUDA error: an illegal memory access was encountered\n";
    std::abort();
  }
  const std::filesystem::path samples = flag(argc, argv, "--bench_samples_out");
  const std::string progress = flag(argc, argv, "--bench_progress");
  const auto note = [&](const char* what, const std::string& name) {
    if (!progress.empty()) std::ofstream(progress, std::ios::app) << what << ' ' << name << '\n';
  };
  if (const char* hang_in = std::getenv("FAKE_CHAPTER_HANG_IN"); hang_in && example == hang_in) {
    note("start", example + "/baseline");
    note("end", example + "/baseline");
    note("start", example + "/optimized");
    if (const char* hanging = std::getenv("FAKE_CHAPTER_HANGING"))
      std::ofstream(hanging) << "hanging\n";
    std::this_thread::sleep_for(std::chrono::seconds(60));  // a signal ends it first
    return 1;
  }
  nlohmann::json out = {{"context",
                         {{"hardware_key", "test_gpu"},
                          {"gpu_name", "Test GPU"},
                          // where a real chapter would read its ceilings from
                          {"fake_expectations_dir", flag(argc, argv, "--bench_expectations_dir")}}},
                        {"benchmarks",
                         {row(example + "/baseline", "baseline", 200, samples),
                          row(example + "/optimized", "optimized", 100, samples)}}};
  if (example == "ch99/sized") {  // one pair per point: 2x at n:1, no speedup at n:2
    out["benchmarks"] = nlohmann::json::array();
    for (const auto& p : points_of_sized(argc, argv)) {
      out["benchmarks"].push_back(row("ch99/sized/baseline/" + p, "baseline", 200, samples));
      out["benchmarks"].push_back(row("ch99/sized/optimized/" + p, "optimized", p == "n:1" ? 100 : 200, samples));
    }
  }
  if (!variants.empty()) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& b : out["benchmarks"]) {
      const std::string name = b["name"];  // ch99/<example>/<variant>/...
      const std::size_t from = name.find('/', name.find('/') + 1) + 1;
      const std::string variant = name.substr(from, name.find('/', from) - from);
      if (std::find(variants.begin(), variants.end(), variant) != variants.end()) kept.push_back(b);
    }
    out["benchmarks"] = kept;
  }
  std::ofstream(flag(argc, argv, "--benchmark_out")) << out.dump(1);
  return 0;
}
