// ch04/one_shot.cuh: the one-shot all-reduce kernel over peer memory and its flag protocol, with
// no harness code, for the two programs that run it: ch04/allreduce_small (one process drives
// every GPU, peer pointers from cudaDeviceEnablePeerAccess) and mpi/allreduce_mpi.cu (one process
// per GPU, the peers' buffers opened from CUDA IPC handles). The kernel needs only every GPU's
// input and flags as pointers this GPU can dereference; where they come from is the caller's.
//
// One kernel per GPU and call: a flag exchange with every peer, then each thread sums 16 bytes of
// all N inputs in GPU order (every GPU gets the same bits) and writes them to this GPU's output,
// then a second flag exchange.
// The protocol: every GPU's memory holds a flag slot per (block, peer) that the peer's block
// writes, and each block's count of calls (its epoch, kept on the GPU: no host counter, so a
// captured graph would stay correct). Block b of GPU r starts by storing epoch e into slot (b, r)
// of every GPU (st.release.sys) and waits (ld.acquire.sys, then __syncthreads) until block b of
// every peer has stored e into its slots: no GPU reads a peer's input before that peer's kernel
// has started, that is before the earlier work on the peer's stream (whatever wrote the input) has
// finished. At its end the block exchanges e the same way in a second set of slots, after all its
// threads' reads: no GPU's kernel ends, and lets later work on its stream overwrite its input,
// while a peer still reads it. Block b reads the same elements on every GPU (every GPU must launch
// the same grid with the same n and n4), so pairing blocks across GPUs covers every read. A grid
// has at most as many blocks as the smallest GPU has SMs (512 threads: one fits on any SM), so all
// of it is resident at once and no block waits on one that cannot start. Out of place only: a GPU
// writing its output over its input would race with its peers' reads. A wait over 5 s traps, so a
// broken exchange fails the run instead of hanging it (it also traps under a tool that serialises
// the GPUs' kernels: the exchange needs all N running at once).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace ch04::one_shot {

inline constexpr int kMaxGpus = 8;      // flag slots per block; kernels for 2..8 GPUs
inline constexpr int kThreads = 512;    // per block
inline constexpr int kMaxBlocks = 256;  // flag slots per GPU; grids use min(SMs, this)
inline constexpr uint64_t kWaitLimitNs = uint64_t{5'000'000'000};

// In every GPU's memory, zeroed before any GPU's first call. start[b][j] / end[b][j]: the last
// call in which block b of GPU j started / finished reading (written by GPU j); calls[b]: this
// GPU's block b's calls so far.
struct Signals {
  uint32_t start[kMaxBlocks][kMaxGpus];
  uint32_t end[kMaxBlocks][kMaxGpus];
  uint32_t calls[kMaxBlocks];
};
struct Args {
  const float* in[kMaxGpus];   // every GPU's input, as this GPU reaches it (peer or IPC pointer)
  Signals* signals[kMaxGpus];  // every GPU's flags, the same way
  float* out;                  // this GPU's output
  int rank;                    // this GPU's index
  int64_t n, n4;               // floats; float4s read as vectors (0: none)
};

__device__ inline void store_release_sys(uint32_t* flag, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}
__device__ inline uint32_t load_acquire_sys(const uint32_t* flag) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}
__device__ inline uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread j < N of the block tells GPU j that this block reached `epoch`, then waits until block
// blockIdx.x of GPU j has said the same (its own slot included: j == rank returns at once).
template <int N>
__device__ void exchange(const Args& a, bool at_end, uint32_t epoch) {
  const int j = threadIdx.x, b = blockIdx.x;
  if (j >= N) return;
  Signals* peer = a.signals[j];
  store_release_sys(at_end ? &peer->end[b][a.rank] : &peer->start[b][a.rank], epoch);
  Signals* self = a.signals[a.rank];
  const uint32_t* mine = at_end ? &self->end[b][j] : &self->start[b][j];
  const uint64_t since = globaltimer_ns();
  while (int32_t(load_acquire_sys(mine) - epoch) < 0)  // wrap-safe: epochs only grow
    if (globaltimer_ns() - since > kWaitLimitNs) {
      printf("ch04 one-shot all-reduce: GPU %d block %d waited 5 s for GPU %d (%s, call %u)\n",
             a.rank, b, j, at_end ? "end" : "start", epoch);
      __trap();
    }
}

template <int N>
__global__ void __launch_bounds__(kThreads) sum(Args a) {
  const uint32_t epoch = a.signals[a.rank]->calls[blockIdx.x] + 1;
  exchange<N>(a, false, epoch);
  __syncthreads();  // the acquire above orders every thread's reads below
  const int64_t first = blockIdx.x * int64_t(kThreads) + threadIdx.x,
                stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = first; i < a.n4; i += stride) {
    float4 v[N];
#pragma unroll
    for (int g = 0; g < N; ++g)
      v[g] = __ldcg(reinterpret_cast<const float4*>(a.in[g]) + i);  // all in flight
    float4 total = v[0];
#pragma unroll
    for (int g = 1; g < N; ++g)
      total = make_float4(total.x + v[g].x, total.y + v[g].y, total.z + v[g].z, total.w + v[g].w);
    reinterpret_cast<float4*>(a.out)[i] = total;
  }
  for (int64_t i = 4 * a.n4 + first; i < a.n; i += stride) {  // the tail (or all, when unaligned)
    float total = __ldcg(a.in[0] + i);
#pragma unroll
    for (int g = 1; g < N; ++g) total += __ldcg(a.in[g] + i);
    a.out[i] = total;
  }
  __syncthreads();  // every thread of the block has read its share of every peer
  exchange<N>(a, true, epoch);
  if (threadIdx.x == 0) a.signals[a.rank]->calls[blockIdx.x] = epoch;  // every thread read it above
}

using Kernel = void (*)(Args);
// The kernel for `gpus` GPUs (2..kMaxGpus), nullptr otherwise.
inline Kernel kernel_for(int gpus) {
  static const Kernel kernels[kMaxGpus + 1] = {nullptr, nullptr, sum<2>, sum<3>, sum<4>,
                                               sum<5>,  sum<6>,  sum<7>, sum<8>};
  return gpus >= 2 && gpus <= kMaxGpus ? kernels[gpus] : nullptr;
}

// The largest grid `device` may run: its SM count, at most kMaxBlocks. Every GPU of an all-reduce
// must launch the same grid, so the caller takes the minimum over all of them.
inline cudaError_t max_blocks(int device, int* blocks) {
  int sms = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  *blocks = std::min(sms, kMaxBlocks);
  return e;
}

// Sets a.n and a.n4 for an all-reduce of `count` floats (float4 loads only when `aligned`: every
// GPU's input and output on 16 bytes, which every GPU must agree on) and returns its grid: a block
// per kThreads items (float4s, then the tail's floats), at least 1 and at most `max_blocks`.
inline int plan(Args& a, int64_t count, bool aligned, int max_blocks) {
  a.n = count;
  a.n4 = aligned ? count / 4 : 0;
  const int64_t items = a.n4 + (count - 4 * a.n4);
  return int(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, max_blocks));
}

}  // namespace ch04::one_shot
