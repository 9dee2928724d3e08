// ch12/dynamic_parallelism: per-segment work whose sizes live on the device (a segmented sum of
// squares over 1024 segments of random length), launched three ways.
//
//   1. baseline: the host copies the segment lengths to pinned memory, synchronises, and
//      launches one right-sized kernel per segment: 1024 launches plus a device-to-host round
//      trip, for ~10 us of memory traffic. It blocks the host (declared blocks_host);
//   2. step `device_launches` (CUDA dynamic parallelism): one parent thread per segment
//      launches the right-sized child grid from the device, so the host needs no lengths. It
//      needs relocatable device code (-rdc=true and cudadevrt: ch12's CMakeLists asks
//      bench_add_chapter for it); built without it, the rung is SKIPPED with that reason;
//   3. optimized: the honest answer for this shape: no per-segment launches at all. One grid of
//      (max length / 1024) x segments blocks; a block past its segment's end returns at once.
//      The idle blocks cost a few ns each, far less than a launch, host- or device-side.
// Every variant zeroes the sums (4 KB memset) and adds block partials with atomicAdd.
//
//   ./bench compare --chapter ch12 --example dynamic_parallelism
#include <bench/bench.hpp>
#include <kernels/reference_rows.cuh>

namespace {

constexpr int kBlock = 256;
constexpr int kPerBlock = 4 * kBlock;  // elements one block sums

struct Segments {
  int64_t segments, capacity;  // segment s holds len[s] <= capacity values at s * capacity
  bench::DeviceSpan<const int32_t> len;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Segments(bench::Setup& s)
      : segments(s.size("segments", 1024, 37)),
        capacity(s.size("capacity", 16384, 3001)),
        len(s.input<int32_t>("len", segments, bench::integers(1, capacity))),
        in(s.input<float>("in", segments * capacity, bench::uniform(-1, 1))),
        out(s.output<float>("out", segments)) {
    s.bytes(static_cast<double>(segments) * capacity / 2 * sizeof(float));  // lengths average capacity / 2
  }
};

// Block (x, y) sums the squares of elements [x * 1024, x * 1024 + 1024) of segment base + y.
__global__ void __launch_bounds__(kBlock) sum_squares(const float* __restrict__ in, const int32_t* __restrict__ len,
                                                      float* __restrict__ out, int64_t capacity, int base) {
  const int segment = base + static_cast<int>(blockIdx.y);
  const int64_t n = len[segment];
  const int64_t start = int64_t{blockIdx.x} * kPerBlock;
  if (start >= n) return;  // past this segment's end: the flat launch's idle blocks
  const float* x = in + segment * capacity;
  float sum = 0;
  for (int64_t i = start + threadIdx.x; i < min(n, start + kPerBlock); i += kBlock) sum += x[i] * x[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ float warp_sums[kBlock / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (float v : warp_sums) total += v;
    atomicAdd(&out[segment], total);
  }
}

__host__ __device__ inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kPerBlock - 1) / kPerBlock); }

void zero_sums(const Segments& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(w.out.data(), 0, w.out.bytes(), s));
}

class HostLaunches {
 public:
  HostLaunches(const Segments& w, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaHostAlloc(&pinned_, w.len.bytes(), cudaHostAllocDefault));
  }
  ~HostLaunches() { cudaFreeHost(pinned_); }
  HostLaunches(const HostLaunches&) = delete;
  HostLaunches& operator=(const HostLaunches&) = delete;
  void operator()(const Segments& w, cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(pinned_, w.len.data(), w.len.bytes(), cudaMemcpyDeviceToHost, s));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    zero_sums(w, s);
    for (int seg = 0; seg < w.segments; ++seg) {
      sum_squares<<<blocks_for(pinned_[seg]), kBlock, 0, s>>>(w.in.data(), w.len.data(), w.out.data(), w.capacity, seg);
      BENCH_CHECK_LAUNCH();
    }
  }

 private:
  int32_t* pinned_ = nullptr;
};

#if defined(__CUDACC_RDC__)
__global__ void launch_children(const float* in, const int32_t* len, float* out, int64_t capacity, int segments) {
  const int seg = blockIdx.x * blockDim.x + threadIdx.x;
  if (seg < segments)  // the parent grid completes only once every child has
    sum_squares<<<blocks_for(len[seg]), kBlock, 0, cudaStreamFireAndForget>>>(in, len, out, capacity, seg);
}
void launch_device_side(const Segments& w, cudaStream_t s) {
  zero_sums(w, s);
  launch_children<<<static_cast<unsigned>((w.segments + 127) / 128), 128, 0, s>>>(w.in.data(), w.len.data(), w.out.data(),
                                                                                 w.capacity, static_cast<int>(w.segments));
  BENCH_CHECK_LAUNCH();
}
constexpr const char* kNoRdc = "";
#else
void launch_device_side(const Segments&, cudaStream_t) {}
constexpr const char* kNoRdc =
    "dynamic parallelism needs relocatable device code: build ch12 with "
    "bench_add_chapter(ch12 RELOCATABLE_DEVICE_CODE)";
#endif

void launch_flat(const Segments& w, cudaStream_t s) {
  zero_sums(w, s);
  const dim3 grid(blocks_for(w.capacity), static_cast<unsigned>(w.segments));
  sum_squares<<<grid, kBlock, 0, s>>>(w.in.data(), w.len.data(), w.out.data(), w.capacity, 0);
  BENCH_CHECK_LAUNCH();
}

void reference(const Segments& w, bench::HostData& h) {
  auto len = h.input<int32_t>("len");
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t seg = 0; seg < w.segments; ++seg) {
    double sum = 0;
    for (int64_t i = 0; i < len[seg]; ++i) sum += double(in[seg * w.capacity + i]) * in[seg * w.capacity + i];
    out[seg] = sum;
  }
}

// The timing-size check (docs/validity.md row 2): one block per segment, its sum of squares in
// double (kernels/reference_rows.cuh), from the host launch, sharing no code with the variants.
__global__ void reference_sum_squares(const float* in, const int32_t* len, float* out, int64_t capacity) {
  const float* segment = in + blockIdx.x * capacity;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < len[blockIdx.x]; i += kernels::kReferenceRowBlock) sum += double(segment[i]) * segment[i];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<float>(sum);
}

void device_reference(const Segments& w, cudaStream_t s) {
  reference_sum_squares<<<static_cast<unsigned>(w.segments), kernels::kReferenceRowBlock, 0, s>>>(w.in.data(), w.len.data(), w.out.data(), w.capacity);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch12, dynamic_parallelism, Segments)
    .stateful<HostLaunches>(bench::Role::baseline, "host_reads_lengths_launches_per_segment", {.blocks_host = true, .host_bound = true})
    .step("device_launches", launch_device_side)
    .variant_requires([](const Segments&) { return std::string(kNoRdc); })
    .optimized("one_flat_launch_early_exit", launch_flat)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace
