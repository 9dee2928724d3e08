// kernels/tma_store_epilogue.cuh: the epilogue of ch10 persistent_gemm's "persistent_tma_store"
// and of kernels/fp8_gemm.cuh's persistent E4M3 kernel (ch19 fp8_gemm's "e4m3_persistent", and
// one of calibrate's FP8 ceilings): a consumer warpgroup of kernels/ws_gemm.cuh's tile hands its
// 64 x 256 BF16 share of a tile to the copy engine through shared memory (TMA store,
// cp.async.bulk.tensor global <- shared) instead of storing it from registers.
//
// Staging, per consumer: 2 buffers of 64 x 64 BF16 (8 KiB, one store box each) in the 128-byte
// swizzle, 32 KiB for both consumers, after kernels/ws_gemm.cuh's ring. Why not a whole 128 x 256
// tile (64 KiB): next to the 4-stage ring (192 KiB) it exceeds the 227 KiB an SM gives one CTA, and
// a 3-stage ring would cut the main loop's cover for load latency, on every k-block, to buy room
// for a buffer used once per tile. The staging need only hold what the copy engine has not read
// yet, and it reads a chunk's 8 KiB from shared memory quickly; its global writes are never waited
// for until the CTA exits. 4 chunks a tile, the buffers alternating across tiles too. The output
// tile is the same for any operand type (FP32 sums, BF16 D), so an 8-bit ring of the same bytes
// (kernels/fp8_gemm.cuh) uses this epilogue unchanged, with its own shared-memory struct around
// the staging.
//
// sm_90a device code, like kernels/ws_gemm.cuh: call it only under BENCH_SM90A_DEVICE.
#pragma once

#include <kernels/bf16_pack.cuh>
#include <kernels/ws_gemm.cuh>

namespace kernels::ws {

constexpr int kStoreCols = 64;  // one 128-byte swizzle row of BF16: the store box's width
constexpr int kStoreBuffers = 2;
constexpr int kChunks = kBN / kStoreCols;  // 4 column chunks of a consumer's 64 x 256
static_assert(kChunks % kStoreBuffers == 0,
              "a tile's chunks must leave the buffer rotation in step");

using Staging = bf16[kStoreBuffers][kXShare * kStoreCols];  // one consumer's, 16 KiB
struct alignas(1024) TmaStoreSmem {
  Smem ring;                    // first: init_ring's aligned base is this struct's
  Staging staging[kConsumers];  // 1024-aligned (sizeof(Smem))
};
constexpr size_t kTmaStoreSmemBytes = sizeof(TmaStoreSmem) + 1024;  // 225 KiB + alignment room
static_assert(kTmaStoreSmemBytes <= 227 * 1024, "one CTA per SM: at most 227 KiB");

// Synchronises the 128 threads of one warpgroup only (ids 1, 2; 0 is __syncthreads). The id is
// a register, so ptxas reserves all 16 named barriers: free at one CTA per SM.
__device__ __forceinline__ void warpgroup_sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kWarpgroup) : "memory");
}
// Two floats as BF16 into 4 bytes of shared memory: st.shared, not a generic store (the
// staging pointer comes from aligning the dynamic base, which hides its address space).
__device__ __forceinline__ void store_shared_bf16x2(uint32_t addr, float lo, float hi) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(kernels::pack_bf16x2(lo, hi)) : "memory");
}

// Consumer `cw` stores its 64 x 256 of tile t as 4 chunks of 64 x 64. Per chunk: the leader
// (thread 0 of the warpgroup, which alone issues and waits for its bulk groups) waits until the
// store that last used this buffer (two chunks back, maybe the previous tile's) has read it; a
// warpgroup barrier; every thread writes its fragments; each fences its writes into the async
// proxy; a barrier; the leader issues the chunk's TMA store and commits it as one bulk group, and
// nobody waits for it: the next chunk goes to the other buffer.
__device__ __forceinline__ void store_tile_tma(const float (&acc)[128], Staging& staging,
                                               const CUtensorMap* map_d, int cw, Tile t) {
  const int thread = threadIdx.x % kWarpgroup, lane = thread % 32;
  const bool leader = thread == 0;
  // Fragment rows (wgmma's accumulator layout, as wgmma::store_m64n256_bf16): row and row + 8,
  // both with row % 8 == lane / 4; each 16-byte unit (8 columns) of a 128-byte staging row sits
  // at unit ^ (row % 8), the swizzle the store map undoes. For one store instruction a warp's 8
  // rows then hit 8 different units: 32 distinct banks, no conflict.
  const int row = (thread / 32) * 16 + lane / 4, swizzle = lane / 4, pair = 2 * (lane % 4);
#pragma unroll
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const bf16* buf = staging[chunk % kStoreBuffers];
    const uint32_t top = tma::smem_addr(buf + row * kStoreCols),
                   bottom = top + 8 * kStoreCols * sizeof(bf16);
    if (leader) tma::wait_read<kStoreBuffers - 1>();  // all but the newest group (other buffer)
    warpgroup_sync(1 + cw);
#pragma unroll
    for (int unit = 0; unit < kStoreCols / 8; ++unit) {
      const int i = chunk * (kStoreCols / 8) + unit;  // fragment column group: columns 8i..8i+7
      const uint32_t offset = (unit ^ swizzle) * 16 + pair * sizeof(bf16);  // bytes in the row
      store_shared_bf16x2(top + offset, acc[4 * i], acc[4 * i + 1]);
      store_shared_bf16x2(bottom + offset, acc[4 * i + 2], acc[4 * i + 3]);
    }
    tma::fence_proxy_async_shared();  // this thread's writes, before the copy engine reads them
    warpgroup_sync(1 + cw);           // ... and everyone's, before the leader issues the copy
    if (leader) {
      tma::store_2d(map_d, t.c0 + chunk * kStoreCols, t.r0 + cw * kXShare, buf);
      tma::commit();
    }
  }
}

// ---- Host side: D (m x n, column-major) as D^T (n x m, row-major) in 64 x 64 boxes, 128-byte
// swizzled like the staging.
inline CUtensorMap output_map(bf16* d, int64_t m, int64_t n) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), d, uint64_t(n),
                          uint64_t(m), kXShare, kStoreCols, CU_TENSOR_MAP_SWIZZLE_128B);
}
inline CUtensorMap output_map(const kernels::GemmBf16& w) {
  return output_map(w.d.data(), w.m, w.n);
}

}  // namespace kernels::ws
