// ch07/async_prefetch: a 33-tap 1D convolution, out[i] = sum_t w[t] in[i + t - 16] (zero past
// the ends), staged through shared memory one tile at a time, without and with prefetching.
//
// Blocks of 1024 threads are persistent (as many as fit on the SMs at once) and each walks its
// share of 8192-output tiles. A tile's input (8192 + 32 halo floats) is staged in shared memory,
// then each thread computes 8 consecutive outputs from a 40-float register window: 264 FMAs per
// 32 bytes moved, about 40% of the time those bytes take at HBM speed, so hiding one behind the
// other is worth up to ~1.4x.
//   1. baseline: load tile k (global -> registers -> shared), __syncthreads, compute, write,
//      __syncthreads, next tile. While a block computes it has no loads in flight, and while it
//      waits for its loads it computes nothing; with one or two such blocks per SM, DRAM idles
//      during every compute phase and the FMA units idle during every load.
//   2. optimized: the same tiles, with a kStages-deep ring of shared-memory tiles filled by
//      cp.async (LDGSTS in SASS: global -> shared without passing through registers). While the
//      block computes tile k, tiles k+1 .. k+kStages-1 are on their way, so DRAM never idles.
// Same arithmetic in the same order: bitwise-identical results.
// The timing-size check uses a simple double-accumulating kernel (device_reference).
//
//   ./bench compare --chapter ch07 --example async_prefetch
#include <bench/bench.hpp>
#include <kernels/async_copy.cuh>
#include <kernels/occupancy.cuh>

#include <algorithm>

namespace {

constexpr int kRadius = 16;
constexpr int kTaps = 2 * kRadius + 1;
constexpr int kBlock = 1024;                     // one large block per SM (persistent)
constexpr int kPerThread = 8;                     // consecutive outputs per thread
constexpr int kTile = kBlock * kPerThread;        // outputs per tile
constexpr int kTileIn = kTile + 2 * kRadius;      // input floats per tile, halo included
constexpr int kChunks = kTileIn / 4;              // 16-byte chunks per tile
constexpr int kStages = 4;                        // prefetch ring depth
constexpr size_t kRingBytes = size_t{kStages} * kTileIn * sizeof(float);  // 131 KB
static_assert(kRadius % 4 == 0, "halo must keep tile starts 16-byte aligned");

struct Conv {
  int64_t n;
  bench::DeviceSpan<const float> in, w;
  bench::DeviceSpan<float> out;
  explicit Conv(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 100'003)),  // 1 GiB in, 1 GiB out; odd size to verify
        in(s.input<float>("in", n, bench::uniform(-1, 1))),
        w(s.input<float>("w", kTaps, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)) {
    s.bytes(2.0 * n * sizeof(float));
    s.flops(2.0 * kTaps * n, bench::ceiling::fp32);
  }
  int64_t tiles() const { return (n + kTile - 1) / kTile; }
};

// Input chunk c of the tile starting at output `first` covers in[first - kRadius + 4c, +4).
__device__ __forceinline__ int64_t chunk_start(int64_t first, int c) { return first - kRadius + 4 * c; }

// Computes the tile's kTile outputs from its staged input `s` (s[0] = in[first - kRadius]).
__device__ __forceinline__ void convolve_tile(const float* s, const float (&w)[kTaps], float* out,
                                              int64_t first, int64_t n) {
  const int j0 = threadIdx.x * kPerThread;
  float x[kPerThread + 2 * kRadius];
#pragma unroll
  for (int v = 0; v < (kPerThread + 2 * kRadius) / 4; ++v) {
    const float4 q = reinterpret_cast<const float4*>(s + j0)[v];
    x[4 * v] = q.x, x[4 * v + 1] = q.y, x[4 * v + 2] = q.z, x[4 * v + 3] = q.w;
  }
  float acc[kPerThread] = {};
#pragma unroll
  for (int t = 0; t < kTaps; ++t)
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) acc[k] = fmaf(w[t], x[k + t], acc[k]);
  const int64_t i0 = first + j0;
  if (i0 + kPerThread <= n) {
    reinterpret_cast<float4*>(out + i0)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    reinterpret_cast<float4*>(out + i0)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
  } else {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k)
      if (i0 + k < n) out[i0 + k] = acc[k];
  }
}

__device__ __forceinline__ void load_weights(const float* __restrict__ wg, float (&w)[kTaps]) {
#pragma unroll
  for (int t = 0; t < kTaps; ++t) w[t] = __ldg(wg + t);
}

__global__ void __launch_bounds__(kBlock) conv_sync(const float* __restrict__ in, const float* __restrict__ wg,
                                                   float* __restrict__ out, int64_t n, int64_t tiles) {
  __shared__ __align__(16) float s[kTileIn];
  float w[kTaps];
  load_weights(wg, w);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t first = tile * kTile;
    for (int c = threadIdx.x; c < kChunks; c += kBlock) {
      const int64_t g = chunk_start(first, c);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (g >= 0 && g + 4 <= n) {
        v = __ldg(reinterpret_cast<const float4*>(in + g));
      } else if (g >= 0 && g < n) {  // the last, partial chunk
        v.x = in[g];
        if (g + 1 < n) v.y = in[g + 1];
        if (g + 2 < n) v.z = in[g + 2];
      }
      reinterpret_cast<float4*>(s)[c] = v;
    }
    __syncthreads();
    convolve_tile(s, w, out, first, n);
    __syncthreads();
  }
}

