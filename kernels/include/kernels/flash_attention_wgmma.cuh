// kernels/flash_attention_wgmma.cuh: the Hopper FlashAttention forward block (sm_90a only): TMA
// loads by a producer, wgmma for both products, two or three consumer warpgroups; ch16's
// `wgmma_ws`, `wgmma_pingpong`, `wgmma_pingpong_192`, `wgmma_persistent`, `wgmma_overlap` and
// `wgmma_overlap_early_turn` rungs and ch18's block-sparse `skip_masked_wgmma`. Which 128-key tiles a block walks, and which
// scores it masks, is a policy (`Walk`, below), as in flash_attention_mma.cuh.
//
// Templated on the head dim kD (128 or 64), the consumer count kConsumers (Team: 2, or 3 at d64,
// where d128's accumulators would not fit 160 registers) and the schedule.
// A CTA: 64 x kConsumers query rows of one head, 1 + kConsumers warpgroups.
//   producer (warpgroup 0, one thread): TMA loads Q once (kConsumers 64-row boxes per 64
//     columns) and then, per 128-key tile, K and V into a 2-stage ring. K and V have barriers of
//     their own both ways: S can start before V has landed, and a K stage is refilled as soon as
//     every consumer's S = Q K^T is done with it, while V waits for P V.
//   consumers (warpgroups 1 .., 64 query rows each), per tile:
//     S (64 x 128) = Q K^T: kD / 16 wgmma m64n128k16, both operands from shared memory (K-major);
//     the online softmax on S's fragments (the same quad-of-lanes row layout as mma.sync), the
//     1/sqrt(d) scale folded into the exponent's FFMA;
//     P packed to BF16 in registers, which is wgmma's register A operand as it stands;
//     O (64 x kD, FP32) += P V: 8 wgmma (m64n128k16; m64n64k16 at d64) with A from registers, V
//     from shared memory MN-major (V is stored [key][dim]: dim contiguous, so the descriptor says
//     N-major, imm-trans-b = 1).
//     In a 192-row block a consumer computes only the tiles its own 64 rows need
//     (Walk::tiles_for) and passes over the rest, releasing their stages (tile 0 only when its
//     rows start past seq).
//   setmaxnreg: the producer drops to 24 registers; two consumers rise to 240 (384 threads launch
//   with 168 each), three to 160 (512 threads launch with 128). 24 x 128 + 240 x 256 = 64,512 and
//   24 x 128 + 160 x 384 = 64,512, of 65,536.
// Shared memory, all in the 128-byte swizzle that TMA writes and wgmma reads: a 128-row x kD BF16
// tile is kD / 64 boxes of 64 columns ([box][row][64]), 16 KiB each, each row 128 bytes: d128 two
// boxes, d64 one (a d64 row is exactly one 128-byte swizzle row; the V descriptor's LBO, the
// distance to the next box, then goes unused). Q 32 KiB + 2 stages x (K 32 + V 32 KiB) = 160 KiB
// at d128; at d64 16 KiB of Q a consumer pair (24 with three) + 64 KiB of ring (one CTA per SM,
// by registers either way).
// Four consumer schedules (Schedule):
//   serial ("wgmma_ws"): S, wait, softmax, P V, wait, per tile. The tensor cores idle through each
//     softmax unless another warpgroup happens to be issuing then;
//   pingpong ("wgmma_pingpong", FlashAttention-3's two overlaps): (1) within a warpgroup, S of
//     tile t and P V of tile t - 1 are issued together and the softmax of tile t runs while P V
//     is on the tensor cores (O is rescaled and P repacked only once it completes); (2) between
//     the warpgroups, named barriers make them take turns (round robin) issuing those GEMMs, so
//     one's softmax lines up with the others' GEMMs instead of the softmaxes colliding;
//   overlap ("wgmma_overlap", two consumers): pingpong's turns with S one tile ahead inside a
//     warpgroup. A turn issues P V of tile t - 1, waits for it and issues S of tile t + 1 into a
//     second S register set; tile t's softmax, O's rescale and P's packing run while that S is on
//     the tensor cores, and is waited for before the next turn (overlap_tile says why P V is
//     waited for first: registers). The producer then loads K one tile ahead of V.
//   overlap_early_turn ("wgmma_overlap_early_turn"): overlap with the turn passed as soon as P V
//     of tile t - 1 is issued, before the wait for it, so the other consumer's P V queues behind
//     it; S of tile t + 1 is then issued outside the turn.
//
// A Walk is a small struct with these device members (t counts the block's 128-key tiles, at
// least one; the tiles a row needs come first):
//   int tiles() const;                          how many tiles this block walks
//   int tiles_for(int64_t last_row) const;      how many of them rows up to last_row need (a
//                                               causal walk's prefix; tiles() when all do):
//                                               needed by 3-consumer (192-row) blocks only
//   int key_tile(int t) const;                  which 128-key tile of the head tile t is
//   bool masks(int t) const;                    tile t may hold masked scores: check them
//   bool visible(int64_t row, int64_t key) const;  the per-score mask (keys < seq are checked too)
// Usage: a kernel of Team<kConsumers>::kThreads threads, __launch_bounds__(that, 1),
// kSmemBytes<kD, kConsumers> bytes of dynamic shared memory (the opt-in is the caller's), Q as a
// query_map<kD> and K, V as tile_map<kD> tensor maps of [heads * seq][kD] (passed as
// __grid_constant__ parameters) calls, under #if BENCH_SM90A_DEVICE,
//   kernels::flash_wgmma::block<kD, kConsumers, Schedule::pingpong>(
//       map_q, map_k, map_v, out + head * seq * kD, seq, head * seq, qb, walk);
// Or, persistent (at most one CTA an SM, two consumers), over `items` blocks:
//   kernels::flash_wgmma::persistent<kD, 2, Schedule::pingpong>(
//       map_q, map_k, map_v, out, seq, items, locate);  (see persistent, below)
// A head's last tile may run into the next head's rows (or past the tensor: TMA fills zeros),
// which the key < seq mask and the row < seq store ignore.
#pragma once

