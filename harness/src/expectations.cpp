// Expectations files: strict parsing with file:line:column errors, the file a machine reads and
// its ceilings (writing and diffing: tools/expectations_write.cpp). Format: docs/expectations.md.
#include "bench/expectations.hpp"

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

namespace bench {
namespace {

using nlohmann::json;

std::string escape_pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// A key that appears twice in one object: nlohmann::json keeps the last silently.
struct DuplicateKey {
  std::string pointer;          // of the object holding it
  std::string key;
  std::size_t first = 0, second = 0;  // byte offsets of the two keys
};

// nlohmann::json keeps no source positions, so a second, tiny scanner walks the (already
// validated) text and records where each value starts, keyed by its JSON pointer. That lets a
// wrong type or an unknown key be reported at its line and column. It also finds the first key
// repeated within an object, which the parser would have let the last one win.
class OffsetScanner {
 public:
  explicit OffsetScanner(std::string_view text) : text_(text) {}
  std::map<std::string, std::size_t> scan() {
    value("");
    return std::move(offsets_);
  }
  const std::optional<DuplicateKey>& duplicate() const { return duplicate_; }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  std::string string_token() {  // at the opening quote
    std::string out;
    for (++pos_; pos_ < text_.size() && text_[pos_] != '"'; ++pos_) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;  // keep the escaped char
      out += text_[pos_];
    }
    ++pos_;
    return out;
  }
  void value(const std::string& path) {
    skip_space();
    if (pos_ >= text_.size()) return;
    offsets_[path] = pos_;
    const char c = text_[pos_];
    if (c == '{' || c == '[') {
      const bool object = c == '{';
      ++pos_;
      std::map<std::string, std::size_t> keys;  // this object's keys, where each first appeared
      for (int index = 0;; ++index) {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] == '}' || text_[pos_] == ']') break;
        std::string token = std::to_string(index);
        if (object) {
          const std::size_t at = pos_;
          token = string_token();
          if (auto [it, fresh] = keys.emplace(token, at); !fresh && !duplicate_)
            duplicate_ = DuplicateKey{path, token, it->second, at};
          skip_space();
          ++pos_;  // ':'
        }
        value(path + "/" + escape_pointer_token(token));
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == ',') ++pos_;
      }
      ++pos_;
    } else if (c == '"') {
      string_token();
    } else {
      while (pos_ < text_.size() && !std::strchr(",]} \t\r\n", text_[pos_])) ++pos_;
    }
  }
  std::string_view text_;
  std::size_t pos_ = 0;
  std::map<std::string, std::size_t> offsets_;
  std::optional<DuplicateKey> duplicate_;
};

struct Source {
  std::string_view text;
  const std::string& name;
  std::map<std::string, std::size_t> offsets;

  [[noreturn]] void fail(const std::string& pointer, const std::string& what) const {
    auto it = offsets.find(pointer);
    fail_at(it == offsets.end() ? 0 : it->second, pointer, what);
  }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& pointer, const std::string& what) const {
    const TextPosition at = text_position(text, offset);
    std::string where = pointer.empty() ? "the top level" : pointer;
    throw ExpectationsError(name + ":" + std::to_string(at.line) + ":" +
                            std::to_string(at.column) + ": at " + where + ": " + what);
  }
};

std::string fmt_duplicate(const std::string& key, std::size_t line, std::size_t column) {
  return "duplicate key \"" + key + "\" (first at line " + std::to_string(line) + ", column " +
         std::to_string(column) + "); JSON keeps only the last, so one of them would be silently ignored";
}

// The range a number must lie in: every numeric field of the format has one (docs/expectations.md).
enum class Range {
  positive,      // > 0: medians, speedups, ceilings, counts that must be at least one
  non_negative,  // >= 0: device sizes (0: not recorded)
  fraction,      // [0, 1]: relative noise
  tolerance,     // (0, 1): a band of +-100% or more would accept anything
};

bool in_range(double v, Range range) {
  if (!std::isfinite(v)) return false;
  switch (range) {
    case Range::positive: return v > 0;
    case Range::non_negative: return v >= 0;
    case Range::fraction: return v >= 0 && v <= 1;
    case Range::tolerance: return v > 0 && v < 1;
  }
  return false;
}

const char* range_text(Range range) {
  switch (range) {
    case Range::positive: return "a positive number";
    case Range::non_negative: return "a number >= 0";
    case Range::fraction: return "a relative figure in [0, 1] (0.01 = 1%)";
    case Range::tolerance: return "a relative tolerance in (0, 1) (0.10 = +-10%)";
  }
  return "?";
}

