// ch10/double_buffered_gemm: keep the next k-blocks' loads in flight while the tensor cores work
// on this one.
//
// The GEMM (mma_tile.cuh): BF16 D = A B, FP32 accumulate, TN layout, 4096^3; a 128 x 128 CTA tile,
// k-blocks of 32, 8 warps of 4 x 4 mma.sync.m16n8k16 fed by ldmatrix from 64-byte-swizzled
// shared memory. Both variants are one kernel template and differ only in kStages, the number
// of shared-memory stages in the ring: same tile, same copies, same math, same epilogue.
//
// What the hardware does: a k-block's operands (16 KiB) come from L2 or HBM in ~1 us of latency,
// and the tensor cores finish one k-block (1 MFLOP a CTA) in well under that. With one stage a
// CTA issues its copies, waits for all of them (cp.async.wait_group 0 + __syncthreads), computes,
// and only then issues the next ones: each k-block pays the full memory latency with the tensor
// cores idle, and only the second resident CTA of the SM (2 fit by registers) can fill the gap.
// With a ring the copies for k-blocks kb+1..kb+S-1 are already in flight while k-block kb is
// computed, so the latency is paid once per CTA instead of once per k-block.
//
// The changes, baseline "single_stage" -> optimized "cp_async_4stage":
//   1. shared memory holds 4 stages (64 KiB) instead of 1 (16 KiB);
//   2. a prologue issues k-blocks 0..2 before any compute;
//   3. each iteration first issues k-block kb+3 into the stage computed last iteration, then
//      waits only for k-block kb's group (cp.async.wait_group 3) instead of for everything.
// cp.async (LDGSTS) copies global -> shared without passing through registers, so the loads in
// flight cost no registers: 64 accumulators a thread stay put.
//
// Expected (H100; measured: README): the baseline latency-bound, roughly 150-250 TFLOP/s; the
// ring bound by shared-memory bandwidth (per k-block a CTA reads 48 KiB with ldmatrix and writes
// 16 KiB: ~512 cycles of the 128 B/cycle port against ~256 cycles of tensor math at the dense
// rate, so at most ~535 TFLOP/s at 1.98 GHz), by mma.sync's rate on Hopper and possibly by L2
// (64 flop per byte fetched: 6 TB/s at 400 TFLOP/s), roughly 300-450 TFLOP/s (40-60% of the
// BF16 ceiling, which wgmma sets); a speedup of ~1.4-2.2x. Verification: relative L2 <= 1e-2 (BF16
// out, FP32 sums in another order: ch09's bound) against a double CPU reference at 256 x 384 x 224
// and kernels/reference_gemm.cuh at 4096^3. Timed cold, as ch09's 4096^3 GEMMs are.
//
//   ./bench compare --chapter ch10 --example double_buffered_gemm
#include <bench/bench.hpp>

#include "mma_tile.cuh"

namespace ch10 {
namespace {

namespace cp_async = kernels::cp_async;

// Every thread copies 2 of the 512 16-byte chunks of each operand block (4 threads a row: each
// warp reads 8 whole 64-byte row segments) into their swizzled places.
__device__ __forceinline__ void copy_k_block(Stage& st, const bf16* x_tile, const bf16* y_tile,
                                             int k, int kb) {
#pragma unroll
  for (int i = 0; i < kTileRows * 4 / kThreads; ++i) {
    const int e = threadIdx.x + kThreads * i, row = e / 4, chunk = e % 4;
    const int64_t src = int64_t{row} * k + kb * kBlockK + chunk * 8;
    cp_async::copy16(reinterpret_cast<uint8_t*>(st.x) + swizzled(row, chunk), x_tile + src);
    cp_async::copy16(reinterpret_cast<uint8_t*>(st.y) + swizzled(row, chunk), y_tile + src);
  }
}
static_assert(kTileRows == kTileCols, "copy_k_block walks both blocks with one index");

// C (rows x cols, row-major) = X (rows x k) Y (cols x k)^T; one CTA a 128 x 128 tile.
// kStages == 1: load, wait for all, compute (the baseline). kStages > 1: the ring.
template <int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    cp_async_gemm(const bf16* __restrict__ x, const bf16* __restrict__ y, bf16* __restrict__ out,
                  int cols, int k) {
  extern __shared__ uint8_t raw[];
  Stage* ring = align_ring(raw);
  const int64_t row0 = int64_t{blockIdx.x} * kTileRows, col0 = int64_t{blockIdx.y} * kTileCols;
  const bf16* x_tile = x + row0 * k;
  const bf16* y_tile = y + col0 * k;
  const int kblocks = k / kBlockK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp % 2, warp_col = warp / 2;

  // One commit group per k-block; past the last one an empty group keeps the wait count uniform.
  auto issue = [&](int kb) {
    if (kb < kblocks) copy_k_block(ring[kb % kStages], x_tile, y_tile, k, kb);
    cp_async::commit();
  };

  WarpAcc acc = {};
  for (int kb = 0; kb < kStages - 1; ++kb) issue(kb);  // prologue (none for one stage)
  for (int kb = 0; kb < kblocks; ++kb) {
    issue(kb + kStages - 1);        // into the stage the barrier below last freed
    cp_async::wait<kStages - 1>();  // this thread's copies of k-block kb have landed...
    __syncthreads();                // ...and every thread's
    mma_k_block(acc, ring[kb % kStages], warp_row, warp_col, lane);
    __syncthreads();  // all warps are done with the stage before it is refilled
  }
  store_warp_tile(acc, out, cols, row0 + warp_row * 64, col0 + warp_col * 32, lane);
}

template <int kStages>
void launch_cp_async(const GemmBf16& w, cudaStream_t stream) {
  static const bool configured = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(cp_async_gemm<kStages>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(ring_bytes(kStages))));
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(cp_async_gemm<kStages>,
                                          cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)configured;
  // D^T = B A^T: X = B (n rows), Y = A (m rows).
  const dim3 grid(unsigned(w.n / kTileRows), unsigned(w.m / kTileCols));
  cp_async_gemm<kStages><<<grid, kThreads, ring_bytes(kStages), stream>>>(
      w.b.data(), w.a.data(), w.d.data(), int(w.m), int(w.k));
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch10, double_buffered_gemm, GemmBf16)
    .baseline("single_stage", launch_cp_async<1>)
    .optimized("cp_async_4stage", launch_cp_async<4>)
    .with(gemm_checks);

}  // namespace

void launch_cp_async_4stage(const GemmBf16& w, cudaStream_t stream) {
  launch_cp_async<4>(w, stream);
}

}  // namespace ch10
