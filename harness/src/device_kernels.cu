// The harness's own device code: input generation, checksums, L2 flush, the blocking kernel,
// the SM-clock probe and a spin kernel of known duration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "bench/check.hpp"
#include "device_kernels.hpp"

namespace bench::detail {
namespace {

__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline double unit_double(uint64_t bits) {  // in (0, 1]
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

__device__ double draw(Fill fill, uint64_t key) {
  const uint64_t h1 = mix64(key);
  switch (fill.kind) {
    case Fill::Kind::uniform:
      return fill.a + (fill.b - fill.a) * unit_double(h1);
    case Fill::Kind::normal: {
      const uint64_t h2 = mix64(h1 ^ 0x632be59bd9b4e019ull);
      const double r = sqrt(-2.0 * log(unit_double(h1)));
      return fill.a + fill.b * r * cospi(2.0 * unit_double(h2));
    }
    case Fill::Kind::integers: {
      const auto lo = static_cast<int64_t>(fill.a);
      const auto span = static_cast<uint64_t>(static_cast<int64_t>(fill.b) - lo + 1);
      return static_cast<double>(lo + static_cast<int64_t>(h1 % span));
    }
  }
  return 0.0;
}

template <class T>
__device__ T convert(double v) {
  if constexpr (std::is_same_v<T, __half>) return __double2half(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __double2bfloat16(v);
  else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) return __nv_fp8_e4m3(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_fp8_e5m2>) return __nv_fp8_e5m2(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <class T>
__global__ void fill_kernel(T* data, int64_t count, Fill fill, uint64_t seed, uint64_t salt) {
  const uint64_t base = mix64(seed ^ mix64(salt));
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x)
    data[i] = convert<T>(draw(fill, base + static_cast<uint64_t>(i)));
}

__global__ void checksum_kernel(const unsigned char* data, std::size_t bytes,
                                unsigned long long* accumulator) {
  unsigned long long local = 0;
  const std::size_t words = bytes / 8;
  const auto* w = reinterpret_cast<const uint64_t*>(data);  // cudaMalloc is 256-byte aligned
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words;
       i += std::size_t{gridDim.x} * blockDim.x)
    local += mix64(w[i] ^ mix64(i));
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (std::size_t i = words * 8; i < bytes; ++i) local += mix64(data[i] ^ mix64(~i));
  for (int offset = 16; offset > 0; offset /= 2) local += __shfl_down_sync(~0u, local, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(accumulator, local);
}

// The grid reads `count` vectors once, so that L2 holds nothing a timed kernel could reuse.
__device__ void read_to_flush(const uint4* data, std::size_t count, unsigned int* sink) {
  unsigned int acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never true; keeps the loads alive
}

__global__ void l2_flush_kernel(const uint4* data, std::size_t count, unsigned int* sink) {
  read_to_flush(data, count, sink);
}

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block of the hold (launch_blocking_kernel). Thread 0 counts the block in on a device
// counter (atomics on mapped host memory need PCIe atomics, which many hosts lack), and the block
// that completes the count writes the hold's ticket to mapped host memory: every block runs.
// Block 0 alone reads the host's release (mapped memory, one reader instead of one per block)
// and passes it on in device memory; every block ends once it sees its ticket released, so a
// later hold's ticket also releases an earlier one that is still waiting. A block that waits past
// the timeout writes its ticket to *timed_out and ends. The other threads only fill the SM's
// thread slots, waiting at the barrier; at most 32 registers a thread, so that registers never
// keep 4 blocks of 512 from sharing a 2048-thread SM. Released, the grid reads flags.flush once
// (if set): the L2 flush comes right before the start event, as it did when it was a kernel of its
// own queued there.
constexpr int kHoldThreads = 512;
__global__ void __launch_bounds__(kHoldThreads, 4)
    blocking_kernel(HoldFlags flags, unsigned long long ticket, uint64_t timeout_ns) {
  if (threadIdx.x == 0) {
    // One block needs no count (a one-block hold is not waited for, and may run beside another).
    if (gridDim.x == 1 || atomicAdd(flags.arrived, 1u) + 1 == gridDim.x) {
      *flags.running = ticket;
      __threadfence_system();
    }
    const uint64_t start = global_ns();
    if (blockIdx.x == 0) {
      while (*flags.release < ticket) {
        if (global_ns() - start > timeout_ns) {
          *flags.timed_out = ticket;
          break;
        }
        __nanosleep(1000);
      }
      atomicMax(flags.released, ticket);  // block 0 ends the wait of every block, timed out or not
    } else {
      while (atomicAdd(flags.released, 0ull) < ticket && global_ns() - start < 2 * timeout_ns)
        __nanosleep(500);
    }
  }
  __syncthreads();
  if (flags.flush != nullptr) read_to_flush(flags.flush, flags.flush_count, flags.flush_sink);
}

__global__ void clock_probe_kernel(long long cycles, float* mhz) {
  const uint64_t t0 = global_ns();
  const long long c0 = clock64();
  long long c1 = c0;
  while (c1 - c0 < cycles) c1 = clock64();
  const uint64_t t1 = global_ns();
  *mhz = t1 > t0 ? static_cast<float>(1e3 * static_cast<double>(c1 - c0) / static_cast<double>(t1 - t0))
                 : 0.0f;
}

__global__ void spin_kernel(uint64_t ns, unsigned long long* measured_ns) {
  const uint64_t start = global_ns();
  uint64_t now = start;
  while (now - start < ns) now = global_ns();
  if (threadIdx.x == 0) *measured_ns = now - start;
}

__global__ void empty_kernel() {}

// ---- device-checked samples: one output against its reference, as verify.cpp compares ----
template <class T>
__device__ double as_double(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, __nv_fp8_e4m3> || std::is_same_v<T, __nv_fp8_e5m2>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// The per-element rule of verify.cpp's compare_as, kept identical: a device verdict that
// differs from the host's only sends the sample to the host check.
__device__ void tally(double a, double e, const Tolerance& t, DeviceComparison& c) {
  if (!isfinite(a) && isfinite(e)) {
    ++c.non_finite;
    return;
  }
  const double d = fabs(a - e);
  c.err2 += d * d;
  c.ref2 += e * e;
  bool ok = true;
  if (t.kind == Tolerance::Kind::exact) ok = a == e || (isnan(a) && isnan(e));
  else if (t.kind == Tolerance::Kind::allclose) ok = d <= t.atol + t.rtol * fabs(e);
  c.mismatches += ok ? 0 : 1;
}

template <class V>
__device__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(~0u, v, offset);
  return v;
}

constexpr int kCompareBlock = 256;

// E: the reference's element type, T's own or float (an FP32 device reference's values).
template <class T, class E>
__global__ void __launch_bounds__(kCompareBlock)
    compare_kernel(const T* actual, const E* expected, int64_t count, Tolerance t,
                   DeviceComparison* sums) {
  DeviceComparison c{};
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, stride = int64_t{gridDim.x} * blockDim.x;
  int64_t vectorised = 0;  // elements the 16-byte loop covers
  if constexpr (std::is_same_v<T, E>) {
    constexpr int kPerVector = sizeof(uint4) / sizeof(T);
    const int64_t vectors = count / kPerVector;  // cudaMalloc'd buffers: 256-byte aligned
    const auto* actual4 = reinterpret_cast<const uint4*>(actual);
    const auto* expected4 = reinterpret_cast<const uint4*>(expected);
    for (int64_t v = first; v < vectors; v += stride) {
      const uint4 a4 = actual4[v], e4 = expected4[v];
      T a[kPerVector], e[kPerVector];
      memcpy(a, &a4, sizeof a4);
      memcpy(e, &e4, sizeof e4);
#pragma unroll
      for (int k = 0; k < kPerVector; ++k) tally(as_double(a[k]), as_double(e[k]), t, c);
    }
    vectorised = vectors * kPerVector;
  }
  for (int64_t i = vectorised + first; i < count; i += stride)
    tally(as_double(actual[i]), as_double(expected[i]), t, c);
  // Block sum: warps through shuffles, then the first warp over the warps' sums.
  __shared__ DeviceComparison warps[kCompareBlock / 32];
  c.mismatches = warp_sum(c.mismatches);
  c.non_finite = warp_sum(c.non_finite);
  c.err2 = warp_sum(c.err2);
  c.ref2 = warp_sum(c.ref2);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = c;
  __syncthreads();
  if (warp != 0) return;
  c = lane < kCompareBlock / 32 ? warps[lane] : DeviceComparison{};
  c.mismatches = warp_sum(c.mismatches);
  c.non_finite = warp_sum(c.non_finite);
  c.err2 = warp_sum(c.err2);
  c.ref2 = warp_sum(c.ref2);
  if (lane == 0) {
    if (c.mismatches) atomicAdd(&sums->mismatches, c.mismatches);
    if (c.non_finite) atomicAdd(&sums->non_finite, c.non_finite);
    atomicAdd(&sums->err2, c.err2);
    atomicAdd(&sums->ref2, c.ref2);
  }
}

int grid_for(int64_t count, int block) {
  const int64_t blocks = (count + block - 1) / block;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

void launch_fill(void* data, DType dtype, int64_t count, Fill fill, uint64_t seed, uint64_t salt,
                 cudaStream_t stream) {
  const int block = 256, grid = grid_for(count, block);
  switch (dtype) {
#define BENCH_FILL_CASE(tag, T) \
  case DType::tag: fill_kernel<T><<<grid, block, 0, stream>>>(static_cast<T*>(data), count, fill, seed, salt); break;
    BENCH_FILL_CASE(f64, double)
    BENCH_FILL_CASE(f32, float)
    BENCH_FILL_CASE(f16, __half)
    BENCH_FILL_CASE(bf16, __nv_bfloat16)
    BENCH_FILL_CASE(fp8_e4m3, __nv_fp8_e4m3)
    BENCH_FILL_CASE(fp8_e5m2, __nv_fp8_e5m2)
    BENCH_FILL_CASE(i64, int64_t)
    BENCH_FILL_CASE(i32, int32_t)
    BENCH_FILL_CASE(i8, int8_t)
    BENCH_FILL_CASE(u64, uint64_t)
    BENCH_FILL_CASE(u32, uint32_t)
    BENCH_FILL_CASE(u8, uint8_t)
#undef BENCH_FILL_CASE
  }
  BENCH_CHECK_LAUNCH();
}

void launch_checksum(const void* data, std::size_t bytes, unsigned long long* accumulator,
                     cudaStream_t stream) {
  const int block = 256, grid = grid_for(static_cast<int64_t>(bytes / 8), block);
  checksum_kernel<<<grid, block, 0, stream>>>(static_cast<const unsigned char*>(data), bytes,
                                              accumulator);
  BENCH_CHECK_LAUNCH();
}

void launch_l2_flush(const void* data, std::size_t bytes, unsigned int* sink, cudaStream_t stream) {
  const std::size_t count = bytes / sizeof(uint4);
  const int block = 512, grid = grid_for(static_cast<int64_t>(count), block);
  l2_flush_kernel<<<grid, block, 0, stream>>>(static_cast<const uint4*>(data), count, sink);
  BENCH_CHECK_LAUNCH();
}

unsigned blocking_kernel_blocks(int device) {
  int sms = 0, threads_per_sm = 0, per_sm = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  BENCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  BENCH_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, blocking_kernel, kHoldThreads, 0));
  return per_sm * kHoldThreads == threads_per_sm ? static_cast<unsigned>(sms * per_sm) : 0;
}

void launch_blocking_kernel(const HoldFlags& flags, unsigned long long ticket, unsigned blocks,
                            uint64_t timeout_ns, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(flags.arrived, 0, sizeof(unsigned), stream));
  blocking_kernel<<<blocks, kHoldThreads, 0, stream>>>(flags, ticket, timeout_ns);
  BENCH_CHECK_LAUNCH();
}

void launch_clock_probe(long long cycles, float* mhz, cudaStream_t stream) {
  clock_probe_kernel<<<1, 1, 0, stream>>>(cycles, mhz);
  BENCH_CHECK_LAUNCH();
}

void launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  BENCH_CHECK_LAUNCH();
}

void launch_spin(uint64_t ns, unsigned long long* measured_ns, cudaStream_t stream) {
  spin_kernel<<<1, 32, 0, stream>>>(ns, measured_ns);
  BENCH_CHECK_LAUNCH();
}

void launch_compare(const void* actual, DType actual_dtype, const void* expected,
                    DType expected_dtype, int64_t count, Tolerance tolerance,
                    DeviceComparison* sums, cudaStream_t stream) {
  if (expected_dtype != actual_dtype && expected_dtype != DType::f32)
    throw std::invalid_argument(std::string("a device comparison of ") + to_string(actual_dtype) +
                                " outputs against a " + to_string(expected_dtype) + " reference");
  const bool f32_reference = expected_dtype != actual_dtype;
  // Enough blocks to fill every SM several times over; more would only add atomics.
  constexpr int64_t kMaxBlocks = 2048;
  const int per_thread = f32_reference ? 1 : 16 / size_of(actual_dtype);
  const int grid = static_cast<int>(
      std::min<int64_t>(kMaxBlocks, grid_for(count / per_thread + 1, kCompareBlock)));
  switch (actual_dtype) {
#define BENCH_COMPARE_CASE(tag, T)                                                                 \
  case DType::tag:                                                                                 \
    if (f32_reference)                                                                             \
      compare_kernel<T, float><<<grid, kCompareBlock, 0, stream>>>(                                \
          static_cast<const T*>(actual), static_cast<const float*>(expected), count, tolerance,    \
          sums);                                                                                   \
    else                                                                                           \
      compare_kernel<T, T><<<grid, kCompareBlock, 0, stream>>>(                                    \
          static_cast<const T*>(actual), static_cast<const T*>(expected), count, tolerance, sums); \
    break;
    BENCH_COMPARE_CASE(f64, double)
    BENCH_COMPARE_CASE(f32, float)
    BENCH_COMPARE_CASE(f16, __half)
    BENCH_COMPARE_CASE(bf16, __nv_bfloat16)
    BENCH_COMPARE_CASE(fp8_e4m3, __nv_fp8_e4m3)
    BENCH_COMPARE_CASE(fp8_e5m2, __nv_fp8_e5m2)
    BENCH_COMPARE_CASE(i64, int64_t)
    BENCH_COMPARE_CASE(i32, int32_t)
    BENCH_COMPARE_CASE(i8, int8_t)
    BENCH_COMPARE_CASE(u64, uint64_t)
    BENCH_COMPARE_CASE(u32, uint32_t)
    BENCH_COMPARE_CASE(u8, uint8_t)
#undef BENCH_COMPARE_CASE
  }
  BENCH_CHECK_LAUNCH();
}

__global__ void bench_trace_marker() {}

void launch_trace_marker(cudaStream_t stream) {
  bench_trace_marker<<<1, 1, 0, stream>>>();
  BENCH_CHECK_LAUNCH();
}

}  // namespace bench::detail
