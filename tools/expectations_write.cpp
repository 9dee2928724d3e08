// tools/expectations_write.cpp: writing, updating and diffing expectations files
// (docs/expectations.md has the format; harness/src/expectations.cpp reads them).
#include "expectations_write.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace bench {
namespace {

using nlohmann::json;

json to_json(const Expectations& x) {
  json doc = {{"format_version", Expectations::kFormatVersion},
              {"hardware_key", x.hardware_key},
              {"device",
               {{"name", x.device.name},
                {"compute_capability", x.device.compute_capability},
                {"sm_count", x.device.sm_count},
                {"l2_bytes", x.device.l2_bytes},
                {"memory_bytes", x.device.memory_bytes},
                {"memory_bus_bits", x.device.memory_bus_bits},
                {"memory_clock_khz", x.device.memory_clock_khz},
                {"device_count", x.device.device_count}}},
              {"ceilings", json::object()},
              {"examples", json::object()}};
  for (const auto& [name, c] : x.ceilings)
    doc["ceilings"][name] = {{"value", c.value},
                             {"unit", c.unit},
                             {"noise", c.noise},
                             {"method", c.method},
                             {"date", c.date}};
  for (const auto& [name, e] : x.examples) {
    json& j = doc["examples"][name];
    if (!e.expected_status.empty()) {
      j["expected_status"] = e.expected_status;
      j["reason"] = e.reason;
    }
    const bool skipped = e.expected_status == kExpectedSkipped;
    if (e.metric) j["metric"] = {{"name", e.metric->name}, {"better", e.metric->better}};
    if (!skipped || !e.variants.empty()) j["variants"] = json::object();
    for (const auto& [variant, v] : e.variants)
      j["variants"][variant] = {{"median_us", v.median_us}, {"noise", v.noise}};
    if (!skipped) {
      j["speedup"] = e.speedup;
      j["tolerance"] = e.tolerance;
    }
    if (e.pct_ceiling) j["pct_ceiling"] = *e.pct_ceiling;
    const Provenance& p = e.provenance;
    j["provenance"] = {{"git_sha", p.git_sha}, {"date", p.date}, {"command", p.command},
                       {"driver", p.driver},   {"cuda", p.cuda}, {"gpu", p.gpu}};
    for (const auto& m : e.machines)
      j["machines"].push_back({{"speedup", m.speedup},
                               {"optimized_us", m.optimized_us},
                               {"host", m.host},
                               {"date", m.date}});
  }
  return doc;
}

}  // namespace

std::string serialize_expectations(const Expectations& expectations) {
  return to_json(expectations).dump(2) + "\n";
}

void save_expectations(const std::filesystem::path& file, const Expectations& expectations) {
  const std::string text = serialize_expectations(expectations);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::filesystem::path temp = file;
  temp += ".tmp." + std::to_string(::getpid());
  std::FILE* out = std::fopen(temp.c_str(), "wb");
  if (!out) throw ExpectationsError(temp.string() + ": cannot be created: " + std::strerror(errno));
  // The first failing step's errno (a full disk: ENOSPC from the write, the flush or the fsync).
  int error = 0;
  if (std::fwrite(text.data(), 1, text.size(), out) != text.size() || std::fflush(out) != 0 ||
      ::fsync(::fileno(out)) != 0)
    error = errno;
  if (std::fclose(out) != 0 && error == 0) error = errno;
  if (error != 0) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw ExpectationsError(temp.string() + ": write failed: " + std::strerror(error) + " (" +
                            file.string() + " is unchanged)");
  }
  std::error_code ec;
  std::filesystem::rename(temp, file, ec);  // atomic on POSIX: readers see old or new, never half
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw ExpectationsError(temp.string() + ": cannot be renamed to " + file.string() + ": " +
                            ec.message());
  }
}

void update_ceilings(const std::filesystem::path& file,
                     const std::map<std::string, Ceiling>& ceilings) {
  Expectations x = load_expectations(file).value_or(Expectations{});
  if (x.hardware_key.empty()) x.hardware_key = file.stem().string();
  for (const auto& [name, c] : ceilings) x.ceilings[name] = c;
  save_expectations(file, x);
}

std::vector<std::string> diff_expectations(const Expectations& before, const Expectations& after) {
  const json old_flat = to_json(before).flatten();
  const json new_flat = to_json(after).flatten();
  auto readable = [](std::string pointer) {  // "/examples/ch07~1copy/speedup" -> dotted form
    std::string out;
    for (std::size_t i = 1; i <= pointer.size(); ++i) {
      if (i == pointer.size()) break;
      if (pointer.compare(i, 2, "~1") == 0)
        out += '/', ++i;
      else if (pointer.compare(i, 2, "~0") == 0)
        out += '~', ++i;
      else
        out += pointer[i] == '/' ? '.' : pointer[i];
    }
    return out;
  };
  std::vector<std::string> lines;
  for (const auto& [key, value] : new_flat.items()) {
    auto it = old_flat.find(key);
    if (it == old_flat.end())
      lines.push_back("+ " + readable(key) + ": " + value.dump());
    else if (*it != value)
      lines.push_back("~ " + readable(key) + ": " + it->dump() + " -> " + value.dump());
  }
  for (const auto& [key, value] : old_flat.items())
    if (!new_flat.contains(key)) lines.push_back("- " + readable(key) + ": " + value.dump());
  return lines;
}

std::string scored_by_text(const std::optional<ScoredMetric>& metric) {
  return metric ? metric->name + " (" + metric->better + " is better)" : "time";
}

}  // namespace bench
