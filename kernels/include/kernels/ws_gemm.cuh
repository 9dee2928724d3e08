// kernels/ws_gemm.cuh: the TMA + wgmma GEMM tile that ch10's warp_specialization and persistent_gemm
// schedule in different ways, so that between their variants only the scheduling changes.
//
// BF16 D = A B, FP32 accumulate, the suite's TN layout (kernels/gemm_bf16.cuh). The kernels
// compute D^T (n x m, row-major: the same bytes) = B A^T: X = B gives a tile's rows, Y = A its
// columns. One tile: 128 x 256 of D^T, k-blocks of 64 (one 128-byte swizzle row of BF16); a
// 4-stage ring of (128 x 64 X block, 256 x 64 Y block) stages, 48 KiB each, written by TMA in
// the 128-byte swizzle (4 boxes per stage: 2 of 64 X rows, 2 of 128 Y rows); "full" mbarriers
// (the bytes landed) and "empty" mbarriers (both math warpgroups are done with the stage); two
// math warpgroups, each 64 x 256 of the tile (128 FP32 accumulators a thread), 4
// wgmma.m64n256k16 per k-block; grouped rasterisation; the epilogue stores bf16x2 from
// registers. 192 KiB of ring + 1 KiB of alignment slack: one CTA per SM.
//
// The ring is addressed by a slot: the running count of k-blocks a CTA has put through it. Slot
// s lives in stage s % 4 and is the (s / 4)-th use of that stage, so its barrier phase parity is
// (s / 4) & 1. In a one-tile kernel the slot is the k-block; a kernel that runs several tiles
// keeps counting across them, so the parity flips per ring wrap, not per tile.
//
// Everything device-side here is sm_90a code: call it only under BENCH_SM90A_DEVICE, from a
// variant declared {.arch_specific = 90}.
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/arch.cuh>
#include <kernels/gemm_bf16.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>

#include <algorithm>
#include <cstdint>
#include <string>

