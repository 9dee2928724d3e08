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
// The kernel (FlashAttention-2 style, the same on both sides): a CTA per 128-query block and head,
// 8 warps of 16 query rows. Q's fragments stay in registers; K and V arrive in 64-key tiles
// through a 2-stage cp.async ring in shared memory (rows of 256 bytes, 16-byte chunk c of row r at
// c ^ (r % 8): an ldmatrix phase of 8 rows then covers all 32 banks). Per tile, per warp: S (16 x 64)
// by 64 mma.sync m16n8k16 (kernels/mma_bf16.cuh), the online softmax on the S fragments (row max
// and sum over the quad of lanes that share a row), P packed to BF16 in registers as the A
// operand, O (16 x 128, FP32) += P V by 64 more mma.sync with V read through ldmatrix.trans.
// What changes from baseline to optimized:
//   1. baseline "dense_masked": walks all 64 key blocks of its row; a masked block is loaded and
//      multiplied like any other, then its scores are set to -inf (p = 0: no contribution);
//   2. optimized "skip_masked": walks only the kept blocks, from a per-row list (CSR), in the same
//      ascending order: the kept blocks' arithmetic is identical, so the outputs are bit-identical.
// Flops: only what the pattern needs, 4 x 128 per kept score (q.k and p v), for both variants,
// against the BF16 tensor ceiling; the baseline's reported TFLOP/s is thus its useful rate.
// Metric "density": kept blocks / all blocks. Expected speedup ~1 / density (4x), a little less
// for the fixed per-CTA costs. Sampling: sustained (seconds of tensor-core work at the power limit).
// Tolerance: relative L2 5e-3. P is rounded to BF16 for the P V product (RMS 2^-8/sqrt(12) =
// 1.1e-3 of each p) and the output to BF16 (the same RMS); FP32 sums add ~1e-5: ~2e-3 in all.
// Verification: 4 heads, 1000 tokens: 8 blocks, the last one 104 rows and keys (zero-filled
// loads, masked keys, unstored rows).
//
//   ./bench compare --chapter ch18 --example block_sparse_attention
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/async_copy.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/mma_bf16.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/reference_attention.cuh>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
constexpr int kHeadDim = 128;
constexpr int kBlock = 128;    // mask block edge, and a CTA's query rows
constexpr int kKeyTile = 64;   // keys per pipeline stage: half a mask block
constexpr int kThreads = 256;  // 8 warps x 16 query rows
constexpr int kRowChunks = kHeadDim * 2 / 16;  // 16-byte chunks per 256-byte row
constexpr unsigned kMaskSeed = 18;

struct Smem {
  bf16 q[kBlock * kHeadDim];        // 32 KiB
  bf16 k[2][kKeyTile * kHeadDim];   // 2 x 16 KiB
  bf16 v[2][kKeyTile * kHeadDim];   // 2 x 16 KiB
};

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

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of 256-byte rows.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return uint32_t(row * 256 + ((chunk ^ (row & 7)) << 4));
}

// Queues rows [row0, row0 + rows) of a [seq][128] matrix into `tile`; rows past seq are zero-filled
// (from an in-bounds source: kernels/async_copy.cuh).
__device__ __forceinline__ void load_rows(bf16* tile, const bf16* src, int64_t row0, int rows, int64_t seq) {
  for (int i = threadIdx.x; i < rows * kRowChunks; i += kThreads) {
    const int r = i / kRowChunks, c = i % kRowChunks;
    const bool inside = row0 + r < seq;
    kernels::cp_async::copy16(reinterpret_cast<uint8_t*>(tile) + swizzled(r, c),
                              src + (inside ? row0 + r : 0) * kHeadDim + c * 8, inside ? 16 : 0);
  }
}

struct Args {
  const bf16 *q, *k, *v;
  bf16* out;
  int64_t seq;
  int nb;
  const uint8_t* mask;
  const int *row_start, *cols;
};

