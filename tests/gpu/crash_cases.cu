// A chapter-like binary whose cases fail on purpose (VALIDITY row 12), run by timing_test.cu in
// a process of its own: an invalid launch configuration (not sticky), an out-of-bounds write
// (sticky: the context is lost, later cases fail with that reason and the process exits 3), and
// a kernel that never ends (the case watchdog names it and the process exits 4).
#include <bench/bench.hpp>

namespace {

struct Tiny {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Tiny(bench::Setup& s)
      : n(s.size("n", 4096, 4096)), in(s.input<float>("in", n, bench::uniform(-1, 1))), out(s.output<float>("out", n)) {}
};

__global__ void copy(const float* in, float* out, int64_t n, int64_t offset) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i + offset] = in[i];
}

void bad_launch(const Tiny& w, cudaStream_t s) {
  copy<<<1, 4096, 0, s>>>(w.in.data(), w.out.data(), w.n, 0);  // 4096 threads: over the limit
  BENCH_CHECK_LAUNCH();
}
void out_of_bounds(const Tiny& w, cudaStream_t s) {
  copy<<<16, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, int64_t{1} << 40);
  BENCH_CHECK_LAUNCH();
}
// Waits for something that never happens, as a deadlocked kernel does (no CUDA error, ever).
__global__ void spin_forever() {
  for (;;) __nanosleep(1000);
}
void hang(const Tiny&, cudaStream_t s) {
  spin_forever<<<1, 32, 0, s>>>();
  BENCH_CHECK_LAUNCH();
}
void honest(const Tiny& w, cudaStream_t s) {
  copy<<<16, 256, 0, s>>>(w.in.data(), w.out.data(), w.n, 0);
  BENCH_CHECK_LAUNCH();
}
void reference(const Tiny& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) out[i] = in[i];
}

BENCH_EXAMPLE(crash, bad_launch, Tiny).baseline("too_many_threads", bad_launch).reference(reference);
BENCH_EXAMPLE(crash, out_of_bounds, Tiny).baseline("far_write", out_of_bounds).reference(reference);
BENCH_EXAMPLE(crash, out_of_bounds_then_after, Tiny).baseline("honest", honest).reference(reference);
BENCH_EXAMPLE(crash, hang, Tiny).baseline("spin_forever", hang).reference(reference);

}  // namespace
