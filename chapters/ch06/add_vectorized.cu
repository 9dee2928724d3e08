// ch06/add_vectorized: c = a + b over 2^28 floats, with 4-byte or 16-byte accesses.
//
// ch07/copy_vectorized.cu shows 16-byte accesses on a copy (one stream in, one out). An add has
// three streams, two loads feeding one store, and shows better what a wider access buys per
// thread. For each thread, in SASS:
//   scalar : 2 x LDG.E (4 B), 1 FADD, 1 x STG.E (4 B), plus index and address arithmetic,
//            for 4 bytes of output; 8 bytes of loads in flight per thread;
//   float4 : 2 x LDG.E.128 (16 B), 4 FADD, 1 x STG.E.128 (16 B), the same index arithmetic,
//            for 16 bytes of output; 32 bytes of loads in flight per thread.
// So the vector form issues about a quarter of the instructions, needs a quarter of the
// threads (and blocks to schedule) for the same bytes, and every resident warp keeps four
// times the bytes in flight towards HBM, which is what hides the memory latency.
//
// What changes from baseline to optimized:
//   1. baseline: one float per thread (LDG.E / STG.E);
//   2. optimized: one float4 per thread, loaded with no L1 allocation and stored evict-first
//      (kernels/vector_access.cuh: each byte is touched once, caching it helps nobody);
//   3. the last n % 4 elements (odd verification size) are added by scalar accesses.
// Same additions, same bytes, bitwise-equal results. Target: >= 90% of the HBM copy ceiling,
// counting the three arrays (3 GiB) as the bytes moved.
//
//   ./bench compare --chapter ch06 --example add_vectorized
#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

#include "vector_add.cuh"

namespace {

using VectorAdd = ch06::VectorAdd<int64_t{1} << 28, 1'000'003>;  // 1 GiB per array

constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock) add_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ c, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Thread i adds float4 number i; the threads past the last full float4 add one tail element
// each. Each harness buffer is its own cudaMalloc (256-byte aligned), so every float4 is 16-byte aligned.
__global__ void __launch_bounds__(kBlock) add_float4(const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ c, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  const int64_t vectors = n / 4;
  if (i < vectors) {
    const float4 x = kernels::load_stream(reinterpret_cast<const float4*>(a) + i);
    const float4 y = kernels::load_stream(reinterpret_cast<const float4*>(b) + i);
    kernels::store_stream(reinterpret_cast<float4*>(c) + i, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
  } else if (const int64_t j = 4 * vectors + (i - vectors); j < n) {  // at most 3 tail elements
    c[j] = a[j] + b[j];
  }
}

void launch_scalar(const VectorAdd& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  add_scalar<<<blocks, kBlock, 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_float4(const VectorAdd& w, cudaStream_t stream) {
  const int64_t threads = w.n / 4 + w.n % 4;  // one per float4, one per tail element
  const auto blocks = static_cast<unsigned>((threads + kBlock - 1) / kBlock);
  add_float4<<<blocks, kBlock, 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, add_vectorized, VectorAdd)
    .baseline("float_per_thread", launch_scalar)
    .optimized("float4_per_thread", launch_float4)
    .reference(ch06::vector_add_reference<VectorAdd>)
    .device_reference(ch06::vector_add_device_reference<VectorAdd>)
    .tolerance(bench::exact());

}  // namespace
