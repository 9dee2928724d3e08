// ch06/add_parallel: c = a + b over 16M floats, by one block or by a grid that fills the GPU.
//
// A GPU is fast only when it has tens of thousands of threads to switch between: each SM keeps
// up to 64 warps resident and issues from whichever has its operands ready, so while most
// warps wait ~1 us for HBM the others keep the memory system busy. One block lives on ONE of
// the 132 SMs and keeps at most 32 of its warps' loads in flight; the other 131 SMs sit idle.
//
// What changes from baseline to optimized:
//   1. baseline: a single block of 1024 threads walks the whole vector (block-stride loop):
//      1,024 threads for 16,777,216 elements, the shape of a CPU loop moved to the GPU as is;
//   2. optimized: one thread per element, 65,536 blocks of 256 threads: 16,384 times as many
//      threads, spread over every SM, each with one element to add.
// Both read every a[i] and b[i] once and write every c[i] once: the same bytes, the same sums.
// The size keeps the single block well under a second per call (it moves 192 MiB through one
// SM at a few tens of GB/s), while the optimized grid is still far beyond the 50 MB L2.
//
//   ./bench compare --chapter ch06 --example add_parallel
#include <bench/bench.hpp>

#include "vector_add.cuh"

namespace {

using VectorAdd = ch06::VectorAdd<int64_t{1} << 24, 100'003>;

// One block loops over the vector: thread t adds elements t, t + 1024, t + 2048, ...
// Consecutive threads still touch consecutive floats, so every access is coalesced: the only
// thing wrong is how few threads there are.
constexpr int kOneBlock = 1024;
__global__ void add_one_block(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                              int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c[i] = a[i] + b[i];
}

// One thread per element: the loop is gone, the grid is the loop.
constexpr int kBlock = 256;
__global__ void add_grid(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                         int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

void launch_one_block(const VectorAdd& w, cudaStream_t stream) {
  add_one_block<<<1, kOneBlock, 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_grid(const VectorAdd& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  add_grid<<<blocks, kBlock, 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, add_parallel, VectorAdd)
    .baseline("one_block_loop", launch_one_block)
    .optimized("thread_per_element", launch_grid)
    .reference(ch06::vector_add_reference<VectorAdd>)
    .device_reference(ch06::vector_add_device_reference<VectorAdd>)
    .tolerance(bench::exact());

}  // namespace
