// kernels/fp8_gemm.cuh: the E4M3 wgmma GEMM of ch19 fp8_gemm, and its persistent kernel, which
// is also one of calibrate's two FP8 ceilings (calibrate/gemm.cu: the ceiling is the faster of
// cuBLASLt and this kernel, which beats cuBLASLt's FP8 at 8192^3 on the H100 and the H200).
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32
// accumulate, the suite's TN layout. The kernels compute D^T = B A^T: X = B gives a tile's rows,
// Y = A its columns. The tile is ch10's (kernels/ws_gemm.cuh: 128 x 256 of D^T, a 4-stage TMA
// ring in the 128-byte swizzle, one producer warpgroup whose one thread issues the copies, two
// consumer warpgroups of 64 x 256 each, grouped rasterisation), counted in bytes so that it holds
// either operand type: a k-block is one 128-byte swizzle row, 64 BF16 or 128 E4M3 values, and
// each of its 4 wgmma steps 32 bytes along it. An operand type is a traits struct (E4m3Operands
// below; ch19 adds its BF16 baseline's and its block-scaled rung's): the element type, the copy
// engine's type, the wgmma, and how the FP32 sums are scaled.
//
// persistent_gemm: one CTA per SM walks tiles b, b + grid, ... (ch10's static schedule: equal
// tiles), the ring's slots counting on across tiles, so the producer loads the next tile's first
// k-blocks while the consumers store this one, and the store goes through shared memory to TMA
// (kernels/tma_store_epilogue.cuh). ch19's README explains the rung; this file is its code.
//
// Everything device-side here is sm_90a code: call it only under BENCH_SM90A_DEVICE, from a
// variant declared {.arch_specific = 90}.
#pragma once

#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <kernels/arch.cuh>
#include <kernels/fp8_quantize.cuh>
#include <kernels/tma.cuh>
#include <kernels/tma_store_epilogue.cuh>
#include <kernels/wgmma.cuh>
#include <kernels/ws_gemm.cuh>

#include <cstdint>
#include <string>

namespace kernels::fp8_gemm {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

// ---- The tile: ch10's, in bytes, so that it holds either operand type.
constexpr int kRowBytes = 128;  // a k-block row: one 128-byte swizzle row (64 BF16 or 128 E4M3)
constexpr int kBM = 128;        // tile rows (D columns), from X = B: wgmma's M side
constexpr int kBN = 256;        // tile columns (D rows), from Y = A: wgmma's N side
constexpr int kStages = 4;
constexpr int kConsumers = 2;  // math warpgroups, 64 tile rows each
constexpr int kWarpgroup = 128;
constexpr int kThreads = (1 + kConsumers) * kWarpgroup;  // producer + 2 consumers
constexpr int kXShare = kBM / kConsumers;                 // 64 X rows per copy
constexpr int kYShare = kBN / kConsumers;                 // 128 Y rows per copy
constexpr int kStepBytes = 32;                            // one wgmma's k: 16 BF16 or 32 E4M3
constexpr int kStepsPerBlock = kRowBytes / kStepBytes;    // 4 wgmma a k-block
constexpr uint32_t kStageBytes = (kBM + kBN) * kRowBytes;  // 48 KiB
constexpr int kGroupRows = 16;  // rasterisation: 16 row-tiles per column band (ch10's)
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;  // setmaxnreg, per thread
static_assert(wgmma::fits_register_pool(kProducerRegisters, kConsumerRegisters, kConsumers));

// The tile, its grouped rasterisation (consecutive tile numbers walk kGroupRows row-tiles of one
// column band, so the CTAs running together share their Y blocks and re-read X from L2), the
// TMA-store epilogue and the persistent grid are ch10's, from kernels/: the tile in D^T's
// elements and the thread roles are the same for either operand type.
using kernels::ws::grouped_tile;
using kernels::ws::Tile;
static_assert(kBM == kernels::ws::kBM && kBN == kernels::ws::kBN &&
              kConsumers == kernels::ws::kConsumers && kXShare == kernels::ws::kXShare &&
              kGroupRows == kernels::ws::kGroupRows &&
              kThreads == kernels::ws::kSpecialisedThreads);

// The persistent kernel's shared memory: the ring, then each consumer's TMA-store staging
// (kernels/tma_store_epilogue.cuh: 2 buffers of 64 x 64 BF16). 192 KiB + 64 bytes of barriers,
// padded to 193 KiB, + 32 KiB: 225 KiB, + 1 KiB of alignment room, as ch10's
// persistent_tma_store. (ch19's block-scaled rung adds 4 KiB of A-scale slots to its own ring:
// with them this layout would be 230 KiB, over the 227 KiB a block may ask for.)
struct alignas(1024) PersistentSmem {
  uint8_t x[kStages][kBM * kRowBytes];  // 16 KiB each (1024-aligned: the swizzle is address bits)
  uint8_t y[kStages][kBN * kRowBytes];  // 32 KiB each
  uint64_t full[kStages], empty[kStages];
  alignas(1024) kernels::ws::Staging staging[kConsumers];  // the swizzle is address bits
};
constexpr size_t kPersistentSmemBytes = sizeof(PersistentSmem) + 1024;
static_assert(kPersistentSmemBytes <= 227 * 1024, "the persistent CTA no longer fits one SM");

// What differs between the operand types: the values a k-block holds, the copy engine's element
// type, the wgmma, and how the sums are scaled. per_block (ch19's block-scaled rung): the scales
// change along k, and the producer also brings each k-block's Y scales (Layout::y_scales).
enum class Scaling { none, per_tensor, per_block };
struct E4m3Operands {
  using T = fp8;
  static constexpr int kBK = kRowBytes / int(sizeof(T));  // 128
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_UINT8;  // codes as bytes
  static constexpr Scaling kScaling = Scaling::per_tensor;
  __device__ static void mma(float (&acc)[128], uint64_t a, uint64_t b, int accumulate) {
    wgmma::mma_m64n256k32_e4m3(acc, a, b, accumulate);
  }
};

// The ring's barriers (in any layout with full/empty): a full barrier completes on the producer's
// one expect_tx and its bytes, an empty one after `empty_arrivals` releases.
template <class Layout>
__device__ __forceinline__ Layout& init_ring(uint8_t* raw, uint32_t empty_arrivals) {
  Layout& sm = tma::aligned_1024<Layout>(raw);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], 1);
      tma::mbarrier_init(&sm.empty[s], empty_arrivals);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  return sm;
}

