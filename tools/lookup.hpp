// tools/lookup.hpp: finding things the commands share: a chapter's examples and their cases
// (compare, sanitize), and an executable on PATH or in a few known folders (profile, sanitize).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace bench::tools {

// `--example a,b`: each name is "copy" or "ch07/copy", both naming the example ch07/copy; an
// empty list selects every example.
bool example_selected(const std::string& example, const std::vector<std::string>& names);
// The names that select none of `examples`, in the order given: `--example` refuses them, so a
// typo is an error naming it rather than an empty run.
std::vector<std::string> unmatched_names(const std::vector<std::string>& examples,
                                         const std::vector<std::string>& names);
// The error for them, `places` being where they were looked for (chapters, or a results file):
// "--example nope matches no example of ch07 (`bench list` names them)".
std::string no_such_examples(const std::vector<std::string>& unmatched,
                             const std::vector<std::string>& places);

// A chapter binary's cases grouped by example (all its points together: one process runs
// them), examples in the binary's order.
struct ChapterExamples {
  std::vector<std::string> examples;                         // "ch07/copy", ...
  std::map<std::string, std::vector<std::string>> cases_of;  // example -> its cases
  std::string error;                                         // set when the cases could not be listed
};
// `point_args` select the axis points listed (point_args() below).
ChapterExamples chapter_examples(const std::filesystem::path& binary,
                                 const std::vector<std::string>& names,
                                 const std::vector<std::string>& point_args = {});

// `--axis NAME=V[,V]` (repeatable) and `--sweep` as the chapter binaries' flags:
// --bench_axis=NAME=V[,V], --bench_sweep.
std::vector<std::string> point_args(const std::vector<std::string>& axes, bool sweep);
// True when the point of `point_key` ("ch16/fa/b:4/s:4096") has every `--axis NAME=V[,V]` axis
// at one of its values (saved results rescored with --axis).
bool point_selected(const std::string& point_key, const std::vector<std::string>& axes);

bool is_executable(const std::filesystem::path& file);
// The folders of $PATH, in order.
std::vector<std::filesystem::path> path_dirs();

}  // namespace bench::tools
