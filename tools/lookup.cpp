#include "lookup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "chapter_process.hpp"
#include "results.hpp"

namespace bench::tools {

namespace {

// `example` is an example, a case's point key or a case ("ch16/fa/b:4"): its example is named.
bool names_example(const std::string& example, const std::string& name) {
  const std::string base = base_example_of(example);
  return base == name || base.substr(base.find('/') + 1) == name;
}

}  // namespace

bool example_selected(const std::string& example, const std::vector<std::string>& names) {
  return names.empty() || std::any_of(names.begin(), names.end(),
                                      [&](const auto& n) { return names_example(example, n); });
}

std::vector<std::string> unmatched_names(const std::vector<std::string>& examples,
                                         const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names)
    if (std::none_of(examples.begin(), examples.end(),
                     [&](const auto& e) { return names_example(e, name); }))
      out.push_back(name);
  return out;
}

std::string no_such_examples(const std::vector<std::string>& unmatched,
                             const std::vector<std::string>& places,
                             const std::vector<std::string>& axes, bool sweep) {
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  std::vector<std::string> asked;  // as the user wrote them
  if (sweep) asked.push_back("--sweep");
  for (const auto& axis : axes) asked.push_back("--axis " + axis);
  return "--example " + join(unmatched) + (unmatched.size() == 1 ? " matches" : " match") +
         " no example of " + join(places) +
         (asked.empty() ? " (`bench list` names them)"
                        : " at the points " + join(asked) +
                              " select (`bench list --sweep` names every point)");
}

ChapterExamples chapter_examples(const std::filesystem::path& binary,
                                 const std::vector<std::string>& names,
                                 const std::vector<std::string>& point_args) {
  ChapterExamples out;
  for (const auto& name : list_cases(binary, &out.error, point_args)) {
    const std::string example = base_example_of(name);  // one process runs all its points
    if (!example_selected(example, names)) continue;
    if (!out.cases_of.count(example)) out.examples.push_back(example);
    out.cases_of[example].push_back(name);
  }
  return out;
}

namespace {
// An expectation's key is an example, or for an example with axes one of its points.
void insert_keys(const ChapterExamples& listed, std::set<std::string>& keys) {
  keys.insert(listed.examples.begin(), listed.examples.end());
  for (const auto& [example, cases] : listed.cases_of)
    for (const auto& c : cases) keys.insert(example_of(c));
}
}  // namespace

void ExampleCatalog::add(const std::string& chapter, const ChapterExamples& listed) {
  Listing& l = chapters_[chapter];
  insert_keys(listed, l.examples);
  l.unchecked.clear();
}

const ExampleCatalog::Listing& ExampleCatalog::listing(const std::string& chapter) {
  if (auto it = chapters_.find(chapter); it != chapters_.end()) return it->second;
  Listing& l = chapters_[chapter];
  const std::filesystem::path binary = chapter_binary(build_dir_, chapter);
  if (!is_executable(binary)) {
    l.unchecked = "not built: no " + binary.string();
    return l;
  }
  const ChapterExamples listed = chapter_examples(binary, {}, {"--bench_sweep"});  // every point
  if (!listed.error.empty()) l.unchecked = "could not list its cases: " + listed.error;
  insert_keys(listed, l.examples);
  return l;
}

ExampleCheck ExampleCatalog::check() {
  return [this](const std::string& example) -> std::string {
    const std::string chapter = example.substr(0, example.find('/'));
    const Listing& l = listing(chapter);
    if (!l.unchecked.empty()) {
      unchecked_.emplace(chapter, l.unchecked);
      return {};
    }
    if (l.examples.count(example)) return {};
    return "\"" + example + "\" names no example of the suite: " + chapter + " (" +
           chapter_binary(build_dir_, chapter).string() + ") has " + std::to_string(l.examples.size()) +
           " examples and not this one (`bench list --chapter " + chapter +
           "` names them); a renamed or removed example's entry must go too";
  };
}

std::map<std::string, std::string> ExampleCatalog::take_unchecked() {
  return std::exchange(unchecked_, {});
}

std::string describe_unchecked(const std::map<std::string, std::string>& unchecked) {
  std::string chapters, why;
  for (const auto& [chapter, reason] : unchecked) {
    chapters += (chapters.empty() ? "" : ", ") + chapter;
    why += (why.empty() ? "" : "; ") + chapter + ": " + reason;
  }
  return chapters + " (" + why + ")";
}

std::vector<std::string> point_args(const std::vector<std::string>& axes, bool sweep) {
  std::vector<std::string> args;
  if (sweep) args.push_back("--bench_sweep");
  for (const auto& axis : axes) args.push_back("--bench_axis=" + axis);
  return args;
}

bool point_selected(const std::string& point_key, const std::vector<std::string>& axes) {
  const auto point = axes_of(point_of(point_key));
  for (const auto& filter : axes) {
    const auto eq = filter.find('=');
    const std::string name = filter.substr(0, eq);
    std::vector<std::string> wanted;
    std::istringstream values(eq == std::string::npos ? "" : filter.substr(eq + 1));
    for (std::string v; std::getline(values, v, ',');) wanted.push_back(v);
    auto it =
        std::find_if(point.begin(), point.end(), [&](const auto& kv) { return kv.first == name; });
    if (it == point.end() || std::find(wanted.begin(), wanted.end(), it->second) == wanted.end())
      return false;
  }
  return true;
}

bool is_executable(const std::filesystem::path& file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) && ::access(file.c_str(), X_OK) == 0;
}

std::vector<std::filesystem::path> path_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string dir; std::getline(in, dir, ':');)
      if (!dir.empty()) dirs.emplace_back(dir);
  }
  return dirs;
}

}  // namespace bench::tools
