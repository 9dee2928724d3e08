// ch10/tma_pipeline: let the copy engine fetch the tiles, so the threads only compute.
//
// The GEMM (mma_tile.cuh): BF16 D = A B, FP32 accumulate, TN layout, 4096^3; a 128 x 128 CTA tile,
// k-blocks of 32, 8 warps of 4 x 4 mma.sync.m16n8k16 fed by ldmatrix from 64-byte-swizzled
// shared memory, a 4-stage ring. Both variants keep all of that: the same tile, the same stages,
// the same swizzled layout, the same math and epilogue. Only who fills the ring changes.
//
// What the hardware does: with cp.async (double_buffered_gemm's optimized kernel, the baseline
// here) every one of the 256 threads computes two global addresses and two swizzled shared
// addresses per operand per k-block and issues 4 LDGSTS, then waits on its own copy groups,
// and a __syncthreads makes all threads' copies visible: the loads cost issue slots and
// registers on the same warps that issue the mma.sync, and a block-wide barrier per k-block.
// TMA (the Hopper tensor memory accelerator) takes one instruction per operand block: a
// tensor map (built once on the host: base, shape, strides, box, swizzle) plus two coordinates;
// the copy engine generates the addresses, writes the box in the 64-byte swizzle and counts the
// bytes that land on an mbarrier. Threads wait on that barrier, not on each other.
//
// The changes, baseline "cp_async_4stage" -> optimized "tma_4stage" (sm_90a):
//   1. two CUtensorMaps (A and B, 128 x 32 boxes, CU_TENSOR_MAP_SWIZZLE_64B) passed as
//      __grid_constant__ parameters replace the pointer arithmetic of 256 threads;
//   2. one thread issues each k-block: mbarrier.arrive.expect_tx(16 KiB) + two
//      cp.async.bulk.tensor.2d, instead of 4 cp.async per thread;
//   3. consumers wait on the stage's "full" mbarrier (phase parity kb / 4 % 2), which also
//      makes the bytes visible: the cp.async side's wait_group + __syncthreads before the math
//      is gone; the __syncthreads after it stays on both sides (the stage may be refilled only
//      when every warp has read it: warp specialisation with "empty" barriers is the next lesson).
//
// Expected (H100; measured: README): a modest gain, ~1.05-1.2x; both sides are bound by
// shared-memory bandwidth and mma.sync issue (see double_buffered_gemm), and TMA removes only
// the address math, the LDGSTS issue slots and one barrier per k-block. The big TMA wins come
// with wgmma (operands read from shared memory by the tensor core, no ldmatrix) and with
// producer warps that free the consumers' registers, ch09's wgmma rung and later ch10 examples.
// Verification: relative L2 <= 1e-2 against a double CPU reference at 256 x 384 x 224 and
// kernels/reference_gemm.cuh at 4096^3 (see double_buffered_gemm). Timed cold, as ch09's 4096^3
// GEMMs.
//
//   ./bench compare --chapter ch10 --example tma_pipeline
#include <bench/bench.hpp>
#include <kernels/tma.cuh>

#include "mma_tile.cuh"

namespace ch10 {
namespace {

namespace tma = kernels::tma;
constexpr int kStages = 4;
// The ring, then its barriers.
constexpr size_t kSmemBytes = ring_bytes(kStages, kStages * sizeof(uint64_t));

// C (rows x cols, row-major) = X (rows x k) Y (cols x k)^T, X and Y seen through tensor maps.
__global__ void __launch_bounds__(kThreads, 2)
    tma_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
             bf16* __restrict__ out, int cols, int k) {
  extern __shared__ uint8_t raw[];
  Stage* ring = align_ring(raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kStages);  // full[s]: stage s has landed
  const int row0 = blockIdx.x * kTileRows, col0 = blockIdx.y * kTileCols;
  const int kblocks = k / kBlockK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp % 2, warp_col = warp / 2;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) tma::mbarrier_init(&full[s], 1);  // one arrival: the issuer's
    tma::fence_barrier_init();  // visible to the copy engine before the first copy
  }
  __syncthreads();

  // Thread 0 issues k-block kb: expect 16 KiB on the stage's barrier, then the two boxes.
  auto issue = [&](int kb) {
    if (threadIdx.x == 0 && kb < kblocks) {
      Stage& st = ring[kb % kStages];
      uint64_t* bar = &full[kb % kStages];
      tma::arrive_expect_tx(bar, kStageBytes);
      tma::load_2d(st.x, &map_x, kb * kBlockK, row0, bar);
      tma::load_2d(st.y, &map_y, kb * kBlockK, col0, bar);
    }
  };

  WarpAcc acc = {};
  for (int kb = 0; kb < kStages - 1; ++kb) issue(kb);  // prologue
  for (int kb = 0; kb < kblocks; ++kb) {
    issue(kb + kStages - 1);  // into the stage the barrier below last freed
    // K-block kb has landed, and is visible to every thread that sees the phase complete.
    tma::wait_parity(&full[kb % kStages], (kb / kStages) & 1);
    mma_k_block(acc, ring[kb % kStages], warp_row, warp_col, lane);
    __syncthreads();  // all warps are done with the stage before it is refilled
  }
  store_warp_tile(acc, out, cols, row0 + warp_row * 64, col0 + warp_col * 32, lane);
}

// A rows x k row-major BF16 matrix in 128 x 32 boxes, 64-byte swizzled: one operand block.
CUtensorMap operand_map(const bf16* base, int64_t rows, int64_t k) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, uint64_t(rows),
                          uint64_t(k), kTileRows, kBlockK, CU_TENSOR_MAP_SWIZZLE_64B);
}
static_assert(kTileRows == kTileCols, "one box shape serves both operands");

void launch_tma(const GemmBf16& w, cudaStream_t stream) {
  static const bool configured = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(tma_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kSmemBytes)));
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(tma_gemm, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)configured;
  // D^T = B A^T: X = B (n rows), Y = A (m rows). Encoding a map is a host call of a few us,
  // hidden behind the previous launch; the pointers are the workload's, fixed.
  const CUtensorMap map_x = operand_map(w.b.data(), w.n, w.k);
  const CUtensorMap map_y = operand_map(w.a.data(), w.m, w.k);
  const dim3 grid(unsigned(w.n / kTileRows), unsigned(w.m / kTileCols));
  tma_gemm<<<grid, kThreads, kSmemBytes, stream>>>(map_x, map_y, w.d.data(), int(w.m), int(w.k));
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch10, tma_pipeline, GemmBf16)
    .baseline("cp_async_4stage", launch_cp_async_4stage)
    .optimized("tma_4stage", launch_tma, {.min_compute_capability = 90})
    .with(gemm_checks);

}  // namespace
}  // namespace ch10