// Queues this thread's chunks of `tile` into stage buffer `s` (zero-filled past the ends).
// Every source address is in bounds, zero fills included (they read from `in`: n >= 4 floats).
// The one chunk that straddles the end (n % 4 != 0) goes as four 4-byte copies: a 16-byte
// cp.async with src-size < 16 reads only the valid bytes, but memcheck checks all 16 and
// reported the read past the end (async_copy.cuh). One chunk per launch: the cost is nil.
__device__ __forceinline__ void prefetch_tile(float* s, const float* in, int64_t tile, int64_t n) {
  const int64_t first = tile * kTile;
  for (int c = threadIdx.x; c < kChunks; c += kBlock) {
    const int64_t g = chunk_start(first, c);
    if (g >= 0 && g + 4 <= n) {
      kernels::cp_async::copy16(s + 4 * c, in + g);
    } else if (g >= 0 && g < n) {  // the last, partial chunk
#pragma unroll
      for (int e = 0; e < 4; ++e)
        kernels::cp_async::copy4(s + 4 * c + e, in + (g + e < n ? g + e : g), g + e < n ? 4 : 0);
    } else {  // wholly before the start or past the end: zero fill
      kernels::cp_async::copy16(s + 4 * c, in, 0);
    }
  }
}

__global__ void __launch_bounds__(kBlock) conv_pipelined(const float* __restrict__ in, const float* __restrict__ wg,
                                                        float* __restrict__ out, int64_t n, int64_t tiles) {
  extern __shared__ __align__(16) float ring[];  // kStages tiles of kTileIn floats
  auto s = reinterpret_cast<float(*)[kTileIn]>(ring);
  float w[kTaps];
  load_weights(wg, w);
  const int64_t mine = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;  // this block's tiles
  auto tile_of = [&](int64_t k) { return blockIdx.x + k * gridDim.x; };
  for (int k = 0; k < kStages - 1; ++k) {  // prologue: kStages - 1 tiles in flight
    if (k < mine) prefetch_tile(s[k], in, tile_of(k), n);
    kernels::cp_async::commit();  // an empty group keeps the count uniform
  }
  for (int64_t k = 0; k < mine; ++k) {
    kernels::cp_async::wait<kStages - 2>();  // tile k has landed (for this thread's chunks)
    __syncthreads();                         // ... for every thread's; tile k-1 is consumed
    if (k + kStages - 1 < mine) prefetch_tile(s[(k + kStages - 1) % kStages], in, tile_of(k + kStages - 1), n);
    kernels::cp_async::commit();
    convolve_tile(s[k % kStages], w, out, tile_of(k) * kTile, n);
  }
}

void launch_sync(const Conv& w, cudaStream_t stream) {
  static const unsigned grid = kernels::resident_grid(conv_sync, kBlock);
  conv_sync<<<std::min<int64_t>(grid, w.tiles()), kBlock, 0, stream>>>(w.in.data(), w.w.data(), w.out.data(), w.n, w.tiles());
  BENCH_CHECK_LAUNCH();
}

void launch_pipelined(const Conv& w, cudaStream_t stream) {
  static const unsigned grid = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(conv_pipelined, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kRingBytes)));
    return kernels::resident_grid(conv_pipelined, kBlock, kRingBytes);
  }();
  conv_pipelined<<<std::min<int64_t>(grid, w.tiles()), kBlock, kRingBytes, stream>>>(w.in.data(), w.w.data(), w.out.data(), w.n, w.tiles());
  BENCH_CHECK_LAUNCH();
}

__global__ void conv_reference(const float* __restrict__ in, const float* __restrict__ w, float* __restrict__ out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  double acc = 0.0;
  for (int t = 0; t < kTaps; ++t) {
    const int64_t j = i + t - kRadius;
    if (j >= 0 && j < n) acc += double(w[t]) * double(in[j]);
  }
  out[i] = static_cast<float>(acc);
}

void launch_reference(const Conv& w, cudaStream_t stream) {
  conv_reference<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.in.data(), w.w.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void reference(const Conv& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto wt = h.input<float>("w");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) {
    double acc = 0.0;
    for (int t = 0; t < kTaps; ++t) {
      const int64_t j = i + t - kRadius;
      if (j >= 0 && j < w.n) acc += double(wt[t]) * double(in[j]);
    }
    out[i] = acc;
  }
}

BENCH_EXAMPLE(ch07, async_prefetch, Conv)
    .baseline("sync_staging", launch_sync)
    .optimized("cp_async_4_stage", launch_pipelined)
    .reference(reference)
    .device_reference(launch_reference);

}  // namespace
