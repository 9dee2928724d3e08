// Host vectors to and from device memory for the GPU tests of kernels/ headers: upload allocates
// and copies, download copies back; failures are gtest failures of the calling test. upload waits
// for the device: a copy from pageable memory may return before its last bytes land, and a
// kernel on a non-blocking stream is not ordered after the legacy stream's copy.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

template <class T>
T* upload(const std::vector<T>& host) {
  T* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dev;
}

template <class T>
std::vector<T> download(const T* dev, std::size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}
