// ch09/tensor_core_gemm_wgmma.cu: the ladder's sm_90a rung: wgmma.mma_async fed by TMA.
//
// Structure (one CTA computes a 128 x 256 tile of D^T, i.e. 256 rows of D by 128 columns):
//   1. three warpgroups: warpgroup 0 is the producer (one thread issues TMA copies), warpgroups 1
//      and 2 are consumers, each owning 64 x 256 FP32 accumulators (128 registers per thread);
//   2. a 4-stage shared-memory ring of (128 x 64 B-tile, 256 x 64 A-tile) BF16 k-blocks, each
//      row 128 bytes, laid out by TMA in the 128-byte swizzle that wgmma's descriptors read
//      without bank conflicts; "full" mbarriers (TMA bytes landed) and "empty" mbarriers (both
//      consumers done with the stage) hand stages back and forth;
//   3. per k-block each consumer issues four wgmma m64n256k16 (K-major A and B from shared
//      memory), commits, and waits for the *previous* group only, so one k-block of tensor work
//      is always queued while it releases the stage before;
//   4. grouped rasterisation: consecutive CTAs walk 16 row-tiles of one column band, so a wave
//      of 132 CTAs re-reads operand tiles from L2, not HBM;
//   5. epilogue: accumulators converted to BF16 pairs and stored straight from registers.
// wgmma's M side is B (n rows) and its N side is A (m rows): the accumulator rows are then D's
// columns and each thread's adjacent accumulator pair is two adjacent rows of column-major D.
// Shapes: m % 256 == 0, n % 128 == 0, k % 64 == 0 (refused otherwise, see wgmma_gemm_requires).
#include <bench/bench.hpp>
#include <kernels/arch.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>

#include "tensor_core_gemm.cuh"

namespace ch09 {
namespace {

constexpr int kBM = 128;                       // rows of the CTA tile (wgmma M side: from B)
constexpr int kBN = 256;                       // columns of the CTA tile (wgmma N side: from A)
constexpr int kBK = 64;                        // one 128-byte swizzle row of BF16
constexpr int kStages = 4;
constexpr int kConsumers = 2;                  // each takes 64 of the 128 rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupRows = 16;                 // rasterisation group (row-tiles)
constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(bf16);

struct alignas(1024) Smem {
  bf16 x[kStages][kBM * kBK];  // B k-blocks: 16 KiB each, 1024-aligned (swizzle atom)
  bf16 y[kStages][kBN * kBK];  // A k-blocks: 32 KiB each
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

// descriptor, fence/commit/wait, the m64n256k16 instruction and the epilogue's store: kernels/wgmma.cuh.
namespace wgmma = kernels::wgmma;
__device__ __forceinline__ uint64_t descriptor(const bf16* tile) { return wgmma::descriptor_k_major_sw128(tile); }

__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
               bf16* __restrict__ out, int rows, int cols, int k) {
#if BENCH_SM90A_DEVICE  // empty for other targets: the variant is arch_specific = 90, SKIPPED there
  extern __shared__ uint8_t raw[];
  Smem& sm = kernels::tma::aligned_1024<Smem>(raw);
  // Grouped rasterisation of the (rows / kBM) x (cols / kBN) tiles.
  const int tiles_r = rows / kBM, tiles_c = cols / kBN;
  const int per_group = kGroupRows * tiles_c, group = blockIdx.x / per_group;
  const int first_r = group * kGroupRows, group_size = min(tiles_r - first_r, kGroupRows);
  const int tile_r = first_r + (blockIdx.x % per_group) % group_size;
  const int tile_c = (blockIdx.x % per_group) / group_size;
  const int r0 = tile_r * kBM, c0 = tile_c * kBN;
  const int kblocks = k / kBK;
  const int wg = threadIdx.x / 128;
  namespace tma = kernels::tma;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], 1);
      tma::mbarrier_init(&sm.empty[s], kConsumers);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer: one thread keeps the ring full
    if (threadIdx.x == 0) {
      for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % kStages;
        if (kb >= kStages) tma::wait_parity(&sm.empty[s], ((kb / kStages) - 1) & 1);
        tma::arrive_expect_tx(&sm.full[s], kStageBytes);
        tma::load_2d(sm.x[s], &map_x, kb * kBK, r0, &sm.full[s]);
        tma::load_2d(sm.y[s], &map_y, kb * kBK, c0, &sm.full[s]);
      }
    }
    return;
  }

  const int cw = wg - 1;  // consumer index: rows cw*64 .. cw*64+63 of the tile
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % kStages;
    tma::wait_parity(&sm.full[s], (kb / kStages) & 1);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)  // +32 bytes along the swizzled row per k16 step
      wgmma::mma_m64n256k16_bf16(acc, descriptor(&sm.x[s][cw * 64 * kBK + kk * 16]), descriptor(&sm.y[s][kk * 16]),
                       kb > 0 || kk > 0);
    wgmma::commit();
    wgmma::wait<1>();  // the previous k-block's group is done: release its stage
    if (kb > 0 && threadIdx.x % 128 == 0) tma::arrive(&sm.empty[(kb - 1) % kStages]);
  }
  wgmma::wait<0>();

  wgmma::store_m64n256_bf16(acc, out, cols, r0 + cw * 64, c0);
#endif
}

// A rows x k row-major BF16 matrix seen in boxes of box_rows x 64, 128-byte swizzled.
CUtensorMap make_map(const bf16* base, uint64_t rows, uint64_t k, uint32_t box_rows) {
  return kernels::tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, rows, k, box_rows, kBK,
                                   CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace

std::string wgmma_gemm_requires(const GemmBf16& w) {
  if (w.m % kBN != 0 || w.n % kBM != 0 || w.k % kBK != 0 || w.k == 0)
    return "wgmma rung tiles only: needs m % 256 == 0, n % 128 == 0, k % 64 == 0";
  return "";
}

void launch_wgmma_gemm(const GemmBf16& w, cudaStream_t stream) {
  // D^T (n x m, row-major) = B (n x k) * A (m x k)^T: X = B gives the rows, Y = A the columns.
  const CUtensorMap map_x = make_map(w.b.data(), w.n, w.k, kBM);
  const CUtensorMap map_y = make_map(w.a.data(), w.m, w.k, kBN);
  static const bool configured = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    return true;
  }();
  (void)configured;
  const unsigned grid = unsigned((w.n / kBM) * (w.m / kBN));
  wgmma_gemm<<<grid, kThreads, kSmemBytes, stream>>>(map_x, map_y, w.d.data(), int(w.n), int(w.m), int(w.k));
  BENCH_CHECK_LAUNCH();
}

}  // namespace ch09
