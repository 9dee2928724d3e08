// The list of registered examples, filled by BENCH_EXAMPLE during static initialisation.
#include "registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

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

const char* to_string(Better better) { return better == Better::higher ? "higher" : "lower"; }

Point::Point(const std::string& text) : text_(text), values_(detail::parse_point(text)) {}

std::string Point::string_axis(std::string_view name) const {
  for (const auto& [axis, value] : values_)
    if (axis == name) return value;
  throw std::invalid_argument(fmt::format("point '{}' has no axis '{}'", text_, name));
}
int64_t Point::axis(std::string_view name) const { return std::stoll(string_axis(name)); }
double Point::float_axis(std::string_view name) const { return std::stod(string_axis(name)); }

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

std::string axis_text(int64_t value) { return std::to_string(value); }

std::string axis_text(double value) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {  // the shortest %g that reads back exactly
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> parse_point(const std::string& point) {
  std::vector<std::pair<std::string, std::string>> out;
  if (point.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(point.find('/', start), point.size());
    const std::string part = point.substr(start, end - start);
    const std::size_t colon = part.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == part.size())
      throw std::invalid_argument(fmt::format("'{}' in point '{}' is not axis:value", part, point));
    out.emplace_back(part.substr(0, colon), part.substr(colon + 1));
    if (end == point.size()) break;
    start = end + 1;
  }
  return out;
}

namespace {

bool contains(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

void check_axes(const ExampleDef& e) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("{}/{}: {}", e.chapter, e.name, what));
  };
  auto check_word = [&](const std::string& word, const char* what) {
    if (word.empty() || word.find_first_of("/:=, ") != std::string::npos)
      fail(fmt::format("{} '{}' is empty or holds one of / : = , or a space", what, word));
  };
  std::vector<std::string> names;
  for (const auto& axis : e.axes) {
    check_word(axis.name, "axis name");
    // Google Benchmark's own name suffixes, which the tools strip from a case name.
    for (const char* reserved : {"iterations", "repeats", "min_time", "min_warmup_time", "threads"})
      if (axis.name == reserved)
        fail(fmt::format("axis name '{}' is one of Google Benchmark's", reserved));
    if (contains(names, axis.name)) fail(fmt::format("axis '{}' declared twice", axis.name));
    names.push_back(axis.name);
    if (axis.values.empty()) fail(fmt::format("axis '{}' has no values", axis.name));
    for (std::size_t i = 0; i < axis.values.size(); ++i) {
      check_word(axis.values[i], "axis value");
      if (std::find(axis.values.begin(), axis.values.begin() + i, axis.values[i]) !=
          axis.values.begin() + i)
        fail(fmt::format("axis '{}' lists {} twice", axis.name, axis.values[i]));
    }
    for (const auto& d : axis.defaults)
      if (!contains(axis.values, d))
        fail(fmt::format("axis '{}': default {} is not one of its values", axis.name, d));
  }
}

// Every combination of `values_of` (one list per axis), first axis outermost.
std::vector<std::string> product(const ExampleDef& e,
                                 const std::vector<std::vector<std::string>>& values_of) {
  std::vector<std::string> points{""};
  for (std::size_t a = 0; a < e.axes.size(); ++a) {
    std::vector<std::string> next;
    for (const auto& prefix : points)
      for (const auto& v : values_of[a])
        next.push_back(prefix + (prefix.empty() ? "" : "/") + e.axes[a].name + ":" + v);
    points = std::move(next);
  }
  return points;
}

// A declared default point, checked and rewritten with the axes in declaration order.
std::string canonical_point(const ExampleDef& e, const std::string& point) {
  auto parsed = parse_point(point);
  std::string out;
  for (const auto& axis : e.axes) {
    auto it = std::find_if(parsed.begin(), parsed.end(),
                           [&](const auto& kv) { return kv.first == axis.name; });
    if (it == parsed.end() || !contains(axis.values, it->second))
      throw std::invalid_argument(
          fmt::format("{}/{}: default point '{}' needs {} set to one of its values", e.chapter,
                      e.name, point, axis.name));
    out += (out.empty() ? "" : "/") + axis.name + ":" + it->second;
    parsed.erase(it);
  }
  if (!parsed.empty())
    throw std::invalid_argument(fmt::format("{}/{}: default point '{}' names '{}', not an axis",
                                            e.chapter, e.name, point, parsed[0].first));
  return out;
}

