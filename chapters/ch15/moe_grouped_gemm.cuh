// ch15/moe_grouped_gemm.cuh: moe_dispatch's grouped GEMMs, every expert's tiles in one persistent
// launch on kernels/ws_gemm.cuh's warp-specialised TMA + wgmma tile (ch10's persistent_gemm), and
// the epilogues that take a finished tile out: BF16 stores in sorted order from registers
// (StoreSorted) or through shared memory and TMA (StoreSortedTma), or the combine's weighted
// reductions (CombineIntoY32). Three ways to feed A's rows: whole-tile TMA boxes of the permuted
// copy (grouped_gemm), a cp.async gather from x through the row index (grouped_gemm_gather), and
// one TMA box per row (grouped_gemm_row_tma). moe_dispatch.cu says which rung runs which; the
// sections keep its numbering.
//
// Everything device-side here is sm_90a code (wgmma, setmaxnreg, TMA): the kernels' bodies are
// compiled only under BENCH_SM90A_DEVICE, for variants declared {.arch_specific = 90}.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <kernels/async_copy.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/tma_store_epilogue.cuh>
#include <kernels/wgmma.cuh>

#include "moe_permutation.cuh"

namespace ch15::moe {
namespace {  // each including file gets its own copy: kernels must not clash at link time

namespace ws = kernels::ws;
namespace wgmma = kernels::wgmma;
namespace tma = kernels::tma;
namespace cp_async = kernels::cp_async;

// ---- 2. Step grouped_wgmma: one grouped GEMM over the permuted copy --------------------------
// The grouped GEMM: ws_gemm's producer and consumers, looped over this CTA's work items (a
// persistent kernel, as ch10's persistent_gemm, with `slot` running on across items). X = the
// sorted rows (a tile's 128 rows from its expert's offset), Y = the experts' weights stacked
// [expert * ffn + column][hidden]. The item count is read from memory and broadcast from lane 0,
// so the loop that holds the wgmma is uniform to the compiler.
// Where a consumer warpgroup's finished tile goes (its 64 rows from `first`, 256 columns from
// col0; rows at or past `end` belong to the next expert and are left alone). Every rung but
// epilogue_combine stores the expert outputs, BF16, in sorted order, for the combine kernel.
// An epilogue is called by each consumer warpgroup `cw` once a tile, with the ring's shared
// memory (an epilogue may keep staging space after it: kSmemBytes is the CTA's whole dynamic
// shared memory), and once more at the end (finish) before the CTA's shared memory goes.
struct StoreSorted {
  static constexpr size_t kSmemBytes = ws::kSmemBytes;
  bf16* __restrict__ y_sorted;
  int ffn;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem&, int, int first,
                                             int col0, int end) const {
    wgmma::store_m64n256_bf16_rows_below(acc, y_sorted, ffn, first, col0, end);
  }
  __device__ __forceinline__ void finish() const {}
};

// The consumer warpgroups of every grouped GEMM here: for each of this CTA's work items, its
// k-blocks into the accumulators (ws::mma_tile; kGenericX as there), then the tile handed to the
// epilogue (StoreSorted, StoreSortedTma or CombineIntoY32) with the rows that belong to its expert.
// A template so that its wgmma is compiled only where a kernel's sm_90a body calls it.
template <bool kGenericX, class Epilogue>
__device__ __forceinline__ void consume_items(ws::Smem& sm, const int32_t* __restrict__ offsets,
                                              const int32_t* __restrict__ tile_prefix, int items,
                                              int experts, int n_tiles, int kblocks,
                                              const Epilogue& epilogue, uint32_t& slot) {
  float acc[128];
  const int cw = ws::start_consumer(acc);
  for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
    const WorkItem at = locate_tile(tile_prefix, experts, item, n_tiles);
    ws::mma_tile<1, kGenericX>(acc, sm, cw, kblocks, slot);
    const int first = offsets[at.expert] + at.row_tile * ws::kBM + cw * ws::kXShare;
    epilogue(acc, sm, cw, first, at.col_tile * ws::kBN, offsets[at.expert + 1]);
  }
  epilogue.finish();
}