namespace kernels::ws {

using bf16 = __nv_bfloat16;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

constexpr int kBM = 128;  // tile rows (D columns), from X = B: wgmma's M side
constexpr int kBN = 256;  // tile columns (D rows), from Y = A: wgmma's N side
constexpr int kBK = 64;   // one 128-byte swizzle row of BF16
constexpr int kStages = 4;
constexpr int kConsumers = 2;  // math warpgroups, 64 tile rows each
constexpr int kWarpgroup = 128;
constexpr int kGroupRows = 16;             // rasterisation: 16 row-tiles per column band
constexpr int kXShare = kBM / kConsumers;  // 64 X rows per copy
constexpr int kYShare = kBN / kConsumers;  // 128 Y rows per copy
constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(bf16);  // 48 KiB
constexpr uint32_t kShareBytes = kStageBytes / kConsumers;          // what one copy pair brings

struct alignas(1024) Smem {
  bf16 x[kStages][kBM * kBK];  // X blocks, 16 KiB each (1024-aligned: the swizzle is address bits)
  bf16 y[kStages][kBN * kBK];  // Y blocks, 32 KiB each
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

// The workload at a timing size and a verification size (m, n, k of D = A B).
template <int64_t M, int64_t N, int64_t K, int64_t VM, int64_t VN, int64_t VK>
struct SizedGemm : kernels::GemmBf16 {
  explicit SizedGemm(bench::Setup& s)
      : kernels::GemmBf16(s, s.size("m", M, VM), s.size("n", N, VN), s.size("k", K, VK)) {}
};

// The square workload m = n = k = the axis `mnk` when timing, at a fixed verification size.
template <int64_t VM, int64_t VN, int64_t VK>
struct SquareGemm : kernels::GemmBf16 {
  explicit SquareGemm(bench::Setup& s)
      : kernels::GemmBf16(s, s.size("m", s.axis("mnk"), VM), s.size("n", s.axis("mnk"), VN),
                          s.size("k", s.axis("mnk"), VK)) {}
};

struct Tile {
  int r0, c0;  // first row (of X) and column (of Y) of the tile of D^T
};
// Grouped rasterisation, in one place so that every ch10 GEMM orders its work the same way (this
// tile; multicast_producer's and cluster_multicast's pairs of tiles). Unit number `unit` of a
// units_r x units_c grid of units (tiles, or pairs of them), as a row and column in units that
// the caller scales. Consecutive numbers walk kGroup unit rows of one column band (fewer in the
// last band), so the units running at one time share their Y blocks and re-read X from L2.
struct UnitCoord {
  int row, col;
};
template <int kGroup>
__device__ __forceinline__ UnitCoord grouped_raster(int unit, int units_r, int units_c) {
  const int per_band = kGroup * units_c;
  const int band = unit / per_band, in_band = unit % per_band;
  const int first_r = band * kGroup, band_rows = min(units_r - first_r, kGroup);
  return {first_r + in_band % band_rows, in_band / band_rows};
}
// Tile number `tile` of a rows x cols D^T, in kGroupRows row-tiles per column band.
__device__ __forceinline__ Tile grouped_tile(int tile, int rows, int cols) {
  const UnitCoord at = grouped_raster<kGroupRows>(tile, rows / kBM, cols / kBN);
  return {at.row * kBM, at.col * kBN};
}

// The dynamic shared memory, aligned, with its barriers initialised and visible to the copy
// engine. A full barrier completes after `full_arrivals` arrivals and their bytes; an empty one
// after `empty_arrivals`: one per math warpgroup that reads the stage (of every CTA of a
// cluster, when a stage is filled by multicast).
__device__ __forceinline__ Smem& init_ring(uint8_t* raw, uint32_t full_arrivals,
                                           uint32_t empty_arrivals = kConsumers) {
  Smem& sm = tma::aligned_1024<Smem>(raw);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], full_arrivals);
      tma::mbarrier_init(&sm.empty[s], empty_arrivals);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  return sm;
}

// Copies share `part` of tile t's k-block kb (X rows part*64.., Y rows part*128..) into `stage`.
__device__ __forceinline__ void load_share(Smem& sm, const CUtensorMap* map_x,
                                           const CUtensorMap* map_y, Tile t, int kb, int stage,
                                           int part) {
  tma::load_2d(&sm.x[stage][part * kXShare * kBK], map_x, kb * kBK, t.r0 + part * kXShare,
               &sm.full[stage]);
  tma::load_2d(&sm.y[stage][part * kYShare * kBK], map_y, kb * kBK, t.c0 + part * kYShare,
               &sm.full[stage]);
}

// Math warpgroup `cw` waits for ring slot `slot` and queues its 4 wgmma (64 x 256 x 64) as one
// group; `first` (the tile's first k-block) overwrites the accumulators instead of adding.
// kGenericX: the X block was written by ordinary (generic-proxy) copies, cp.async rather than
// TMA (ch15's row gather), and wgmma reads shared memory through the async proxy: after the
// barrier's acquire, a proxy fence makes those writes visible to this thread's wgmma.
template <bool kGenericX = false>
__device__ __forceinline__ void mma_k_block(float (&acc)[128], Smem& sm, int cw, uint32_t slot,
                                            bool first) {
  const int s = int(slot % kStages);
  tma::wait_parity(&sm.full[s], (slot / kStages) & 1);
  if constexpr (kGenericX) tma::fence_proxy_async_shared();
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk)  // +32 bytes along the swizzled rows per k16 step
    wgmma::mma_m64n256k16_bf16(
        acc, wgmma::descriptor_k_major_sw128(&sm.x[s][cw * kXShare * kBK + kk * 16]),
        wgmma::descriptor_k_major_sw128(&sm.y[s][kk * 16]), !first || kk > 0);
  wgmma::commit();
}