#include <cuda_bf16.h>

#include <kernels/arch.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/flash_attention_mma.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>

namespace kernels::flash_wgmma {

using bf16 = __nv_bfloat16;

constexpr int kKeys = 128;  // keys per tile
constexpr int kHalf = 64;   // head-dim columns per 128-byte swizzle row (one TMA box)
constexpr int kStages = 2;
constexpr int kWarpgroup = 128, kConsumerRows = 64;
constexpr uint32_t kBoxBytes = kKeys * kHalf * sizeof(bf16);  // 16 KiB: one 64-column box
constexpr int kProducerRegisters = 24;

// A block of kConsumers consumer warpgroups of 64 query rows each, plus the producer warpgroup:
// 2 (128 rows, 384 threads) or 3 (192 rows, 512 threads, FlashAttention-3's choice at head dim
// 64). The register pool is the same 64 K either way, so a third consumer gets 160 registers
// where two get 240.
template <int kConsumers>
struct Team {
  static_assert(kConsumers == 2 || kConsumers == 3, "2 or 3 consumer warpgroups");
  static constexpr int kRows = kConsumerRows * kConsumers;
  static constexpr int kThreads = (1 + kConsumers) * kWarpgroup;
  static constexpr int kConsumerRegisters = kConsumers == 2 ? 240 : 160;
  static_assert(wgmma::fits_register_pool(kProducerRegisters, kConsumerRegisters, kConsumers));
};

// Consumer cw of query block qb: its first row, and how many of the block's tiles it computes
// (consume, below). In a block taller than a key tile (192 rows) only those its own 64 rows need
// (the walk's tiles_for its last row), and tile 0 alone when its rows start past seq: a causal
// walk's last tile is often past a warpgroup's rows, and a head's last block often ends past seq.
// In a 128-row block every warpgroup needs every tile, and the count is tiles() at compile time.
// Host and device: a chapter counts the work the kernel does (ch16's computed_flops_ratio).
template <int kConsumers>
__host__ __device__ inline int64_t consumer_first_row(int qb, int cw) {
  return int64_t{qb} * Team<kConsumers>::kRows + cw * kConsumerRows;
}
template <int kConsumers, class Walk>
__host__ __device__ inline int consumer_tiles(const Walk& walk, int qb, int cw, int64_t seq) {
  if constexpr (Team<kConsumers>::kRows > kKeys) {
    const int64_t first_row = consumer_first_row<kConsumers>(qb, cw);
    return first_row >= seq ? 1 : walk.tiles_for(first_row + kConsumerRows - 1);
  } else {
    return walk.tiles();
  }
}

template <int kD, int kConsumers = 2>
struct alignas(1024) Smem {
  static_assert(kD == 64 || kD == 128, "one or two 64-column boxes a row");
  static constexpr int kBoxes = kD / kHalf;                   // 64-column boxes per row
  static constexpr uint32_t kTileBytes = kBoxes * kBoxBytes;  // a K or V tile
  static constexpr int kRows = Team<kConsumers>::kRows;
  static constexpr uint32_t kQueryBytes = kBoxes * kRows * kHalf * sizeof(bf16);
  bf16 q[kBoxes][kRows * kHalf];           // [box][row][64]
  bf16 k[kStages][kBoxes][kKeys * kHalf];  // [stage][box][key][64]
  bf16 v[kStages][kBoxes][kKeys * kHalf];  // the same
  uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
  uint64_t q_empty;  // every consumer's S done with Q: the next block's may be loaded
};
template <int kD, int kConsumers = 2>
constexpr size_t kSmemBytes = sizeof(Smem<kD, kConsumers>) + 1024;  // + room to align the base

// S = Q K^T for consumer cw's 64 rows from stage s, queued as one wgmma group (not waited): over
// head_dim in kD / 16 k16 steps, +32 bytes along the swizzled rows, (d128) the second box from 4
// on. kOverwrite: the first step declares sc an output only (mma_m64n128k16_bf16_overwrite), for
// the overlap schedule, where sc's previous contents would otherwise stay live beside the other
// S set; the other schedules keep the form they were measured with.
// issue_scores_from reads Q from buffer `qs` (the chained kernel's second Q buffer), issue_scores
// from sm.q. kKeys64: S over the tile's first 64 keys only (m64n64k16; sc is then that product's
// 32 accumulators: the chained kernel's causal diagonal, whose other 64 keys lie past every row of
// consumer 0).
template <int kD, int kC, bool kOverwrite = false, bool kKeys64 = false>
__device__ __forceinline__ void issue_scores_from(
    float (&sc)[kKeys64 ? 32 : 64],
    const bf16 (&qs)[Smem<kD, kC>::kBoxes][Smem<kD, kC>::kRows * kHalf], Smem<kD, kC>& sm, int cw,
    int s) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint64_t q =
        wgmma::descriptor_k_major_sw128(&qs[kk / 4][cw * 64 * kHalf + (kk % 4) * 16]);
    const uint64_t k = wgmma::descriptor_k_major_sw128(&sm.k[s][kk / 4][(kk % 4) * 16]);
    if constexpr (kKeys64)
      wgmma::mma_m64n64k16_bf16(sc, q, k, kk > 0);
    else if (kOverwrite && kk == 0)
      wgmma::mma_m64n128k16_bf16_overwrite(sc, q, k);
    else
      wgmma::mma_m64n128k16_bf16(sc, q, k, kk > 0);
  }
  wgmma::commit();
}
template <int kD, int kC, bool kOverwrite = false>
__device__ __forceinline__ void issue_scores(float (&sc)[64], Smem<kD, kC>& sm, int cw, int s) {
  issue_scores_from<kD, kC, kOverwrite>(sc, sm.q, sm, cw, s);
}