template <class Epilogue>
__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm(const __grid_constant__ CUtensorMap map_x,
                 const __grid_constant__ CUtensorMap map_w,
                 const __grid_constant__ Epilogue epilogue, const int32_t* __restrict__ offsets,
                 const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, 1);  // full: the producer's one expect_tx per stage
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int items = __shfl_sync(0xffffffffu, tile_prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    if (threadIdx.x == 0)
      for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
        const WorkItem at = locate_tile(tile_prefix, experts, item, n_tiles);
        const ws::Tile tile{offsets[at.expert] + at.row_tile * ws::kBM,
                            (at.expert * n_tiles + at.col_tile) * ws::kBN};
        ws::produce_k_blocks(sm, &map_x, &map_w, tile, 0, kblocks, slot);
      }
  } else {
    consume_items<false>(sm, offsets, tile_prefix, items, experts, n_tiles, kblocks, epilogue,
                         slot);
  }
#endif
}

// ---- 2b. grouped_gather, cluster_permute, tma_store: A's rows gathered from x by cp.async ----
// Hopper's TMA copies boxes, not lists of rows (a row gather is Blackwell's tile::gather4), so a
// stage's X block (128 rows x 64 columns, 16 KiB) is 1024 cp.async of 16 bytes, 8 per producer
// thread, each to the chunk the 128-byte swizzle gives it: the layout TMA writes and the wgmma
// descriptors expect. The W block stays on TMA (thread 0). A stage's full barrier counts 129
// arrivals: thread 0's expect_tx for W's bytes and one per producer thread, which cp.async makes
// once that thread's copies have landed (no thread waits). The stage is written by ordinary
// copies (the generic proxy) and read by wgmma (the async proxy): the consumers fence after the
// barrier (ws::mma_tile's kGenericX). Rows past the expert's end are zero-filled, multiplied and
// not stored. Issue rate: a k-block's A is 32 warp-wide cp.async (each 4 whole 128-byte rows,
// 512 bytes) and 32 warp-wide index loads, against 4.2 MFLOP of wgmma for the CTA, about 0.56 us
// at the H100's dense BF16 rate shared by 132 SMs: a small fraction of the producer's time.
namespace gather {
constexpr int kChunksPerRow = ws::kBK * int(sizeof(bf16)) / 16;  // 8 chunks of 16 bytes a row
constexpr int kRowStride = ws::kWarpgroup / kChunksPerRow;       // a thread's rows: 16 apart
constexpr int kRowsPerThread = ws::kBM / kRowStride;             // 8 of them
constexpr uint32_t kWBytes = ws::kBN * ws::kBK * sizeof(bf16);   // W's 32 KiB of a stage
constexpr uint32_t kFullArrivals = 1 + ws::kWarpgroup;           // expect_tx + each copier
}  // namespace gather

// The epilogue is a parameter: StoreSorted (grouped_gather, cluster_permute), StoreSortedTma
// (tma_store, 2e below) or CombineIntoY32 (epilogue_combine, 2d below); the gather is the same.
template <class Epilogue>
__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm_gather(const bf16* __restrict__ x, const __grid_constant__ CUtensorMap map_w,
                        const __grid_constant__ Epilogue epilogue,
                        const int32_t* __restrict__ row_token, const int32_t* __restrict__ offsets,
                        const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden) {
#if BENCH_SM90A_DEVICE
  using namespace gather;
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, kFullArrivals);
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int items = __shfl_sync(0xffffffffu, tile_prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    // Thread p fills 16-byte chunk p % 8 of rows p / 8 + 16 i. The swizzle puts chunk c of row r
    // at chunk c ^ (r % 8), the same for all of a thread's rows (16 apart), so it is one column.
    const int chunk = int(threadIdx.x) % kChunksPerRow, row0 = int(threadIdx.x) / kChunksPerRow;
    const int swizzled = (chunk ^ (row0 % 8)) * 8;
    for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
      const WorkItem at = locate_tile(tile_prefix, experts, item, n_tiles);
      const int first = offsets[at.expert] + at.row_tile * ws::kBM, end = offsets[at.expert + 1];
      const int c0 = (at.expert * n_tiles + at.col_tile) * ws::kBN;
      for (int kb = 0; kb < kblocks; ++kb, ++slot) {
        const int s = int(slot % ws::kStages);
        if (slot >= ws::kStages) tma::wait_parity(&sm.empty[s], ((slot / ws::kStages) - 1) & 1);
        if (threadIdx.x == 0) {
          tma::arrive_expect_tx(&sm.full[s], kWBytes);
          for (int part = 0; part < ws::kConsumers; ++part)
            tma::load_2d(&sm.y[s][part * ws::kYShare * ws::kBK], &map_w, kb * ws::kBK,
                         c0 + part * ws::kYShare, &sm.full[s]);
        }
        const bf16* column = x + kb * ws::kBK + chunk * 8;
        bf16* to = &sm.x[s][row0 * ws::kBK + swizzled];
        // The thread's 8 row indices are re-read each k-block (L1 hits, 512 bytes per tile for
        // the warpgroup) rather than held: 8 more live registers spill under the producer's 40.
#pragma unroll 4
        for (int i = 0; i < kRowsPerThread; ++i) {  // a zero fill still needs a valid source: x
          const int row = first + row0 + i * kRowStride;
          const bool inside = row < end;
          cp_async::copy16(to + i * kRowStride * ws::kBK,
                           inside ? column + int64_t{__ldg(row_token + row)} * hidden : x,
                           inside ? 16 : 0);
        }
        cp_async::arrive_on(&sm.full[s]);
      }
    }
    cp_async::commit();  // nothing left in flight when the thread exits
    cp_async::wait<0>();
  } else {
    consume_items</*kGenericX=*/true>(sm, offsets, tile_prefix, items, experts, n_tiles, kblocks,
                                      epilogue, slot);
  }
