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

#include "copy_workload.cuh"

namespace {

using ch07::Copy;

BENCH_EXAMPLE(ch07, copy_vectorized, Copy)
    .int_axis("mib", ch07::kCopyMib, ch07::kCopyMibDefault)
    .baseline("scalar", ch07::launch_scalar_copy)
    .optimized("float4", ch07::launch_float4_copy</*kStreamingHints=*/true>)
    .reference(ch07::copy_reference)
    .device_reference(ch07::device_copy_reference)
    .tolerance(bench::exact());

}  // namespace
