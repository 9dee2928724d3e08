// ch06/bank_conflicts: scores = Q·Kᵀ for many independent 32x32 blocks (32 queries against 32
// keys, head dimension 32), each block computed from two tiles held in shared memory.
//
// Shared memory is 32 banks, each 4 bytes wide: word w lives in bank w % 32, and a warp's access
// takes one pass (a "wavefront") per distinct word asked of the busiest bank. A row-major 32x32
// float tile puts a whole COLUMN in one bank (the row stride, 32 words, is a multiple of 32).
//
// Thread (lane j, row group y) computes scores[i][j] = sum_d Q[i][d] * K[j][d] for i = y, y+8,
// y+16, y+24. Per d, the warp reads Q[i][d] (the same word for every lane: a broadcast, one
// pass; fetched 4 d at a time as one LDS.128) and K[j][d] for j = 0..31: a COLUMN of the K tile,
// so 32 lanes ask one bank for 32 different words. Every K word is read by 4 rows x 8 warps,
// so shared memory, not HBM, sets the baseline's speed.
//
// What changes from baseline to optimized:
//   1. baseline: `__shared__ float k_tile[32][32]`: each of the 32 K reads per thread (32-bit
//      LDS) is a 32-way conflict, 32 wavefronts where 1 would do. Per block: 8 warps x 32 reads
//      x 31 extra wavefronts = 7,936 conflicts; 520 million for the 65,536 blocks, which is what
//      Nsight Compute's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld should count
//      (`./bench profile ch06/bank_conflicts/baseline`);
//   2. optimized: `k_tile[32][33]`. One word of padding per row moves row j's words to banks
//      j, j+1, ..., so a column touches 32 different banks: one wavefront per read, zero
//      conflicts. Q's tile, read only by broadcast, keeps its unpadded, 16-byte-aligned rows.
// Wavefronts per block: baseline 8 x (32 x 32 + 32 Q) = 8,448, optimized 8 x (32 + 32) = 512.
// At one wavefront per SM clock, the baseline can consume only ~1.5 bytes of tiles per clock per
// SM (~0.4 TB/s on an H100), the padded kernel ~24 B/clock, more than HBM delivers: it becomes
// memory-bound. The arithmetic, its order and the results are identical (bitwise); only where
// each K element sits in shared memory moves. (ch07/transpose pads a tile that is read once;
// here each word is read 32 times, so the conflicts cost far more than the global traffic.)
//
//   ./bench compare --chapter ch06 --example bank_conflicts
#include <bench/bench.hpp>

namespace {

constexpr int kTile = 32;              // queries = keys = head dimension per block
constexpr int kRowGroups = 8;          // 32 x 8 threads: each computes 4 rows of one column
constexpr int kTileFloats = kTile * kTile;

struct BlockScores {
  int64_t blocks;  // independent 32x32 problems
  bench::DeviceSpan<const float> q, k;
  bench::DeviceSpan<float> scores;
  explicit BlockScores(bench::Setup& s)
      : blocks(s.size("blocks", int64_t{1} << 16, 37)),  // 256 MiB per array when timing
        q(s.input<float>("q", blocks * kTileFloats, bench::uniform(-1, 1))),
        k(s.input<float>("k", blocks * kTileFloats, bench::uniform(-1, 1))),
        scores(s.output<float>("scores", blocks * kTileFloats)) {
    s.bytes(3.0 * blocks * kTileFloats * sizeof(float));  // read Q and K, write the scores
    s.flops(2.0 * blocks * kTile * kTile * kTile);         // one FMA per (i, j, k)
  }
};

// KPad = 0: the conflicted K tile; KPad = 1: the padded, conflict-free one.
template <int KPad>
__global__ void __launch_bounds__(kTile * kRowGroups) block_scores(const float* __restrict__ q,
                                                                   const float* __restrict__ k,
                                                                   float* __restrict__ scores) {
  __shared__ __align__(16) float q_tile[kTile][kTile];
  __shared__ float k_tile[kTile][kTile + KPad];
  const int lane = threadIdx.x, group = threadIdx.y;
  const int64_t base = blockIdx.x * int64_t{kTileFloats};
  // Stage both tiles: each warp copies whole rows, coalesced in global memory and conflict-free
  // in shared memory (consecutive lanes, consecutive words) with or without padding.
  for (int row = group; row < kTile; row += kRowGroups) {
    q_tile[row][lane] = q[base + row * kTile + lane];
    k_tile[row][lane] = k[base + row * kTile + lane];
  }
  __syncthreads();

  float acc[kTile / kRowGroups] = {};
#pragma unroll
  for (int d = 0; d < kTile; d += 4) {
    float key[4];  // K[lane][d..d+3]: a column across the warp, the access that conflicts
#pragma unroll
    for (int e = 0; e < 4; ++e) key[e] = k_tile[lane][d + e];
#pragma unroll
    for (int r = 0; r < kTile / kRowGroups; ++r) {
      // Q[i][d..d+3]: the same 16 bytes for every lane, one broadcast LDS.128.
      const float4 query = *reinterpret_cast<const float4*>(&q_tile[group + r * kRowGroups][d]);
      acc[r] = fmaf(query.x, key[0], acc[r]);
      acc[r] = fmaf(query.y, key[1], acc[r]);
      acc[r] = fmaf(query.z, key[2], acc[r]);
      acc[r] = fmaf(query.w, key[3], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kTile / kRowGroups; ++r) scores[base + (group + r * kRowGroups) * kTile + lane] = acc[r];
}

template <int KPad>
void launch(const BlockScores& w, cudaStream_t stream) {
  block_scores<KPad><<<static_cast<unsigned>(w.blocks), dim3(kTile, kRowGroups), 0, stream>>>(
      w.q.data(), w.k.data(), w.scores.data());
  BENCH_CHECK_LAUNCH();
}

void reference(const BlockScores& w, bench::HostData& h) {
  auto q = h.input<float>("q");
  auto k = h.input<float>("k");
  auto scores = h.expected("scores");
  for (int64_t b = 0; b < w.blocks; ++b) {
    const int64_t base = b * kTileFloats;
    for (int i = 0; i < kTile; ++i)
      for (int j = 0; j < kTile; ++j) {
        double sum = 0;
        for (int d = 0; d < kTile; ++d) sum += double(q[base + i * kTile + d]) * k[base + j * kTile + d];
        scores[base + i * kTile + j] = sum;
      }
  }
}

BENCH_EXAMPLE(ch06, bank_conflicts, BlockScores)
    .baseline("k_tile_32x32", launch<0>)
    .optimized("k_tile_32x33_padded", launch<1>)
    .reference(reference);  // FP32 sums of 32 products: the float default (relative L2 1e-5)

}  // namespace
