// ch10/atomic_reduction: a global sum needs no second kernel: each block adds its sum to one
// total with an atomic, and the last block to arrive writes the result.
//
// The work: the sum of n FP32 values (read once) into one float. Both variants sum each 64 KB
// chunk in one block with the same code (global_sum.cuh: 16-byte streaming loads, 4 in flight per
// thread, short-lived blocks); only what happens to the block sums differs.
//
// What the hardware does: an atomic on global memory is performed in L2, at the slice that owns
// the address, not in the SM; the SM's thread can go on (RED, no return value) while the add
// travels. Adds from all SMs to one address are serialised there, one every few clocks, which is
// ample for one add per 64 KB block.
//
// Why the baseline pays: the two-pass form ends pass 1 with every block storing its sum in a
// partials array, then launches a second kernel (one 1024-thread block) that reads them back and
// writes the sum. That costs the gap between two kernels (the first must drain completely before
// the second starts), the second kernel's own latency-bound run (loads from L2, a block reduction)
// and the partials' round trip through L2: a few microseconds, whatever n is.
//
// The size is the lesson, and the axis `mib`: by default 2^22 floats (16 MiB, 256 blocks, cold:
// read from HBM). The stream itself takes only microseconds (ch10's README, 'Measured', has the
// times), so the few microseconds the second kernel costs are a real share. At 1 GiB (--sweep)
// the same microseconds are ~1.6% of the stream: both sides read at
// the HBM ceiling and the pair gains nothing, or loses, because each block's ticket holds its SM
// slot while the HBM stream needs every slot (ncu: README). A two-pass reduction of a big array
// is already as fast as HBM: the sweep's crossover shows where.
//
// What changes from baseline to optimized:
//   1. baseline `two_pass`: chunk_partials<<<chunks, 256>>> then sum_partials<<<1, 1024>>>;
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
//
//   ./bench compare --chapter ch10 --example atomic_reduction --sweep   # 16 MiB to 1 GiB
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
    .int_axis("mib", ch10::kSumMib, ch10::kSumMibDefault)
    .baseline("two_pass", ch10::launch_two_pass)
    .optimized("atomic_last_block", launch_atomic_last_block)
    .reference(ch10::reference)
    .device_reference(ch10::device_reference)
    .tolerance(bench::relative_l2(1e-5));  // derived in global_sum.cuh

}  // namespace
