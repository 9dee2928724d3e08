// ch06/launch_bounds: warps walking linked lists of 512-byte nodes, compiled with
// __launch_bounds__(256) or __launch_bounds__(256, 5): same source, different register budget.
//
// Each warp follows its own list: per hop it reads one node (lane L takes the node's L-th float4:
// 512 coalesced bytes) and the index of the next node, then folds the 4 floats into 32 running
// features. The next hop cannot start before the index arrives from HBM, so a warp spends most
// of its life waiting ~1 us per hop, and the SM is only as busy as the number of warps it holds
// (one hop in flight each). Occupancy is the throughput here, and registers set the occupancy:
// an SM has 65,536, so 256-thread blocks at 128 registers per thread fit twice (16 warps, 25% of
// 64), at 48 registers five times (40 warps, 62.5%).
//
// What changes from baseline to optimized:
//   1. baseline: `__launch_bounds__(256)`, the block size alone, as kernels often declare it. It
//      tells ptxas no block is larger, so it may use up to 255 registers; it takes 128 (no
//      spills), keeping the features' loop-invariant constants (3 per feature) in registers;
//   2. optimized: `__launch_bounds__(256, 5)`: "and let 5 blocks share an SM", so ptxas must fit
//      in 65,536 / (5 x 256) = 51 registers. It takes 48, with no spill (the build's
//      --warn-on-spills would say so): the constants become instruction immediates, a few more
//      instructions per hop, none on the path that waits for memory.
// 2.5 times the warps per SM means 2.5 times the lists walked at once, until HBM is the limit.
// Both variants report `registers_per_thread` and `theoretical_occupancy` (cudaFuncGetAttributes,
// the occupancy calculator) next to their times. With no bound at all ptxas must allow blocks of
// 1024 threads and stays within 64 registers (48 here); (256, 6) gives 40 registers and spills.
// Same lists, same arithmetic, bitwise-equal results.
//
//   ./bench compare --chapter ch06 --example launch_bounds
#include <bench/bench.hpp>
#include <kernels/occupancy.cuh>

#include <vector>

