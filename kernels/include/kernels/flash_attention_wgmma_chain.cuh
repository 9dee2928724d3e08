// kernels/flash_attention_wgmma_chain.cuh: the ping-pong FlashAttention kernel of
// flash_attention_wgmma.cuh made persistent for unequal (causal) blocks, with the blocks of a CTA
// chained into one stream of tiles; ch16's `wgmma_chained` rung (sm_90a only).
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
// Which blocks a CTA runs: a host plan (ch16's list_schedule), since a fixed stride cannot balance
// unequal blocks and claiming them from a counter measured a tie. The plan's layout, `plan`:
//   plan[0 .. gridDim.x]: offsets, CTA c runs items plan[G + 1 + plan[c]] .. up to plan[c + 1]
//   (G = gridDim.x), in that order; an item is whatever `locate` turns into {head, qb, walk}.
// Every thread reads its own CTA's entries (read-only global memory the host wrote before the
// launch: no shared-memory hand-over, so nothing for racecheck to pair), and the consumers
// broadcast each from lane 0 so the compiler knows it is warp-uniform (ch16 README: a value each
// thread loads itself moved every derived index off the uniform datapath).
//
// Two consumers, the pingpong schedule, 128-row blocks, 128-key tiles as in the header it builds
// on. Shared memory: Smem<kD, 2> plus a second Q buffer and its two barriers (193 KiB at d128).
#pragma once

#include <kernels/flash_attention_wgmma.cuh>

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

// Consumer cw's stream over the CTA's `count` blocks (entries[0 .. count - 1]). Per ring tile n
// >= 1 the pingpong step: in its turn S of tile n and P V of tile n - 1, then tile n's softmax
// while that P V runs, then O's rescale and P's packing. When tile n is the first of a block,
// its softmax starts from an empty running max and sum, and after the P V of the previous
// block's last tile that block's O is stored and O restarts from zero. Tile 0 of the stream is
// the only one with S alone, and the stream's last P V the only one waited for alone. The turns
// are pingpong's over the whole stream: the last consumer's first pass opens consumer 0's first
// turn and it skips its last pass, so no arrival is left pending at exit. Every wgmma sits in
// straight-line code of a loop body (none in a branch: cmake/wgmma_guard.sh).
template <int kD, class Locate>
__device__ __forceinline__ void consume_chain(ChainSmem<kD>& cs, int cw, const int* entries,
                                              int count, const Locate& locate, int64_t seq,
                                              bf16* out) {
  auto& sm = cs.sm;
  const int warp = (threadIdx.x % kWarpgroup) / 32, lane = threadIdx.x % 32;
  const int rows = cw * kConsumerRows + warp * 16 + lane / 4;  // row0 within a block; and + 8
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

  // Ring tile 0 (the first block's tile 0) alone.
  tma::wait_parity(chain_q_full(cs, 0), 0);
  tma::wait_parity(&sm.k_full[0], 0);
  issue_scores_from<kD, 2>(sc, chain_queries(cs, 0), sm, cw, 0);
  wgmma::wait<0>();
  release(&sm.k_empty[0]);
  if (tiles == 1) release(chain_q_empty(cs, 0));
  softmax_tile<kD>(sc, m, l, c, b.walk, 0, seq, row0);
  rescale_and_pack<kD>(o, c, sc, pa);

  uint32_t n = 1;  // the ring's tile: tiles through the ring so far
  // Each trip: the rest of block j's tiles (S of tile t with P V of tile t - 1), then block
  // j + 1's tile 0 with P V of block j's last tile and the store of block j's O.
  for (int j = 0;;) {
    for (int t = 1; t < tiles; ++t) {
      const int s = int(n % kStages), prev = int((n - 1) % kStages);
      wait_turn(cw);
      tma::wait_parity(&sm.k_full[s], (n / kStages) & 1);
      issue_scores_from<kD, 2>(sc, chain_queries(cs, j), sm, cw, s);
      tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
      issue_pv(o, pa, sm, prev);  // reads pa: left untouched until this group completes
      if (cw != 1 || j + 1 < count || t + 1 < tiles) pass_turn<2>(cw);
      wgmma::wait<1>();  // S (the older group) is done; P V may still run
      release(&sm.k_empty[s]);
      if (t + 1 == tiles) release(chain_q_empty(cs, j));
      softmax_tile<kD>(sc, m, l, c, b.walk, t, seq, row0);
      wgmma::wait<0>();
      release(&sm.v_empty[prev]);
      rescale_and_pack<kD>(o, c, sc, pa);
      ++n;
    }
    if (++j == count) break;
    // Block j's tile 0, with P V of block j - 1's last tile.
    const auto done = b;
    const int done_row0 = row0;
    b = locate(next_entry);
    if (j + 1 < count) next_entry = chain_entry_uniform(entries, j + 1);
    tiles = b.walk.tiles();
    row0 = b.qb * Team<2>::kRows + rows;
    const int s = int(n % kStages), prev = int((n - 1) % kStages);
    wait_turn(cw);
    tma::wait_parity(chain_q_full(cs, j), (j >> 1) & 1);
    tma::wait_parity(&sm.k_full[s], (n / kStages) & 1);
    issue_scores_from<kD, 2>(sc, chain_queries(cs, j), sm, cw, s);
    tma::wait_parity(&sm.v_full[prev], ((n - 1) / kStages) & 1);
    issue_pv(o, pa, sm, prev);
    if (cw != 1 || j + 1 < count || tiles > 1) pass_turn<2>(cw);
    wgmma::wait<1>();
    release(&sm.k_empty[s]);
    if (tiles == 1) release(chain_q_empty(cs, j));
    float l_done[2] = {l[0], l[1]};  // the finished block's sums, for its store
    m[0] = m[1] = kernels::kEmptyMax, l[0] = l[1] = 0.0f;
    softmax_tile<kD>(sc, m, l, c, b.walk, 0, seq, row0);
    wgmma::wait<0>();  // the finished block's last P V: its O is final
    release(&sm.v_empty[prev]);
    kernels::flash_store_rows<kD>(l_done, done_row0, seq, out + done.head * seq * kD,
                                  [&](int jj, int e) { return o[4 * jj + e]; });
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
    rescale_and_pack<kD>(o, c, sc, pa);
    ++n;
  }
  last_pv(o, pa, sm, n - 1);
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
// memory, blocks from `plan` (the layout above), locate(item) = {head, qb, walk}. sm_90a device
// code only: call it under #if BENCH_SM90A_DEVICE.
template <int kD, class Locate>
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
    consume_chain<kD>(cs, threadIdx.x / kWarpgroup - 1, entries,
                      __shfl_sync(0xffffffffu, count, 0), locate, seq, out);
  }
}

}  // namespace kernels::flash_wgmma
