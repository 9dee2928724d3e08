// ch18/block_sparse_attention: with a block mask, attention's cost is the blocks it keeps; a
// FlashAttention kernel that walks only the kept 128 x 128 blocks does a quarter of the work of
// one that computes every block and masks it, at 25% density.
//
// The work: prefill attention, batch 1, 32 heads, 8192 tokens, head_dim 128, under a fixed-seed
// block mask of 128 x 128 blocks: every query block keeps its diagonal block and 15 of the other
// 63 key blocks, drawn at random (seed 18): 16 of 64 in every row, density exactly 25%, and the
// same work in every CTA. (Non-causal: the mask alone says what is seen.)
// The hardware: each kept block is two tensor-core GEMMs (S = Q K^T, 128 x 128 x 128, and
// O += P V, the same size) and an online softmax between them; a masked block computed anyway
// costs the same tensor-core time and then contributes nothing.
//
// The first two rungs share one kernel (FlashAttention-2 style): a CTA per 128-query block and head,
// 8 warps of 16 query rows. Q's fragments stay in registers; K and V arrive in 64-key tiles
// through a 2-stage cp.async ring in shared memory (rows of 256 bytes, 16-byte chunk c of row r at
// c ^ (r % 8): an ldmatrix phase of 8 rows then covers all 32 banks). Per tile, per warp: S (16 x 64)
// by 64 mma.sync m16n8k16 (kernels/mma_bf16.cuh), the online softmax on the S fragments (row max
// and sum over the quad of lanes that share a row), P packed to BF16 in registers as the A
// operand, O (16 x 128, FP32) += P V by 64 more mma.sync with V read through ldmatrix.trans.
// The ladder:
//   1. baseline "dense_masked": walks all 64 key blocks of its row; a masked block is loaded and
//      multiplied like any other, then its scores are set to -inf (p = 0: no contribution);
//   2. step "skip_masked": walks only the kept blocks, from a per-row list (CSR), in the same
//      ascending order: the kept blocks' arithmetic is identical, so the outputs are bit-identical.
//      This is the lesson: the time follows the kept blocks (ch18's README, 'Where the time
//      goes', has the measured ratio at 25%);
//   3. optimized "skip_masked_wgmma" (sm_90a): the same walk of the kept blocks on ch16's Hopper
//      kernel (kernels/flash_attention_wgmma.cuh: a TMA producer warpgroup, two wgmma consumer
//      warpgroups in ping-pong), whose 128-key tiles are exactly the mask's blocks: the CSR row is
//      its Walk. Measured (README): near ch16's dense rate on the kept blocks, and faster than
//      compiled FlexAttention on the same mask.
// Flops: only what the pattern needs, 4 x 128 per kept score (q.k and p v), for every variant,
// against the BF16 tensor ceiling; the baseline's reported TFLOP/s is thus its useful rate.
// Metric "density": kept blocks / all blocks. Expected: the step ~1 / density (4x), a little less
// for the fixed per-CTA costs; the top rung ~2x more on the same blocks, the Hopper body's gain
// (ch16's wgmma_pingpong against fa2_mma_sync). Sampling: sustained (seconds of tensor-core work at
// the power limit).
// Tolerance: relative L2 5e-3. P is rounded to BF16 for the P V product (RMS 2^-8/sqrt(12) =
// 1.1e-3 of each p) and the output to BF16 (the same RMS); FP32 sums add ~1e-5: ~2e-3 in all.
// Verification: 4 heads, 1000 tokens: 8 blocks, the last one 104 rows and keys (zero-filled
// loads, masked keys, unstored rows).
//
//   ./bench compare --chapter ch18 --example block_sparse_attention
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/flash_attention_mma.cuh>
#include <kernels/flash_attention_wgmma.cuh>
#include <kernels/reference_attention.cuh>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
constexpr int kHeadDim = kernels::kFlashHeadDim;    // 128
constexpr int kBlock = kernels::kFlashQueryRows;     // mask block edge, and a CTA's query rows
constexpr int kKeyTile = kernels::kFlashKeyTile;     // keys per pipeline stage: half a mask block
constexpr int kThreads = kernels::kFlashThreads;     // 8 warps x 16 query rows
constexpr unsigned kMaskSeed = 18;

