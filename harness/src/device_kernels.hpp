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
// The flags a hold (launch_blocking_kernel) shares with the host. Tickets only grow: each hold
// has its own, and a flag holding a ticket needs no reset between holds.
struct HoldFlags {
  const volatile unsigned long long* release;  // mapped: the highest ticket the host released
  unsigned long long* released;                // device: the same, as block 0 passes it on
  unsigned* arrived;                           // device: blocks of this hold running (zeroed first)
  volatile unsigned long long* running;        // mapped: the last hold whose blocks all ran
  volatile unsigned long long* timed_out;      // mapped: the last hold that gave up waiting
  const uint4* flush = nullptr;  // read once by the grid when released (the L2 flush), or none
  std::size_t flush_count = 0;   // 16-byte vectors
  unsigned int* flush_sink = nullptr;
};
// How many blocks of the hold fill every thread slot of every SM of `device`, so that no other
// kernel can start beside them; 0 where its blocks cannot fill an SM exactly.
unsigned blocking_kernel_blocks(int device);
// Queues the hold `ticket` on `stream`: `blocks` blocks (at least 1) that each end once the host
// releases `ticket` (or a later one), or after timeout_ns, writing `ticket` to *flags.timed_out.
// Once all of them run, *flags.running becomes `ticket`. Work queued behind it starts back-to-back.
void launch_blocking_kernel(const HoldFlags& flags, unsigned long long ticket, unsigned blocks,
                            uint64_t timeout_ns, cudaStream_t stream);
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
