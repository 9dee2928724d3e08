// bench/device_info.hpp: what the run context records about the GPU and the build. Host-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct DeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string hardware_key;  // "h100_80gb_hbm3" (prefixed "2x_" etc. for several GPUs)
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  int64_t smem_per_block_optin = 0;
  int memory_bus_bits = 0;
  int memory_clock_khz = 0;   // peak, as the driver reports it
  int sm_clock_khz = 0;       // peak, as the driver reports it
  bool ecc = false;
  int driver_version = 0;     // CUDA version the driver supports: 13000 means 13.0
  std::string driver_release; // the kernel driver itself, "580.159.04" ("" if unknown)
  int runtime_version = 0;
  int device_count = 0;
  std::string pci_bus_id;
  double datasheet_hbm_gbps() const {  // bus width x DDR clock: a lead, not a ceiling
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0) / 1e9;
  }
};

// Slug of a device name: lower case, runs of other characters become one '_', the vendor
// prefix "nvidia_" removed; "Nx_" prepended when the machine has N > 1 GPUs.
std::string hardware_key(const std::string& device_name, int device_count);

// Queries the CUDA runtime. Throws bench::CudaError when there is no usable device.
DeviceInfo query_device(int index = 0);
// The driver release ("580.159.04") as NVML reports it (nvmlSystemGetDriverVersion), from the
// NVML library named; "" when it cannot be loaded or does not answer. query_device's fallback
// where /proc/driver/nvidia/version is missing.
std::string driver_release_from_nvml(const std::string& library = "libnvidia-ml.so.1");
// The SM clock as a timestamp kernel measures it (clock64 against %globaltimer), in MHz: once
// at whatever state the GPU is in, and once after `load_ms` of spinning, when an idle GPU has
// ramped up to its running clock.
struct MeasuredClock {
  double first_mhz = 0;
  double loaded_mhz = 0;
};
MeasuredClock measure_sm_clock(int index = 0, double load_ms = 200);
// Number of CUDA devices, 0 when there is none or no driver; `why` receives the reason
// (no_device_reason's words).
int cuda_device_count(std::string* why = nullptr);
// Why cudaGetDeviceCount found no device, in a user's words, the CUDA runtime's own text kept in
// parentheses: cudaErrorInsufficientDriver (35), which the runtime also returns when no NVIDIA
// driver is loaded at all, and cudaErrorNoDevice (100) both mean "no NVIDIA driver or GPU found";
// any other error is given as CUDA names it.
std::string no_device_reason(int cuda_error, const std::string& cuda_name, const std::string& cuda_text);

// Build facts captured at configure time.
struct BuildInfo {
  std::string git_sha;
  std::string build_type;
  std::string cuda_architectures;
  std::string cuda_flags;
  std::string nvcc_version;
  std::string source_dir;
};
const BuildInfo& build_info();
// The commit a result records: `from_environment` (BENCH_GIT_SHA when the program runs) when set
// and not empty, else `configured` (taken when CMake configured the build). The environment wins
// because the configured one goes stale when the tree changes under an existing build that does
// not configure again: a device call that sends a newer tree to a warm machine recorded the first
// call's commit.
std::string recorded_git_sha(const char* from_environment, const std::string& configured);

}  // namespace bench
