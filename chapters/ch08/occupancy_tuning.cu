// ch08/occupancy_tuning: when each thread has one memory access in flight, the warps resident
// on an SM are its only source of memory parallelism, and the launch configuration sets how
// many there are.
//
// What the hardware does: an SM holds at most 64 warps (2048 threads) and 32 blocks on Hopper,
// and a block stays resident until its last warp exits. A warp waiting on a load issues nothing;
// the scheduler switches to another resident warp. With one 4-byte load in flight per thread,
// the bytes an SM has requested from HBM at any moment are (resident warps) x 32 x 4 bytes, and
// by Little's law the bandwidth it gets is that divided by the memory latency.
//
// Why the baseline pays: it launches one-warp blocks (a common "one warp per block is enough"
// choice). The 32-blocks-per-SM limit then caps the SM at 32 warps, 50% theoretical occupancy,
// however light the kernel is: half the loads in flight. That costs less than half the
// bandwidth (measured: README), most likely because latency is shorter with fewer requests
// queued.
//
// What changes from baseline to optimized (the kernel is the same one, instantiated twice):
//   1. block size 32 -> 256 threads: 8 blocks x 8 warps = 64 warps per SM, 100% occupancy
//      (registers and shared memory do not limit this kernel: ptxas reports 18 registers);
//   2. both launch a grid of exactly the blocks that can be resident at once (the occupancy
//      calculator's count x SMs, kernels::resident_grid), each thread striding over the array,
//      so neither side pays for launching millions of tiny blocks: the only difference is the
//      number of resident warps;
//   3. both report their theoretical occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
//      as the counters theoretical_occupancy and resident_warps_per_sm.
// The loop is kept rolled (#pragma unroll 1) on purpose: one element in flight per thread is
// the condition under which occupancy is the lever. hbm_streaming pulls the other lever (more
// bytes in flight per thread), after which occupancy matters much less; ch06/occupancy_api
// shows the calculator picking a block size.
//
//   ./bench compare --chapter ch08 --example occupancy_tuning
//   ./bench profile ch08/occupancy_tuning/baseline   # ncu: achieved occupancy, warp stalls
#include <bench/bench.hpp>
#include <kernels/occupancy.cuh>

#include <vector>

namespace {

struct AffineMap {  // y = a * x + b over n floats
  static constexpr float kA = 1.5f, kB = 0.25f;
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit AffineMap(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 1'000'003)),
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(2.0 * n * sizeof(float));  // x read once, y written once
    s.flops(2.0 * n);                  // one FMA per element
  }
};

void reference(const AffineMap& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = double{AffineMap::kA} * x[i] + AffineMap::kB;
}

// One element per thread per iteration, the next load issued only after this one's store: one
// 4-byte load in flight per thread, whatever the block size.
template <int kBlock>
__global__ void __launch_bounds__(kBlock) affine_map(const float* __restrict__ x,
                                                     float* __restrict__ y, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * kBlock;
#pragma unroll 1
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n; i += stride)
    y[i] = fmaf(AffineMap::kA, x[i], AffineMap::kB);
}

// A variant is a launch configuration: the grid is sized once (untimed) from the occupancy
// calculator, and the theoretical occupancy is reported next to the time.
template <int kBlock>
struct Configuration {
  unsigned grid = kernels::resident_grid(affine_map<kBlock>, kBlock);
  int resident_warps = kernels::resident_warps_per_sm(affine_map<kBlock>, kBlock);
  double occupancy = kernels::theoretical_occupancy(affine_map<kBlock>, kBlock);
  Configuration(const AffineMap&, cudaStream_t) {}
  void operator()(const AffineMap& w, cudaStream_t stream) const {
    affine_map<kBlock><<<grid, kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const {
    return {{"theoretical_occupancy", occupancy}, {"resident_warps_per_sm", double(resident_warps)}};
  }
};

// The timing-size check (docs/validity.md row 2): one thread per element, in double, sharing no
// code with the variants.
__global__ void reference_affine_map(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = float(double{AffineMap::kA} * x[i] + AffineMap::kB);
}

void device_reference(const AffineMap& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  reference_affine_map<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch08, occupancy_tuning, AffineMap)
    .stateful<Configuration<32>>(bench::Role::baseline, "32_thread_blocks_50pct")
    .stateful<Configuration<256>>(bench::Role::optimized, "256_thread_blocks_100pct")
    .reference(reference)
    .device_reference(device_reference);  // FP32's default tolerance: the kernel rounds a*x+b once (FMA)

}  // namespace
