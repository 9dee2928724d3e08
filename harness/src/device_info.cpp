// Device facts for the run context and the hardware key.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "bench/check.hpp"
#include "bench/device_info.hpp"
#include "device_kernels.hpp"

namespace bench {

std::string no_device_reason(int cuda_error, const std::string& cuda_name, const std::string& cuda_text) {
  const std::string cuda = cuda_name + ": " + cuda_text;
  if (cuda_error == cudaErrorInsufficientDriver || cuda_error == cudaErrorNoDevice)
    return "no NVIDIA driver or GPU found (" + cuda + ")";
  return cuda;
}

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = no_device_reason(err, cudaGetErrorName(err), cudaGetErrorString(err));
    cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA runtime reports 0 devices";
  return count;
}

namespace {
// /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 ..."
std::string read_driver_release() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  return std::regex_search(s, m, std::regex(R"(Kernel Module\s+([0-9][0-9.]*))")) ? m[1].str() : "";
}

}  // namespace

// NVML's library is loaded at run time, so nothing links against it and a machine without it
// just gets "".
std::string driver_release_from_nvml(const std::string& library) {
  void* nvml = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (nvml == nullptr) return "";
  using Status = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
  const auto init = reinterpret_cast<Status (*)()>(::dlsym(nvml, "nvmlInit_v2"));
  const auto version = reinterpret_cast<Status (*)(char*, unsigned)>(::dlsym(nvml, "nvmlSystemGetDriverVersion"));
  const auto shutdown = reinterpret_cast<Status (*)()>(::dlsym(nvml, "nvmlShutdown"));
  std::string release;
  if (init != nullptr && version != nullptr && shutdown != nullptr && init() == 0) {
    char text[96] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
    if (version(text, sizeof text) == 0) release = text;
    shutdown();
  }
  ::dlclose(nvml);
  return release;
}

MeasuredClock measure_sm_clock(int index, double load_ms) {
  BENCH_CUDA_CHECK(cudaSetDevice(index));
  float* mhz = nullptr;
  unsigned long long* sink = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&mhz, sizeof(float)));
  BENCH_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned long long)));
  MeasuredClock clock;
  float host = 0;
  detail::launch_clock_probe(20'000, mhz, nullptr);
  BENCH_CUDA_CHECK(cudaMemcpy(&host, mhz, sizeof host, cudaMemcpyDeviceToHost));
  clock.first_mhz = host;
  detail::launch_spin(static_cast<uint64_t>(load_ms * 1e6), sink, nullptr);
  detail::launch_clock_probe(20'000, mhz, nullptr);
  BENCH_CUDA_CHECK(cudaMemcpy(&host, mhz, sizeof host, cudaMemcpyDeviceToHost));
  clock.loaded_mhz = host;
  cudaFree(mhz);
  cudaFree(sink);
  return clock;
}

DeviceInfo query_device(int index) {
  DeviceInfo info;
  info.index = index;
  BENCH_CUDA_CHECK(cudaGetDeviceCount(&info.device_count));
  cudaDeviceProp prop{};
  BENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  info.name = prop.name;
  info.hardware_key = hardware_key(info.name, info.device_count);
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.global_mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.smem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  info.memory_bus_bits = prop.memoryBusWidth;
  info.ecc = prop.ECCEnabled != 0;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, index));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, index));
  BENCH_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  BENCH_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  info.driver_release = read_driver_release();
  // A container often has no /proc/driver/nvidia (the lent GPU machines do not); NVML, which
  // nvidia-smi uses, comes with the driver and answers there.
  if (info.driver_release.empty()) info.driver_release = driver_release_from_nvml();
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) info.pci_bus_id = bus;
  return info;
}

}  // namespace bench