struct BlockSparse {
  int64_t heads, seq;
  int nb;  // blocks per side
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  std::vector<uint8_t> mask;           // [nb][nb], 1 = kept
  std::vector<int> row_start, cols;    // CSR of the kept blocks, columns ascending
  bench::DeviceBuffer<uint8_t> mask_d;
  bench::DeviceBuffer<int> row_start_d, cols_d;
  double density = 0;
  explicit BlockSparse(bench::Setup& s)
      : heads(s.size("heads", 32, 4)),
        seq(s.size("seq", 8192, 1000)),
        nb(int((seq + kBlock - 1) / kBlock)),
        q(s.input<bf16>("q", heads * seq * kHeadDim, bench::normal(0, 4))),  // a peaked softmax
        k(s.input<bf16>("k", heads * seq * kHeadDim, bench::uniform(-1, 1))),
        v(s.input<bf16>("v", heads * seq * kHeadDim, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", heads * seq * kHeadDim)) {
    s.param("mask_seed", kMaskSeed);
    // Each row: its diagonal plus a quarter of the blocks in all, the others drawn without repeats.
    const int kept_per_row = std::max(1, (nb + 2) / 4);
    std::mt19937 rng(kMaskSeed);
    mask.assign(size_t(nb) * nb, 0);
    row_start.push_back(0);
    double kept_scores = 0;
    for (int r = 0; r < nb; ++r) {
      std::vector<int> others(nb);
      std::iota(others.begin(), others.end(), 0);
      others.erase(others.begin() + r);
      std::shuffle(others.begin(), others.end(), rng);
      mask[size_t(r) * nb + r] = 1;
      for (int i = 0; i < kept_per_row - 1; ++i) mask[size_t(r) * nb + others[i]] = 1;
      for (int c = 0; c < nb; ++c)
        if (mask[size_t(r) * nb + c]) {
          cols.push_back(c);
          kept_scores += double(block_len(r)) * block_len(c);
        }
      row_start.push_back(int(cols.size()));
    }
    density = double(cols.size()) / (double(nb) * nb);
    mask_d = upload(mask), row_start_d = upload(row_start), cols_d = upload(cols);
    s.bytes(4.0 * heads * seq * kHeadDim * sizeof(bf16));  // q, k, v read once; out written once
    s.flops(4.0 * kHeadDim * heads * kept_scores, bench::ceiling::bf16);
  }
  int64_t block_len(int b) const { return std::min<int64_t>(kBlock, seq - int64_t{b} * kBlock); }
  template <class T>
  static bench::DeviceBuffer<T> upload(const std::vector<T>& host) {
    bench::DeviceBuffer<T> d(int64_t(host.size()));
    BENCH_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
    return d;
  }
};

struct Args {
  const bf16 *q, *k, *v;
  bf16* out;
  int64_t seq;
  int nb;
  const uint8_t* mask;
  const int *row_start, *cols;
};

// The tiles query block qb walks (kernels/flash_attention_mma.cuh's Walk): two 64-key tiles per
// 128-key block, all nb blocks (dense, masked ones scored -inf) or only the kept ones (skip).
template <bool kSkip>
struct BlockWalk {
  const Args& a;
  int qb, first;
  __device__ int tiles() const { return 2 * (kSkip ? a.row_start[qb + 1] - first : a.nb); }
  __device__ int key_block(int t) const { return kSkip ? a.cols[first + t / 2] : t / 2; }
  __device__ int64_t first_key(int t) const { return int64_t{key_block(t)} * kBlock + (t % 2) * kKeyTile; }
  __device__ bool masked(int t) const { return !kSkip && a.mask[int64_t{qb} * a.nb + key_block(t)] == 0; }
  __device__ bool visible(int64_t, int64_t) const { return true; }
};

template <bool kSkip>
__global__ void __launch_bounds__(kThreads) block_sparse_flash(Args a) {
  const int qb = blockIdx.x;
  const int64_t head = blockIdx.y * a.seq * kHeadDim;
  kernels::flash_attention_block(a.q + head, a.k + head, a.v + head, a.out + head, a.seq, qb,
                                 BlockWalk<kSkip>{a, qb, kSkip ? a.row_start[qb] : 0});
}

// Untimed: the shared-memory opt-in (96 KiB, over the 48 KiB default). Reports the density.
template <bool kSkip>
struct BlockFlash {
  double density;
  BlockFlash(const BlockSparse& w, cudaStream_t) : density(w.density) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_flash<kSkip>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(sizeof(kernels::FlashSmem))));
  }
  void operator()(const BlockSparse& w, cudaStream_t stream) const {
    const Args args{w.q.data(), w.k.data(),      w.v.data(),           w.out.data(),
                    w.seq,      w.nb,            w.mask_d.data(),      w.row_start_d.data(),
                    w.cols_d.data()};
    block_sparse_flash<kSkip><<<dim3(unsigned(w.nb), unsigned(w.heads)), kThreads, sizeof(kernels::FlashSmem), stream>>>(args);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"density", density}}; }
};

