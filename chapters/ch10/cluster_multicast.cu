// ch10/cluster_multicast: two CTAs that need the same operand block can read it from L2 once. A
// TMA load with .multicast::cluster writes its box into the shared memory of every CTA of the
// cluster named in a mask, and tells each one's mbarrier its bytes.
//
// When it pays: a GEMM tile of R x C over k-blocks of 64 brings (R + C) x 64 BF16 from L2 into
// shared memory for R x C x 64 multiply-adds, so L2 -> shared traffic per flop is (R + C) / (R C).
// persistent_gemm's 128 x 256 tile needs 11.7 KB per MFLOP, several TB/s across the GPU at its
// rate (ch10's README, 'Measured', has it), and there multicast measured no gain. A 128 x 128 tile
// needs a third more, 15.6 KB per MFLOP, more than L2 delivers at the same rate, so the tensor
// cores wait on it. Smaller tiles are what a GEMM uses when a big tile leaves SMs idle (few
// tiles, a ragged last wave) or registers short, so this is the tile where sharing a read should
// pay.
//
// The work: D = A B in BF16 with FP32 sums (the suite's TN GEMM, kernels/gemm_bf16.cuh), at
// 4096^3. Both variants run the same persistent warp-specialised kernel over 128 x 128 tiles of
// D^T = B A^T (X = B gives a tile's rows, Y = A its columns): a producer thread feeds a 6-stage
// ring of (X 128 x 64, Y 128 x 64) stages, 32 KiB each, through TMA and full/empty mbarriers;
// two consumer warpgroups each run 4 wgmma.m64n128k16 per k-block on 64 of the tile's rows and
// store their 64 x 128 from registers. The grid and the order of the tiles are the same in both:
// CTAs 2c and 2c + 1 always take the two tiles of one 256 x 128 pair (rows r0 and r0 + 128, the
// same columns), which need the same Y block every k-block.
//
// What changes from baseline to optimized:
//   1. baseline `each_cta_loads`: each CTA loads its X block and the whole Y block itself: 32 KiB
//      of L2 reads per stage, the pair's Y read twice;
//   2. optimized `pair_multicast`: the pair is a cluster of 2 (a cluster-dimension launch
//      attribute); each CTA loads its X block and half of Y (64 rows) multicast to both: 24 KiB
//      of L2 reads per stage, a quarter less. A stage still brings 32 KiB into each CTA, so the full barrier's
//      expect_tx is unchanged (the peer's half may land before this CTA's expect_tx; the
//      tx-count allows that).
//   3. the coupling multicast brings: a producer writes into its peer's stage, so it may refill a
//      stage only when the consumers of both CTAs have released it (empty barriers of 4 arrivals,
//      each consumer releasing in both CTAs at CTA scope: kernels/tma.cuh's arrive_cluster says
//      why not cluster scope), a cluster barrier after the barrier inits, and a drain of the ring
//      before a CTA exits (no peer arrival or multicast into it may still be pending).
//
// Expected before the first run: the baseline L2-bound at ~2 GiB of L2 -> shared traffic (64
// k-blocks x 32 KiB x 1,024 tiles), the optimized one a quarter lighter; a gain up to ~1.3x if
// L2 alone limits, less where the coupling or the tensor pipe takes over.
//
// Measured (README): the H200 gains less than the H100 because its L2 delivers more, so its
// baseline waits less on it (ncu). persistent_gemm's 128 x 256 tile is faster still: multicast
// is for when the tile cannot grow.
//
// Verification: m = 2816, n = 1792, k = 320 (D^T 1792 x 2816: 7 x 22 = 154 pairs over 66
// clusters, more than one wave and not a multiple of one; 5 k-blocks), against the CPU
// reference; at the timing size against the device reference GEMM. Relative L2 1e-2, as every
// ch10 GEMM (BF16 output).
//
//   ./bench compare --chapter ch10 --example cluster_multicast
#include <kernels/occupancy.cuh>

#include <algorithm>
#include <string>

#include <kernels/ws_gemm.cuh>  // SizedGemm, operand_map, allow_smem: the workload and host helpers