// O += P V from stage s, one wgmma group: 8 k16 steps of 16 keys (2048 bytes of each box); N = kD
// is one m64n128k16 (d128: LBO to the second box) or one m64n64k16 (d64). kSteps < 8: only the
// tile's first 16 kSteps keys (the rest of P is zero: the chained kernel's causal diagonal).
template <int kD, int kC, int kSteps = kKeys / 16>
__device__ __forceinline__ void issue_pv(float (&o)[kD / 2], const uint32_t (&pa)[kKeys / 16][4],
                                         Smem<kD, kC>& sm, int s) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const uint64_t v = wgmma::descriptor_mn_major_sw128(&sm.v[s][0][kk * 16 * kHalf], kBoxBytes);
    if constexpr (kD == 128)
      wgmma::mma_m64n128k16_bf16_a_regs(o, pa[kk], v, 1);
    else
      wgmma::mma_m64n64k16_bf16_a_regs(o, pa[kk], v, 1);
  }
  wgmma::commit();
}

// The warpgroup's one arrival on a stage's empty barrier.
__device__ __forceinline__ void release(uint64_t* empty) {
  if (threadIdx.x % kWarpgroup == 0) tma::arrive(empty);
}

// A consumer's last P V (the ring's tile n) alone: issued once V has landed, waited for, and its
// V stage released.
template <int kD, int kC, int kSteps = kKeys / 16>
__device__ __forceinline__ void last_pv(float (&o)[kD / 2], const uint32_t (&pa)[kKeys / 16][4],
                                        Smem<kD, kC>& sm, uint32_t n) {
  const int s = int(n % kStages);
  tma::wait_parity(&sm.v_full[s], (n / kStages) & 1);
  issue_pv<kD, kC, kSteps>(o, pa, sm, s);
  wgmma::wait<0>();
  release(&sm.v_empty[s]);
}

// Tile t's masked scores set to -inf, where the walk says the tile may hold any (the causal
// diagonal, keys past seq): the other tiles skip the 64 compares. sc[4i + e] is row
// row0 + 8 (e / 2), key key_tile(t) * 128 + 8 i + 2 (lane % 4) + e % 2.
// A walk that can say it for one consumer's 64 rows (masks(t, first row)) is asked so: in a
// 192-row block the block's diagonal spans two tiles, but each consumer's only one.
template <class Walk>
__device__ __forceinline__ bool consumer_masks(const Walk& walk, int t, int row0) {
  if constexpr (requires { walk.masks(t, 0); })
    return walk.masks(t, row0 - row0 % kConsumerRows);
  else
    return walk.masks(t);
}
template <class Walk>
__device__ __forceinline__ void mask_tile(float (&sc)[64], const Walk& walk, int t, int64_t seq,
                                          int row0) {
  if (consumer_masks(walk, t, row0)) {
    // 32-bit positions (a head's seq < 2^31): 64-bit ones cost the 192-row kernel a spill.
    const int key0 = walk.key_tile(t) * kKeys + 2 * (threadIdx.x % 4);
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int key = key0 + 8 * (i / 4) + i % 2;
      if (key >= seq || !walk.visible(row0 + 8 * ((i % 4) / 2), key)) sc[i] = -INFINITY;
    }
  }
}

// Online softmax of a (masked) tile, in place: sc becomes P (FP32, relative to the new running
// max), m and l advance, and c is the factor O must be rescaled by before P V.
// kScores < 64: only the tile's first kScores / 4 column groups (keys 0 .. 2 kScores - 1 of the
// tile) hold visible scores, and the rest of P is zero without an exponential (the chained
// kernel's causal diagonal, for the consumer whose rows all lie before the tile's second half).
template <int kD, int kScores = 64>
__device__ __forceinline__ void softmax_scores(float (&sc)[64], float (&m)[2], float (&l)[2],
                                               float (&c)[2]) {
  static_assert(kScores % 4 == 0 && kScores <= 64, "whole column groups");
  // The row maxima are taken on the raw scores (the scale is positive, so it commutes with max)
  // and the scale is folded into the exponent's one FFMA: 2^(s x scale - m), no separate multiply
  // per score. At head dim 64 the softmax's per-score instructions weigh as much as the GEMMs.
  const float scale = kernels::kLog2e / sqrtf(float(kD));
  float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kScores; ++i) top[(i % 4) / 2] = fmaxf(top[(i % 4) / 2], sc[i]);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 1));
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 2));
    const float m_new = fmaxf(m[h], top[h] * scale);
    c[h] = kernels::exp2_ftz(m[h] - m_new);
    l[h] *= c[h], m[h] = m_new;
  }