// One JSON object read strictly: only known keys, each with the type asked for.
class StrictObject {
 public:
  StrictObject(const Source& source, const json& value, std::string pointer, const char* what)
      : source_(source), value_(value), pointer_(std::move(pointer)) {
    if (!value.is_object())
      source.fail(pointer_, std::string("expected an object (") + what + "), found " +
                                value.type_name());
  }
  void allow_only(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, v] : value_.items()) {
      bool ok = false;
      for (auto k : known) ok |= key == k;
      if (!ok) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        source_.fail(child_pointer(key), "unknown key \"" + key + "\" (expected one of: " + list + ")");
      }
    }
  }
  const json* find(const std::string& key, bool required) const {
    auto it = value_.find(key);
    if (it != value_.end()) return &*it;
    if (required) source_.fail(pointer_, "missing required key \"" + key + "\"");
    return nullptr;
  }
  double number(const std::string& key, bool required, double fallback = 0.0) const {
    const json* v = find(key, required);
    if (!v) return fallback;
    if (!v->is_number()) source_.fail(child_pointer(key), type_error("a number", *v));
    return v->get<double>();
  }
  // A number that must lie in `range` (when present).
  double number(const std::string& key, bool required, Range range, double fallback = 0.0) const {
    const json* v = find(key, required);
    if (!v) return fallback;
    const double x = number(key, required, fallback);
    if (!in_range(x, range)) source_.fail(child_pointer(key), type_error(range_text(range), *v));
    return x;
  }
  int64_t integer(const std::string& key, Range range = Range::non_negative, int64_t fallback = 0) const {
    const json* v = find(key, false);
    if (!v) return fallback;
    if (!v->is_number_integer()) source_.fail(child_pointer(key), type_error("an integer", *v));
    const int64_t x = v->get<int64_t>();
    if (!in_range(double(x), range))
      source_.fail(child_pointer(key), type_error(range == Range::positive ? "a positive integer" : "an integer >= 0", *v));
    return x;
  }
  std::string string(const std::string& key, bool required = false) const {
    const json* v = find(key, required);
    if (!v) return {};
    if (!v->is_string()) source_.fail(child_pointer(key), type_error("a string", *v));
    return v->get<std::string>();
  }
  StrictObject object(const std::string& key, const char* what) const {
    return StrictObject(source_, *find(key, true), child_pointer(key), what);
  }
  const json& value() const { return value_; }
  std::string child_pointer(const std::string& key) const {
    return pointer_ + "/" + escape_pointer_token(key);
  }
  const Source& source() const { return source_; }

 private:
  static std::string type_error(const char* expected, const json& v) {
    return std::string("expected ") + expected + ", found " + v.type_name() + " " + v.dump();
  }
  const Source& source_;
  const json& value_;
  std::string pointer_;
};