#endif
}

// ---- 2c. Step row_tma_gather: the gather as TMA, a row per copy (measured slower) --------------
// The idea: the cp.async gather costs the GEMM beside TMA: 128 threads each issue 8 copies and
// make one arrival on the stage's barrier (129 arrivals a stage), re-read their row indices every
// k-block, and the consumers fence the generic proxy before every stage. Here a box of ONE row
// (64 columns, 128 bytes) is a TMA copy of its own: the tensor map covers x [tokens][hidden], a
// row's coordinate is its token, and the 128-byte swizzle is a function of the shared-memory
// address (bits 7-9 pick the XOR), so row r's box written at stage + 128 r lands in exactly the
// chunks a whole-tile box would have put it in. One producer warp: each lane holds the tokens of
// 4 of the tile's 128 rows for the whole tile and issues their 4 copies per k-block; lane 0 also
// the stage's one expect_tx (the whole 48 KiB: X's rows and W's block) and W's two boxes. Rows
// past the expert's end ask for row `tokens` of x, past its end: TMA fills zeros and still counts
// the box's bytes. The writes are the async proxy's, as TMA's always are: the consumers are
// ws_gemm's own, with no proxy fence.
// What was measured (README): the GEMM took several times the cp.async gather's time; spread
// over 1713 items x 32 k-blocks on 132 CTAs, that is tens of ns for each of a stage's 130 copies
// if they go one after another.
// Two costs serialise them: a TMA copy takes its map and coordinates in uniform registers
// (UTMALDG [URa], [URb]), so a load_2d whose 32 lanes hold 32 different tokens becomes a loop of
// 32 single-lane issues that ptxas builds around it; and one SM's TMA unit takes the requests in
// turn, 130 a stage where a whole-tile box is one. Which of the two dominates is not measured
// (the SASS and an ncu profile would say). Hopper's TMA moves boxes, not row lists (Blackwell's
// tile::gather4 moves 4 rows a request); for a gather on Hopper, per-thread cp.async wins.
namespace row_tma {
constexpr int kRowsPerLane = ws::kBM / 32;  // 4 rows of the tile per lane
static_assert(kRowsPerLane * 32 == ws::kBM, "the producer warp's lanes cover the tile's rows");
// Lane 0's one expect_tx must be exactly the bytes of the copies issued on the stage's barrier:
// kBM one-row boxes of A (each kBK columns) and B's kConsumers boxes of kYShare rows. Too few
// and the stage completes before its last rows land; too many and the consumers wait forever.
static_assert(ws::kBM * ws::kBK * sizeof(bf16) +
                      ws::kConsumers * ws::kYShare * ws::kBK * sizeof(bf16) ==
                  ws::kStageBytes,
              "the stage's expect_tx against its boxes");
}  // namespace row_tma

