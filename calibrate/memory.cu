// calibrate/memory: the device-memory ceilings (HBM copy, read, write, cudaMemcpy D2D), the L2
// and shared-memory bandwidth. Each case's `gbps` counter is the ceiling `bench calibrate`
// stores (calibrate/ceilings.hpp lists the methods).
//
//   build/<preset>/calibrate/calibrate --benchmark_filter='hbm|memcpy|l2|smem'
#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

#include <algorithm>

namespace {

constexpr int kBlock = 256;
constexpr int kUnroll = 4;                      // independent 16-byte accesses per thread
constexpr int64_t kHbmFloats = int64_t{1} << 29;  // 2 GiB per buffer: 40x the H100's L2

int resident_blocks() {  // a full wave of 256-thread blocks (2048 threads per SM)
  int device = 0, sms = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * 8;
}

// ---- copy: 16-byte loads, all in flight, then 16-byte stores ----------------------------------
struct Copy {
  int64_t n;
  bench::DeviceSpan<const float> src;
  bench::DeviceSpan<float> dst;
  explicit Copy(bench::Setup& s)
      : n(s.size("n", kHbmFloats, 1'000'003)),
        src(s.input<float>("src", n, bench::uniform(-1, 1))),
        dst(s.output<float>("dst", n)) {
    s.bytes(2.0 * n * sizeof(float), bench::ceiling::hbm_copy);
  }
};

__global__ void copy_vec4(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const int64_t n4 = n / 4;
  const auto* s4 = reinterpret_cast<const float4*>(src);
  auto* d4 = reinterpret_cast<float4*>(dst);
  const int64_t base = blockIdx.x * int64_t{kBlock * kUnroll} + threadIdx.x;
  float4 v[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    if (base + k * kBlock < n4) v[k] = s4[base + k * kBlock];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    if (base + k * kBlock < n4) d4[base + k * kBlock] = v[k];
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) dst[4 * n4 + threadIdx.x] = src[4 * n4 + threadIdx.x];
}

void launch_copy(const Copy& w, cudaStream_t stream) {
  const int64_t blocks = (w.n / 4 + kBlock * kUnroll - 1) / (kBlock * kUnroll) + 1;
  copy_vec4<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_memcpy(const Copy& w, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), w.src.data(), w.dst.bytes(), cudaMemcpyDeviceToDevice, stream));
}

void copy_reference(const Copy& w, bench::HostData& h) {
  auto src = h.input<float>("src");
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = src[i];
}

BENCH_EXAMPLE(calibrate, hbm_copy_gbps, Copy)
    .baseline("vec4_copy_kernel", launch_copy)
    .reference(copy_reference)
    .tolerance(bench::exact());

BENCH_EXAMPLE(calibrate, memcpy_d2d_gbps, Copy)
    .baseline("cudaMemcpyAsync_d2d", launch_memcpy)
    .reference(copy_reference)
    .tolerance(bench::exact());

// ---- read: a grid of one full wave sums 16-byte loads into one int64 per block ---------------
// Integer inputs make the sums exact. Thread t of the grid reads int4 elements t, t + T, t + 2T,
// ... (T threads in all), so element i belongs to block (i mod T) / kBlock; the n mod 4 tail
// belongs to block 0. `reps` re-reads the whole buffer (the L2 case); `L2Only` bypasses L1.
struct Sum {
  int64_t n;
  int reps;
  int blocks;
  bench::DeviceSpan<const int32_t> src;
  bench::DeviceSpan<int64_t> partial;
  Sum(bench::Setup& s, int64_t timing_n, int timing_reps, const char* ceiling)
      : n(s.size("n", timing_n, 1'000'003)),
        reps(static_cast<int>(s.size("reps", timing_reps, 3))),
        blocks(resident_blocks()),
        src(s.input<int32_t>("src", n, bench::integers(-9, 9))),
        partial(s.output<int64_t>("partial", blocks)) {
    s.param("blocks", blocks);
    s.bytes(double(reps) * n * sizeof(int32_t) + blocks * sizeof(int64_t), ceiling);
  }
};
struct HbmRead : Sum {
  explicit HbmRead(bench::Setup& s) : Sum(s, kHbmFloats, 1, bench::ceiling::hbm_read) {}
};
struct L2Read : Sum {  // 16 MiB: a third of the H100's 50 MiB L2, re-read 16 times per launch
  explicit L2Read(bench::Setup& s) : Sum(s, int64_t{1} << 22, 16, bench::ceiling::l2) {}
};

