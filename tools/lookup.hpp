// tools/lookup.hpp: finding things the commands share: a chapter's examples and their cases
// (compare, sanitize), and an executable on PATH or in a few known folders (profile, sanitize).
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/expectations.hpp"

namespace bench::tools {

// `--example a,b`: each name is "copy" or "ch07/copy", both naming the example ch07/copy; an
// empty list selects every example.
bool example_selected(const std::string& example, const std::vector<std::string>& names);
// The names that select none of `examples`, in the order given: `--example` refuses them, so a
// typo is an error naming it rather than an empty run.
std::vector<std::string> unmatched_names(const std::vector<std::string>& examples,
                                         const std::vector<std::string>& names);
// The error for them, `places` being where they were looked for (chapters, or a results file):
// "--example nope matches no example of ch07 (`bench list` names them)"; given the --axis and
// --sweep the listing took (as point_args() does), it says those points selected none (an
// example may lack the axis, or the value asked).
std::string no_such_examples(const std::vector<std::string>& unmatched,
                             const std::vector<std::string>& places,
                             const std::vector<std::string>& axes = {}, bool sweep = false);

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

// The suite's examples as the built chapter binaries list them (--benchmark_list_tests, no GPU
// needed), for the example keys of expectations files: `check()` is the ExampleCheck that
// validate, compare and the update read files with. Each chapter is listed once, when a key
// first names it. A key of a chapter with no binary in the build (not built, or no such chapter)
// cannot be checked: it passes, and `take_unchecked()` says which chapters those were.
class ExampleCatalog {
 public:
  explicit ExampleCatalog(std::filesystem::path build_dir) : build_dir_(std::move(build_dir)) {}
  // A chapter already listed (compare lists the chapters it runs): not listed again.
  // Its keys are the examples' points (results.hpp, example_of), taken from every case listed.
  void add(const std::string& chapter, const ChapterExamples& listed);
  ExampleCheck check();
  // The chapters whose keys could not be checked since the last call, with why.
  std::map<std::string, std::string> take_unchecked();

 private:
  struct Listing {
    std::set<std::string> examples;
    std::string unchecked;  // non-empty: why this chapter's keys cannot be checked
  };
  const Listing& listing(const std::string& chapter);
  std::filesystem::path build_dir_;
  std::map<std::string, Listing> chapters_;
  std::map<std::string, std::string> unchecked_;
};
// "ch04, ch99 (not built: no <build>/chapters/ch04/ch04)": what take_unchecked() returned, in a line.
std::string describe_unchecked(const std::map<std::string, std::string>& unchecked);

bool is_executable(const std::filesystem::path& file);
// The folders of $PATH, in order.
std::vector<std::filesystem::path> path_dirs();

}  // namespace bench::tools