__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm_row_tma(const __grid_constant__ CUtensorMap map_rows,
                         const __grid_constant__ CUtensorMap map_w, bf16* __restrict__ y_sorted,
                         const int32_t* __restrict__ row_token, const int32_t* __restrict__ offsets,
                         const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden,
                         int tokens) {
#if BENCH_SM90A_DEVICE
  using row_tma::kRowsPerLane;
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, 1);  // full: lane 0's one expect_tx per stage
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int items = __shfl_sync(0xffffffffu, tile_prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    if (threadIdx.x < 32) {
      const int lane = int(threadIdx.x);
      for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
        const WorkItem at = locate_tile(tile_prefix, experts, item, n_tiles);
        const int first = offsets[at.expert] + at.row_tile * ws::kBM, end = offsets[at.expert + 1];
        const int c0 = (at.expert * n_tiles + at.col_tile) * ws::kBN;
        int token[kRowsPerLane];  // the lane's rows: lane + 32 i of the tile
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) {
          const int row = first + lane + 32 * i;
          token[i] = row < end ? row_token[row] : tokens;
        }
        for (int kb = 0; kb < kblocks; ++kb, ++slot) {
          const int s = int(slot % ws::kStages);
          if (slot >= ws::kStages) tma::wait_parity(&sm.empty[s], ((slot / ws::kStages) - 1) & 1);
          if (lane == 0) {
            tma::arrive_expect_tx(&sm.full[s], ws::kStageBytes);
            for (int part = 0; part < ws::kConsumers; ++part)
              tma::load_2d(&sm.y[s][part * ws::kYShare * ws::kBK], &map_w, kb * ws::kBK,
                           c0 + part * ws::kYShare, &sm.full[s]);
          }
#pragma unroll
          for (int i = 0; i < kRowsPerLane; ++i)
            tma::load_2d(&sm.x[s][(lane + 32 * i) * ws::kBK], &map_rows, kb * ws::kBK, token[i],
                         &sm.full[s]);
        }
      }
    }
  } else {
    consume_items<false>(sm, offsets, tile_prefix, items, experts, n_tiles, kblocks,
                         StoreSorted{y_sorted, ffn}, slot);
  }
#endif
}

// ---- 2d. Step epilogue_combine: the combine in the GEMM's epilogue --------------------------
// A token's kTopK rows sit in kTopK different experts' tiles, computed by different CTAs at
// different times, so no CTA holds a token's whole sum: each adds its row's share, weighted, into
// an FP32 copy of y (y32, tokens x ffn, 25 MB at the timing size: L2 is 50 MB) with reductions,
// which the L2 performs (red: no value comes back, the SM does not wait). A pass afterwards
// (finish_combine) turns y32 into BF16 y and zeroes it for the next call. What goes: the expert
// outputs' BF16 write (routed x ffn, 96 MiB at the timing size) and the combine's read of them.
// What comes: the reductions (the same routed x ffn values, as FP32) and the pass over y32.
// Each value is rounded to BF16 before it is weighted, as the other rungs store it (and PyTorch's
// grouped_mm returns it): the same arithmetic as theirs, only the sums' order differs.
//
// The vector form: red.global.add.v4.f32 (PTX ISA 8.1, sm_90 and later; 16-byte aligned address,
// as every vector access): one request of 4 floats instead of 4. The accumulator fragment gives a
// thread 2 adjacent columns of 2 rows (r and r + 8; wgmma::store_m64n_bf16 says which), so lanes
// 2q and 2q + 1, which hold columns c, c+1 and c+2, c+3 of the same two rows, swap one pair:
// the even lane then has 4 adjacent columns of row r, the odd one of row r + 8. Two shuffles per
// 4 values; each thread then writes one row of the tile (its token and weight found once a tile).
// y32 rows are ffn floats (ffn % 256 == 0) and the columns 8 i + 4 (lane % 4 / 2) from a
// 256-aligned col0: every address is 16-byte aligned.
__device__ __forceinline__ void red_add_v4(float* address, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(address), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}
__device__ __forceinline__ float bf16_rounded(float v) {
  return __bfloat162float(__float2bfloat16(v));
}

