// kernels/streaming_gemv.cuh: out = act · Wᵀ for a few tokens (1 to 8 activation rows), BF16
// weights [n][k] row-major, FP32 sums: the decode-time projection, where each weight is used once
// per token and the kernel's only job is to stream W at the HBM read ceiling.
//
// A general GEMM library tiles for reuse: at 1 to 8 tokens there is almost none to have, and what
// decides the time is how many weight bytes are in flight and whether any SM sits idle. Here:
//   - a warp owns a group of kRowsPerWarp weight rows and streams them with 16-byte loads, each
//     lane kVectorsPerRow loads per row in flight (16 loads, 256 bytes a lane) before it uses any;
//   - the tokens' activations sit in shared memory for the whole kernel ([tokens][k] BF16, written
//     once by the block's prologue), so a 16-byte activation load feeds kRowsPerWarp rows;
//   - the grid is persistent (up to kBlocksPerSm blocks an SM), warps striding over the groups,
//     so the last pass of a large matrix still has most warps streaming;
//   - FP32 FMAs, one warp butterfly per (row, token) sum at the end of a group.
// The caller's Op says what is around the product, so the elementwise work before and after it
// costs no launch of its own:
//   int64_t row(int64_t group, int slot) const    weight row of the group's slot 0..3 (a map, so
//                                                 an epilogue can own rows that belong together:
//                                                 a RoPE pair, a gate row and its up row);
//   void fill_row(bf16* act_row, int token, int64_t k) const
//                                                 the prologue, by all threads of a block: writes
//                                                 token's activation row act_row [0..k) (a copy,
//                                                 a norm); a row at a time, so that
//                                                 kernels/streaming_mma.cuh can fill the rows in
//                                                 parallel, a block each;
//   void store(int64_t group, int slot, int token, const float (&sums)[kRowsPerWarp]) const
//                                                 the epilogue, one lane per (slot, token) of the
//                                                 group, with the token's sums of all the slots
//                                                 (read a slot other than a constant one with
//                                                 pick).
// Weights are read before the kernel waits for the one ahead (kernels/pdl.cuh): they are inputs
// nothing in a decode step writes, so a launched dependently the kernel's first loads overlap the
// tail of the kernel before it, and only the prologue waits.
// load_slab, fill_activations and stream_groups are the kernel's pieces as device functions, for a
// persistent kernel that runs several projections in one launch (ch20's megakernel).
// Limits: k a multiple of 8 (16-byte rows); tokens × k × 2 bytes of shared memory per block (a
// GPU without it throws bench::Unsupported); from about 8 tokens the FMAs, not the bytes, set the
// time: kernels/streaming_mma.cuh streams the same way into tensor cores, with the same hooks.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/bf16_pack.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/pdl.cuh>
#include <kernels/vector_access.cuh>
#include <stdexcept>
#include <string>

namespace kernels::gemv {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;    // rows one activation load serves; a group's 4 sums per token
constexpr int kVectorsPerRow = 4;  // 16-byte loads per row a lane has in flight: 256 bytes a lane
constexpr int kBlocksPerSm = 2;    // at most: 64 KB in flight per block, and room left for the
                                   // dependent kernel's first blocks where registers allow
constexpr int kMaxTokens = 8;
// Registers (ptxas, sm_90a, CUDA 13.0, with ch20's epilogues): 102-116 at 1 token and 125-128 at 2
// (2 blocks an SM), 149-155 at 4 and 181-200 at 8 (1 block an SM: 8 warps, 64 KB in flight).

// The activation rows a launch holds: the tokens rounded up to 1, 2, 4 or 8 (one kernel each);
// the padding rows are zeros, and their sums are never stored.
inline int padded_tokens(int tokens) {
  int padded = 1;
  while (padded < tokens) padded *= 2;
  return padded;
}

// a [i] for a runtime i, by an unrolled compare: the array stays in registers (indexed, it would
// go to local memory). For epilogues that read a partner slot's sum.
template <int kN>
__device__ __forceinline__ float pick(const float (&a)[kN], int i) {
  float out = 0;
#pragma unroll
  for (int j = 0; j < kN; ++j)
    if (j == i) out = a[j];
  return out;
}

// The pieces of the kernel below, as device functions, so that a persistent kernel running several
// projections in one launch (ch20's megakernel) streams each the same way. A warp's weights are
// the array w [kRowsPerWarp][kVectorsPerRow], 256 bytes a lane; the pieces take any [kR][kV]
// (the megakernel's narrow groups: [2][8], the same 256 bytes over twice as many warps), and the
// Op's store then gets kR sums.

// Loads the slab of a group's rows that starts at vector v0 into w (zeros past the row's end).
template <class Op, int kR, int kV>
__device__ __forceinline__ void load_slab(const bf16* weight, int64_t k, const Op& op,
                                          int64_t group, int64_t v0, uint4 (&w)[kR][kV]) {
  const int lane = threadIdx.x % 32;
  const int64_t vectors = k / kBf16PerVector;
#pragma unroll
  for (int slot = 0; slot < kR; ++slot) {
    const uint4* row = reinterpret_cast<const uint4*>(weight + op.row(group, slot) * k);
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int64_t v = v0 + u * 32 + lane;
      w[slot][u] = v < vectors ? load_stream(row + v) : make_uint4(0, 0, 0, 0);
    }
  }
}

// The prologue, by all threads of the block: op.fill_row writes the tokens' rows, then the padding
// rows up to kTokens are zeroed. The caller synchronizes the block before the product reads act.
template <int kTokens, class Op>
__device__ __forceinline__ void fill_activations(const Op& op, uint4* act, int tokens, int64_t k) {
  const int64_t vectors = k / kBf16PerVector;
  for (int t = 0; t < tokens; ++t) op.fill_row(reinterpret_cast<bf16*>(act + t * vectors), t, k);
  for (int64_t i = tokens * vectors + threadIdx.x; i < kTokens * vectors; i += kThreads)
    act[i] = make_uint4(0, 0, 0, 0);
}

