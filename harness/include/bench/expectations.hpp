// bench/expectations.hpp: reading and writing expectations/<hardware_key>.json (format in
// docs/expectations.md). Host-only; used by the harness's .cpp files and by the tools, never by
// chapter code.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace bench {

// A malformed file: the message names the file, the line and column, and what was expected.
class ExpectationsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The `ceilings` block only, as name -> value (e.g. "hbm_copy_gbps" -> 3010.5). A missing file
// gives an empty map; a malformed one throws ExpectationsError.
std::map<std::string, double> load_ceilings(const std::filesystem::path& file);

}  // namespace bench