// The run's points without --bench_sweep and --bench_axis: the declared default points, else the
// product of each axis's defaults (an axis without defaults: every value).
std::vector<std::string> default_points(const ExampleDef& e) {
  if (!e.default_points.empty()) {
    std::vector<std::string> points;
    for (const auto& p : e.default_points) {
      std::string point = canonical_point(e, p);
      if (!contains(points, point)) points.push_back(std::move(point));
    }
    return points;
  }
  std::vector<std::vector<std::string>> values_of;
  for (const auto& axis : e.axes)
    values_of.push_back(axis.defaults.empty() ? axis.values : axis.defaults);
  return product(e, values_of);
}

}  // namespace

std::vector<std::string> select_points(const ExampleDef& e, const PointSelection& selection) {
  check_axes(e);
  if (e.axes.empty())
    return selection.filters.empty() ? std::vector<std::string>{""} : std::vector<std::string>{};
  const std::vector<std::string> defaults = default_points(e);
  if (!selection.sweep && selection.filters.empty()) return defaults;
  const std::vector<Point> default_at(defaults.begin(), defaults.end());
  // Each axis's candidate values, in the axis's order: a filtered axis those of its values every
  // filter on it names; the others every value under --bench_sweep, else the values the default
  // points give them.
  std::vector<std::vector<std::string>> values_of(e.axes.size());
  std::vector<bool> filtered(e.axes.size(), false);
  for (const auto& [name, wanted] : selection.filters)
    if (std::none_of(e.axes.begin(), e.axes.end(),
                     [&](const AxisDef& a) { return a.name == name; }))
      return {};  // the example has no such axis
  for (std::size_t a = 0; a < e.axes.size(); ++a) {
    const AxisDef& axis = e.axes[a];
    const auto& filters = selection.filters;
    auto on_axis = [&](const auto& filter) { return filter.first == axis.name; };
    filtered[a] = std::any_of(filters.begin(), filters.end(), on_axis);
    for (const auto& v : axis.values) {
      const bool taken =
          filtered[a]
              ? std::all_of(filters.begin(), filters.end(),
                            [&](const auto& f) { return !on_axis(f) || contains(f.second, v); })
              : selection.sweep ||
                    std::any_of(default_at.begin(), default_at.end(),
                                [&](const Point& d) { return d.string_axis(axis.name) == v; });
      if (taken) values_of[a].push_back(v);
    }
  }
  std::vector<std::string> points = product(e, values_of);
  if (selection.sweep) return points;
  // Without --bench_sweep the filters narrow the default run where default points hold their
  // values, and widen it where none does: a candidate is kept if it is a default point, or if no
  // default point has its values on the filtered axes (--axis batch=32 where the defaults are
  // batch 1 and 8: batch 32, the other axes at their defaults).
  std::erase_if(points, [&](const std::string& text) {
    const Point point(text);
    auto agrees_on_filtered = [&](const Point& d) {
      for (std::size_t a = 0; a < e.axes.size(); ++a)
        if (filtered[a] && point.string_axis(e.axes[a].name) != d.string_axis(e.axes[a].name))
          return false;
      return true;
    };
    return !contains(defaults, text) &&
           std::any_of(default_at.begin(), default_at.end(), agrees_on_filtered);
  });
  return points;
}

std::vector<const ExampleDef*> expand_points(const std::vector<const ExampleDef*>& examples,
                                             const PointSelection& selection) {
  static std::vector<std::unique_ptr<ExampleDef>> copies;
  std::vector<const ExampleDef*> out;
  for (const ExampleDef* e : examples)
    for (const auto& point : select_points(*e, selection)) {
      auto copy = std::make_unique<ExampleDef>(*e);
      copy->point = point;
      const Point at(point);
      std::erase_if(copy->variants, [&](const VariantDef& v) { return v.where && !v.where(at); });
      for (const auto& [where, mode] : e->modes_where)
        if (where(at)) copy->mode = mode;
      copies.push_back(std::move(copy));
      out.push_back(copies.back().get());
    }
  return out;
}

std::string case_name(const ExampleDef& e, const VariantDef& v) {
  return e.point.empty() ? fmt::format("{}/{}/{}", e.chapter, e.name, v.name)
                         : fmt::format("{}/{}/{}/{}", e.chapter, e.name, v.name, e.point);
}

}  // namespace detail
}  // namespace bench