#pragma unroll
  for (int i = 0; i < kScores; ++i) {
    sc[i] = kernels::exp2_ftz(fmaf(sc[i], scale, -m[(i % 4) / 2]));
    l[(i % 4) / 2] += sc[i];
  }
#pragma unroll
  for (int i = kScores; i < 64; ++i) sc[i] = 0.0f;
}

// Online softmax of tile t, in place: its masked scores dropped, then softmax_scores.
template <int kD, class Walk>
__device__ __forceinline__ void softmax_tile(float (&sc)[64], float (&m)[2], float (&l)[2],
                                             float (&c)[2], const Walk& walk, int t, int64_t seq,
                                             int row0) {
  mask_tile(sc, walk, t, seq, row0);
  softmax_scores<kD>(sc, m, l, c);
}

// P packed to BF16 as P V's register A operand (the scores' accumulator layout is the A fragment
// layout, so no shuffle).
__device__ __forceinline__ void pack_scores(const float (&sc)[64], uint32_t (&pa)[kKeys / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      pa[kk][r] = kernels::pack_bf16x2(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
}

// Once no P V group is in flight: O *= c, and P packed to BF16 as the A operand of the next P V
// (keys 16 kk .. 16 kk + 15 are column groups 2 kk and 2 kk + 1).
template <int kD>
__device__ __forceinline__ void rescale_and_pack(float (&o)[kD / 2], const float (&c)[2],
                                                 const float (&sc)[64],
                                                 uint32_t (&pa)[kKeys / 16][4]) {
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] *= c[(i % 4) / 2];
  pack_scores(sc, pa);
}

// How a consumer orders its GEMMs and softmax (the header comment says more):
//   serial: S, wait, softmax, P V, wait, per tile;
//   pingpong: S of tile t issued with P V of tile t - 1 and tile t's softmax run while P V is on
//     the tensor cores, and the consumers take turns issuing their GEMMs (named barriers).
//   overlap: pingpong's turns, and S one tile ahead within a warpgroup: a turn issues P V of tile
//     t - 1, waits for it and issues S of tile t + 1, and tile t's softmax, rescale and packing
//     run while that S is on the tensor cores (two S register sets).
//   overlap_early_turn: overlap with the turn passed as soon as P V of tile t - 1 is issued,
//     before the warpgroup waits for it: the other consumer queues its P V behind it instead of
//     finding the tensor cores drained, and S of tile t + 1 is issued outside the turn.
enum class Schedule { serial, pingpong, overlap, overlap_early_turn };

// The schedules that keep S one tile ahead (overlap_tiles; the producer loads K a tile ahead of V).
constexpr bool one_tile_ahead(Schedule s) {
  return s == Schedule::overlap || s == Schedule::overlap_early_turn;
}

// Named barriers 1 .. kConsumers (0 is __syncthreads'): consumer cw waits on 1 + cw for its turn
// to issue GEMMs (its own 128 threads plus the previous consumer's 128 arrivals) and hands the
// turn to the next one, round robin.
__device__ __forceinline__ void wait_turn(int cw) {
  asm volatile("bar.sync %0, 256;" ::"r"(1 + cw) : "memory");
}
template <int kConsumers>
__device__ __forceinline__ void pass_turn(int cw) {
  asm volatile("bar.arrive %0, 256;" ::"r"(1 + (cw + 1) % kConsumers) : "memory");
}
// pass_turn where `pass` holds, as one predicated bar.arrive rather than a branch around it: the
// overlap_early_turn schedule passes its turn while its P V group is in flight, and there a branch
// cost 8-16 bytes of spill in three of its four kernels; predicated, only the persistent one
// spills (12 bytes; ptxas -v, CUDA 13.0).
template <int kConsumers>
__device__ __forceinline__ void pass_turn_if(int cw, bool pass) {
  asm volatile(
      "{\n"
      " .reg .pred p;\n"
      " setp.ne.b32 p, %1, 0;\n"
      " @p bar.arrive %0, 256;\n"
      "}" ::"r"(1 + (cw + 1) % kConsumers),
      "r"(int(pass))
      : "memory");
}

// A tile this warpgroup does not compute still owes its K and V stages one release each, and
// only once the stage holds that tile: an arrival made earlier would count towards the stage's
// previous use.
template <int kD, int kC>
__device__ __forceinline__ void pass_over(Smem<kD, kC>& sm, uint32_t n) {
  const int s = int(n % kStages);
  const uint32_t parity = (n / kStages) & 1;
  tma::wait_parity(&sm.k_full[s], parity);
  release(&sm.k_empty[s]);
  tma::wait_parity(&sm.v_full[s], parity);
  release(&sm.v_empty[s]);
}

// The overlap schedules, one tile k of a block's `tiles` (the ring's tile n = ring0 + k). On entry
// S of tile k is in `cur`, complete (issued a tile ago, or before the loop for tile 0, which waits
// for it here), and P of tile k - 1 is packed in pa. Its turn issues P V of tile k - 1 (none for
// the first tile), waits for it, and issues S of tile k + 1 into `next` (none for the last); tile
// k's softmax, O's rescale and P's packing then run while S of tile k + 1 is on the tensor cores,
// and S of tile k + 1 is waited for before the tile ends. kFirst and kLast are template
// arguments, so no wgmma sits in a branch (cmake/wgmma_guard.sh).
// That last wait keeps a habit every other schedule here keeps (and CUTLASS's and
// FlashAttention-3's ping-pong): no wgmma group is outstanding while the warpgroup blocks on its
// turn's named barrier or goes round a loop. The wait is usually short: S was issued before the
// softmax, whose exponentials keep the SFU about as long as S keeps the tensor cores. Here, not
// at the top of the next tile before wait_turn, because there ptxas spilled (4 to 16 bytes in
// three of the kernels); here the register allocation is the first form's (no spill).
// Registers: O (kD / 2), `cur` (64) and `next` (64): 192 at d128, of the consumer's 240. P V of
// tile k - 1 has to be done before S of tile k + 1 is issued: in flight beside them, pa (32) makes
// 224, and ptxas then spills and serialises every wgmma (C7512, "insufficient register
// resources"). So the warpgroup waits for its P V, as pingpong waits for its S; the other
// consumer's GEMMs fill that wait.
// Where the turn passes (kSchedule): overlap passes it once S of tile k + 1 is issued, so the
// turn holds the wait for P V (k - 1) and the other consumer can queue nothing behind it: the
// tensor cores drain while the wait returns, the stages are released, the mask runs and S is
// issued. overlap_early_turn passes it right after P V (k - 1) is issued, as pingpong does after
// its two issues; this warpgroup's own issues and waits keep their order (its registers do not
// change), and a bar.arrive does not block, so still no group is outstanding at a blocking
// barrier. The turns then order the P V issues only: S of tile k + 1 goes in outside them
// (scripts/flash_wgmma_protocol.py checks the barrier order of both).
template <Schedule kSchedule, bool kFirst, bool kLast, int kD, int kC, class Walk>
__device__ __forceinline__ void overlap_tile(Smem<kD, kC>& sm, int cw, float (&cur)[64],
                                             float (&next)[64], float (&o)[kD / 2],
                                             uint32_t (&pa)[kKeys / 16][4], float (&m)[2],
                                             float (&l)[2], const Walk& walk, int k, int tiles,
                                             uint32_t ring0, int64_t seq, int row0) {
  const uint32_t n = ring0 + k;
  const int s = int(n % kStages), prev = int((n - 1) % kStages), after = int((n + 1) % kStages);
  if constexpr (!kFirst) {
    wait_turn(cw);
    tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
    issue_pv(o, pa, sm, prev);
    if constexpr (kSchedule == Schedule::overlap_early_turn)
      pass_turn_if<kC>(cw, cw != kC - 1 || k + 1 < tiles);
  }
  wgmma::wait<0>();  // P V of tile k - 1 (tile 0: its S): O is final up to tile k - 1
  release(&sm.k_empty[s]);
  if constexpr (!kFirst) release(&sm.v_empty[prev]);
  if constexpr (kLast) release(&sm.q_empty);  // every S is done: Q may be refilled
  // The mask before S of tile k + 1 is issued: its compares' temporaries beside the second S set
  // spilled (only the walk's masked tiles run it: the diagonal, the ragged end).
  mask_tile(cur, walk, k, seq, row0);
  if constexpr (!kLast) {
    tma::wait_parity(&sm.k_full[after], ((n + 1) / kStages) & 1);
    issue_scores<kD, kC, true>(next, sm, cw, after);
  }
  if constexpr (!kFirst && kSchedule == Schedule::overlap) {
    if (cw != kC - 1 || k + 1 < tiles) pass_turn<kC>(cw);
  }
  float c[2];
  softmax_scores<kD>(cur, m, l, c);
  rescale_and_pack<kD>(o, c, cur, pa);
  if constexpr (!kLast) wgmma::wait<0>();  // S of tile k + 1: none outstanding at the next turn
}

// The overlap schedules' tiles (two consumers): tile 0's S issued before the loop, each tile's
// overlap_tile with the two S register sets swapping roles (the loop takes two tiles a trip, so
// each set stays in fixed registers), then the last tile's P V alone. The turns are pingpong's:
// one a tile from tile 1, the last consumer's first pass opening consumer 0's first turn.
template <Schedule kSchedule, int kD, int kC, class Walk>
__device__ __forceinline__ void overlap_tiles(Smem<kD, kC>& sm, int cw, float (&o)[kD / 2],
                                              float (&m)[2], float (&l)[2], const Walk& walk,
                                              int64_t seq, int row0, uint32_t ring0) {
  static_assert(kC == 2, "two S register sets fit two consumers' 240 registers, not three's 160");
  const int tiles = walk.tiles();
  float sa[64], sb[64];
  uint32_t pa[kKeys / 16][4];
  if (cw == kC - 1 && tiles > 1) pass_turn<kC>(cw);
  const int s0 = int(ring0 % kStages);
  tma::wait_parity(&sm.k_full[s0], (ring0 / kStages) & 1);
  issue_scores<kD, kC, true>(sa, sm, cw, s0);
  if (tiles == 1) {
    overlap_tile<kSchedule, true, true>(sm, cw, sa, sb, o, pa, m, l, walk, 0, tiles, ring0, seq,
                                        row0);
  } else {
    overlap_tile<kSchedule, true, false>(sm, cw, sa, sb, o, pa, m, l, walk, 0, tiles, ring0, seq,
                                         row0);
    int k = 1;  // odd tiles compute in sb, even ones in sa
    for (; k + 2 < tiles; k += 2) {
      overlap_tile<kSchedule, false, false>(sm, cw, sb, sa, o, pa, m, l, walk, k, tiles, ring0, seq,
                                            row0);
      overlap_tile<kSchedule, false, false>(sm, cw, sa, sb, o, pa, m, l, walk, k + 1, tiles, ring0,
                                            seq, row0);
    }
    if (k + 1 < tiles) {  // two left: k and the last
      overlap_tile<kSchedule, false, false>(sm, cw, sb, sa, o, pa, m, l, walk, k, tiles, ring0, seq,
                                            row0);
      overlap_tile<kSchedule, false, true>(sm, cw, sa, sb, o, pa, m, l, walk, k + 1, tiles, ring0,
                                           seq, row0);
    } else {  // k is the last
      overlap_tile<kSchedule, false, true>(sm, cw, sb, sa, o, pa, m, l, walk, k, tiles, ring0, seq,
                                           row0);
    }
  }
  last_pv(o, pa, sm, ring0 + tiles - 1);
}

// One consumer warpgroup (cw = 0 .. kC - 1): rows qb * kRows + cw * 64 .. + 63 of this head.
// It computes the first `mine` of the block's tiles (consumer_tiles) and passes over the rest.
// The block's tile t is the ring's tile ring0 + t (tiles before it: earlier blocks of a persistent
// CTA), and its Q is the q_full barrier's phase q_phase; once its last S is done it releases Q.
// The two are two loops, not a branch per tile: a wgmma inside a branch the compiler cannot prove
// warpgroup-uniform is serialised (ptxas C7518, cmake/wgmma_guard.sh), which slowed d64 badly
// (docs/writing-an-example.md). In a 128-row block mine = tiles at compile time: a per-warpgroup
// count measured slower there (ch16's README), for nothing to skip.
template <int kD, int kC, Schedule kSchedule, class Walk>
__device__ __forceinline__ void consume(Smem<kD, kC>& sm, int cw, int qb, const Walk& walk,
                                        int64_t seq, bf16* out, uint32_t ring0 = 0,
                                        uint32_t q_phase = 0) {
  const int tiles = walk.tiles();
  const int64_t first_row = consumer_first_row<kC>(qb, cw);
  const int mine = consumer_tiles<kC>(walk, qb, cw, seq);
  const int warp = (threadIdx.x % kWarpgroup) / 32, lane = threadIdx.x % 32;
  const int row0 = int(first_row) + warp * 16 + lane / 4;  // and row0 + 8
  float o[kD / 2], sc[64];
  float m[2] = {kernels::kEmptyMax, kernels::kEmptyMax}, l[2] = {0.0f, 0.0f}, c[2];
  uint32_t pa[kKeys / 16][4];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
  tma::wait_parity(&sm.q_full, q_phase);
  if constexpr (kSchedule == Schedule::serial) {
    for (int t = 0; t < mine; ++t) {
      const uint32_t n = ring0 + t;
      const int s = int(n % kStages);
      const uint32_t parity = (n / kStages) & 1;
      tma::wait_parity(&sm.k_full[s], parity);
      issue_scores(sc, sm, cw, s);
      wgmma::wait<0>();
      release(&sm.k_empty[s]);
      softmax_tile<kD>(sc, m, l, c, walk, t, seq, row0);
      rescale_and_pack<kD>(o, c, sc, pa);  // the previous P V group has completed
      tma::wait_parity(&sm.v_full[s], parity);
      issue_pv(o, pa, sm, s);
      wgmma::wait<0>();
      release(&sm.v_empty[s]);
    }
    release(&sm.q_empty);
    for (int t = mine; t < tiles; ++t) pass_over(sm, ring0 + t);
  } else if constexpr (one_tile_ahead(kSchedule)) {
    // Two consumers: mine == tiles.
    overlap_tiles<kSchedule>(sm, cw, o, m, l, walk, seq, row0, ring0);
  } else {
    // Consumer 0 issues first (the last consumer's pass opens its first turn). Each pass is
    // matched by one wait: the last consumer skips its last pass, so no arrival is left pending
    // on a barrier when the CTA exits. A warpgroup past its own tiles still takes its turns.
    if (cw == kC - 1 && tiles > 1) pass_turn<kC>(cw);
    // Tile 0's S and softmax alone; then tile t's S with tile t - 1's P V, and tile t's softmax
    // while that P V runs; the last tile's P V alone.
    const int s0 = int(ring0 % kStages);
    tma::wait_parity(&sm.k_full[s0], (ring0 / kStages) & 1);
    issue_scores(sc, sm, cw, s0);
    wgmma::wait<0>();
    release(&sm.k_empty[s0]);
    softmax_tile<kD>(sc, m, l, c, walk, 0, seq, row0);
    rescale_and_pack<kD>(o, c, sc, pa);
    for (int t = 1; t < mine; ++t) {
      const uint32_t n = ring0 + t;
      const int s = int(n % kStages), prev = int((n - 1) % kStages);
      wait_turn(cw);
      tma::wait_parity(&sm.k_full[s], (n / kStages) & 1);
      issue_scores(sc, sm, cw, s);
      tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
      issue_pv(o, pa, sm, prev);  // reads pa: left untouched until this group completes
      if (cw != kC - 1 || t + 1 < tiles) pass_turn<kC>(cw);
      wgmma::wait<1>();  // S (the older group) is done; P V may still run
      release(&sm.k_empty[s]);
      softmax_tile<kD>(sc, m, l, c, walk, t, seq, row0);
      wgmma::wait<0>();
      release(&sm.v_empty[prev]);
      rescale_and_pack<kD>(o, c, sc, pa);
    }
    release(&sm.q_empty);  // every S is done: Q may be refilled while P V finishes
    last_pv(o, pa, sm, ring0 + mine - 1);
    for (int t = mine; t < tiles; ++t) {
      wait_turn(cw);
      if (cw != kC - 1 || t + 1 < tiles) pass_turn<kC>(cw);
      pass_over(sm, ring0 + t);
    }
  }
  kernels::flash_store_rows<kD>(l, row0, seq, out, [&](int j, int e) { return o[4 * j + e]; });
}

// One thread's initialisation of the block's barriers (init_smem; the chained kernel adds its own).
template <int kD, int kConsumers>
__device__ __forceinline__ void init_barriers(Smem<kD, kConsumers>& sm) {
  tma::mbarrier_init(&sm.q_full, 1);
  tma::mbarrier_init(&sm.q_empty, kConsumers);  // one arrival per consumer warpgroup
  for (int s = 0; s < kStages; ++s) {
    tma::mbarrier_init(&sm.k_full[s], 1);
    tma::mbarrier_init(&sm.v_full[s], 1);
    tma::mbarrier_init(&sm.k_empty[s], kConsumers);  // one arrival per consumer warpgroup
    tma::mbarrier_init(&sm.v_empty[s], kConsumers);
  }
}

// The shared memory, aligned, with every barrier initialised and visible to the copy engine.
template <int kD, int kConsumers>
__device__ __forceinline__ Smem<kD, kConsumers>& init_smem() {
  using Sm = Smem<kD, kConsumers>;
  extern __shared__ uint8_t wgmma_smem_raw[];
  Sm& sm = tma::aligned_1024<Sm>(wgmma_smem_raw);
  if (threadIdx.x == 0) {
    init_barriers(sm);
    tma::fence_barrier_init();
  }
  __syncthreads();
  return sm;
}

// The producer's two steps for one block (produce, below). The first: the block's Q into buffer qs (sm.q; the chained kernel alternates two),
// completing on `full`.
template <int kD, int kConsumers>
__device__ __forceinline__ void load_queries(
    bf16 (&qs)[Smem<kD, kConsumers>::kBoxes][Smem<kD, kConsumers>::kRows * kHalf],
    uint64_t* full, const CUtensorMap& map_q, int head_row, int qb) {
  using Sm = Smem<kD, kConsumers>;
  tma::arrive_expect_tx(full, Sm::kQueryBytes);
  for (int h = 0; h < Sm::kBoxes; ++h)
    for (int c = 0; c < kConsumers; ++c)
      tma::load_2d(&qs[h][c * kConsumerRows * kHalf], &map_q, h * kHalf,
                   head_row + qb * Sm::kRows + c * kConsumerRows, full);
}

// The second: the block's K and V tiles into the ring, from the ring's tile ring0.
template <Schedule kSchedule, int kD, int kConsumers, class Walk>
__device__ __forceinline__ void load_tiles(Smem<kD, kConsumers>& sm, const CUtensorMap& map_k,
                                           const CUtensorMap& map_v, int head_row,
                                           const Walk& walk, uint32_t ring0) {
  using Sm = Smem<kD, kConsumers>;
  const int tiles = walk.tiles();
  if constexpr (one_tile_ahead(kSchedule)) {
    // Tile t into its ring stage once the stage's previous tile (n - kStages) is released: K
    // (sm.k, map_k, k_empty, k_full) or V.
    auto load = [&](int t, auto& tile, const CUtensorMap& map, uint64_t* empty, uint64_t* full) {
      const uint32_t n = ring0 + t;
      const int s = int(n % kStages), key_row = head_row + walk.key_tile(t) * kKeys;
      if (n >= kStages) tma::wait_parity(&empty[s], ((n / kStages) - 1) & 1);
      tma::arrive_expect_tx(&full[s], Sm::kTileBytes);
      for (int h = 0; h < Sm::kBoxes; ++h)
        tma::load_2d(tile[s][h], &map, h * kHalf, key_row, &full[s]);
    };
    load(0, sm.k, map_k, sm.k_empty, sm.k_full);
    for (int t = 1; t < tiles; ++t) {
      load(t, sm.k, map_k, sm.k_empty, sm.k_full);
      load(t - 1, sm.v, map_v, sm.v_empty, sm.v_full);
    }
    load(tiles - 1, sm.v, map_v, sm.v_empty, sm.v_full);
  } else {
    for (int t = 0; t < tiles; ++t) {
      const uint32_t n = ring0 + t;
      const int s = int(n % kStages), key_row = head_row + walk.key_tile(t) * kKeys;
      const uint32_t reuse_parity = ((n / kStages) - 1) & 1;  // the release of tile n - kStages
      if (n >= kStages) tma::wait_parity(&sm.k_empty[s], reuse_parity);
      tma::arrive_expect_tx(&sm.k_full[s], Sm::kTileBytes);
      for (int h = 0; h < Sm::kBoxes; ++h)
        tma::load_2d(sm.k[s][h], &map_k, h * kHalf, key_row, &sm.k_full[s]);
      if (n >= kStages) tma::wait_parity(&sm.v_empty[s], reuse_parity);
      tma::arrive_expect_tx(&sm.v_full[s], Sm::kTileBytes);
      for (int h = 0; h < Sm::kBoxes; ++h)
        tma::load_2d(sm.v[s][h], &map_v, h * kHalf, key_row, &sm.v_full[s]);
    }
  }
}

// The producer's thread, one block: Q as 64-row boxes (query_map), one per consumer and 64
// columns (a 64-row box is a whole number of 8-row swizzle periods, so they stack into the same
// layout one tall box writes), then the block's K and V tiles into the ring, whose tile ring0 is
// the block's first. The overlap schedule needs K one tile ahead of V (at tile k a consumer waits
// for K of tile k + 1 and V of tile k - 1), so it loads K of tile t before V of tile t - 1:
// otherwise K of tile k + 1 would queue behind V of tile k, whose stage frees only once P V of
// tile k - 2 is done, late in the tile before.
template <int kD, int kConsumers, Schedule kSchedule, class Walk>
__device__ __forceinline__ void produce(Smem<kD, kConsumers>& sm, const CUtensorMap& map_q,
                                        const CUtensorMap& map_k, const CUtensorMap& map_v,
                                        int head_row, int qb, const Walk& walk, uint32_t ring0) {
  load_queries<kD, kConsumers>(sm.q, &sm.q_full, map_q, head_row, qb);
  load_tiles<kSchedule>(sm, map_k, map_v, head_row, walk, ring0);
}

// The block: query rows qb * kRows .. + kRows - 1 of one head (kRows = 64 x kConsumers), whose
// rows start at head_row in the maps and whose output is `out` ([seq][kD]). sm_90a device code
// only: call it under #if BENCH_SM90A_DEVICE.
template <int kD, int kConsumers, Schedule kSchedule, class Walk>
__device__ __forceinline__ void block(const CUtensorMap& map_q, const CUtensorMap& map_k,
                                      const CUtensorMap& map_v, bf16* out, int64_t seq,
                                      int head_row, int qb, const Walk& walk) {
  auto& sm = init_smem<kD, kConsumers>();
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<kD, kConsumers, kSchedule>(sm, map_q, map_k, map_v, head_row, qb, walk, 0);
  } else {
    wgmma::grow_registers<Team<kConsumers>::kConsumerRegisters>();
    consume<kD, kConsumers, kSchedule>(sm, threadIdx.x / kWarpgroup - 1, qb, walk, seq, out);
  }
}

