// The list of registered examples, filled by BENCH_EXAMPLE during static initialisation.
#include "registry.hpp"

#include <algorithm>

namespace bench {

const char* to_string(Role role) {
  switch (role) {
    case Role::baseline: return "baseline";
    case Role::step: return "step";
    case Role::optimized: return "optimized";
    case Role::vendor: return "vendor";
  }
  return "unknown";
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::cold: return "cold";
    case Mode::hot: return "hot";
    case Mode::host: return "host";
    case Mode::sustained: return "sustained";
  }
  return "unknown";
}

namespace detail {

std::vector<std::unique_ptr<ExampleDef>>& registry() {
  static std::vector<std::unique_ptr<ExampleDef>> examples;
  return examples;
}

ExampleDef& register_example(std::string chapter, std::string name, std::string file) {
  auto def = std::make_unique<ExampleDef>();
  def->chapter = std::move(chapter);
  def->name = std::move(name);
  def->file = std::move(file);
  registry().push_back(std::move(def));
  return *registry().back();
}

std::vector<const ExampleDef*> sorted_examples() {
  std::vector<const ExampleDef*> out;
  for (const auto& e : registry()) out.push_back(e.get());
  std::stable_sort(out.begin(), out.end(), [](const ExampleDef* a, const ExampleDef* b) {
    return std::tie(a->chapter, a->name) < std::tie(b->chapter, b->name);
  });
  return out;
}

}  // namespace detail
}  // namespace bench