// ---- Optimized: the kept blocks on the Hopper kernel (kernels/flash_attention_wgmma.cuh) --------

namespace fw = kernels::flash_wgmma;
static_assert(fw::Team<2>::kRows == kBlock && fw::kKeys == kBlock, "one wgmma tile per mask block");

// Query block qb's kept blocks, from the CSR: one 128-key tile each. No score inside a kept block
// is masked; only a head's last block can be partial (keys past seq), so only it is checked.
struct KeptTiles {
  const int* cols;  // this row's kept blocks, ascending
  int count;
  int partial_last;  // the last block's index when seq is not a multiple of 128, else -1
  __device__ int tiles() const { return count; }
  __device__ int key_tile(int t) const { return cols[t]; }
  __device__ bool masks(int t) const { return partial_last >= 0 && cols[t] == partial_last; }
  __device__ bool visible(int64_t, int64_t) const { return true; }
};

__global__ void __launch_bounds__(fw::Team<2>::kThreads, 1)
    block_sparse_wgmma(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                       const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ out, int64_t seq,
                       const int* row_start, const int* cols, int partial_last) {
#if BENCH_SM90A_DEVICE
  const int qb = blockIdx.x, first = row_start[qb];
  fw::block<kHeadDim, 2, fw::Schedule::pingpong>(map_q, map_k, map_v, out + int64_t{blockIdx.y} * seq * kHeadDim, seq,
                            int(blockIdx.y * seq), qb,
                            KeptTiles{cols + first, row_start[qb + 1] - first, partial_last});
#endif
}

// Untimed: the shared-memory opt-in (162 KiB) and the three tensor maps (fixed buffers).
struct BlockWgmma {
  double density;
  CUtensorMap map_q, map_k, map_v;
  explicit BlockWgmma(const BlockSparse& w, cudaStream_t)
      : density(w.density),
        map_q(fw::query_map<kHeadDim>(w.q.data(), w.heads * w.seq)),
        map_k(fw::tile_map<kHeadDim>(w.k.data(), w.heads * w.seq)),
        map_v(fw::tile_map<kHeadDim>(w.v.data(), w.heads * w.seq)) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(fw::kSmemBytes<kHeadDim>)));
  }
  void operator()(const BlockSparse& w, cudaStream_t stream) const {
    const int partial_last = w.seq % kBlock != 0 ? w.nb - 1 : -1;
    block_sparse_wgmma<<<dim3(unsigned(w.nb), unsigned(w.heads)), fw::Team<2>::kThreads, fw::kSmemBytes<kHeadDim>, stream>>>(
        map_q, map_k, map_v, w.out.data(), w.seq, w.row_start_d.data(), w.cols_d.data(), partial_last);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"density", density}}; }
};

// ---- References and registration --------------------------------------------------------------

struct KeptBlock {
  const uint8_t* mask;
  int64_t nb;
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const {
    return mask[(qi / kBlock) * nb + kj / kBlock] != 0;
  }
};
void reference(const BlockSparse& w, bench::HostData& h) {
  kernels::reference_attention(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"), h.expected("out"), w.heads, w.seq,
                               w.seq, KeptBlock{w.mask.data(), w.nb});
}
void device_reference(const BlockSparse& w, cudaStream_t stream) {
  kernels::reference_attention(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.heads, w.seq, w.seq,
                               KeptBlock{w.mask_d.data(), w.nb}, stream);
}

BENCH_EXAMPLE(ch18, block_sparse_attention, BlockSparse)
    .stateful<BlockFlash<false>>(bench::Role::baseline, "dense_masked")
    .stateful<BlockFlash<true>>(bench::Role::step, "skip_masked")
    .stateful<BlockWgmma>(bench::Role::optimized, "skip_masked_wgmma", {.arch_specific = 90})
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(5e-3))
    .mode(bench::Mode::sustained);

}  // namespace
