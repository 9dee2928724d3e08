// ch09/elementwise_fusion: three memory-bound elementwise kernels → one fused kernel.
//
// w = relu(a * x + b) * scale over n = 2^28 FP32 elements (1 GiB in, 1 GiB out).
// Roofline: 3 flops per element over 8 bytes moved (fused minimum) = 0.375 flop/byte, two
// orders of magnitude left of the H100's ridge point (~20 flop/byte for FP32 SIMT): the time is
// bytes over HBM bandwidth whatever the arithmetic.
//
// What changes from baseline to optimized:
//   1. baseline: three kernels, y = a*x + b, z = relu(y), w = z * scale, each reading its input
//      from and writing its result to device memory: 6 x 4 bytes per element, 3x the minimum;
//   2. optimized: one kernel keeps y and z in registers: read x once, write w once (8 bytes per
//      element), 16-byte streaming loads and stores, two float4 in flight per thread.
// Same FP32 operations in the same order, so both round identically (exact tolerance).
// The cost model counts the fused minimum (8 bytes per element): the baseline's gbps counter is
// therefore "useful" bandwidth and its % of ceiling shows what the two extra round trips cost.
//
//   ./bench compare --chapter ch09 --example elementwise_fusion
#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

namespace {

constexpr float kA = 1.5f, kB = -0.25f, kScale = 0.75f;

struct Chain {
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> w;
  bench::DeviceBuffer<float> y, z;  // the baseline's intermediates (scratch, not outputs)
  explicit Chain(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 1'000'003)),
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        w(s.output<float>("w", n)),
        y(n),
        z(n) {
    s.bytes(2.0 * n * sizeof(float), bench::ceiling::hbm_copy);
    s.flops(3.0 * n);
  }
};

constexpr int kBlock = 256;

__global__ void affine(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = __fmaf_rn(kA, x[i], kB);
}
__global__ void relu(const float* __restrict__ y, float* __restrict__ z, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) z[i] = fmaxf(y[i], 0.0f);
}
__global__ void scale(const float* __restrict__ z, float* __restrict__ w, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) w[i] = z[i] * kScale;
}

__device__ __forceinline__ float fused_op(float v) { return fmaxf(__fmaf_rn(kA, v, kB), 0.0f) * kScale; }

// Each thread handles two float4 (8 elements) a grid-stride apart in its block's chunk; the
// scalar tail (n % 4) is done by the first threads.
__global__ void fused(const float* __restrict__ x, float* __restrict__ w, int64_t n) {
  constexpr int kVecs = 2;
  const int64_t n4 = n / 4;
  const int64_t base = blockIdx.x * int64_t{blockDim.x} * kVecs + threadIdx.x;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* w4 = reinterpret_cast<float4*>(w);
  float4 v[kVecs];
#pragma unroll
  for (int k = 0; k < kVecs; ++k)
    if (base + k * blockDim.x < n4) v[k] = kernels::load_stream(x4 + base + k * blockDim.x);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t j = base + k * blockDim.x;
    if (j < n4)
      kernels::store_stream(w4 + j, make_float4(fused_op(v[k].x), fused_op(v[k].y), fused_op(v[k].z), fused_op(v[k].w)));
  }
  const int64_t tail = 4 * n4 + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (tail < n) w[tail] = fused_op(x[tail]);
}

unsigned blocks_for(int64_t items, int64_t per_block) { return static_cast<unsigned>((items + per_block - 1) / per_block); }

void launch_three_kernels(const Chain& w, cudaStream_t stream) {
  const unsigned grid = blocks_for(w.n, kBlock);
  affine<<<grid, kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
  relu<<<grid, kBlock, 0, stream>>>(w.y.data(), w.z.data(), w.n);
  BENCH_CHECK_LAUNCH();
  scale<<<grid, kBlock, 0, stream>>>(w.z.data(), w.w.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_fused(const Chain& w, cudaStream_t stream) {
  fused<<<blocks_for(w.n / 4 + 1, 2 * kBlock), kBlock, 0, stream>>>(w.x.data(), w.w.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void reference(const Chain& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto out = h.expected("w");
  for (int64_t i = 0; i < w.n; ++i) out[i] = fmaxf(fmaf(kA, x[i], kB), 0.0f) * kScale;  // FP32, as the GPU
}

// The timing-size check (docs/validity.md row 2): one thread per element, the CPU reference's
// FP32 expression, sharing no code with the variants.
__global__ void reference_chain(const float* x, float* w, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) w[i] = fmaxf(fmaf(kA, x[i], kB), 0.0f) * kScale;
}

void device_reference(const Chain& w, cudaStream_t stream) {
  reference_chain<<<blocks_for(w.n, kBlock), kBlock, 0, stream>>>(w.x.data(), w.w.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch09, elementwise_fusion, Chain)
    .baseline("three_kernels", launch_three_kernels)
    .optimized("fused_vec4", launch_fused)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact());

}  // namespace