// The ring is addressed by a slot, as in kernels/ws_gemm.cuh: the running count of k-blocks a
// role has put through it. Slot s lives in stage s % 4 and is that stage's (s / 4)-th use, so its
// barrier parity is (s / 4) & 1. One tile per CTA, the slot is the k-block; the persistent kernel
// keeps counting across its tiles, so a parity flips per ring wrap, not per tile.
//
// The producer's one thread: for each k-block of tile t, wait until the consumers released the
// stage's previous use (slot - 4), then one expect_tx for the whole stage and its 4 copies (2 of
// X, 2 of Y), plus, block-scaled, the tile's 256 Y scales of the k-block (row kb of the
// [k-blocks][cols] scales).
template <class Op, class Layout>
__device__ __forceinline__ void produce(Layout& sm, const CUtensorMap* map_x,
                                        const CUtensorMap* map_y, const CUtensorMap* map_y_scales,
                                        Tile t, int kblocks, uint32_t& slot) {
  constexpr bool kBlockScaled = Op::kScaling == Scaling::per_block;
  constexpr uint32_t kBytes = kStageBytes + (kBlockScaled ? kBN * sizeof(float) : 0);
  for (int kb = 0; kb < kblocks; ++kb, ++slot) {
    const int s = int(slot % kStages);
    if (slot >= kStages) tma::wait_parity(&sm.empty[s], ((slot / kStages) - 1) & 1);
    tma::arrive_expect_tx(&sm.full[s], kBytes);
    for (int part = 0; part < kConsumers; ++part) {
      tma::load_2d(&sm.x[s][part * kXShare * kRowBytes], map_x, kb * Op::kBK,
                   t.r0 + part * kXShare, &sm.full[s]);
      tma::load_2d(&sm.y[s][part * kYShare * kRowBytes], map_y, kb * Op::kBK,
                   t.c0 + part * kYShare, &sm.full[s]);
    }
    if constexpr (kBlockScaled) tma::load_2d(sm.y_scales[s], map_y_scales, t.c0, kb, &sm.full[s]);
  }
}

// Consumer `cw`: its 64 x 256 of the tile. Each k-block's 4 wgmma are one group; the stage a
// group read is released (by the warpgroup's first thread) once the next group is queued and the
// older one has finished, the tile's last one after the final wait, before the epilogue, so that
// a persistent producer refills it with the next tile's k-blocks while this warpgroup stores.
template <class Op, class Layout>
__device__ __forceinline__ void consume(float (&acc)[128], Layout& sm, int cw, int kblocks,
                                        uint32_t& slot) {
  const bool leader = threadIdx.x % kWarpgroup == 0;
  for (int kb = 0; kb < kblocks; ++kb, ++slot) {
    const int s = int(slot % kStages);
    tma::wait_parity(&sm.full[s], (slot / kStages) & 1);
    wgmma::fence();
#pragma unroll
    for (int step = 0; step < kStepsPerBlock; ++step)  // +32 bytes along the swizzled rows
      Op::mma(
          acc,
          wgmma::descriptor_k_major_sw128(&sm.x[s][cw * kXShare * kRowBytes + step * kStepBytes]),
          wgmma::descriptor_k_major_sw128(&sm.y[s][step * kStepBytes]), kb > 0 || step > 0);
    wgmma::commit();
    wgmma::wait<1>();
    if (kb > 0 && leader) tma::arrive(&sm.empty[(slot - 1) % kStages]);
  }
  wgmma::wait<0>();
  if (leader) tma::arrive(&sm.empty[(slot - 1) % kStages]);
}

