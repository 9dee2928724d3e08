// ch20/staged_attention.cuh: the megakernel's attention item with the chunk's K and V rows staged
// in shared memory by the copy engine, so that a block has its chunk in flight at once.
//
// decode::attend_split (kernels/decode_attention.cuh) keeps a warp's keys in flight in registers,
// 4 keys' K and V a lane: 32 KB a block per step of 64 keys, each step's math waiting for its own
// loads (one query leaves no registers to hold a step ahead: under the megakernel's 128-register
// cap that spilled, ch20's README "Tried and not kept"). In the megakernel at batch 1 a block has
// one 512-key item and an SM two blocks, so the attention phase is 8 trips to L2 in a row. Here
// thread 0 asks the copy engine for the item's first kStages steps at once (cp.async.bulk: one
// copy of a step's contiguous K rows and one of its V rows, both completing on the step's
// mbarrier); the warps fold each step out of shared memory with the same math (decode::fold_keys)
// and, once every warp has read it, thread 0 refills its slot with the step kStages on. The bytes
// in flight are the shared memory's (96 KB a block), not registers.
//
// Shared memory is the megakernel's, which the projections' prologues write with ordinary stores
// before and after the attention phase: Stages::open orders those stores before the copy
// engine's writes (fence.proxy.async) and initialises the barriers; Stages::close invalidates the
// barriers once every copy has been waited for, so the next phase may store over them.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <kernels/decode_attention.cuh>
#include <kernels/tma.cuh>

namespace ch20::staged {

namespace decode = kernels::decode;
using decode::kHeadDim;
constexpr int kStepKeys = decode::keys_per_cta_step(1);  // 64: 8 keys for each of the 8 warps
constexpr int kStages = 3;
constexpr int kRowVectors = decode::kLanesPerKey;  // a row: 16 vectors of 8 BF16
constexpr uint32_t kRowBytes = kHeadDim * sizeof(__nv_bfloat16);
static_assert(decode::keys_per_lane(1) * 2 * decode::kWarps == kStepKeys,
              "a step: every warp once");

struct Smem {
  uint4 k[kStages][kStepKeys][kRowVectors];
  uint4 v[kStages][kStepKeys][kRowVectors];
  uint64_t full[kStages];  // stage slot s: its K and V bytes have landed
  decode::SplitSmem<1> split;
};

// The slots' barriers over one attention phase. Steps are numbered across the block's items
// (`used`), so a slot's parity follows from the count alone.
class Stages {
 public:
  // Every thread of the block, at the phase's start.
  __device__ explicit Stages(Smem& s) : s_(s) {
    kernels::tma::fence_proxy_async_shared();  // this thread's earlier stores, before the copies
    if (threadIdx.x == 0) {
      for (int i = 0; i < kStages; ++i) kernels::tma::mbarrier_init(&s.full[i], 1);
      kernels::tma::fence_barrier_init();
    }
    __syncthreads();
  }

  // Every thread of the block, after its last item: every copy issued has been waited for.
  __device__ void close() {
    __syncthreads();
    if (threadIdx.x == 0)
      for (int i = 0; i < kStages; ++i) kernels::tma::mbarrier_inval(&s_.full[i]);
    __syncthreads();
  }

  // Split `split` of pair bh (kv.pair: GQA rows, every query sees all keys), one query, as
  // decode::attend_split<1> computes it: the partial (m, l, o) into a.part_ml / a.part_o.
  template <class Kv>
  __device__ void attend(const decode::Args& a, const Kv& kv, int64_t bh, int split) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int half = lane / decode::kLanesPerKey, part = lane % decode::kLanesPerKey;
    const auto keys = kv.pair(bh);
    const int64_t begin = split * a.chunk, end = min(begin + a.chunk, keys.n_k);
    if (begin >= end) return;  // the whole block: merge_pair's loop skips no chunk that holds keys
    const int steps = int((end - begin + kStepKeys - 1) / kStepKeys);
    // Thread 0 issues the first steps before anything waits: q's load below overlaps them.
    auto issue = [&](int step) {
      const int slot = (used_ + step) % kStages;
      const int64_t first = begin + int64_t{step} * kStepKeys;
      const uint32_t bytes = uint32_t(min(int64_t{kStepKeys}, end - first)) * kRowBytes;
      const int64_t row = keys.row(first);
      kernels::tma::arrive_expect_tx(&s_.full[slot], 2 * bytes);
      kernels::tma::load_1d(s_.k[slot], kv.k + row * kHeadDim, bytes, &s_.full[slot]);
      kernels::tma::load_1d(s_.v[slot], kv.v + row * kHeadDim, bytes, &s_.full[slot]);
    };
    if (threadIdx.x == 0)
      for (int step = 0; step < min(steps, kStages); ++step) issue(step);
    const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
    for (int i = threadIdx.x; i < kHeadDim; i += decode::kThreads)
      s_.split.q[0][i] = __bfloat162float(a.q[(bh * a.n_q + a.q_first) * kHeadDim + i]) * scale;
    __syncthreads();

    constexpr int kKeys = decode::keys_per_lane(1);
    float m[1] = {kernels::kEmptyMax}, l[1] = {0.0f}, o[1][8] = {};
    for (int step = 0; step < steps; ++step) {
      const int slot = (used_ + step) % kStages;
      kernels::tma::wait_parity(&s_.full[slot], uint32_t((used_ + step) / kStages) & 1u);
      const int64_t key0 = begin + int64_t{step} * kStepKeys + warp * decode::keys_per_warp_step(1);
      uint4 k_raw[kKeys], v_raw[kKeys];
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        const int row = warp * decode::keys_per_warp_step(1) + 2 * u + half;
        const bool present = key0 + 2 * u + half < end;  // past `end`: the slot's stale rows
        k_raw[u] = present ? s_.k[slot][row][part] : make_uint4(0, 0, 0, 0);
        v_raw[u] = present ? s_.v[slot][row][part] : make_uint4(0, 0, 0, 0);
      }
      decode::fold_keys<1, decode::Bf16Rows>(k_raw, v_raw, half, part, key0, end, end, 0,
                                             s_.split.q, m, l, o);
      if (step + kStages < steps) {
        __syncthreads();  // every warp has read the slot
        if (threadIdx.x == 0) issue(step + kStages);
      }
    }
    used_ += uint32_t(steps);
    decode::finish_pass<1, false>(a, kv, bh, split, m, l, o, s_.split.o, s_.split.ml);
  }

 private:
  Smem& s_;
  uint32_t used_ = 0;  // steps of earlier items: slot and parity of the next
};

}  // namespace ch20::staged
