// ch10/stream_k.cuh: how persistent_gemm's "persistent_stream_k" adds up a tile that several CTAs
// computed parts of (stream_k_plan.hpp says who runs which part).
//
// A CTA that ran a part other than the head writes each consumer's FP32 accumulators to its own
// slot of a global workspace, in the wgmma fragment order: thread i of consumer c writes its 128
// floats, and thread i of consumer c of the finishing CTA holds the same 128 elements of the tile,
// so it reads them back unchanged, no layout conversion (32 float4 per thread, a warpgroup's 128
// threads side by side, so every access is a contiguous 2 KiB). Then one thread publishes a
// per-(CTA, consumer) flag with a release store, after a warpgroup barrier (the barrier orders the
// other threads' writes before it; the release is cumulative).
//
// In the finishing CTA the producer's thread waits, not the consumers: it has issued its last
// copy by then, and a spin loop next to the consumers' 128 accumulators made ptxas spill. For each
// part it waits for the flag with acquire loads and resets it to 0 for the next launch (it is the
// flag's only reader, and the next launch starts after this one ends), then arrives once on each
// consumer's `ready` mbarrier (a release; the consumers' wait on it is an acquire, which carries
// the parts' visibility on). The consumers read the parts past L1 (ld.global.cg: another SM wrote
// them), add them in CTA order (deterministic) and store the tile as any other.
//
// A wait that never ends would be a bug (every contributor is resident: the grid is the resident
// CTA count; a real wait is at most a tile's time, ~100 us): after 2^24 polls (seconds) the
// kernel traps, so the harness reports a CUDA error naming it instead of hanging.
//
// sm_90a device code, like kernels/ws_gemm.cuh: call it only under BENCH_SM90A_DEVICE.
#pragma once

#include <kernels/flags.cuh>
#include <kernels/tma_store_epilogue.cuh>
#include <kernels/ws_gemm.cuh>

#include "stream_k_plan.hpp"

namespace ch10::stream_k {
namespace ws = kernels::ws;  // the tile and the TMA-store epilogue this file builds on

constexpr int kFloat4PerThread = 128 / 4;  // a consumer thread's 64 x 256 / 128 accumulators
// Floats of one CTA's workspace slot: both consumers' accumulators.
constexpr int64_t kSlotFloats = int64_t{ws::kConsumers} * ws::kWarpgroup * 128;

// persistent_tma_store's shared memory and one mbarrier per consumer: "the parts of the tile you
// finish have all been published". 226 KiB, with the alignment room the 227 KiB an SM allows.
struct alignas(1024) Smem {
  ws::TmaStoreSmem base;  // first: init_ring's aligned base is this struct's
  uint64_t ready[ws::kConsumers];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;
static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM: at most 227 KiB");

// Consumer `cw`'s half of CTA `cta`'s workspace slot, as float4: [group of 4 floats][thread].
__device__ __forceinline__ float4* part_of(float* workspace, int cta, int cw) {
  return reinterpret_cast<float4*>(workspace + cta * kSlotFloats) +
         cw * kFloat4PerThread * ws::kWarpgroup;
}

// Consumer `cw` writes its accumulators to CTA `cta`'s slot and publishes them.
__device__ __forceinline__ void publish_partial(const float (&acc)[128], float* workspace,
                                                unsigned* flags, int cta, int cw) {
  const int thread = threadIdx.x % ws::kWarpgroup;
  float4* slot = part_of(workspace, cta, cw);
#pragma unroll
  for (int g = 0; g < kFloat4PerThread; ++g)
    slot[g * ws::kWarpgroup + thread] =
        make_float4(acc[4 * g], acc[4 * g + 1], acc[4 * g + 2], acc[4 * g + 3]);
  ws::warpgroup_sync(1 + cw);
  if (thread == 0)
    kernels::store_release<kernels::Scope::gpu>(&flags[cta * ws::kConsumers + cw], 1);
}

// The finishing CTA's producer thread: waits until CTA `cta` has published both consumers'
// parts, and resets the flags for the next launch.
__device__ __forceinline__ void wait_for_partials(unsigned* flags, int cta) {
  for (int cw = 0; cw < ws::kConsumers; ++cw) {
    unsigned* flag = &flags[cta * ws::kConsumers + cw];
    for (uint32_t polls = 0; kernels::load_acquire<kernels::Scope::gpu>(flag) == 0; ++polls)
      if (polls == (1u << 24)) __trap();  // a contributor that never publishes: a bug, not a wait
    *flag = 0;
  }
}

// Consumer `cw` of the finishing CTA adds CTA `cta`'s published partial to its own.
__device__ __forceinline__ void add_partial(float (&acc)[128], float* workspace, int cta, int cw) {
  const int thread = threadIdx.x % ws::kWarpgroup;
  const float4* slot = part_of(workspace, cta, cw);
#pragma unroll
  for (int g = 0; g < kFloat4PerThread; ++g) {
    const float4 v = __ldcg(&slot[g * ws::kWarpgroup + thread]);  // past L1: another SM wrote it
    acc[4 * g] += v.x, acc[4 * g + 1] += v.y, acc[4 * g + 2] += v.z, acc[4 * g + 3] += v.w;
  }
}

}  // namespace ch10::stream_k