// The product: the warp's groups first, first + stride, ... < groups; w must hold the slab at
// vector 0 of group `first` (load_slab, issued as early as the caller can).
template <int kTokens, class Op, int kR, int kV>
__device__ __forceinline__ void stream_groups(const bf16* weight, int64_t k, int64_t groups,
                                              int tokens, const Op& op, const uint4* act,
                                              int64_t first, int64_t stride, uint4 (&w)[kR][kV]) {
  const int lane = threadIdx.x % 32;
  const int64_t vectors = k / kBf16PerVector;
  for (int64_t group = first; group < groups; group += stride) {  // warp-uniform
    float sum[kR][kTokens] = {};
    for (int64_t v0 = 0; v0 < vectors; v0 += 32 * kV) {
      if (group != first || v0 != 0) load_slab(weight, k, op, group, v0, w);
#pragma unroll
      for (int u = 0; u < kV; ++u) {
        const int64_t v = v0 + u * 32 + lane;
        if (v >= vectors) break;
        float wf[kR][kBf16PerVector];
#pragma unroll
        for (int slot = 0; slot < kR; ++slot) unpack_bf16x8(w[slot][u], wf[slot]);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          float a[kBf16PerVector];
          unpack_bf16x8(act[t * vectors + v], a);
#pragma unroll
          for (int slot = 0; slot < kR; ++slot)
#pragma unroll
            for (int e = 0; e < kBf16PerVector; ++e)
              sum[slot][t] = fmaf(wf[slot][e], a[e], sum[slot][t]);
        }
      }
    }
#pragma unroll
    for (int slot = 0; slot < kR; ++slot)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) sum[slot][t] = warp_reduce(sum[slot][t], Sum{});
    // Lane (slot, token) stores, given the token's sums of every slot.
    const int slot = lane / kTokens, token = lane % kTokens;
    if (slot < kR && token < tokens) {
      float mine[kR];
#pragma unroll
      for (int s = 0; s < kR; ++s) mine[s] = pick(sum[s], token);
      op.store(group, slot, token, mine);
    }
  }
}

template <int kTokens, class Op>
__global__ void __launch_bounds__(kThreads)
    stream_rows(const bf16* weight, int64_t k, int64_t groups, int tokens, Op op) {
  extern __shared__ uint4 act[];  // [kTokens][k / 8]
  const int64_t stride = int64_t{gridDim.x} * kWarps;
  const int64_t first = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  uint4 w[kRowsPerWarp][kVectorsPerRow];
  // The weights wait for nothing: the first 256 bytes a lane go out before the kernel ahead ends.
  if (first < groups) load_slab(weight, k, op, first, 0, w);
  pdl::wait_for_prerequisite();
  fill_activations<kTokens>(op, act, tokens, k);
  __syncthreads();
  pdl::allow_dependents();
  stream_groups<kTokens>(weight, k, groups, tokens, op, act, first, stride, w);
}

// One projection's launch, planned untimed: the kernel for the padded token count, its shared
// memory opted in, the persistent grid. Each call launches it programmatically (kernels/pdl.cuh).
template <class Op>
class StreamingGemv {
 public:
  StreamingGemv(int tokens, int64_t groups, int64_t k)
      : tokens_(tokens),
        groups_(groups),
        k_(k),
        smem_(size_t(padded_tokens(tokens)) * k * sizeof(bf16)) {
    if (tokens < 1 || tokens > kMaxTokens || k % kBf16PerVector != 0)
      throw std::invalid_argument("StreamingGemv: 1 to 8 tokens, k a multiple of 8");
    switch (padded_tokens(tokens)) {
      case 1:
        kernel_ = stream_rows<1, Op>;
        break;
      case 2:
        kernel_ = stream_rows<2, Op>;
        break;
      case 4:
        kernel_ = stream_rows<4, Op>;
        break;
      default:
        kernel_ = stream_rows<8, Op>;
        break;
    }
    cudaFuncAttributes attributes = {};
    BENCH_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel_));
    if (attributes.sharedSizeBytes + smem_ >
        size_t(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)))
      throw bench::Unsupported("streaming GEMV: " + std::to_string(smem_) +
                               " bytes of activations exceed this GPU's shared memory per block");
    // The opt-in is the kernel's, not this object's: every StreamingGemv of the same Op and padded
    // token count shares it (ch20's o and down projections, k = 4096 and 14336), so it is only
    // ever raised. Set to this object's size, a smaller one made later would make the larger
    // one's launches fail.
    if (int(smem_) > attributes.maxDynamicSharedSizeBytes)
      BENCH_CUDA_CHECK(
          cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_)));
    const int64_t resident =
        int64_t{sm_count()} * std::clamp(blocks_per_sm(kernel_, kThreads, smem_), 1, kBlocksPerSm);
    grid_ = unsigned(std::min((groups + kWarps - 1) / kWarps, resident));
  }
  void operator()(const bf16* weight, const Op& op, cudaStream_t s) const {
    pdl::launch(kernel_, dim3(grid_), dim3(kThreads), smem_, s, weight, k_, groups_, tokens_, op);
  }

 private:
  int tokens_;
  int64_t groups_, k_;
  size_t smem_;
  void (*kernel_)(const bf16*, int64_t, int64_t, int, Op) = nullptr;
  unsigned grid_ = 0;
};

}  // namespace kernels::gemv
