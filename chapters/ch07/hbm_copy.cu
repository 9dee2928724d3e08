// ch07/hbm_copy: how close a hand-written copy gets to the copy engine path of cudaMemcpy.
//
// What changes from baseline to optimized, and the vendor rung:
//   1. baseline: the first copy anyone writes: one float per thread, one thread per element;
//   2. optimized: 16-byte accesses (LDG.E.128 / STG.E.128) with streaming hints (no L1
//      allocation for loads, evict-first stores), kUnroll independent 16-byte loads issued before
//      the first store so each thread keeps 64 bytes in flight, and a grid sized to the SMs
//      (kBlocksPerSm resident blocks each) that strides over the buffer, so no block launches
//      late into a drained machine; the last n % 4 elements are copied by scalar accesses;
//   3. vendor "memcpy": cudaMemcpyAsync device-to-device on the same buffers, the number the
//      tuned kernel is measured against (target: >= 95% of its bandwidth).
// All three copy every element exactly once: same bytes, same result.
//
//   ./bench compare --chapter ch07 --example hbm_copy
#include <bench/bench.hpp>
#include <kernels/occupancy.cuh>
#include <kernels/vector_access.cuh>

#include <algorithm>

#include "copy_workload.cuh"

namespace {

using ch07::Copy;

constexpr int kBlock = 256;
constexpr int kUnroll = 4;        // 16-byte loads in flight per thread
constexpr int kBlocksPerSm = 8;   // 2048 threads per SM: the SM's full complement

// Each pass of the grid-stride loop moves a chunk of kUnroll * blockDim float4 per block: all
// kUnroll loads are issued, then all kUnroll stores, with a block's lanes adjacent in each.
__global__ void __launch_bounds__(kBlock) tuned_copy(const float* __restrict__ src,
                                                     float* __restrict__ dst, int64_t n) {
  const auto* in = reinterpret_cast<const float4*>(src);
  auto* out = reinterpret_cast<float4*>(dst);
  const int64_t vectors = n / 4;
  const int64_t chunk = int64_t{kUnroll} * blockDim.x;
  const int64_t full_chunks = vectors / chunk;
  for (int64_t c = blockIdx.x; c < full_chunks; c += gridDim.x) {
    const int64_t base = c * chunk + threadIdx.x;
    float4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = kernels::load_stream(in + base + k * blockDim.x);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) kernels::store_stream(out + base + k * blockDim.x, v[k]);
  }
  // Leftover float4s (fewer than one chunk) and the n % 4 tail, one element of work per thread.
  const int64_t tid = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t threads = int64_t{gridDim.x} * blockDim.x;
  for (int64_t v = full_chunks * chunk + tid; v < vectors; v += threads)
    kernels::store_stream(out + v, kernels::load_stream(in + v));
  for (int64_t j = 4 * vectors + tid; j < n; j += threads) dst[j] = src[j];
}

void launch_tuned(const Copy& w, cudaStream_t stream) {
  const int64_t chunks = (w.n / 4 + kUnroll * kBlock - 1) / (kUnroll * kBlock);
  static const int sms = kernels::sm_count();
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(chunks, int64_t{sms} * kBlocksPerSm));
  tuned_copy<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_memcpy(const Copy& w, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), w.src.data(), w.src.bytes(), cudaMemcpyDeviceToDevice, stream));
}

BENCH_EXAMPLE(ch07, hbm_copy, Copy)
    .baseline("naive", ch07::launch_scalar_copy)
    .optimized("tuned", launch_tuned)
    .vendor("memcpy", launch_memcpy)
    .reference(ch07::copy_reference)
    .tolerance(bench::exact());

}  // namespace
