// ch16/flash_attention_wgmma.cuh: the Hopper rung of flash_attention.cu (sm_90a only), in a file of
// its own to keep each under a screenful of ideas. Included by flash_attention.cu alone.
//
// A CTA: 128 query rows of one head, 3 warpgroups.
//   producer (warpgroup 0, one thread): TMA loads Q once (128 x 128) and then, per 128-key tile,
//     K and V into a 2-stage ring; each tile's K and V complete on barriers of their own, so S can
//     start before V has landed. It reuses a stage once both consumers have released it.
//   consumers (warpgroups 1, 2: 64 query rows each), per tile:
//     S (64 x 128) = Q K^T: 8 wgmma m64n128k16, both operands from shared memory (K-major);
//     the online softmax on S's fragments (the same quad-of-lanes row layout as mma.sync);
//     P packed to BF16 in registers, which is wgmma's register A operand as it stands;
//     O (64 x 128, FP32) += P V: 8 wgmma with A from registers, V from shared memory MN-major
//     (V is stored [key][dim]: dim contiguous, so the descriptor says N-major, imm-trans-b = 1).
//   setmaxnreg: 384 threads launch with 168 registers each; the producer drops to 24 and the
//   consumers rise to 240 (24 x 128 + 240 x 256 = 64,512 of 65,536).
// Shared memory, all in the 128-byte swizzle that TMA writes and wgmma reads: a 128-row x 128-dim
// BF16 tile is two 64-column boxes ([half][row][64]), 16 KiB each, each row 128 bytes.
// Q 32 KiB + 2 stages x (K 32 + V 32 KiB) = 160 KiB, one CTA per SM.
// The two consumers run their GEMMs and softmaxes independently, so the warp schedulers already
// overlap one's softmax with the other's wgmma where they drift apart; FlashAttention-3's
// ping-pong (named barriers forcing the alternation) and intra-warpgroup overlap (S of tile t + 1
// issued before the softmax of tile t) are the next refinements, not done here.
#pragma once

#include <cuda_bf16.h>

#include <kernels/arch.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/flash_attention_mma.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>

namespace ch16_wgmma {

using bf16 = __nv_bfloat16;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

constexpr int kHeadDim = 128;
constexpr int kRows = 128;   // query rows per CTA: 2 consumers x 64
constexpr int kKeys = 128;   // keys per tile
constexpr int kHalf = 64;    // head-dim columns per 128-byte swizzle row (one TMA box)
constexpr int kStages = 2;
constexpr int kWarpgroup = 128, kConsumers = 2, kThreads = (1 + kConsumers) * kWarpgroup;
constexpr uint32_t kTileBytes = kKeys * kHeadDim * sizeof(bf16);  // 32 KiB: Q, or a K or V tile
constexpr uint32_t kHalfBytes = kTileBytes / 2;                   // one 64-column box
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;
static_assert(kRows == kKeys, "causal: query block qb ends inside key tile qb");
static_assert(kProducerRegisters * kWarpgroup + kConsumerRegisters * kConsumers * kWarpgroup <= 65536);

struct alignas(1024) Smem {
  bf16 q[2][kRows * kHalf];             // [half][row][64]
  bf16 k[kStages][2][kKeys * kHalf];    // [stage][half][key][64]
  bf16 v[kStages][2][kKeys * kHalf];
  uint64_t q_full, k_full[kStages], v_full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

// Key tiles query block qb walks: all, or (causal) those at or below its last row.
template <bool kCausal>
__host__ __device__ inline int tiles_for(int64_t seq, int qb) {
  const int all = int((seq + kKeys - 1) / kKeys);
  return kCausal ? (all < qb + 1 ? all : qb + 1) : all;
}

// One consumer warpgroup (cw = 0, 1): rows qb * 128 + cw * 64 .. + 63 of this head.
template <bool kCausal>
__device__ __forceinline__ void consume(Smem& sm, int cw, int qb, int tiles, int64_t seq, bf16* out) {
  const int warp = (threadIdx.x % kWarpgroup) / 32, lane = threadIdx.x % 32;
  const int64_t row0 = int64_t{qb} * kRows + cw * 64 + warp * 16 + lane / 4;  // and row0 + 8
  const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
  float o[64], m[2] = {kernels::kEmptyMax, kernels::kEmptyMax}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  tma::wait_parity(&sm.q_full, 0);
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kStages;
    const uint32_t parity = (t / kStages) & 1;
    // S = Q K^T over head_dim in 8 k16 steps: +32 bytes along the swizzled rows, the next box at 4.
    float sc[64];  // written by the first wgmma (accumulate = 0): no zeroing needed
    tma::wait_parity(&sm.k_full[s], parity);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
      wgmma::mma_m64n128k16_bf16(sc, wgmma::descriptor_k_major_sw128(&sm.q[kk / 4][cw * 64 * kHalf + (kk % 4) * 16]),
                                 wgmma::descriptor_k_major_sw128(&sm.k[s][kk / 4][(kk % 4) * 16]), kk > 0);
    wgmma::commit();
    wgmma::wait<0>();
    // Online softmax. sc[4i + e] is row row0 + 8 (e / 2), key t * 128 + 8 i + 2 (lane % 4) + e % 2.
    // Only the last tile has masked scores (causal: the diagonal; else keys past seq): the others
    // skip the 64 compares.
    if (t == tiles - 1) {
      const int64_t key0 = int64_t{t} * kKeys + 2 * (lane % 4);
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const int64_t key = key0 + 8 * (i / 4) + i % 2;
        if (key >= seq || (kCausal && key > row0 + 8 * ((i % 4) / 2))) sc[i] = -INFINITY;
      }
    }
    float m_new[2] = {m[0], m[1]};
#pragma unroll
    for (int i = 0; i < 64; ++i) sc[i] *= scale, m_new[(i % 4) / 2] = fmaxf(m_new[(i % 4) / 2], sc[i]);
    float c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 1));
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 2));
      c[h] = kernels::exp2_ftz(m[h] - m_new[h]);
      l[h] *= c[h], m[h] = m_new[h];
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= c[(i % 4) / 2];  // the previous P V group has completed
    // P, packed: keys 16 kk .. 16 kk + 15 are column groups 2 kk and 2 kk + 1.
    uint32_t pa[kKeys / 16][4];