namespace {

constexpr int kBlock = 256;
constexpr int kFeatures = 32;
constexpr int kNodeVectors = 32;  // float4 per node: one per lane, 512 bytes

struct ListWalk {
  int64_t nodes, walkers, hops;
  bench::DeviceSpan<const float> payload;  // nodes x 32 float4, as floats
  bench::DeviceSpan<const int> next, start;
  bench::DeviceSpan<float> features;  // one value per walker and lane
  explicit ListWalk(bench::Setup& s)
      : nodes(s.size("nodes", int64_t{1} << 20, 4'099)),  // 512 MiB of nodes: far beyond L2
        walkers(s.size("walkers", int64_t{1} << 15, 37)),  // 248 lists per SM: 6 waves at 40 warps per SM
        hops(s.size("hops", 64, 64)),
        payload(s.input<float>("payload", nodes * kNodeVectors * 4, bench::uniform(-1, 1))),
        next(s.input<int>("next", nodes, bench::integers(0, nodes - 1))),
        start(s.input<int>("start", walkers, bench::integers(0, nodes - 1))),
        features(s.output<float>("features", walkers * 32)) {
    const double node_bytes = kNodeVectors * sizeof(float4) + sizeof(int);  // the node, its link
    s.bytes(double(walkers) * hops * node_bytes + features.bytes());
    s.flops(double(walkers) * 32 * hops * kFeatures * 8.0);  // per feature: 3 FMAs and 2 multiplies
  }
};

// One warp per list. __launch_bounds__(kBlock, MinBlocks): at most kBlock threads per block, and
// MinBlocks blocks must fit on an SM together (the baseline asks for 1, the optimized for 5).
template <int MinBlocks>
__global__ void __launch_bounds__(kBlock, MinBlocks) walk_lists(const float4* __restrict__ payload,
                                                                const int* __restrict__ next,
                                                                const int* __restrict__ start,
                                                                float* __restrict__ features, int walkers, int hops) {
  const int lane = threadIdx.x % 32;
  const int walker = (blockIdx.x * kBlock + threadIdx.x) / 32;
  if (walker >= walkers) return;
  int node = start[walker];
  float acc[kFeatures] = {};
  for (int h = 0; h < hops; ++h) {
    const float4 r = payload[int64_t{node} * kNodeVectors + lane];
    node = next[node];  // the dependent load: the next hop waits for it
#pragma unroll
    for (int j = 0; j < kFeatures; ++j) {
      const float t = fmaf(r.x, float(j + 1) * 0.125f, r.y * (1.0f / (j + 1)));
      acc[j] = fmaf(t, r.z + float(j) * r.w, acc[j] * 0.5f);
    }
  }
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kFeatures; ++j) sum = fmaf(acc[j], acc[j], sum);
  features[walker * 32 + lane] = sum;
}

// A stateful variant only to report registers and occupancy (bench::Metric) next to the time.
template <auto Kernel>
class Walk {
 public:
  Walk(const ListWalk&, cudaStream_t) {
    cudaFuncAttributes attributes{};
    BENCH_CUDA_CHECK(cudaFuncGetAttributes(&attributes, Kernel));
    registers_ = attributes.numRegs;
    occupancy_ = kernels::theoretical_occupancy(Kernel, kBlock);
  }
  void operator()(const ListWalk& w, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>((w.walkers * 32 + kBlock - 1) / kBlock);
    Kernel<<<blocks, kBlock, 0, stream>>>(reinterpret_cast<const float4*>(w.payload.data()), w.next.data(), w.start.data(), w.features.data(),
                                          static_cast<int>(w.walkers), static_cast<int>(w.hops));
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() {
    return {{"registers_per_thread", double(registers_)}, {"theoretical_occupancy", occupancy_}};
  }

 private:
  int registers_ = 0;
  double occupancy_ = 0;
};

void reference(const ListWalk& w, bench::HostData& h) {
  auto payload = h.input<float>("payload");
  auto next = h.input<int>("next");
  auto start = h.input<int>("start");
  auto features = h.expected("features");
  for (int64_t walker = 0; walker < w.walkers; ++walker)
    for (int lane = 0; lane < 32; ++lane) {
      double acc[kFeatures] = {};
      for (int64_t h = 0, node = start[walker]; h < w.hops; ++h, node = next[node]) {
        const float* r = &payload[(node * kNodeVectors + lane) * 4];  // x, y, z, w
        for (int j = 0; j < kFeatures; ++j)
          acc[j] = (r[0] * (j + 1) * 0.125 + r[1] / (j + 1)) * (double(j) * r[3] + r[2]) + acc[j] * 0.5;
      }
      double sum = 0;
      for (double a : acc) sum += a * a;
      features[walker * 32 + lane] = sum;
    }
}

// The timing-size check (docs/validity.md row 2): one thread per (walker, lane), the CPU
// reference's arithmetic in double, sharing no code with the variants.
__global__ void reference_walk_lists(const float* payload, const int* next, const int* start, float* features,
                                     int64_t walkers, int64_t hops) {
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (o >= walkers * 32) return;
  const int64_t walker = o / 32, lane = o % 32;
  double acc[kFeatures] = {};
  for (int64_t h = 0, node = start[walker]; h < hops; ++h, node = next[node]) {
    const float* r = &payload[(node * kNodeVectors + lane) * 4];  // x, y, z, w
#pragma unroll  // keeps acc in registers
    for (int j = 0; j < kFeatures; ++j)
      acc[j] = (r[0] * (j + 1) * 0.125 + r[1] / (j + 1)) * (double(j) * r[3] + r[2]) + acc[j] * 0.5;
  }
  double sum = 0;
#pragma unroll
  for (int j = 0; j < kFeatures; ++j) sum += acc[j] * acc[j];
  features[o] = float(sum);
}

void device_reference(const ListWalk& w, cudaStream_t stream) {
  reference_walk_lists<<<static_cast<unsigned>((w.walkers * 32 + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.payload.data(), w.next.data(), w.start.data(), w.features.data(), w.walkers, w.hops);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, launch_bounds, ListWalk)
    .stateful<Walk<walk_lists<1>>>(bench::Role::baseline, "launch_bounds_256")
    .stateful<Walk<walk_lists<5>>>(bench::Role::optimized, "launch_bounds_256_5")
    .reference(reference)
    .device_reference(device_reference);  // the float default, relative L2 1e-5

}  // namespace