namespace {

using bf16 = __nv_bfloat16;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

constexpr int kTile = 128;  // a CTA's tile of D^T: 128 X rows x 128 Y rows
constexpr int kBK = 64;     // one 128-byte swizzle row of BF16
constexpr int kStages = 6;  // 6 x 32 KiB: persistent_gemm's 192 KiB of ring
constexpr int kConsumers = 2, kWarpgroup = 128, kThreads = (1 + kConsumers) * kWarpgroup;
constexpr int kConsumerRows = kTile / kConsumers;  // 64: one wgmma M
constexpr int kPair = 2;                           // tiles (CTAs) that share a Y block
constexpr int kHalfY = kTile / kPair;              // the rows of Y each CTA of a pair multicasts
constexpr int kGroupPairs = 8;                     // rasterisation: pair rows per column band
constexpr uint32_t kStageBytes = 2 * kTile * kBK * sizeof(bf16);  // 32 KiB into each CTA

struct alignas(1024) Smem {
  bf16 x[kStages][kTile * kBK];  // 16 KiB each, 1024-aligned: the swizzle is address bits
  bf16 y[kStages][kTile * kBK];
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

using kernels::ws::Tile;  // first X row and first Y row of the tile
// Tile `half` (0 or 1) of pair number `pair`: kernels/ws_gemm.cuh's grouped rasterisation over
// pairs (256 x 128 units of D^T, kGroupPairs pair rows per column band), then the half's 128 rows.
__device__ __forceinline__ Tile pair_tile(int pair, int rows, int cols, int half) {
  const kernels::ws::UnitCoord at =
      kernels::ws::grouped_raster<kGroupPairs>(pair, rows / (kPair * kTile), cols / kTile);
  return {(at.row * kPair + half) * kTile, at.col * kTile};
}

// Where a role is in the ring: the stage of its next k-block and the parity of that stage's
// current use (its barriers' phase), advanced per k-block without dividing by kStages, which is
// not a power of two. A producer waits for the stage's previous use to be released: parity
// phase ^ 1, which a fresh barrier counts as complete, so the first pass through the ring does
// not wait.
struct RingPosition {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

template <bool kMulticast>
__global__ void __launch_bounds__(kThreads, 1)
    pair_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
              bf16* __restrict__ out, int rows, int cols, int k) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = tma::aligned_1024<Smem>(raw);
  constexpr int kWriters = kMulticast ? kPair : 1;  // the CTAs whose producers fill our stages
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], 1);  // the producer's expect_tx
      tma::mbarrier_init(&sm.empty[s], kConsumers * kWriters);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  if constexpr (kMulticast) tma::cluster_sync();  // the peer's barriers exist before we use them
  const int half = int(blockIdx.x) % kPair;  // the cluster rank, when the pair is a cluster
  const int pairs = (rows / (kPair * kTile)) * (cols / kTile), kblocks = k / kBK;
  const int first_pair = int(blockIdx.x) / kPair, pair_stride = int(gridDim.x) / kPair;
  RingPosition at;
  if (threadIdx.x / kWarpgroup == 0) {
    if (threadIdx.x != 0) return;
    for (int pair = first_pair; pair < pairs; pair += pair_stride) {
      const Tile t = pair_tile(pair, rows, cols, half);
      for (int kb = 0; kb < kblocks; ++kb, at.advance()) {
        const int s = at.stage;
        tma::wait_parity(&sm.empty[s], at.phase ^ 1);
        tma::arrive_expect_tx(&sm.full[s], kStageBytes);
        tma::load_2d(sm.x[s], &map_x, kb * kBK, t.r0, &sm.full[s]);
        if constexpr (kMulticast)
          tma::load_2d_multicast(&sm.y[s][half * kHalfY * kBK], &map_y, kb * kBK,
                                 t.c0 + half * kHalfY, &sm.full[s], 0b11);
        else
          tma::load_2d(sm.y[s], &map_y, kb * kBK, t.c0, &sm.full[s]);
      }
    }
    // Drain: once all 4 consumers have released the last use of every stage, no peer arrival
    // or multicast into this CTA is pending, and it may exit.
    if constexpr (kMulticast)
      for (int s = 0; s < kStages; ++s, at.advance())
        tma::wait_parity(&sm.empty[at.stage], at.phase ^ 1);
  } else {
    const int cw = int(threadIdx.x) / kWarpgroup - 1;
    const bool leader = threadIdx.x % kWarpgroup == 0;
    float acc[kTile / 2];
    for (float& a : acc) a = 0.0f;  // the first wgmma overwrites them; never left undefined
    int previous = 0;  // the stage of the k-block before this one
    for (int pair = first_pair; pair < pairs; pair += pair_stride) {
      for (int kb = 0; kb < kblocks; ++kb, previous = at.stage, at.advance()) {
        const int s = at.stage;
        tma::wait_parity(&sm.full[s], at.phase);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)  // +32 bytes along the swizzled rows per k16 step
          wgmma::mma_m64n128k16_bf16(
              acc, wgmma::descriptor_k_major_sw128(&sm.x[s][cw * kConsumerRows * kBK + kk * 16]),
              wgmma::descriptor_k_major_sw128(&sm.y[s][kk * 16]), kb > 0 || kk > 0);
        wgmma::commit();
        wgmma::wait<1>();  // the previous k-block's group is done: release its stage
        if (kb > 0 && leader) tma::arrive_each_cta<kWriters>(&sm.empty[previous]);
      }
      wgmma::wait<0>();
      if (leader) tma::arrive_each_cta<kWriters>(&sm.empty[previous]);
      const Tile t = pair_tile(pair, rows, cols, half);
      wgmma::store_m64n_bf16<kTile>(acc, out, cols, t.r0 + cw * kConsumerRows, t.c0);
    }
  }