// A persistent CTA (one an SM): blocks one after another, item blockIdx.x, then every
// gridDim.x-th after it, so the CTAs walk the launch order together as the waves of a
// non-persistent grid would. What it saves is each block's fill: the producer loads the next
// block's Q as soon as every consumer's last S is done and its first K and V tiles as soon as
// ring stages free, while the consumers finish P V and store O; the ring and its barrier phases
// run on across blocks. Every thread computes the same item sequence, so nothing is handed over
// through shared memory (a slot the producer writes and the consumers read needs every reading
// thread's arrival before the next write, or racecheck reports it: docs/writing-an-example.md).
// A fixed stride suits blocks of equal length (non-causal): for a causal walk's unequal blocks
// the hardware's dispatch of a plain grid balances better (ch16's model: a fixed stride ends
// 7-15% past an even split, and slower when measured: ch16's README).
//   items: how many blocks; locate(i) gives block i as {head, qb, walk} (the launch order).
template <int kD, int kConsumers, Schedule kSchedule, class Locate>
__device__ __forceinline__ void persistent(const CUtensorMap& map_q, const CUtensorMap& map_k,
                                           const CUtensorMap& map_v, bf16* out, int64_t seq,
                                           int items, const Locate& locate) {
  auto& sm = init_smem<kD, kConsumers>();
  uint32_t ring = 0, k = 0;  // tiles through the ring so far; blocks so far (q_full's phase)
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x != 0) return;
    for (int item = int(blockIdx.x); item < items; item += int(gridDim.x), ++k) {
      if (k > 0) tma::wait_parity(&sm.q_empty, (k - 1) & 1);  // the consumers are done with Q
      const auto b = locate(item);
      produce<kD, kConsumers, kSchedule>(sm, map_q, map_k, map_v, int(b.head * seq), b.qb,
                                         b.walk, ring);
      ring += b.walk.tiles();
    }
  } else {
    wgmma::grow_registers<Team<kConsumers>::kConsumerRegisters>();
    for (int item = int(blockIdx.x); item < items; item += int(gridDim.x), ++k) {
      const auto b = locate(item);
      consume<kD, kConsumers, kSchedule>(sm, threadIdx.x / kWarpgroup - 1, b.qb, b.walk, seq,
                                         out + b.head * seq * kD, ring, k & 1);
      ring += b.walk.tiles();
    }
  }
}

// Host: a [rows][kD] BF16 matrix in 128-row x 64-column boxes, 128-byte swizzled (K and V).
template <int kD>
inline CUtensorMap tile_map(const bf16* base, int64_t rows) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, uint64_t(rows), kD,
                          kKeys, kHalf, CU_TENSOR_MAP_SWIZZLE_128B);
}
// The same in 64-row boxes (Q: one box per consumer warpgroup).
template <int kD>
inline CUtensorMap query_map(const bf16* base, int64_t rows) {
  return tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), base, uint64_t(rows), kD,
                          kConsumerRows, kHalf, CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace kernels::flash_wgmma
