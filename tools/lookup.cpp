#include "lookup.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "chapter_process.hpp"

namespace bench::tools {

bool example_selected(const std::string& example, const std::string& filter) {
  return filter.empty() || example == filter || example.substr(example.find('/') + 1) == filter;
}

ChapterExamples chapter_examples(const std::filesystem::path& binary, const std::string& filter) {
  ChapterExamples out;
  for (const auto& name : list_cases(binary, &out.error)) {
    const std::string example = example_of(name);
    if (!example_selected(example, filter)) continue;
    if (!out.cases_of.count(example)) out.examples.push_back(example);
    out.cases_of[example].push_back(name);
  }
  return out;
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