ExampleExpectation read_example(const StrictObject& o) {
  ExampleExpectation e;
  e.expected_status = o.string("expected_status");
  if (!e.expected_status.empty() && e.expected_status != kExpectedNoSpeedup && e.expected_status != kExpectedSkipped)
    o.source().fail(o.child_pointer("expected_status"),
                    "expected \"no_speedup\" or \"skipped\", found \"" + e.expected_status + "\"");
  const bool skipped = e.expected_status == kExpectedSkipped;
  if (e.expected_status.empty())
    o.allow_only(
        {"variants", "metric", "speedup", "tolerance", "pct_ceiling", "provenance", "machines"});
  else if (!skipped)
    o.allow_only({"expected_status", "reason", "variants", "metric", "speedup", "tolerance",
                  "pct_ceiling", "provenance", "machines"});
  else  // the optimized side never runs here: nothing to hold a speedup to
    o.allow_only({"expected_status", "reason", "variants", "metric", "provenance"});
  if (o.find("metric", false)) {
    const StrictObject m =
        o.object("metric", "{name, better}: the figure the speedup is a ratio of");
    m.allow_only({"name", "better"});
    e.metric = ScoredMetric{m.string("name", true), m.string("better", true)};
    if (e.metric->name.empty())
      o.source().fail(m.child_pointer("name"), "expected a metric's name, found \"\"");
    if (e.metric->better != "lower" && e.metric->better != "higher")
      o.source().fail(m.child_pointer("better"),
                      "expected \"lower\" or \"higher\", found \"" + e.metric->better + "\"");
  }
  if (!e.expected_status.empty()) {
    e.reason = o.string("reason", true);
    if (e.reason.empty()) o.source().fail(o.child_pointer("reason"), "expected a non-empty string saying why");
  }
  if (!skipped || o.find("variants", false)) {
    const StrictObject variants = o.object("variants", "variant name -> {median_us, noise}");
    for (const auto& [name, v] : variants.value().items()) {
      StrictObject variant(o.source(), v, variants.child_pointer(name), "{median_us, noise}");
      variant.allow_only({"median_us", "noise"});
      e.variants[name] = {variant.number("median_us", true, Range::positive),
                          variant.number("noise", false, Range::fraction)};
    }
  }
  if (!skipped) {
    e.speedup = o.number("speedup", true, Range::positive);
    e.tolerance = o.number("tolerance", true, Range::tolerance);
  }
  if (o.find("pct_ceiling", false)) e.pct_ceiling = o.number("pct_ceiling", true, Range::positive);
  if (o.find("provenance", false)) {
    const StrictObject p = o.object("provenance", "git_sha, date, command, driver, cuda, gpu");
    p.allow_only({"git_sha", "date", "command", "driver", "cuda", "gpu"});
    e.provenance = {p.string("git_sha"), p.string("date"),   p.string("command"),
                    p.string("driver"),  p.string("cuda"),   p.string("gpu")};
  }
  if (const json* machines = o.find("machines", false)) {
    const std::string pointer = o.child_pointer("machines");
    if (!machines->is_array())
      o.source().fail(pointer, std::string("expected an array of {speedup, optimized_us, host, date}, found ") +
                                   machines->type_name());
    for (std::size_t i = 0; i < machines->size(); ++i) {
      StrictObject m(o.source(), (*machines)[i], pointer + "/" + std::to_string(i), "{speedup, optimized_us, host, date}");
      m.allow_only({"speedup", "optimized_us", "host", "date"});
      e.machines.push_back({m.number("speedup", true, Range::positive), m.number("optimized_us", true, Range::positive),
                            m.string("host"), m.string("date")});
    }
  }
  return e;
}

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ExpectationsError(file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TextPosition text_position(std::string_view text, std::size_t byte_offset) {
  TextPosition at;
  for (std::size_t i = 0; i < byte_offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
  }
  return at;
}

Expectations parse_expectations(std::string_view text, const std::string& source_name,
                                const ExpectationsChecks& checks) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const TextPosition at = text_position(text, e.byte > 0 ? e.byte - 1 : 0);
    throw ExpectationsError(source_name + ":" + std::to_string(at.line) + ":" +
                            std::to_string(at.column) + ": not valid JSON: " + e.what());
  }
  OffsetScanner scanner(text);
  const Source source{text, source_name, scanner.scan()};
  if (const auto& d = scanner.duplicate()) {
    const TextPosition first = text_position(text, d->first);
    source.fail_at(d->second, d->pointer,
                   fmt_duplicate(d->key, first.line, first.column));
  }
  const StrictObject top(source, doc, "", "an expectations file");
  top.allow_only({"format_version", "hardware_key", "device", "ceilings", "examples"});
  const double version = top.number("format_version", true);
  if (version != Expectations::kFormatVersion)
    source.fail("/format_version", "unsupported format_version " + doc["format_version"].dump() +
                                       " (this build reads 1)");
  Expectations x;
  x.hardware_key = top.string("hardware_key", true);
  if (!checks.hardware_key.empty() && x.hardware_key != checks.hardware_key)
    source.fail("/hardware_key", "hardware_key \"" + x.hardware_key + "\" does not match the file's name (" +
                                     checks.hardware_key + ".json): a file is read for the GPU its name says, so "
                                     "rename the file or fix the key");
  if (top.find("device", false)) {
    const StrictObject d = top.object("device", "the device description");
    d.allow_only({"name", "compute_capability", "sm_count", "l2_bytes", "memory_bytes",
                  "memory_bus_bits", "memory_clock_khz", "device_count"});
    x.device = {d.string("name"),          d.string("compute_capability"), d.integer("sm_count"),
                d.integer("l2_bytes"),     d.integer("memory_bytes"),
                d.integer("memory_bus_bits"), d.integer("memory_clock_khz"),
                d.integer("device_count", Range::positive, 1)};
  }
  if (top.find("ceilings", false)) {
    const StrictObject ceilings = top.object("ceilings", "ceiling name -> {value, unit, ...}");
    for (const auto& [name, v] : ceilings.value().items()) {
      StrictObject c(source, v, ceilings.child_pointer(name), "{value, unit, noise, method, date}");
      c.allow_only({"value", "unit", "noise", "method", "date"});
      x.ceilings[name] = {c.number("value", true, Range::positive), c.string("unit", true),
                          c.number("noise", false, Range::fraction), c.string("method"), c.string("date")};
    }
  }
  if (top.find("examples", false)) {
    const StrictObject examples = top.object("examples", "\"chNN/example\" -> expectation");
    // chNN/name, then the axis point of an example with axes: /axis:value per axis (docs/expectations.md).
    static const std::regex example_key("ch[0-9]{2}/[A-Za-z0-9_]+(/[A-Za-z0-9_]+:[A-Za-z0-9_.+-]+)*");
    for (const auto& [name, v] : examples.value().items()) {
      const std::string pointer = examples.child_pointer(name);
      if (!std::regex_match(name, example_key))
        source.fail(pointer, "example key \"" + name + "\" is not of the form chNN/name[/axis:value...]");
      if (checks.example)
        if (const std::string why = checks.example(name); !why.empty()) source.fail(pointer, why);
      x.examples[name] = read_example(StrictObject(source, v, pointer, "an example's expectation"));
      if (checks.metric &&
          x.examples[name].expected_status != kExpectedSkipped)  // a skip records no ratio
        if (const std::string why = checks.metric(name, x.examples[name].metric); !why.empty())
          source.fail(x.examples[name].metric ? pointer + "/metric" : pointer, why);
    }
  }
  return x;
}

