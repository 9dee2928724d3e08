// tools/lookup.hpp: finding things the commands share: a chapter's examples and their cases
// (compare, sanitize), and an executable on PATH or in a few known folders (profile, sanitize).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace bench::tools {

// "copy" and "ch07/copy" both name the example ch07/copy; an empty filter selects every example.
bool example_selected(const std::string& example, const std::string& filter);

// A chapter binary's cases grouped by example, examples in the binary's order.
struct ChapterExamples {
  std::vector<std::string> examples;                         // "ch07/copy", ...
  std::map<std::string, std::vector<std::string>> cases_of;  // example -> its cases
  std::string error;                                         // set when the cases could not be listed
};
ChapterExamples chapter_examples(const std::filesystem::path& binary, const std::string& filter);

bool is_executable(const std::filesystem::path& file);
// The folders of $PATH, in order.
std::vector<std::filesystem::path> path_dirs();

}  // namespace bench::tools
