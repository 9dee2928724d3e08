// Planted bugs for `bench sanitize` (sanitize_test.cpp), in a chapter-like binary whose examples
// belong to chapter "test", never to a real one. Each passes its verification; only a sanitizer
// sees what is wrong:
//   1. out_of_bounds_read: the last thread also reads the element after the end of its input and
//      throws the value away. memcheck must name peek_past_end and the line marked below.
//   2. shared_race: each thread peeks at a slot another warp writes, before the barrier, and
//      throws the value away. racecheck must report neighbour_race.
//   3. clean: the same staging with the barrier in its place: every tool must be clean, and so
//      must the harness's own fill, poison, checksum and compare kernels in all three.
// The test finds the lines it expects by the "SANITIZE:" markers.
#include <bench/bench.hpp>

namespace {

constexpr int kBlock = 256;

struct Vec {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  // 4000 floats, 16000 bytes: the element after the last lies in the rest of the allocation's
  // 512-byte granule, memory that is mapped (no fault without the sanitizer) and no buffer's.
  explicit Vec(bench::Setup& s)
      : n(s.size("n", 4000, 4000)),
        in(s.input<float>("in", n, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)) {}
};

int blocks(const Vec& w) { return static_cast<int>((w.n + kBlock - 1) / kBlock); }

// A stencil's off-by-one: volatile, so the compiler keeps the load whose value nobody uses.
__global__ void peek_past_end(const float* in, float* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i >= n) return;
  out[i] = in[i];
  if (i == n - 1) {
    const float unused = static_cast<const volatile float*>(in)[n];  // SANITIZE: out-of-bounds read
    (void)unused;
  }
}

// After the barrier every thread reads back its own slot, so the output is right in whatever
// order the warps ran; the peek a warp ahead, before the barrier, races with that warp's write.
__global__ void neighbour_race(const float* in, float* out, int64_t n) {
  __shared__ float tile[kBlock];
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.f;                                               // SANITIZE: racy write
  const float unused = static_cast<volatile float*>(tile)[(threadIdx.x + 32) % kBlock];  // SANITIZE: racy read
  (void)unused;
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x];
}

// The same staging, the neighbour read after the barrier.
__global__ void staged_copy(const float* in, float* out, int64_t n) {
  __shared__ float tile[kBlock];
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  const float neighbour = tile[(threadIdx.x + 32) % kBlock];
  if (i < n) out[i] = tile[threadIdx.x] + 0.f * neighbour;
}

void launch_peek(const Vec& w, cudaStream_t s) {
  peek_past_end<<<blocks(w), kBlock, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}
void launch_race(const Vec& w, cudaStream_t s) {
  neighbour_race<<<blocks(w), kBlock, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}
void launch_staged(const Vec& w, cudaStream_t s) {
  staged_copy<<<blocks(w), kBlock, 0, s>>>(w.in.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void reference(const Vec& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) out[i] = in[i];
}

BENCH_EXAMPLE(test, out_of_bounds_read, Vec).baseline("peek_past_end", launch_peek).reference(reference);
BENCH_EXAMPLE(test, shared_race, Vec).baseline("neighbour_race", launch_race).reference(reference);
BENCH_EXAMPLE(test, clean, Vec).baseline("staged_copy", launch_staged).reference(reference);

}  // namespace
