// ch07/hbm_copy: how close a hand-written copy gets to cudaMemcpy's device-to-device copy, and
// what does not help on Hopper.
//
// What changes along the ladder, and the vendor rung:
//   1. baseline: the first copy anyone writes: one float per thread, one thread per element;
//   2. step "hints_2_in_flight": 16-byte accesses with streaming cache hints (LDG.E.NA.128 /
//      STG.E.EF.128: no L1 allocation for loads, evict-first stores) and 2 independent 16-byte
//      loads issued before the first store, one block per 2 x 256 float4: the textbook "tuned"
//      copy. It was this example's optimized rung until the H200 measured it under memcpy;
//   3. optimized "plain_float4": one float4 per thread, plain loads and stores (LDG.E.128 /
//      STG.E.128), 256-thread blocks. The 16-byte access is the whole win; on the H200 the
//      hints and the unrolling each cost time, and on the H100 neither gained (README's sweep);
//   4. vendor "memcpy": cudaMemcpyAsync device-to-device on the same buffers (target: the
//      optimized copy at >= 95% of its bandwidth).
// Also measured on the H100 and kept out: a persistent grid sized to the SMs (2, 4, 8 or 16
// blocks per SM striding over the buffer) ran slower than one block per chunk (README).
// The last n % 4 elements are copied by scalar accesses. All rungs copy every element exactly
// once: same bytes, same result.
//
//   ./bench compare --chapter ch07 --example hbm_copy
#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

#include <algorithm>

#include "copy_workload.cuh"

namespace {

using ch07::Copy;

constexpr int kBlock = 256;
constexpr int kUnroll = 2;  // the step's 16-byte loads in flight per thread
constexpr int64_t kChunk = int64_t{kUnroll} * kBlock;  // the step's float4s per block

// Step: block b copies float4s [b * kChunk, (b + 1) * kChunk): all kUnroll loads are issued,
// then all kUnroll stores, with the block's lanes adjacent in each. Block 0 also copies the
// n % 4 tail.
__global__ void __launch_bounds__(kBlock) hinted_copy(const float* __restrict__ src,
                                                      float* __restrict__ dst, int64_t n) {
  const auto* in = reinterpret_cast<const float4*>(src);
  auto* out = reinterpret_cast<float4*>(dst);
  const int64_t vectors = n / 4;
  const int64_t base = blockIdx.x * kChunk + threadIdx.x;
  float4 v[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    if (base + k * kBlock < vectors) v[k] = kernels::load_stream(in + base + k * kBlock);
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    if (base + k * kBlock < vectors) kernels::store_stream(out + base + k * kBlock, v[k]);
  if (blockIdx.x == 0 && 4 * vectors + threadIdx.x < n) dst[4 * vectors + threadIdx.x] = src[4 * vectors + threadIdx.x];
}

void launch_hinted(const Copy& w, cudaStream_t stream) {
  const int64_t blocks = std::max<int64_t>(1, (w.n / 4 + kChunk - 1) / kChunk);
  hinted_copy<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_memcpy(const Copy& w, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), w.src.data(), w.src.bytes(), cudaMemcpyDeviceToDevice, stream));
}

BENCH_EXAMPLE(ch07, hbm_copy, Copy)
    .int_axis("mib", ch07::kCopyMib, ch07::kCopyMibDefault)
    .baseline("naive", ch07::launch_scalar_copy)
    .step("hints_2_in_flight", launch_hinted)
    .optimized("plain_float4", ch07::launch_float4_copy</*kStreamingHints=*/false>)
    .vendor("memcpy", launch_memcpy)
    .reference(ch07::copy_reference)
    .device_reference(ch07::device_copy_reference)
    .tolerance(bench::exact());

}  // namespace