#endif
}

// ---- Host side.
std::string requirements(const kernels::GemmBf16& w) {
  if (w.n % (kPair * kTile) != 0 || w.m % kTile != 0 || w.k % kBK != 0 || w.k == 0)
    return "pairs of whole tiles only: needs n % 256 == 0, m % 128 == 0, k % 64 == 0, k > 0";
  return "";
}

// Both variants launch the same grid: 2 x the clusters of 2 resident at once (a cluster's CTAs
// share a GPC, so that can be fewer than the SMs), at most one CTA per tile. Asked once, outside
// the timed launches.
unsigned pair_grid(const kernels::GemmBf16& w) {
  static const int resident_pairs = [] {
    kernels::ws::allow_smem<pair_gemm<true>, kSmemBytes>();
    // One cluster's grid; the cluster size is a launch attribute, as launch_pair_gemm gives it.
    const int clusters =
        kernels::resident_clusters(pair_gemm<true>, kPair, kThreads, kSmemBytes, kPair);
    return std::max(clusters, 1);
  }();
  const int pairs = int((w.n / (kPair * kTile)) * (w.m / kTile));
  return unsigned(kPair * std::min(resident_pairs, pairs));
}

template <bool kMulticast>
void launch_pair_gemm(const kernels::GemmBf16& w, cudaStream_t stream) {
  kernels::ws::allow_smem<pair_gemm<kMulticast>, kSmemBytes>();
  // D^T (n x m, row-major) = B A^T: X = B gives the tile rows, Y = A the columns.
  const CUtensorMap map_x = kernels::ws::operand_map(w.b.data(), w.n, w.k, kTile);
  const CUtensorMap map_y =
      kernels::ws::operand_map(w.a.data(), w.m, w.k, kMulticast ? kHalfY : kTile);
  cudaLaunchAttribute cluster = kernels::cluster_dims_x(unsigned(kPair));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(pair_grid(w));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  config.attrs = kMulticast ? &cluster : nullptr;
  config.numAttrs = kMulticast ? 1 : 0;
  BENCH_CUDA_CHECK(cudaLaunchKernelEx(&config, pair_gemm<kMulticast>, map_x, map_y, w.d.data(),
                                      int(w.n), int(w.m), int(w.k)));
}

using Gemm = kernels::ws::SizedGemm<4096, 4096, 4096, 2816, 1792, 320>;

BENCH_EXAMPLE(ch10, cluster_multicast, Gemm)
    .baseline("each_cta_loads", launch_pair_gemm<false>, {.arch_specific = 90})
    .optimized("pair_multicast", launch_pair_gemm<true>, {.arch_specific = 90})
    .requires_that(requirements)
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));

}  // namespace
