// kernels/flash_attention_wgmma_chain.cuh: the ping-pong FlashAttention kernel of
// flash_attention_wgmma.cuh made persistent for unequal (causal) blocks, with the blocks of a CTA
// chained into one stream of tiles; ch16's `wgmma_chained` and `wgmma_chained_diagonal` rungs
// (sm_90a only).
//
// Why: a causal block at s4096 walks 16.5 key tiles on average (non-causal: 32), so what a block
// pays once weighs twice as much. In the plain kernel, and in flash_wgmma::persistent too, every
// block starts with tile 0's S issued alone and waited for, then both consumers' softmax with the
// tensor cores idle, and ends with the last P V issued alone and waited for, then the store of O:
// the turns stop at each block's edges. Here a CTA's blocks are one stream: the turn that issues
// P V of a block's last tile also issues S of the next block's first tile (from a second Q
// buffer, loaded during the block before), so the turns run on across blocks and the store of O
// happens where the steady state rescales O, under the other consumer's GEMMs.
//
// Which blocks a CTA runs: a host plan (ch16's list_schedule or balanced_schedule), since a fixed
// stride cannot balance unequal blocks and claiming them from a counter measured a tie. The
// plan's layout, `plan`:
//   plan[0 .. gridDim.x]: offsets, CTA c runs items plan[G + 1 + plan[c]] .. up to plan[c + 1]
//   (G = gridDim.x), in that order; an item is whatever `locate` turns into {head, qb, walk}.
// Every thread reads its own CTA's entries (read-only global memory the host wrote before the
// launch: no shared-memory hand-over, so nothing for racecheck to pair), and the consumers
// broadcast each from lane 0 so the compiler knows it is warp-uniform (ch16 README: a value each
// thread loads itself moved every derived index off the uniform datapath).
//
// Two consumers, the pingpong schedule, 128-row blocks, 128-key tiles as in the header it builds
// on. Shared memory: Smem<kD, 2> plus a second Q buffer and its two barriers (193 KiB at d128).
//
// kDiagonal (ch16's `wgmma_chained_diagonal`): the blocks are causal, and since a block's 128 rows
// start where a 128-key tile does, its only masked scores are those of its last tile (the
// diagonal: key > row within the tile), and of that tile consumer 0 (rows 0-63) sees only keys
// 0-63 and consumer 1 (rows 64-127) all of keys 0-63. The general form masks by mask_tile: it
// tests every tile and, on the one that holds masked scores, compares each score's key with seq
// (in 64 bits) and with its row, partly as branches, in the window the other consumer's GEMMs
// must cover; and consumer 0 multiplies the quarter of the tile that is all masked for it. Here:
//   - tiles before the diagonal run no mask code;
//   - on the diagonal each consumer tests only the half of the tile where its rows meet the
//     diagonal (mask_diagonal: a 32-bit compare of a constant with the thread's row in the tile,
//     and a select, a score); consumer 0 drops keys 64-127 with neither a compare nor an
//     exponential (softmax_scores<kD, 32>), consumer 1 keeps keys 0-63 without a compare;
//   - consumer 0 computes S over keys 0-63 only (m64n64k16: issue_scores_from's kKeys64 form) and
//     P V over them only (4 of 8 k16 steps): the diagonal's tensor work falls by a quarter. A
//     one-tile block's diagonal (its tile 0, whose S is issued where every block's tile 0 is)
//     keeps the full S.
// Keys past seq need no test: a row < seq sees only keys <= row; rows past seq are never stored.
// At a block change O is zeroed and not rescaled (kDiagonal; the general form does both).
#pragma once

#include <kernels/flash_attention_wgmma.cuh>
#include <type_traits>