std::optional<Expectations> load_expectations(const std::filesystem::path& file,
                                              const ExampleCheck& example,
                                              const MetricCheck& metric) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  return parse_expectations(read_file(file), file.string(),
                            {file.stem().string(), example, metric});
}

namespace {
// Where a machine key's "Nx_" prefix (hardware_key.cpp) ends: 0 for a one-GPU key.
size_t gpu_count_prefix(const std::string& key) {
  const auto x_at = key.find("x_");
  const bool counted = x_at != std::string::npos && x_at > 0 && key.find_first_not_of("0123456789") == x_at;
  return counted ? x_at + 2 : 0;
}
}  // namespace

std::string single_gpu_key(const std::string& hardware_key) {
  return hardware_key.substr(gpu_count_prefix(hardware_key));
}

int64_t gpu_count_of_key(const std::string& hardware_key) {
  const size_t prefix = gpu_count_prefix(hardware_key);
  return prefix == 0 ? 1 : std::stoll(hardware_key.substr(0, prefix - 2));
}

std::optional<Expectations> load_expectations_for(const std::filesystem::path& dir, const std::string& hardware_key,
                                                  std::vector<std::filesystem::path>* sources,
                                                  const ExampleCheck& example) {
  const std::filesystem::path machine_file = dir / (hardware_key + ".json");
  std::optional<Expectations> machine = load_expectations(machine_file, example);
  if (machine && sources) sources->push_back(machine_file);
  const std::string one_gpu = single_gpu_key(hardware_key);
  if (one_gpu == hardware_key) return machine;
  const std::filesystem::path one_gpu_file = dir / (one_gpu + ".json");
  std::optional<Expectations> single = load_expectations(one_gpu_file, example);
  if (!single) return machine;
  if (sources) sources->push_back(one_gpu_file);
  if (!machine) {
    single->hardware_key = hardware_key;
    return single;
  }
  machine->ceilings.merge(single->ceilings);  // merge keeps the machine's entry on a clash
  machine->examples.merge(single->examples);
  return machine;
}

std::string ceiling_for_mode(const std::string& declared, bool sustained,
                             const std::function<bool(const std::string&)>& has) {
  constexpr std::string_view suffix = "_tflops";
  for (const char* dtype : {"tf32", "bf16", "fp16", "fp8"}) {
    const std::string sustained_name = std::string(dtype) + std::string(suffix);
    const std::string burst_name = std::string(dtype) + "_burst" + std::string(suffix);
    if (declared != sustained_name && declared != burst_name) continue;
    if (sustained) return sustained_name;
    return has(burst_name) ? burst_name : declared;
  }
  return declared;
}

std::map<std::string, double> load_ceilings(const std::filesystem::path& dir,
                                            const std::string& hardware_key) {
  std::map<std::string, double> out;
  if (auto x = load_expectations_for(dir, hardware_key))
    for (const auto& [name, c] : x->ceilings) out[name] = c.value;
  return out;
}

}  // namespace bench
