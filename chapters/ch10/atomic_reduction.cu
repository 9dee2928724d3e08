// ch10/atomic_reduction: a global sum needs no second kernel: each block adds its sum to one
// total with an atomic, and the last block to arrive writes the result.
//
// The work: the sum of 2^28 FP32 values (1 GiB, read once) into one float. Both variants sum
// each 64 KB chunk in one block with the same code (global_sum.cuh: 16-byte streaming loads, 4
// in flight per thread, 16,384 short-lived blocks); only what happens to the 16,384 block sums
// differs.
//
// What the hardware does: an atomic on global memory is performed in L2, at the slice that owns
// the address, not in the SM; the SM's thread can go on (RED, no return value) while the add
// travels. Adds from all SMs to one address are serialised there, one every few clocks, which is
// ample for 16,384 of them spread over ~340 us.
//
// Why the baseline pays: the two-pass form ends pass 1 with every block storing its sum in a
// partials array, then launches a second kernel (one 1024-thread block) that reads them back and
// writes the sum. That costs the gap between two kernels (the first must drain completely before
// the second starts), the second kernel's own latency-bound run (16 independent loads per
// thread from L2, a block reduction) and 64 KB of partials to L2 and back. At 1 GiB this is a
// few microseconds against ~340 us of HBM streaming: the expected gain is ~1%, and it is the
// second launch and the tail, not bandwidth. (At small sizes, where the stream itself takes a
// few microseconds, the same saving is most of the time.)
//
// What changes from baseline to optimized:
//   1. baseline `two_pass`: chunk_partials<<<16384, 256>>> then sum_partials<<<1, 1024>>>;
//   2. optimized `atomic_last_block`: one kernel; thread 0 of each block does
//      atomicAdd(total, (double)block_sum), __threadfence(), atomicInc(arrivals, blocks - 1); the
//      block that sees blocks - 1 (the last) fences again, takes the total and resets it
//      (atomicExch to 0) and writes the float sum. atomicInc wraps the counter back to 0, so the
//      next launch starts clean without a memset.
//   3. FP64 total: float atomics would make the low bits of the result depend on the order the
//      blocks finish in, which changes from run to run; an FP64 total makes that order invisible
//      after the final rounding to float (the tolerance, global_sum.cuh, is the FP32 in-block
//      part's). A float atomicAdd straight into the output would also need the output zeroed by
//      a memset first: a second operation on the stream, which is what we set out to remove.
// Target: >= 90% of the HBM read ceiling (bench::ceiling::hbm_read) at 1 GiB, for both.
//
//   ./bench compare --chapter ch10 --example atomic_reduction
#include "global_sum.cuh"

namespace {

__global__ void __launch_bounds__(ch10::kBlock) atomic_last_block(const float* __restrict__ x, int64_t n,
                                                                  ch10::SinglePass pass) {
  const float block_sum = ch10::block_chunk_sum(x, n, blockIdx.x);
  if (threadIdx.x == 0) ch10::add_and_finish(block_sum, gridDim.x, pass);
}

void launch_atomic_last_block(const ch10::GlobalSum& w, cudaStream_t stream) {
  atomic_last_block<<<w.chunks, ch10::kBlock, 0, stream>>>(w.x.data(), w.n, w.single_pass());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch10, atomic_reduction, ch10::GlobalSum)
    .baseline("two_pass", ch10::launch_two_pass)
    .optimized("atomic_last_block", launch_atomic_last_block)
    .reference(ch10::reference)
    .tolerance(bench::relative_l2(1e-5));  // derived in global_sum.cuh

}  // namespace
