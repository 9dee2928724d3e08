// Internal: the device work the harness itself does. Every function enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bench/bench.hpp"

namespace bench::detail {

// Counter-based generator: element i of a buffer is a pure function of (seed, salt, i), so the
// same inputs come out whatever order buffers and variants are built in.
void launch_fill(void* data, DType dtype, int64_t count, Fill fill, uint64_t seed, uint64_t salt,
                 cudaStream_t stream);
// Adds an order-independent hash of `bytes` bytes at `data` into *accumulator (device memory).
void launch_checksum(const void* data, std::size_t bytes, unsigned long long* accumulator,
                     cudaStream_t stream);
// Reads `bytes` bytes so that L2 holds nothing a timed kernel could reuse.
void launch_l2_flush(const void* data, std::size_t bytes, unsigned int* sink,
                     cudaStream_t stream);
// Holds the GPU: `blocks` blocks of 512 threads (blocking_kernel_blocks(): every thread slot of
// every SM, so no other kernel can start beside them), each adding 1 to *arrived (device memory)
// once it runs, the one that brings it to `arrived_target` then writing arrived_target to
// *all_running (mapped host memory); each spins until *release becomes non-zero (set by the host
// through mapped memory) or timeout_ns passes, in which case it sets *timed_out. Work queued
// behind it starts back-to-back.
unsigned blocking_kernel_blocks();
void launch_blocking_kernel(const volatile int* release, uint64_t timeout_ns, int* timed_out,
                            unsigned long long* arrived, unsigned long long arrived_target,
                            unsigned long long* all_running, unsigned blocks, cudaStream_t stream);
// One thread counts `cycles` SM clock cycles against the global timer and writes the SM clock
// in MHz to *mhz.
void launch_clock_probe(long long cycles, float* mhz, cudaStream_t stream);
// An empty kernel: what timing a launch costs when the kernel does nothing.
void launch_empty(cudaStream_t stream);
// Spins for `ns` nanoseconds of global time (one block) and writes the time it measured.
void launch_spin(uint64_t ns, unsigned long long* measured_ns, cudaStream_t stream);
// What one on-device comparison of an output with its reference adds up (docs/validity.md row 2,
// device-checked samples): the counts verify.cpp's host comparison makes, so the verdict is
// the same (device_check.hpp reads it).
struct DeviceComparison {
  // No member initialisers: the kernel keeps these in shared memory. Value-initialise ({}).
  unsigned long long mismatches;  // elements outside exact or allclose
  unsigned long long non_finite;  // NaN or Inf in `actual` where the reference is finite
  double err2, ref2;              // sums of squared differences and squared reference values
};
// Compares `count` elements at `actual` with those at `expected` under a resolved tolerance and
// adds the counts into *sums (device memory, zeroed by the caller). The two hold `actual_dtype`,
// or `expected` holds FP32 (an FP32 device reference's values for a narrower output). It streams
// at HBM speed: a grid-stride loop (16-byte loads of both buffers where their dtypes agree), one
// atomic per count per block.
void launch_compare(const void* actual, DType actual_dtype, const void* expected,
                    DType expected_dtype, int64_t count, Tolerance tolerance,
                    DeviceComparison* sums, cudaStream_t stream);
// The work tracer's marker (work_tracer.hpp): an empty kernel CUPTI's records name with
// kTraceMarkerName, so the tracer can tell it from the variant's own kernels.
inline constexpr const char* kTraceMarkerName = "bench_trace_marker";
void launch_trace_marker(cudaStream_t stream);

}  // namespace bench::detail
