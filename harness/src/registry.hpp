// Internal: the examples BENCH_EXAMPLE registered.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench.hpp"

namespace bench::detail {

std::vector<std::unique_ptr<ExampleDef>>& registry();
// Every example, ordered by chapter then name (registration order across files is unspecified).
std::vector<const ExampleDef*> sorted_examples();

// ---- Axes: which points of each example a run takes (--bench_sweep, --bench_axis) ----------
struct PointSelection {
  bool sweep = false;  // every point, not only the declared defaults
  // --bench_axis=name=v1,v2: only points whose `name` is one of the values; an example without
  // that axis takes no point. Without `sweep` the filters narrow the default points where some
  // hold the values asked and otherwise take the values asked with the other axes at their
  // defaults (select_points).
  std::vector<std::pair<std::string, std::vector<std::string>>> filters;
};
// "b:4/s:4096" -> {{"b", "4"}, {"s", "4096"}}; throws std::invalid_argument when malformed.
std::vector<std::pair<std::string, std::string>> parse_point(const std::string& point);
// The points of `example` the selection takes, in order (first axis outermost), each written as
// in a case name; {""} for an example without axes (none if a filter names an axis). Throws
// std::invalid_argument, naming the example, for a bad declaration: an axis without values, a
// value or name holding '/', ':', '=', ',' or a space, a repeated axis or value, a default that is
// not a value, a default point that does not name every axis with one of its values.
std::vector<std::string> select_points(const ExampleDef& example, const PointSelection& selection);
// One ExampleDef per selected point of each example (a copy with `point` set), owned by the
// registry for the rest of the process, in the order of `examples`.
std::vector<const ExampleDef*> expand_points(const std::vector<const ExampleDef*>& examples,
                                             const PointSelection& selection);
// The case name: chNN/<example>/<variant>[/<point>].
std::string case_name(const ExampleDef& example, const VariantDef& variant);

}  // namespace bench::detail
