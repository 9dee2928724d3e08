// ch05's pinned host buffers (a decoded batch, a staged FP16 tensor): allocated once with
// cudaMallocHost, so the uploads from them run at the link's pinned rate, and freed only after
// the device has finished, since an upload may still be reading one when its owner goes.
#pragma once

#include <cuda_runtime_api.h>

#include <bench/check.hpp>
#include <cstdint>

namespace ch05 {

template <class T>
class PinnedArray {
 public:
  explicit PinnedArray(int64_t count) {
    BENCH_CUDA_CHECK(cudaMallocHost(&data_, count * sizeof(T)));
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() {
    cudaDeviceSynchronize();
    cudaFreeHost(data_);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }

 private:
  T* data_ = nullptr;
};

}  // namespace ch05