// ---- The producer/consumer roles, one tile at a time; `slot` is the role's running ring slot.
constexpr int kSpecialisedThreads = (1 + kConsumers) * kWarpgroup;  // producer + 2 consumers
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;     // setmaxnreg, per thread
static_assert(wgmma::fits_register_pool(kProducerRegisters, kConsumerRegisters, kConsumers));

// The producer's one thread: for each k-block kb_begin..kb_end-1 of tile t, wait until both
// consumers released the stage's previous use (slot - kStages), then one expect_tx for the whole
// stage and its 4 copies.
__device__ __forceinline__ void produce_k_blocks(Smem& sm, const CUtensorMap* map_x,
                                                 const CUtensorMap* map_y, Tile t, int kb_begin,
                                                 int kb_end, uint32_t& slot) {
  for (int kb = kb_begin; kb < kb_end; ++kb, ++slot) {
    const int s = int(slot % kStages);
    if (slot >= kStages) tma::wait_parity(&sm.empty[s], ((slot / kStages) - 1) & 1);
    tma::arrive_expect_tx(&sm.full[s], kStageBytes);
    for (int part = 0; part < kConsumers; ++part) load_share(sm, map_x, map_y, t, kb, s, part);
  }
}
__device__ __forceinline__ void produce_tile(Smem& sm, const CUtensorMap* map_x,
                                             const CUtensorMap* map_y, Tile t, int kblocks,
                                             uint32_t& slot) {
  produce_k_blocks(sm, map_x, map_y, t, 0, kblocks, slot);
}

// Consumer `cw` (0 or 1): the k-blocks of its 64 x 256 of a tile, into `acc`. A stage is
// released (by the warpgroup's first thread) once the wgmma group that read it has finished:
// k-block kb - 1's after kb's group is queued, and the tile's last one after the final wait,
// before the epilogue, so the producer may refill it while this warpgroup stores. kCtas: the
// CTAs whose producers write into this CTA's stages (2 when a cluster multicasts), each told.
// kGenericX: as mma_k_block's.
template <int kCtas = 1, bool kGenericX = false>
__device__ __forceinline__ void mma_tile(float (&acc)[128], Smem& sm, int cw, int kblocks,
                                         uint32_t& slot) {
  const bool leader = threadIdx.x % kWarpgroup == 0;
  for (int kb = 0; kb < kblocks; ++kb, ++slot) {
    mma_k_block<kGenericX>(acc, sm, cw, slot, kb == 0);
    wgmma::wait<1>();
    if (kb > 0 && leader) tma::arrive_each_cta<kCtas>(&sm.empty[(slot - 1) % kStages]);
  }
  wgmma::wait<0>();
  if (leader) tma::arrive_each_cta<kCtas>(&sm.empty[(slot - 1) % kStages]);
}

// Consumer `cw`'s whole share of tile t: the k-blocks, then the bf16x2 stores from registers.
__device__ __forceinline__ void consume_tile(float (&acc)[128], Smem& sm, int cw, Tile t,
                                             int kblocks, uint32_t& slot, bf16* out, int cols) {
  mma_tile(acc, sm, cw, kblocks, slot);
  wgmma::store_m64n256_bf16(acc, out, cols, t.r0 + cw * kXShare, t.c0);
}

// A consumer warpgroup's start, in the consumers' branch of a kernel's role split (setmaxnreg
// must be): its registers up to kConsumerRegisters, its accumulators zeroed once (each tile's
// first wgmma overwrites them; zeroed so they are never undefined). Returns the consumer, 0 or 1.
__device__ __forceinline__ int start_consumer(float (&acc)[128]) {
  wgmma::grow_registers<kConsumerRegisters>();
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  return threadIdx.x / kWarpgroup - 1;
}

