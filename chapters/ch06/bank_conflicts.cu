// ch06/bank_conflicts: scores = Q·Kᵀ for many independent 32x32 blocks (32 queries against 32
// keys, head dimension 32), each block computed from two tiles held in shared memory.
//
// Shared memory is 32 banks, each 4 bytes wide: word w lives in bank w % 32, and a warp's access
// takes one pass (a "wavefront") per distinct word asked of the busiest bank. A row-major 32x32
// float tile puts a whole COLUMN in one bank (the row stride, 32 words, is a multiple of 32).
//
// Thread (lane j, row group y) computes scores[i][j] = sum_d Q[i][d] * K[j][d] for i = y, y+8,
// y+16, y+24. Per d, the warp reads Q[i][d] (the same word for every lane: a broadcast) and
// K[j][d] for j = 0..31: a COLUMN of the K tile. Every K word is read by 4 rows x 8 warps, so
// shared memory, not HBM, sets the baseline's speed.
//
// What changes from baseline to optimized (as compiled: cuobjdump -sass, CUDA 13.0, sm_90a):
//   1. baseline: `__shared__ float k_tile[32][32]`. Its rows are 16-byte aligned, so the compiler
//      merges the four K reads per step, K[j][d..d+3], into ONE LDS.128 per lane (8 per lane; 40
//      LDS.128 in the kernel with Q's 32). A 128-bit shared load is served a quarter-warp at a
//      time: lanes j..j+7 read 16 bytes each from rows 32 words apart, all in the same 4 banks,
//      8 wavefronts per quarter-warp where 1 would do: 32 per instruction instead of 4, 28 extra.
//      Per block: 8 warps x 8 loads x 28 = 1,792 conflicts, about what ncu counts
//      (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld,
//      `./bench profile ch06/bank_conflicts/baseline`; README);
//   2. optimized: `k_tile[32][33]`. One word of padding per row moves row j's words to banks
//      j, j+1, ..., so a column touches 32 different banks. The rows are no longer 16-byte
//      aligned, so the K reads stay 32-bit LDS (32 per lane), each one wavefront; Q's broadcast
//      reads remain LDS.128 (Q's tile, read only by broadcast, keeps its aligned, unpadded rows).
//      Measured (ncu): near zero conflicts.
// Shared-load wavefronts (ncu l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld), per block:
// baseline ~2,582, padded ~783, 3.3x fewer; in both, wavefronts minus conflicts is 768 per block.
// At one wavefront per SM clock, the baseline's ~2,582 clocks per block allow roughly 1.2 TB/s of
// counted traffic on an H100 near 2 GHz, about what it measures: shared-memory bound; the padded
// kernel's ~783 would allow ~4 TB/s, more than HBM delivers: it is memory-bound. Achieved
// occupancy is the same on both sides (README), so the gain is the conflicts. The
// arithmetic, its order and the results are identical (bitwise); only where each K element sits
// in shared memory moves. (ch07/transpose pads a tile that is read once; here each word is read
// 32 times, so the conflicts cost far more than the global traffic.)
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

// The timing-size check (docs/validity.md row 2): one thread per score, summing its 32 products
// in double straight from global memory, sharing no code with the variants.
__global__ void reference_block_scores(const float* q, const float* k, float* scores, int64_t outputs) {
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (o >= outputs) return;
  const int64_t base = o / kTileFloats * kTileFloats;
  const int i = int(o % kTileFloats) / kTile, j = int(o % kTile);
  double sum = 0;
  for (int d = 0; d < kTile; ++d) sum += double(q[base + i * kTile + d]) * k[base + j * kTile + d];
  scores[o] = float(sum);
}

void device_reference(const BlockScores& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  const int64_t outputs = w.blocks * kTileFloats;
  reference_block_scores<<<static_cast<unsigned>((outputs + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.q.data(), w.k.data(), w.scores.data(), outputs);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, bank_conflicts, BlockScores)
    .baseline("k_tile_32x32", launch<0>)
    .optimized("k_tile_32x33_padded", launch<1>)
    .reference(reference)
    .device_reference(device_reference);  // FP32 sums of 32 products: the float default (relative L2 1e-5)

}  // namespace