template <bool L2Only>
__device__ int4 load(const int4* p) {
  if constexpr (L2Only) return __ldcg(p);
  else return *p;
}

__device__ int64_t block_sum(int64_t v) {  // every thread gets the block's total in thread 0
  __shared__ int64_t warp_sums[kBlock / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  if (threadIdx.x == 0)
    for (int i = 0; i < kBlock / 32; ++i) v += warp_sums[i];
  return v;
}

template <bool L2Only>
__global__ void sum_vec4(const int32_t* __restrict__ src, int64_t n, int reps, int64_t* __restrict__ partial) {
  const int64_t n4 = n / 4, threads = int64_t{gridDim.x} * kBlock;
  const auto* s4 = reinterpret_cast<const int4*>(src);
  const int64_t t = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  int acc = 0;  // per thread at most 16 x 2^22/T x 4 x 9 fits easily
  int64_t acc64 = 0;
  for (int r = 0; r < reps; ++r) {
    int64_t i = t;
    for (; i + (kUnroll - 1) * threads < n4; i += kUnroll * threads) {
      int4 v[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) v[k] = load<L2Only>(s4 + i + k * threads);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
    }
    for (; i < n4; i += threads) {
      const int4 v = load<L2Only>(s4 + i);
      acc += v.x + v.y + v.z + v.w;
    }
    acc64 += acc;
    acc = 0;
  }
  if (t == 0)
    for (int64_t j = 4 * n4; j < n; ++j) acc64 += int64_t{reps} * src[j];
  const int64_t total = block_sum(acc64);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <class W, bool L2Only>
void launch_sum(const W& w, cudaStream_t stream) {
  sum_vec4<L2Only><<<w.blocks, kBlock, 0, stream>>>(w.src.data(), w.n, w.reps, w.partial.data());
  BENCH_CHECK_LAUNCH();
}

template <class W>
void sum_reference(const W& w, bench::HostData& h) {
  auto src = h.input<int32_t>("src");
  auto partial = h.expected("partial");
  std::fill(partial.begin(), partial.end(), 0.0);
  const int64_t n4 = w.n / 4, threads = int64_t{w.blocks} * kBlock;
  for (int64_t i = 0; i < n4; ++i)
    partial[(i % threads) / kBlock] += double(w.reps) * (src[4 * i] + src[4 * i + 1] + src[4 * i + 2] + src[4 * i + 3]);
  for (int64_t j = 4 * n4; j < w.n; ++j) partial[0] += double(w.reps) * src[j];
}

BENCH_EXAMPLE(calibrate, hbm_read_gbps, HbmRead)
    .baseline("vec4_sum_kernel", launch_sum<HbmRead, false>)
    .reference(sum_reference<HbmRead>)
    .tolerance(bench::exact());

// ---- read, chunked: one block per contiguous 64 KiB, 4 streaming 16-byte loads in flight -------
// The grid-strided read above sweeps the whole buffer with one wave; on the H200 a kernel that
// reads each block's rows contiguously (ch08/hbm_streaming) measured above it (ch08's README,
// 'H200', has the figures). A ceiling is the most the GPU was seen to do, so `bench calibrate`
// stores the faster of the two read forms as hbm_read_gbps. Block b sums int4 elements
// [b * kChunk, (b + 1) * kChunk); the n mod 4 tail belongs to block 0.
constexpr int64_t kChunk = 4096;  // int4 elements per block: 64 KiB
struct ChunkedRead {
  int64_t n;
  int64_t blocks;
  bench::DeviceSpan<const int32_t> src;
  bench::DeviceSpan<int64_t> partial;
  explicit ChunkedRead(bench::Setup& s)
      : n(s.size("n", kHbmFloats, 1'000'003)),
        blocks((n / 4 + kChunk - 1) / kChunk + (n / 4 == 0)),
        src(s.input<int32_t>("src", n, bench::integers(-9, 9))),
        partial(s.output<int64_t>("partial", blocks)) {
    s.bytes(double(n) * sizeof(int32_t) + blocks * sizeof(int64_t), bench::ceiling::hbm_read);
  }
};

__global__ void sum_chunks(const int32_t* __restrict__ src, int64_t n, int64_t* __restrict__ partial) {
  const int64_t n4 = n / 4, begin = blockIdx.x * kChunk, end = begin + kChunk < n4 ? begin + kChunk : n4;
  const auto* s4 = reinterpret_cast<const uint4*>(src);
  int acc = 0;  // at most 4096 x 4 x 9 per block: fits
  for (int64_t i = begin + threadIdx.x; i < end; i += kUnroll * kBlock) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      v[k] = i + k * kBlock < end ? kernels::load_stream(s4 + i + k * kBlock) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc += int(v[k].x) + int(v[k].y) + int(v[k].z) + int(v[k].w);
  }
  int64_t total = acc;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int64_t j = 4 * n4; j < n; ++j) total += src[j];
  total = block_sum(total);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

void launch_chunks(const ChunkedRead& w, cudaStream_t stream) {
  sum_chunks<<<static_cast<unsigned>(w.blocks), kBlock, 0, stream>>>(w.src.data(), w.n, w.partial.data());
  BENCH_CHECK_LAUNCH();
}

void chunks_reference(const ChunkedRead& w, bench::HostData& h) {
  auto src = h.input<int32_t>("src");
  auto partial = h.expected("partial");
  std::fill(partial.begin(), partial.end(), 0.0);
  const int64_t n4 = w.n / 4;
  for (int64_t i = 0; i < n4; ++i)
    partial[i / kChunk] += double(src[4 * i]) + src[4 * i + 1] + src[4 * i + 2] + src[4 * i + 3];
  for (int64_t j = 4 * n4; j < w.n; ++j) partial[0] += src[j];
}

BENCH_EXAMPLE(calibrate, hbm_read_chunked_gbps, ChunkedRead)
    .baseline("vec4_chunk_sum_kernel", launch_chunks)
    .reference(chunks_reference)
    .tolerance(bench::exact());

// Hot: back-to-back launches keep the 16 MiB resident, so every read after the first hits L2.
BENCH_EXAMPLE(calibrate, l2_gbps, L2Read)
    .baseline("vec4_ldcg_sum_kernel", launch_sum<L2Read, true>)
    .reference(sum_reference<L2Read>)
    .tolerance(bench::exact())
    .mode(bench::Mode::hot);

// ---- write: 16-byte stores of value * (i mod 1024), nothing read but one scalar ----------------
struct Write {
  int64_t n;
  bench::DeviceSpan<const float> value;
  bench::DeviceSpan<float> dst;
  explicit Write(bench::Setup& s)
      : n(s.size("n", kHbmFloats, 1'000'003)),
        value(s.input<float>("value", 1, bench::uniform(1, 2))),
        dst(s.output<float>("dst", n)) {
    s.bytes(double(n) * sizeof(float), bench::ceiling::hbm_write);
  }
};

__global__ void write_vec4(const float* __restrict__ value, float* __restrict__ dst, int64_t n) {
  const float a = *value;
  const int64_t n4 = n / 4;
  auto* d4 = reinterpret_cast<float4*>(dst);
  const int64_t base = blockIdx.x * int64_t{kBlock * kUnroll} + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t i = base + k * kBlock;
    const float f = static_cast<float>((4 * i) & 1023);
    if (i < n4) d4[i] = make_float4(a * f, a * (f + 1), a * (f + 2), a * (f + 3));
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
    const int64_t j = 4 * n4 + threadIdx.x;
    dst[j] = a * static_cast<float>(j & 1023);
  }
}