// Per-tensor scales commute with the sum: one multiply per accumulator, in FP32, before the BF16
// round (the same place cuBLASLt applies its A and B scales). `scale`: dequant(X) x dequant(Y).
__device__ __forceinline__ void apply_scale(float (&acc)[128], float scale) {
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] *= scale;
}

// ---- The persistent kernel: one CTA per SM walks tiles b, b + grid, ... (ch10's static
// schedule: equal tiles, so a queue would buy nothing), the ring's slots counting on across them,
// and the epilogue goes through shared memory to a TMA store (kernels/tma_store_epilogue.cuh).
// What that removes, per tile after a CTA's first: the launch, barrier init and tensor-map fetch,
// the empty ring at the start (the producer is already up to 4 k-blocks into this tile while the
// consumers finish the previous one), and the consumers' 64 st.global a thread (each bf16x2
// scattered over 16 rows) while no wgmma runs: they write 8 KiB swizzled chunks to shared memory
// and one thread hands each to the copy engine, which writes D while they go back to the ring.
// Per-tensor scales only (ch19's block-scaled rung keeps its own kernel).
// D^T (rows x cols, row-major) = X Y^T with X = B, Y = A; x_scales / y_scales: the operands'
// per-tensor scales.
template <class Op>
__global__ void __launch_bounds__(kThreads, 1)
    persistent_gemm(const __grid_constant__ CUtensorMap map_x,
                    const __grid_constant__ CUtensorMap map_y, int rows, int cols, int k,
                    const kernels::Fp8Scales* __restrict__ x_scales,
                    const kernels::Fp8Scales* __restrict__ y_scales,
                    const __grid_constant__ CUtensorMap map_d) {
  static_assert(Op::kScaling != Scaling::per_block, "block scales: ch19's block_scaled_gemm");
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  PersistentSmem& sm = init_ring<PersistentSmem>(raw, kConsumers);
  const int tiles = (rows / kBM) * (cols / kBN), kblocks = k / Op::kBK;
  uint32_t slot = 0;  // k-blocks this role has put through the ring, over all its tiles
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0)
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)
        produce<Op>(sm, &map_x, &map_y, nullptr, grouped_tile(tile, rows, cols), kblocks, slot);
  } else {
    wgmma::grow_registers<kConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float scale = 1.0f;
    if constexpr (Op::kScaling == Scaling::per_tensor)
      scale = x_scales->dequant * y_scales->dequant;  // once: the same for every tile
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;  // each tile's first wgmma overwrites
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      consume<Op>(acc, sm, cw, kblocks, slot);
      if constexpr (Op::kScaling == Scaling::per_tensor) apply_scale(acc, scale);
      kernels::ws::store_tile_tma(acc, sm.staging[cw], &map_d, cw, grouped_tile(tile, rows, cols));
    }
    // The staging must outlive the copy engine's reads of it, and the CTA its shared memory.
    if (threadIdx.x % kWarpgroup == 0) tma::wait_all<0>();
  }
#endif
}

// ---- Host side.
// Whole tiles only, in either operand type (a k-block of 128 E4M3 is two of 64 BF16).
inline std::string requirements(int64_t m, int64_t n, int64_t k) {
  if (m % kBN != 0 || n % kBM != 0 || k % E4m3Operands::kBK != 0 || k == 0)
    return "whole tiles only: needs m % 256 == 0, n % 128 == 0, k % 128 == 0, k > 0";
  return "";
}

// A rows x k row-major operand in boxes of box_rows x one 128-byte row, 128-byte swizzled.
template <class Op>
CUtensorMap operand_map(const typename Op::T* base, int64_t rows, int64_t k, uint32_t box_rows) {
  return tma::make_map_2d(Op::kMapType, sizeof(typename Op::T), base, uint64_t(rows), uint64_t(k),
                          box_rows, Op::kBK, CU_TENSOR_MAP_SWIZZLE_128B);
}

// D (m x n, BF16) = A B on persistent_gemm<Op>: grid = the CTAs resident at once, at most one per
// tile (kernels::ws::persistent_grid); D through its TMA-store map (kernels::ws::output_map).
template <class Op>
void launch_persistent(const typename Op::T* a, const typename Op::T* b, bf16* d, int64_t m,
                       int64_t n, int64_t k, const kernels::Fp8Scales* a_scales,
                       const kernels::Fp8Scales* b_scales, cudaStream_t stream) {
  const unsigned grid = kernels::ws::persistent_grid<persistent_gemm<Op>, kPersistentSmemBytes>(
      int((n / kBM) * (m / kBN)));
  // D^T (n x m, row-major) = B A^T: X = B gives the tile rows, Y = A the columns.
  const CUtensorMap map_x = operand_map<Op>(b, n, k, kXShare);
  const CUtensorMap map_y = operand_map<Op>(a, m, k, kYShare);
  persistent_gemm<Op><<<grid, kThreads, kPersistentSmemBytes, stream>>>(
      map_x, map_y, int(n), int(m), int(k), b_scales, a_scales, kernels::ws::output_map(d, m, n));
  BENCH_CHECK_LAUNCH();
}

}  // namespace kernels::fp8_gemm
