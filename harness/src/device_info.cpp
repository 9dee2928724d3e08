// Device facts for the run context and the hardware key.
#include <cuda_runtime.h>

#include <string>

#include "bench/check.hpp"
#include "bench/device_info.hpp"

namespace bench {

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA runtime reports 0 devices";
  return count;
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
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) info.pci_bus_id = bus;
  return info;
}

}  // namespace bench