template <bool kSkip>
__global__ void __launch_bounds__(kThreads) block_sparse_flash(Args a) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int qb = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t head = blockIdx.y * a.seq * kHeadDim;
  const int first = kSkip ? a.row_start[qb] : 0;
  const int tiles = 2 * (kSkip ? a.row_start[qb + 1] - first : a.nb);
  auto key_block = [&](int t) { return kSkip ? a.cols[first + t / 2] : t / 2; };
  auto load_kv = [&](int t) {
    const int64_t key0 = int64_t{key_block(t)} * kBlock + (t % 2) * kKeyTile;
    load_rows(sm.k[t % 2], a.k + head, key0, kKeyTile, a.seq);
    load_rows(sm.v[t % 2], a.v + head, key0, kKeyTile, a.seq);
  };
  load_rows(sm.q, a.q + head, int64_t{qb} * kBlock, kBlock, a.seq);
  load_kv(0);
  kernels::cp_async::commit();
  kernels::cp_async::wait<0>();
  __syncthreads();
  using kernels::cp_async::smem_addr;
  uint32_t qa[kHeadDim / 16][4];  // this warp's 16 query rows as A fragments, all of head_dim
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    kernels::ldmatrix_x4(qa[kk], smem_addr(sm.q) + swizzled(warp * 16 + lane % 16, 2 * kk + lane / 16));

  // Thread state for rows g and g + 8 of the warp's 16 (g = lane / 4): h = 0, 1.
  float o[kHeadDim / 8][4] = {}, m[2] = {kernels::kEmptyMax, kernels::kEmptyMax}, l[2] = {0.0f, 0.0f};
  const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) load_kv(t + 1);  // into the other stage, freed by the barrier ending t - 1
    kernels::cp_async::commit();
    kernels::cp_async::wait<1>();
    __syncthreads();  // tile t has landed for every thread
    const uint32_t k_tile = smem_addr(sm.k[t % 2]), v_tile = smem_addr(sm.v[t % 2]);
    // S = Q K^T for 64 keys: 8 tiles of 16 x 8.
    float s[kKeyTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
      for (int j = 0; j < kKeyTile / 16; ++j) {
        uint32_t kf[4];
        const int key = 16 * j + lane % 8 + 8 * (lane / 16);
        kernels::ldmatrix_x4(kf, k_tile + swizzled(key, 2 * kk + (lane / 8) % 2));
        kernels::mma_bf16_m16n8k16(s[2 * j], qa[kk], kf[0], kf[1]);
        kernels::mma_bf16_m16n8k16(s[2 * j + 1], qa[kk], kf[2], kf[3]);
      }
    // Online softmax: masked blocks (dense side) and keys past seq score -inf.
    const int kb = key_block(t);
    const bool masked = !kSkip && a.mask[int64_t{qb} * a.nb + kb] == 0;
    const int64_t key0 = int64_t{kb} * kBlock + (t % 2) * kKeyTile + 2 * (lane % 4);
    float m_new[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool seen = !masked && key0 + 8 * j + e % 2 < a.seq;
        s[j][e] = seen ? s[j][e] * scale : -INFINITY;
        m_new[e / 2] = fmaxf(m_new[e / 2], s[j][e]);
      }
    float c[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 1));
      m_new[h] = fmaxf(m_new[h], __shfl_xor_sync(0xffffffffu, m_new[h], 2));
      c[h] = kernels::exp2_ftz(m[h] - m_new[h]);
      l[h] *= c[h], m[h] = m_new[h];
    }
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) o[j][0] *= c[0], o[j][1] *= c[0], o[j][2] *= c[1], o[j][3] *= c[1];
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = kernels::exp2_ftz(s[j][e] - m[e / 2]), l[e / 2] += s[j][e];
    // O += P V: P's C fragments repacked as A fragments, V's B fragments by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      const float(&lo)[4] = s[2 * kk], (&hi)[4] = s[2 * kk + 1];  // keys 16kk + 0-7, 16kk + 8-15
      const uint32_t pa[4] = {kernels::pack_bf16x2(lo[0], lo[1]), kernels::pack_bf16x2(lo[2], lo[3]),
                              kernels::pack_bf16x2(hi[0], hi[1]), kernels::pack_bf16x2(hi[2], hi[3])};
#pragma unroll
      for (int jj = 0; jj < kHeadDim / 16; ++jj) {
        uint32_t vf[4];
        const int key = 16 * kk + lane % 8 + 8 * ((lane / 8) % 2);
        kernels::ldmatrix_x4_trans(vf, v_tile + swizzled(key, 2 * jj + lane / 16));
        kernels::mma_bf16_m16n8k16(o[2 * jj], pa, vf[0], vf[1]);
        kernels::mma_bf16_m16n8k16(o[2 * jj + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with stage t % 2 before tile t + 2 is queued into it
  }
  // The quad's partial sums, then O / l straight from the fragments (rows past seq not stored).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int64_t row = int64_t{qb} * kBlock + warp * 16 + lane / 4 + 8 * h;
    if (row >= a.seq) continue;
    const float inv = 1.0f / l[h];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
      *reinterpret_cast<__nv_bfloat162*>(a.out + head + row * kHeadDim + 8 * j + 2 * (lane % 4)) =
          __floats2bfloat162_rn(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
  }
}

// Untimed: the shared-memory opt-in (96 KiB, over the 48 KiB default). Reports the density.
template <bool kSkip>
struct BlockFlash {
  double density;
  BlockFlash(const BlockSparse& w, cudaStream_t) : density(w.density) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_flash<kSkip>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(sizeof(Smem))));
  }
  void operator()(const BlockSparse& w, cudaStream_t stream) const {
    const Args args{w.q.data(), w.k.data(),      w.v.data(),           w.out.data(),
                    w.seq,      w.nb,            w.mask_d.data(),      w.row_start_d.data(),
                    w.cols_d.data()};
    block_sparse_flash<kSkip><<<dim3(unsigned(w.nb), unsigned(w.heads)), kThreads, sizeof(Smem), stream>>>(args);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"density", density}}; }
};

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
    .stateful<BlockFlash<true>>(bench::Role::optimized, "skip_masked")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(5e-3))
    .mode(bench::Mode::sustained);

}  // namespace
