// ch06/occupancy_api: a piecewise-linear function from a 4097-entry lookup table, applied to 2^28
// floats by persistent blocks that each stage the table in shared memory; the block size fixed
// at 32 threads, or chosen by cudaOccupancyMaxPotentialBlockSize.
//
// An SM holds as many blocks as its scarcest resource allows: 65,536 registers, 228 KB of shared
// memory (each block also costs 1 KB the runtime reserves), 32 blocks, 2,048 threads. Here every
// block needs the whole 16 KB table, whatever its size, so the block count per SM is capped at
// 228 / 17 = 13 by shared memory. With 32-thread blocks that is 13 warps per SM (20% of 64): too
// few loads in flight to cover HBM latency in a loop with one 4-byte load per element.
//
// What changes from baseline to optimized:
//   1. baseline: 32 threads per block, a size picked once ("one warp, simple") and never checked;
//   2. optimized: the block size cudaOccupancyMaxPotentialBlockSize returns for this kernel: the
//      largest block that reaches the best occupancy the registers and shared memory allow
//      (expected 1024 on an H100: 2 blocks, 64 warps per SM, 100%).
// Both launch the grid the occupancy calculator says can be resident at once
// (kernels::resident_grid) and stride over the elements: same work, same table, same results
// (bitwise). Each variant reports `block_size` and `theoretical_occupancy`
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor) next to its time.
//
//   ./bench compare --chapter ch06 --example occupancy_api
#include <bench/bench.hpp>
#include <kernels/occupancy.cuh>

#include <cmath>
#include <vector>

namespace {

constexpr int kSegments = 4096;  // the table has kSegments + 1 knots over [-1, 1]

struct TableLookup {
  int64_t n;
  bench::DeviceSpan<const float> table, x;
  bench::DeviceSpan<float> y;
  explicit TableLookup(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 100'003)),
        table(s.input<float>("table", kSegments + 1, bench::uniform(-1, 1))),
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(2.0 * n * sizeof(float));  // read x, write y (the 16 KB table is noise)
  }
};

// Any block size works: each block copies the table to shared memory, then the whole grid
// strides over the elements, one per thread per step.
__global__ void interpolate(const float* __restrict__ table, const float* __restrict__ x, float* __restrict__ y,
                            int64_t n) {
  __shared__ float knots[kSegments + 1];
  for (int i = threadIdx.x; i <= kSegments; i += blockDim.x) knots[i] = table[i];
  __syncthreads();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    const float u = (x[i] + 1.0f) * (0.5f * kSegments);      // position in segments
    const int j = min(max(static_cast<int>(u), 0), kSegments - 1);
    y[i] = fmaf(u - j, knots[j + 1] - knots[j], knots[j]);  // continuous: a j off by one gives the same y
  }
}

// The block size is the only difference: fixed, or asked of the occupancy API (untimed, once).
template <bool kAskTheApi>
class Interpolate {
 public:
  Interpolate(const TableLookup&, cudaStream_t) {
    if constexpr (kAskTheApi) {
      int min_grid = 0;
      BENCH_CUDA_CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block_, interpolate, 0, 0));
    }
    grid_ = kernels::resident_grid(interpolate, block_);
    occupancy_ = kernels::theoretical_occupancy(interpolate, block_);
  }
  void operator()(const TableLookup& w, cudaStream_t stream) {
    interpolate<<<grid_, block_, 0, stream>>>(w.table.data(), w.x.data(), w.y.data(), w.n);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() {
    return {{"block_size", double(block_)}, {"theoretical_occupancy", occupancy_}};
  }

 private:
  int block_ = 32;
  unsigned grid_ = 0;
  double occupancy_ = 0;
};

void reference(const TableLookup& w, bench::HostData& h) {
  auto table = h.input<float>("table");
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) {
    // The position in segments is rounded to float exactly as the kernel rounds it: x + 1 in
    // float loses up to 2^-24 of 2, which is 2.4e-4 of a segment once scaled by 2048, and that
    // (not the interpolation) is the kernel's largest error: relative L2 1e-4 against a double
    // position, measured on the H100. The interpolation itself is then checked in double.
    const double u = (x[i] + 1.0f) * (0.5f * kSegments);
    const int j = std::min(std::max(static_cast<int>(u), 0), kSegments - 1);
    y[i] = table[j] + (u - j) * (double(table[j + 1]) - table[j]);
  }
}

// The timing-size check (docs/validity.md row 2): one thread per element, the CPU reference's
// arithmetic (the position rounded to float, the interpolation in double), sharing no code with
// the variants.
__global__ void reference_interpolate(const float* table, const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float position = (x[i] + 1.0f) * (0.5f * kSegments);
  const double u = position;
  const int j = min(max(static_cast<int>(u), 0), kSegments - 1);
  y[i] = float(table[j] + (u - j) * (double(table[j + 1]) - table[j]));
}

void device_reference(const TableLookup& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  reference_interpolate<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.table.data(), w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, occupancy_api, TableLookup)
    .stateful<Interpolate<false>>(bench::Role::baseline, "fixed_32_threads")
    .stateful<Interpolate<true>>(bench::Role::optimized, "cudaOccupancyMaxPotentialBlockSize")
    .reference(reference)
    .device_reference(device_reference);  // the float default, relative L2 1e-5

}  // namespace
