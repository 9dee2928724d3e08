// `bench env`: what this machine is, as the expectations files and results know it.
#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "bench/device_info.hpp"
#include "bench/expectations.hpp"
#include "commands.hpp"

namespace bench::tools {

int env_command(const Locations& where, std::ostream& out, std::ostream& err) {
  const BuildInfo& build = build_info();
  std::string why;
  if (cuda_device_count(&why) == 0) {
    err << "bench env: no CUDA device: " << why << "\n";
    return kExitFailed;
  }
  const DeviceInfo d = query_device(0);
  out << fmt::format("hardware key      {}\n", d.hardware_key)
      << fmt::format("gpu               {} (compute capability {}.{}, {} GPU(s))\n", d.name, d.cc_major,
                     d.cc_minor, d.device_count)
      << fmt::format("SMs               {} at up to {} MHz\n", d.sm_count, d.sm_clock_khz / 1000)
      << fmt::format("memory            {:.1f} GiB, {}-bit bus at {} MHz (datasheet {:.0f} GB/s), ECC {}\n",
                     d.global_mem_bytes / double(1ull << 30), d.memory_bus_bits, d.memory_clock_khz / 1000,
                     d.datasheet_hbm_gbps(), d.ecc ? "on" : "off")
      << fmt::format("L2                {:.1f} MiB\n", d.l2_bytes / double(1 << 20))
      << fmt::format("driver / runtime  {}.{} / {}.{}\n", d.driver_version / 1000, d.driver_version % 1000 / 10,
                     d.runtime_version / 1000, d.runtime_version % 1000 / 10)
      << fmt::format("build             {} {} (nvcc {}, arch {})\n", build.build_type, build.git_sha,
                     build.nvcc_version, build.cuda_architectures);
  const auto file = std::filesystem::path(resolve_expectations_dir(where)) / (d.hardware_key + ".json");
  try {
    const auto expectations = load_expectations(file);
    if (!expectations)
      out << fmt::format("expectations      none ({} does not exist)\n", file.string());
    else
      out << fmt::format("expectations      {}: {} ceilings, {} examples{}\n", file.string(),
                         expectations->ceilings.size(), expectations->examples.size(),
                         expectations->ceilings.empty() ? " (run `bench calibrate`)" : "");
  } catch (const ExpectationsError& e) {
    out << "expectations      malformed: " << e.what() << "\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace bench::tools
