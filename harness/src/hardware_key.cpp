// The hardware key names the expectations file of a GPU model (DESIGN §6).
#include <cctype>
#include <string>

#include "bench/device_info.hpp"

namespace bench {

std::string hardware_key(const std::string& device_name, int device_count) {
  std::string slug;
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!slug.empty() && slug.back() != '_') {
      slug += '_';
    }
  }
  while (!slug.empty() && slug.back() == '_') slug.pop_back();
  const std::string vendor = "nvidia_";
  if (slug.rfind(vendor, 0) == 0) slug.erase(0, vendor.size());
  if (device_count > 1) slug = std::to_string(device_count) + "x_" + slug;
  return slug;
}

}  // namespace bench