// The warp-specialised kernel, one tile per CTA (grid = tile count): warpgroup 0 is the
// producer (registers down to 40), warpgroups 1 and 2 the consumers (up to 232).
// warp_specialization's optimized variant and persistent_gemm's baseline.
static __global__ void __launch_bounds__(kSpecialisedThreads, 1)
    producer_consumer(const __grid_constant__ CUtensorMap map_x,
                      const __grid_constant__ CUtensorMap map_y, bf16* __restrict__ out, int rows,
                      int cols, int k) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = init_ring(raw, 1);  // full: the producer's one expect_tx per stage
  const Tile tile = grouped_tile(blockIdx.x, rows, cols);
  uint32_t slot = 0;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) produce_tile(sm, &map_x, &map_y, tile, k / kBK, slot);
  } else {
    float acc[128];
    const int cw = start_consumer(acc);
    consume_tile(acc, sm, cw, tile, k / kBK, slot, out, cols);
  }
#endif
}

// ---- Host side.
inline std::string requirements(const kernels::GemmBf16& w) {
  if (w.m % kBN != 0 || w.n % kBM != 0 || w.k % kBK != 0 || w.k == 0)
    return "whole tiles only: needs m % 256 == 0, n % 128 == 0, k % 64 == 0, k > 0";
  return "";
}

inline int tile_count(const kernels::GemmBf16& w) { return int((w.n / kBM) * (w.m / kBN)); }

// A rows x k row-major BF16 operand in boxes of box_rows x 64, 128-byte swizzled.
inline CUtensorMap operand_map(const bf16* base, int64_t rows, int64_t k, uint32_t box_rows) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, uint64_t(rows),
                          uint64_t(k), box_rows, kBK, CU_TENSOR_MAP_SWIZZLE_128B);
}

// Raises Kernel's dynamic shared-memory limit to kSmem, once (outside the timed launches).
template <auto Kernel, size_t kSmem>
void allow_smem() {
  static const bool configured = [] {
    BENCH_CUDA_CHECK(
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    return true;
  }();
  (void)configured;
}

// Launches any of the chapter's kernels of this tile: the same operand maps; the block size,
// the grid and the shared memory (the ring's, unless the kernel adds to it) are the kernel's,
// and `extra` follows the common arguments (persistent_gemm's TMA-store kernel: D's map).
template <auto Kernel, int kThreads, size_t kSmem = kSmemBytes, class... Extra>
void launch(const kernels::GemmBf16& w, unsigned grid, cudaStream_t stream, const Extra&... extra) {
  allow_smem<Kernel, kSmem>();
  // D^T (n x m, row-major) = B A^T: X = B gives the tile rows, Y = A the columns.
  const CUtensorMap map_x = operand_map(w.b.data(), w.n, w.k, kXShare);
  const CUtensorMap map_y = operand_map(w.a.data(), w.m, w.k, kYShare);
  Kernel<<<grid, kThreads, kSmem, stream>>>(map_x, map_y, w.d.data(), int(w.n), int(w.m), int(w.k),
                                            extra...);
  BENCH_CHECK_LAUNCH();
}
// Grid of a persistent kernel of kSpecialisedThreads threads (ch10's persistent_gemm, ch19's
// fp8_gemm): the CTAs resident at once (one per SM), at most one per tile. Asked once, after the
// shared-memory limit is raised (before it the calculator fits no CTA of this size), outside the
// timed launches like the attribute itself.
template <auto Kernel, size_t kSmem>
unsigned persistent_grid(int tiles) {
  static const unsigned resident = [] {
    allow_smem<Kernel, kSmem>();
    return kernels::resident_grid(Kernel, kSpecialisedThreads, kSmem);
  }();
  return std::min(resident, unsigned(tiles));
}
template <auto Kernel, size_t kSmem>
unsigned persistent_grid(const kernels::GemmBf16& w) {
  return persistent_grid<Kernel, kSmem>(tile_count(w));
}

template <auto Kernel, int kThreads>
void launch_per_tile(const kernels::GemmBf16& w, cudaStream_t stream) {
  launch<Kernel, kThreads>(w, unsigned(tile_count(w)), stream);
}

}  // namespace kernels::ws
