// kernels/group_reduce.cuh: a reduction over the threads that share one piece of work (a row),
// every one of them receiving the result.
//
// The group is either one warp (32 consecutive threads: shuffles only, no shared memory, no
// barrier, so warps of one block may work on different rows) or the whole block (shuffles within
// each warp, then one shared-memory slot per warp and two barriers). The XOR butterfly gives every
// lane the same value, and every thread of a block folds the per-warp slots in the same order, so
// all threads hold bit-identical results with any commutative op (fmaxf, +, or a custom pair
// combine such as online softmax's (max, sum)). Block groups: every thread of the block must
// call it (it contains __syncthreads).
#pragma once

#include <cuda_runtime.h>

namespace kernels {

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ __forceinline__ float shuffle_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ __forceinline__ float2 shuffle_xor(float2 v, int mask) {
  return make_float2(shuffle_xor(v.x, mask), shuffle_xor(v.y, mask));
}

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
  return v;
}

// kGroupThreads: 32 (one warp per group) or blockDim.x (one group per block, at most 1024).
template <int kGroupThreads, class T, class Op>
__device__ __forceinline__ T group_reduce(T v, Op op) {
  static_assert(kGroupThreads % 32 == 0 && kGroupThreads <= 1024, "a warp or a whole block");
  constexpr int kWarps = kGroupThreads / 32;
  v = warp_reduce(v, op);
  if constexpr (kWarps > 1) {
    __shared__ T warp_partials[kWarps];
    __syncthreads();  // a previous call's readers are done with the slots
    if (threadIdx.x % 32 == 0) warp_partials[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_partials[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v = op(v, warp_partials[w]);
  }
  return v;
}

}  // namespace kernels