namespace kernels::flash_wgmma {

template <int kD>
struct alignas(1024) ChainSmem {
  using Sm = Smem<kD, 2>;
  Sm sm;                                     // Q buffer 0 (sm.q), the K/V ring, their barriers
  bf16 q1[Sm::kBoxes][Sm::kRows * kHalf];    // Q buffer 1: odd blocks of the CTA's list
  uint64_t q1_full, q1_empty;
};
template <int kD>
constexpr size_t kChainSmemBytes = sizeof(ChainSmem<kD>) + 1024;  // + room to align the base

// A CTA's j-th block uses Q buffer j % 2, whose barriers are in phase (j / 2) % 2.
template <int kD>
__device__ __forceinline__ auto& chain_queries(ChainSmem<kD>& cs, int j) {
  return (j & 1) ? cs.q1 : cs.sm.q;
}
template <int kD>
__device__ __forceinline__ uint64_t* chain_q_full(ChainSmem<kD>& cs, int j) {
  return (j & 1) ? &cs.q1_full : &cs.sm.q_full;
}
template <int kD>
__device__ __forceinline__ uint64_t* chain_q_empty(ChainSmem<kD>& cs, int j) {
  return (j & 1) ? &cs.q1_empty : &cs.sm.q_empty;
}

// Entry j of the CTA's list, warp-uniform as far as the compiler knows (all 32 lanes present).
__device__ __forceinline__ int chain_entry_uniform(const int* entries, int j) {
  return __shfl_sync(0xffffffffu, entries[j], 0);
}

// kDiagonal: the diagonal tile's masked scores set to -inf in the half of the tile where this
// consumer's rows meet the diagonal: keys 0 .. 63 of the tile for consumer 0, 64 .. 127 for
// consumer 1 (the other half is all masked for consumer 0, all visible for consumer 1). sc[4i + e]
// is key 8 i + 2 (lane % 4) + e % 2 of the tile and row r + 8 (e / 2) of it, r = 64 cw + 16 warp +
// lane / 4; `limit` = r - 2 (lane % 4), so the test is 8 i + e % 2 > limit + 8 (e / 2), a constant
// against a register.
template <int kFirst>
__device__ __forceinline__ void mask_diagonal(float (&sc)[64], int limit) {
#pragma unroll
  for (int i = kFirst; i < kFirst + 32; ++i)
    if (8 * (i / 4) + i % 2 > limit + 8 * ((i % 4) / 2)) sc[i] = -INFINITY;
}

// kDiagonal: a tile's softmax in place, the diagonal's split by consumer (mask_diagonal; the
// header says why), any other tile's without a mask. kConsumer: which consumer runs this code
// where the caller's code is per consumer (0 or 1), or -1 where cw says.
template <int kD, int kConsumer>
__device__ __forceinline__ void diagonal_softmax(float (&sc)[64], float (&m)[2], float (&l)[2],
                                                 float (&c)[2], bool diagonal, int cw, int limit) {
  if (!diagonal) {
    softmax_scores<kD>(sc, m, l, c);
  } else if (kConsumer == 0 || (kConsumer < 0 && cw == 0)) {
    mask_diagonal<0>(sc, limit);
    softmax_scores<kD, 32>(sc, m, l, c);
  } else {
    mask_diagonal<32>(sc, limit);
    softmax_scores<kD>(sc, m, l, c);
  }
}

// Consumer cw's stream over the CTA's `count` blocks (entries[0 .. count - 1]). Per ring tile n
// >= 1 the pingpong step: in its turn S of tile n and P V of tile n - 1, then tile n's softmax
// while that P V runs, then O's rescale and P's packing. When tile n is the first of a block,
// its softmax starts from an empty running max and sum, and after the P V of the previous
// block's last tile that block's O is stored and O restarts from zero. Tile 0 of the stream is
// the only one with S alone, and the stream's last P V the only one waited for alone. The turns
// are pingpong's over the whole stream: the last consumer's first pass opens consumer 0's first
// turn and it skips its last pass, so no arrival is left pending at exit. Every wgmma sits in
// straight-line code of a loop body (none in a branch: cmake/wgmma_guard.sh).
template <int kD, bool kDiagonal, class Locate>
__device__ __forceinline__ void consume_chain(ChainSmem<kD>& cs, int cw, const int* entries,
                                              int count, const Locate& locate, int64_t seq,
                                              bf16* out) {
  static_assert(!kDiagonal || Team<2>::kRows == kKeys,
                "the diagonal form needs a block's rows to start where a key tile does");
  auto& sm = cs.sm;
  const int warp = (threadIdx.x % kWarpgroup) / 32, lane = threadIdx.x % 32;
  const int rows = cw * kConsumerRows + warp * 16 + lane / 4;  // row0 within a block; and + 8
  const int limit = rows - 2 * (lane % 4);                     // mask_diagonal's
  float o[kD / 2], sc[64];
  float m[2] = {kernels::kEmptyMax, kernels::kEmptyMax}, l[2] = {0.0f, 0.0f}, c[2];
  uint32_t pa[kKeys / 16][4];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;

  auto b = locate(chain_entry_uniform(entries, 0));
  int next_entry = count > 1 ? chain_entry_uniform(entries, 1) : 0;  // read a block ahead
  int tiles = b.walk.tiles();
  int row0 = b.qb * Team<2>::kRows + rows;
  if (cw == 1 && (count > 1 || tiles > 1)) pass_turn<2>(cw);

  // Which consumer a piece of code is written for: Any (cw says), or consumer 0 or 1.
  using Any = std::integral_constant<int, -1>;
  using Consumer0 = std::integral_constant<int, 0>;
  using Consumer1 = std::integral_constant<int, 1>;
  // kDiagonal: f(Consumer0{}) on consumer 0 and f(Consumer1{}) on consumer 1 where `when`, each in
  // a loop of its own with a trip count of 0 or 1 (why not a branch: the main loop's comment).
  auto per_consumer = [&](auto&& f, bool when) {
    for (int x = 0; x < int(when && cw == 0); ++x) f(Consumer0{});
    for (int x = 0; x < int(when && cw == 1); ++x) f(Consumer1{});
  };

  // Tile t's softmax in place (diagonal: it is the block's last tile; `who` as
  // diagonal_softmax's kConsumer): the walk's general mask (softmax_tile), or kDiagonal's.
  auto softmax = [&](int t, bool diagonal, auto who) {
    if constexpr (kDiagonal)
      diagonal_softmax<kD, decltype(who)::value>(sc, m, l, c, diagonal, cw, limit);
    else
      softmax_tile<kD>(sc, m, l, c, b.walk, t, seq, row0);
  };

  // Ring tile 0 (the first block's tile 0) alone.
  tma::wait_parity(chain_q_full(cs, 0), 0);
  tma::wait_parity(&sm.k_full[0], 0);
  issue_scores_from<kD, 2>(sc, chain_queries(cs, 0), sm, cw, 0);
  wgmma::wait<0>();
  release(&sm.k_empty[0]);
  if (tiles == 1) release(chain_q_empty(cs, 0));
  softmax(0, tiles == 1, Any{});
  rescale_and_pack<kD>(o, c, sc, pa);

  uint32_t n = 1;  // the ring's tile: tiles through the ring so far
  float sd[32];    // kDiagonal: consumer 0's scores of a diagonal tile (issue_scores_from, kKeys64)
  // Tile t >= 1 of block j: in its turn S of tile t and P V of tile t - 1, then tile t's softmax
  // while that P V runs. `who`: Any, any tile (kDiagonal: any but the block's last, unmasked);
  // Consumer0 or Consumer1 (kDiagonal), the block's last tile, the diagonal, as that consumer's:
  // consumer 0 computes S over its first 64 keys only.
  auto tile = [&](int j, int t, auto who) {
    constexpr int kWho = decltype(who)::value;
    const int s = int(n % kStages), prev = int((n - 1) % kStages);
    wait_turn(cw);
    tma::wait_parity(&sm.k_full[s], (n / kStages) & 1);
    if constexpr (kDiagonal && kWho == 0)
      issue_scores_from<kD, 2, false, true>(sd, chain_queries(cs, j), sm, cw, s);
    else
      issue_scores_from<kD, 2>(sc, chain_queries(cs, j), sm, cw, s);
    tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
    issue_pv(o, pa, sm, prev);  // reads pa: left untouched until this group completes
    if (cw != 1 || j + 1 < count || t + 1 < tiles) pass_turn<2>(cw);
    wgmma::wait<1>();  // S (the older group) is done; P V may still run
    release(&sm.k_empty[s]);
    if (t + 1 == tiles) release(chain_q_empty(cs, j));
    if constexpr (kDiagonal && kWho == 0) {
#pragma unroll
      for (int i = 0; i < 32; ++i) sc[i] = sd[i];  // sc[32 ..]: dropped by the softmax
    }
    softmax(t, kWho >= 0, who);
    wgmma::wait<0>();
    release(&sm.v_empty[prev]);
    rescale_and_pack<kD>(o, c, sc, pa);
    ++n;
  };
  // The stream's last P V (the last block's last tile) alone; kDiagonal: consumer 0 (`who`)
  // over the tile's first 64 keys.
  auto last = [&](auto who) {
    constexpr int kSteps = kDiagonal && decltype(who)::value == 0 ? kKeys / 32 : kKeys / 16;
    last_pv<kD, 2, kSteps>(o, pa, sm, n - 1);
  };
  // Each trip: the rest of block j's tiles (S of tile t with P V of tile t - 1), then block
  // j + 1's tile 0 with P V of block j's last tile and the store of block j's O.
  // kDiagonal: the two consumers' diagonal tiles differ (consumer 0 multiplies half of its S and
  // of its P V), so each consumer's diagonal runs in a loop of its own, with a per-warpgroup trip
  // count of 0 or 1: a wgmma in a branch on the warpgroup (or a k16 step skipped in one) is
  // serialised by ptxas (C7515, C7520), a whole turn in such a loop is not (cmake/wgmma_guard.sh).
  for (int j = 0;;) {
    if constexpr (kDiagonal) {
      for (int t = 1; t + 1 < tiles; ++t) tile(j, t, Any{});
      per_consumer([&](auto who) { tile(j, tiles - 1, who); }, tiles > 1);
    } else {
      for (int t = 1; t < tiles; ++t) tile(j, t, Any{});
    }
    if (++j == count) break;
    // Block j's tile 0, with P V of block j - 1's last tile (its first kSteps k16 steps).
    const auto done = b;
    const int done_row0 = row0;
    b = locate(next_entry);
    if (j + 1 < count) next_entry = chain_entry_uniform(entries, j + 1);
    tiles = b.walk.tiles();
    row0 = b.qb * Team<2>::kRows + rows;
    // kDiagonal: block j - 1's last tile is its diagonal, whose P V consumer 0 (`who`) runs over
    // the tile's first 64 keys only (4 of the 8 k16 steps).
    auto next_block = [&](auto who) {
      constexpr int kWho = decltype(who)::value;
      constexpr int kSteps = kDiagonal && kWho == 0 ? kKeys / 32 : kKeys / 16;
      const int s = int(n % kStages), prev = int((n - 1) % kStages);
      wait_turn(cw);
      tma::wait_parity(chain_q_full(cs, j), (j >> 1) & 1);
      tma::wait_parity(&sm.k_full[s], (n / kStages) & 1);
      issue_scores_from<kD, 2>(sc, chain_queries(cs, j), sm, cw, s);
      tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
      issue_pv<kD, 2, kSteps>(o, pa, sm, prev);
      if (cw != 1 || j + 1 < count || tiles > 1) pass_turn<2>(cw);
      wgmma::wait<1>();
      release(&sm.k_empty[s]);
      if (tiles == 1) release(chain_q_empty(cs, j));
      float l_done[2] = {l[0], l[1]};  // the finished block's sums, for its store
      m[0] = m[1] = kernels::kEmptyMax, l[0] = l[1] = 0.0f;
      softmax(0, tiles == 1, who);
      wgmma::wait<0>();  // the finished block's last P V: its O is final
      release(&sm.v_empty[prev]);
      kernels::flash_store_rows<kD>(l_done, done_row0, seq, out + done.head * seq * kD,
                                    [&](int jj, int e) { return o[4 * jj + e]; });
#pragma unroll
      for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
      // kDiagonal: O restarts from zero without the rescale (64 multiplies of zero by c) that
      // rescale_and_pack would run: only P is packed.
      if constexpr (kDiagonal)
        pack_scores(sc, pa);
      else
        rescale_and_pack<kD>(o, c, sc, pa);
      ++n;
    };
    if constexpr (kDiagonal) {
      per_consumer(next_block, true);
    } else {
      next_block(Any{});
    }
  }
  if constexpr (kDiagonal) {
    per_consumer(last, true);
  } else {
    last(Any{});
  }
  kernels::flash_store_rows<kD>(l, row0, seq, out + b.head * seq * kD,
                                [&](int jj, int e) { return o[4 * jj + e]; });
}

// The producer's thread: for each block of the CTA's list, its Q into buffer j % 2 (once the
// block two before has released it), then its K and V tiles into the ring, which runs on from
// block to block. Q of block j + 1 is thus issued as soon as block j's last tiles are, about two
// tiles before the consumers need it.
template <int kD, class Locate>
__device__ __forceinline__ void produce_chain(ChainSmem<kD>& cs, const CUtensorMap& map_q,
                                              const CUtensorMap& map_k, const CUtensorMap& map_v,
                                              const int* entries, int count, const Locate& locate,
                                              int64_t seq) {
  uint32_t ring = 0;
  for (int j = 0; j < count; ++j) {
    const auto b = locate(entries[j]);
    const int head_row = int(b.head * seq);
    if (j >= 2) tma::wait_parity(chain_q_empty(cs, j), ((j >> 1) - 1) & 1);
    load_queries<kD, 2>(chain_queries(cs, j), chain_q_full(cs, j), map_q, head_row, b.qb);
    load_tiles<Schedule::pingpong>(cs.sm, map_k, map_v, head_row, b.walk, ring);
    ring += b.walk.tiles();
  }
}

// The kernel body: one CTA an SM (at most), 384 threads, kChainSmemBytes<kD> of dynamic shared
// memory, blocks from `plan` (the layout above), locate(item) = {head, qb, walk}; kDiagonal only
// for causal walks (the header comment). sm_90a device code only: call it under
// #if BENCH_SM90A_DEVICE.
template <int kD, bool kDiagonal = false, class Locate>
__device__ __forceinline__ void chained(const CUtensorMap& map_q, const CUtensorMap& map_k,
                                        const CUtensorMap& map_v, bf16* out, int64_t seq,
                                        const int* __restrict__ plan, const Locate& locate) {
  using Cs = ChainSmem<kD>;
  extern __shared__ uint8_t wgmma_smem_raw[];
  Cs& cs = tma::aligned_1024<Cs>(wgmma_smem_raw);
  if (threadIdx.x == 0) {
    init_barriers(cs.sm);
    tma::mbarrier_init(&cs.q1_full, 1);
    tma::mbarrier_init(&cs.q1_empty, 2);  // one arrival per consumer warpgroup
    tma::fence_barrier_init();
  }
  __syncthreads();
  const int first = plan[blockIdx.x], count = plan[blockIdx.x + 1] - first;
  const int* entries = plan + gridDim.x + 1 + first;
  if (count <= 0) return;  // the host plan gives every CTA a block; a guard, not a path
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) produce_chain<kD>(cs, map_q, map_k, map_v, entries, count, locate, seq);
  } else {
    wgmma::grow_registers<Team<2>::kConsumerRegisters>();
    consume_chain<kD, kDiagonal>(cs, threadIdx.x / kWarpgroup - 1, entries,
                                 __shfl_sync(0xffffffffu, count, 0), locate, seq, out);
  }
}

}  // namespace kernels::flash_wgmma
