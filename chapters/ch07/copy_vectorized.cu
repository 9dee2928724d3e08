// ch07/copy_vectorized: the same coalesced copy, 4 bytes or 16 bytes per access.
//
// What changes from baseline to optimized:
//   1. baseline: one float per thread; a warp's load is one 128-byte request (LDG.E), so the
//      SM issues one load and one store instruction, and keeps one thread slot busy, per 4 bytes;
//   2. optimized: one float4 per thread (LDG.E.128 / STG.E.128 in SASS); a warp's load is a
//      512-byte request, a quarter of the instructions, threads and address arithmetic for the
//      same bytes, and four times the bytes in flight per thread;
//   3. the last n % 4 elements (odd sizes) are copied by scalar accesses, so any n works.
// Both copy every element exactly once: same bytes, same result.
//
//   ./bench compare --chapter ch07 --example copy_vectorized
#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

#include "copy_workload.cuh"

namespace {

using ch07::Copy;

constexpr int kBlock = 256;

// Thread i copies float4 number i; the threads past the last full float4 copy the tail.
__global__ void vector_copy(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t vectors = n / 4;
  if (i < vectors) {
    kernels::store_stream(reinterpret_cast<float4*>(dst) + i,
                          kernels::load_stream(reinterpret_cast<const float4*>(src) + i));
  } else {
    const int64_t j = 4 * vectors + (i - vectors);  // at most 3 tail elements
    if (j < n) dst[j] = src[j];
  }
}

void launch_vector(const Copy& w, cudaStream_t stream) {
  const int64_t threads = w.n / 4 + w.n % 4;
  const int64_t blocks = (threads + kBlock - 1) / kBlock;
  vector_copy<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch07, copy_vectorized, Copy)
    .baseline("scalar", ch07::launch_scalar_copy)
    .optimized("float4", launch_vector)
    .reference(ch07::copy_reference)
    .tolerance(bench::exact());

}  // namespace
