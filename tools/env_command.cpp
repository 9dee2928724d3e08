// `bench env`: what this machine is, as the expectations files and results know it.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "bench/device_info.hpp"
#include "bench/expectations.hpp"
#include "commands.hpp"

namespace bench::tools {
namespace {

// Clocks, persistence and power as the driver reports them (nvidia-smi, when it is there).
std::string nvidia_smi_state() {
  FILE* pipe = popen("nvidia-smi --query-gpu=persistence_mode,clocks.sm,clocks.max.sm,clocks.mem,"
                     "power.draw,power.limit,temperature.gpu --format=csv,noheader,nounits -i 0 2>/dev/null",
                     "r");
  if (pipe == nullptr) return "nvidia-smi unavailable";
  char line[512] = {};
  const bool got = fgets(line, sizeof line, pipe) != nullptr;
  pclose(pipe);
  if (!got) return "nvidia-smi unavailable";
  std::string s(line);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return "persistence, SM MHz, max SM MHz, memory MHz, power W, power limit W, temperature C: " + s;
}

}  // namespace

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
      << fmt::format("driver / runtime  {} (CUDA {}.{}) / {}.{}\n", d.driver_release.empty() ? "?" : d.driver_release,
                     d.driver_version / 1000, d.driver_version % 1000 / 10, d.runtime_version / 1000,
                     d.runtime_version % 1000 / 10)
      << fmt::format("build             {} {} (nvcc {}, arch {})\n", build.build_type, build.git_sha,
                     build.nvcc_version, build.cuda_architectures);
  const MeasuredClock clock = measure_sm_clock(0);
  out << fmt::format("SM clock measured {:.0f} MHz at first, {:.0f} MHz after 200 ms of load (timestamp kernel)\n",
                     clock.first_mhz, clock.loaded_mhz)
      << fmt::format("driver reports    {}\n", nvidia_smi_state());
  const std::filesystem::path dir = resolve_expectations_dir(where);
  const auto file = dir / (d.hardware_key + ".json");
  try {
    std::vector<std::filesystem::path> sources;  // a multi-GPU machine's, then its GPU's one-GPU file
    const auto expectations = load_expectations_for(dir, d.hardware_key, &sources);
    std::string read;
    for (const auto& source : sources) read += (read.empty() ? "" : " + ") + source.string();
    if (!expectations)
      out << fmt::format("expectations      none ({} does not exist)\n", file.string());
    else
      out << fmt::format("expectations      {}: {} ceilings, {} examples{}\n", read,
                         expectations->ceilings.size(), expectations->examples.size(),
                         expectations->ceilings.empty() ? " (run `bench calibrate`)" : "");
  } catch (const ExpectationsError& e) {
    out << "expectations      malformed: " << e.what() << "\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace bench::tools
