// Placeholder until the expectations model lands: reads only the ceilings block.
#include "bench/expectations.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace bench {

std::map<std::string, double> load_ceilings(const std::filesystem::path& file) {
  std::map<std::string, double> out;
  std::ifstream in(file);
  if (!in) return out;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw ExpectationsError(file.string() + ": " + e.what());
  }
  if (doc.contains("ceilings"))
    for (auto& [name, c] : doc["ceilings"].items()) out[name] = c.at("value").get<double>();
  return out;
}

}  // namespace bench