#pragma unroll
    for (int i = 0; i < 64; ++i) sc[i] = kernels::exp2_ftz(sc[i] - m[(i % 4) / 2]), l[(i % 4) / 2] += sc[i];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const float* lo = &sc[8 * kk];  // group 2 kk: 4 values, then group 2 kk + 1
      pa[kk][0] = kernels::pack_bf16x2(lo[0], lo[1]), pa[kk][1] = kernels::pack_bf16x2(lo[2], lo[3]);
      pa[kk][2] = kernels::pack_bf16x2(lo[4], lo[5]), pa[kk][3] = kernels::pack_bf16x2(lo[6], lo[7]);
    }
    // O += P V over the tile's keys in 8 k16 steps of 16 keys (2048 bytes of each box).
    tma::wait_parity(&sm.v_full[s], parity);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
      wgmma::mma_m64n128k16_bf16_a_regs(o, pa[kk], wgmma::descriptor_mn_major_sw128(&sm.v[s][0][kk * 16 * kHalf], kHalfBytes),
                                        1);
    wgmma::commit();
    wgmma::wait<0>();
    if (threadIdx.x % kWarpgroup == 0) tma::arrive(&sm.empty[s]);  // both products read stage s
  }
  kernels::flash_store_rows(l, row0, seq, out, [&](int j, int e) { return o[4 * j + e]; });
}

// Q, K, V as [batch * heads * seq][128] maps in 128 x 64 boxes: a head's last tile may run into
// the next head's rows, which the key < seq mask (scores) and the row < seq store (queries) ignore.
template <bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_ws(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
             const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ out, int64_t seq) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t wgmma_smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(wgmma_smem_raw) + 1023) & ~uintptr_t{1023});
  const int qb = kCausal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);  // causal: longest first
  const int head_row = int(blockIdx.y * seq);  // this head's first row in the maps
  const int tiles = tiles_for<kCausal>(seq, qb);
  if (threadIdx.x == 0) {
    tma::mbarrier_init(&sm.q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.k_full[s], 1);
      tma::mbarrier_init(&sm.v_full[s], 1);
      tma::mbarrier_init(&sm.empty[s], kConsumers);  // one arrival per consumer warpgroup
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      tma::arrive_expect_tx(&sm.q_full, kTileBytes);
      for (int h = 0; h < 2; ++h) tma::load_2d(sm.q[h], &map_q, h * kHalf, head_row + qb * kRows, &sm.q_full);
      for (int t = 0; t < tiles; ++t) {
        const int s = t % kStages, key_row = head_row + t * kKeys;
        if (t >= kStages) tma::wait_parity(&sm.empty[s], ((t / kStages) - 1) & 1);
        tma::arrive_expect_tx(&sm.k_full[s], kTileBytes);
        for (int h = 0; h < 2; ++h) tma::load_2d(sm.k[s][h], &map_k, h * kHalf, key_row, &sm.k_full[s]);
        tma::arrive_expect_tx(&sm.v_full[s], kTileBytes);
        for (int h = 0; h < 2; ++h) tma::load_2d(sm.v[s][h], &map_v, h * kHalf, key_row, &sm.v_full[s]);
      }
    }
  } else {
    wgmma::grow_registers<kConsumerRegisters>();
    consume<kCausal>(sm, threadIdx.x / kWarpgroup - 1, qb, tiles, seq, out + int64_t{blockIdx.y} * seq * kHeadDim);
  }
#endif
}

// Host: a [rows][128] BF16 matrix in 128-row x 64-column boxes, 128-byte swizzled.
inline CUtensorMap tile_map(const bf16* base, int64_t rows) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, uint64_t(rows), kHeadDim, kKeys,
                          kHalf, CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace ch16_wgmma