template <int kTopK>
struct CombineIntoY32 {
  float* __restrict__ y32;                // [tokens][ffn], zero when the call starts
  const int32_t* __restrict__ row_token;  // place -> token
  const int32_t* __restrict__ position;   // routed row (token * kTopK + j) -> place
  const float* __restrict__ weight;       // routed row -> routing weight
  int ffn;
  static constexpr size_t kSmemBytes = ws::kSmemBytes;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem&, int, int first,
                                             int col0, int end) const {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const bool upper = (lane & 1) != 0;  // after the swap: row r + 8 (odd lanes) or r (even)
    const int row = first + warp * 16 + lane / 4 + (upper ? 8 : 0);
    const bool inside = row < end;
    // The row's token, and its weight: the routed row of that token whose place is this row (the
    // permutation keeps place -> token only; kTopK places of the token, one 32-byte sector).
    int64_t token = 0;
    float scale = 0.0f;
    if (inside) {
      token = __ldg(row_token + row);
#pragma unroll
      for (int j = 0; j < kTopK; ++j)
        if (__ldg(position + token * kTopK + j) == row) scale = __ldg(weight + token * kTopK + j);
    }
    float* out = y32 + token * ffn + col0 + 4 * ((lane % 4) / 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      // Row r's pair (r0, r1) and row r + 8's (s0, s1), BF16-rounded as the stored outputs are.
      const float r0 = bf16_rounded(acc[4 * i]), r1 = bf16_rounded(acc[4 * i + 1]);
      const float s0 = bf16_rounded(acc[4 * i + 2]), s1 = bf16_rounded(acc[4 * i + 3]);
      // Even lanes give away row r + 8's pair and odd lanes row r's: all lanes shuffle.
      const float got0 = __shfl_xor_sync(0xffffffffu, upper ? r0 : s0, 1);
      const float got1 = __shfl_xor_sync(0xffffffffu, upper ? r1 : s1, 1);
      // Selects, not a branch on `upper`: that would split every warp in two halves, each
      // issuing its own reduction. The even lane's columns come first in either row.
      if (inside)
        red_add_v4(out + 8 * i, scale * (upper ? got0 : r0), scale * (upper ? got1 : r1),
                   scale * (upper ? s0 : got0), scale * (upper ? s1 : got1));
    }
  }
  __device__ __forceinline__ void finish() const {}
};

// y = BF16(y32), and y32 = 0 for the next call, 8 values a thread. The zeroing rides on this pass
// rather than a memset at the start of the call: both are timed work either way, but here the
// lines are already being read (the zero stores hit lines in L2 this thread just read) and it is
// one launch less; y32 is zeroed once, untimed, when the rung is built.
__global__ void finish_combine(float* __restrict__ y32, int64_t values, bf16* __restrict__ y) {
  const int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kernels::kBf16PerVector;
  if (i >= values) return;
  float4* from = reinterpret_cast<float4*>(y32 + i);
  const float4 a = from[0], b = from[1];
  from[0] = from[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float sums[kernels::kBf16PerVector] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  *reinterpret_cast<uint4*>(y + i) = kernels::pack_bf16x8(sums);
}

// ---- 2e. Optimized tma_store: the expert outputs leave through shared memory and TMA stores ----
// From registers (StoreSorted) a warp's store instruction writes 16 bytes in each of 8 rows: half
// of each 32-byte sector, so every sector is written in two halves by two instructions, while
// the tensor cores wait (both consumers store at once). Instead, as ch10's persistent_tma_store
// does, the tile goes to the copy engine (kernels/tma_store_epilogue.cuh: 64 x 64 chunks staged in
// the 128-byte swizzle, two buffers a consumer, nobody waits for the writes).
// Here a TMA box cannot stop at the expert's end (the rows after it are the next expert's, and
// another CTA writes them), so only a consumer's share whose 64 rows all belong to the expert
// goes by TMA; the share that holds the expert's end (at most one in each of the expert's column
// tiles) is stored from registers below the end as before, and a share wholly past it, nothing.
// The branch is uniform over the warpgroup (first and end are the tile's), as the warpgroup
// barriers inside store_tile_tma need.
struct StoreSortedTma {
  static constexpr size_t kSmemBytes = ws::kTmaStoreSmemBytes;
  CUtensorMap map;  // y_sorted [routed][ffn] in 64 x 64 boxes, 128-byte swizzled
  bf16* __restrict__ y_sorted;
  int ffn;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem& sm, int cw,
                                             int first, int col0, int end) const {
    if (first + ws::kXShare <= end)
      ws::store_tile_tma(acc, reinterpret_cast<ws::TmaStoreSmem&>(sm).staging[cw], &map, cw,
                         ws::Tile{first - cw * ws::kXShare, col0});
    else if (first < end)
      wgmma::store_m64n256_bf16_rows_below(acc, y_sorted, ffn, first, col0, end);
  }
  // The last TMA stores must have read their staging before the CTA's shared memory goes (and
  // written y_sorted, which the combine kernel reads next).
  __device__ __forceinline__ void finish() const {
    if (threadIdx.x % ws::kWarpgroup == 0) tma::wait_all<0>();
  }
};

}  // namespace
}  // namespace ch15::moe
