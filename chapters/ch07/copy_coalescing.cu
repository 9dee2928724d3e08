// ch07/copy_coalescing: the same copy, read and written in two orders.
//
// What changes from baseline to optimized:
//   1. baseline: consecutive threads of a warp touch elements n/32 apart, so each warp-wide load
//      or store needs 32 separate 32-byte sectors and uses 4 bytes of each;
//   2. optimized: consecutive threads touch consecutive elements, so a warp's 32 loads fall in
//      four 32-byte sectors (one 128-byte line) and every byte fetched is used; each thread also
//      keeps four independent loads in flight.
// Both copy every element exactly once: same bytes, same result.
//
// The axis `mib` is each buffer's size: 1 GiB by default, down to 4 MiB (both buffers fit the L2)
// with --sweep.
//
//   ./bench compare --chapter ch07 --example copy_coalescing
#include <bench/bench.hpp>

#include "copy_workload.cuh"

namespace {

using ch07::Copy;

constexpr int kBlock = 256;

// Thread i copies element lane * columns + column of the n elements viewed as 32 rows: a warp's
// lanes land `columns` elements apart.
__global__ void strided_copy(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                             int64_t columns) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t j = (i % 32) * columns + i / 32;
  if (i < 32 * columns && j < n) dst[j] = src[j];
}

// Thread i copies elements i, i + stride, i + 2 stride, i + 3 stride of its block's chunk.
__global__ void coalesced_copy(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  constexpr int kPerThread = 4;
  const int64_t base = blockIdx.x * int64_t{blockDim.x} * kPerThread + threadIdx.x;
  float v[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t j = base + k * blockDim.x;
    if (j < n) v[k] = src[j];
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t j = base + k * blockDim.x;
    if (j < n) dst[j] = v[k];
  }
}

void launch_strided(const Copy& w, cudaStream_t stream) {
  const int64_t columns = (w.n + 31) / 32;
  const int64_t blocks = (32 * columns + kBlock - 1) / kBlock;
  strided_copy<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n, columns);
  BENCH_CHECK_LAUNCH();
}

void launch_coalesced(const Copy& w, cudaStream_t stream) {
  const int64_t blocks = (w.n + 4 * kBlock - 1) / (4 * kBlock);
  coalesced_copy<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch07, copy_coalescing, Copy)
    .int_axis("mib", ch07::kCopyMib, ch07::kCopyMibDefault)  // L2-resident to 1 GiB
    .baseline("strided", launch_strided)
    .optimized("coalesced", launch_coalesced)
    .reference(ch07::copy_reference)
    .device_reference(ch07::device_copy_reference)
    .tolerance(bench::exact());

}  // namespace