void launch_write(const Write& w, cudaStream_t stream) {
  const int64_t blocks = (w.n / 4 + kBlock * kUnroll - 1) / (kBlock * kUnroll) + 1;
  write_vec4<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.value.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void write_reference(const Write& w, bench::HostData& h) {
  const double a = h.input<float>("value")[0];
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = a * static_cast<double>(i & 1023);
}

BENCH_EXAMPLE(calibrate, hbm_write_gbps, Write)
    .baseline("vec4_store_kernel", launch_write)
    .reference(write_reference)
    .tolerance(bench::relative_l2(1e-6));  // one float rounding of a * f per element

// ---- shared memory: each block stages a 16 KiB tile, then reads it `reps` times -------------
// Lane t of a block reads int4 (t + r * kBlock) mod kTile4 at step r: a warp reads 512
// consecutive bytes, four conflict-free wavefronts. The loads are ld.volatile.shared: an
// `asm volatile` plain ld.shared is not enough, ptxas merged the repeats (step r and r + 4 read
// the same address) and the first H100 run read twice the hardware's 128 bytes per clock per SM
// (ch02's README, 'Tried and not kept'). After reps steps (a multiple of kTile4 / kBlock = 4)
// each int4 of the tile was read reps / 4 times, so block b's sum is reps / 4 x the sum of its
// tile.
constexpr int kTile4 = 1024;  // int4 elements per tile: 16 KiB

struct Smem {
  int blocks;
  int reps;
  bench::DeviceSpan<const int32_t> tiles;
  bench::DeviceSpan<int64_t> partial;
  explicit Smem(bench::Setup& s)
      : blocks(static_cast<int>(s.size("blocks", resident_blocks(), 37))),
        reps(static_cast<int>(s.size("reps", 4096, 8))),
        tiles(s.input<int32_t>("tiles", int64_t{blocks} * kTile4 * 4, bench::integers(-9, 9))),
        partial(s.output<int64_t>("partial", blocks)) {
    s.bytes(double(blocks) * kBlock * reps * 16, bench::ceiling::smem);
  }
};

__global__ void smem_read(const int32_t* __restrict__ tiles, int reps, int64_t* __restrict__ partial) {
  __shared__ int4 tile[kTile4];
  const auto* src = reinterpret_cast<const int4*>(tiles) + int64_t{blockIdx.x} * kTile4;
  for (int i = threadIdx.x; i < kTile4; i += kBlock) tile[i] = src[i];
  __syncthreads();
  const auto base = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  int a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma unroll 8
  for (int r = 0; r < reps; ++r) {
    const unsigned addr = base + ((threadIdx.x + r * kBlock) % kTile4) * 16;
    int x, y, z, w;
    asm volatile("ld.volatile.shared.v4.s32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(addr));
    a0 += x, a1 += y, a2 += z, a3 += w;
  }
  const int64_t total = block_sum(int64_t{a0} + a1 + a2 + a3);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

void launch_smem(const Smem& w, cudaStream_t stream) {
  smem_read<<<w.blocks, kBlock, 0, stream>>>(w.tiles.data(), w.reps, w.partial.data());
  BENCH_CHECK_LAUNCH();
}

void smem_reference(const Smem& w, bench::HostData& h) {
  auto tiles = h.input<int32_t>("tiles");
  auto partial = h.expected("partial");
  for (int b = 0; b < w.blocks; ++b) {
    double sum = 0;
    for (int64_t i = 0; i < int64_t{kTile4} * 4; ++i) sum += tiles[int64_t{b} * kTile4 * 4 + i];
    partial[b] = sum * (w.reps / (kTile4 / kBlock));
  }
}

BENCH_EXAMPLE(calibrate, smem_gbps, Smem)
    .baseline("ld_shared_v4_kernel", launch_smem)
    .reference(smem_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::hot);

}  // namespace
