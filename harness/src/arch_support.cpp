#include "arch_support.hpp"

#include <fmt/format.h>

namespace bench::detail {

std::string arch_specific_reason(int arch, int cc, std::string_view gpu, std::string_view built_archs) {
  if (arch == 0) return {};
  if (cc != arch)
    return fmt::format("uses sm_{}a-only instructions, which run on compute capability {}.{} only; this GPU ({}) "
                       "is {}.{}", arch, arch / 10, arch % 10, gpu, cc / 10, cc % 10);
  const std::string target = std::to_string(arch) + "a";
  std::string_view rest = built_archs;
  while (!rest.empty()) {  // CMake's list: entries separated by ';'
    const auto end = rest.find(';');
    if (rest.substr(0, end) == target) return {};
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  return fmt::format("uses sm_{}a-only instructions, and this build's CUDA architectures ({}) do not include {} "
                     "(configure with -DBENCH_ARCH={})", arch, built_archs, target, target);
}

}  // namespace bench::detail
