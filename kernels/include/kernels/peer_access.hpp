// kernels/peer_access.hpp: turning on peer access between two GPUs (idempotent), for examples
// that copy or read across GPUs. Leaves the calling thread's current device as it was.
#pragma once

#include <bench/bench.hpp>

#include <cstddef>
#include <string>

namespace kernels {

// Lets `from` read and write `to`'s memory. Throws bench::Unsupported when the pair cannot.
inline void enable_peer_access(int from, int to) {
  int can = 0;
  BENCH_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) throw bench::Unsupported("GPU " + std::to_string(from) + " cannot access GPU " + std::to_string(to) + " as a peer");
  int current = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&current));
  BENCH_CUDA_CHECK(cudaSetDevice(from));
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();  // not an error: clear it
  BENCH_CUDA_CHECK(cudaSetDevice(current));
  if (err != cudaErrorPeerAccessAlreadyEnabled) BENCH_CUDA_CHECK(err);
}

// cudaMalloc on `device` (for a peer's buffer), leaving the current device as it was.
template <class T>
T* malloc_on(int device, std::size_t bytes) {
  int current = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&current));
  BENCH_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  BENCH_CUDA_CHECK(cudaSetDevice(current));
  BENCH_CUDA_CHECK(err);
  return static_cast<T*>(p);
}

// Frees what malloc_on(device, ...) returned; for destructors, so it does not throw.
inline void free_on(int device, void* p) {
  int current = 0;
  if (p == nullptr || cudaGetDevice(&current) != cudaSuccess) return;
  cudaSetDevice(device);
  cudaFree(p);
  cudaSetDevice(current);
}

}  // namespace kernels
