// calibrate/fma: the FP32 FMA ceiling. Every thread runs kChains independent FFMA chains
// x <- x * b + c entirely in registers; its output is the sum of the chains' last values, which
// the closed form x_N = b^N x_0 + c (1 - b^N) / (1 - b) gives exactly in double.
//
//   build/<preset>/calibrate/calibrate --benchmark_filter=fp32
#include <bench/bench.hpp>

#include <cmath>

namespace {

constexpr int kBlock = 256;
constexpr int kChains = 8;  // FFMA latency is 4 cycles: 8 chains per thread x 64 warps per SM

struct Fma {
  int64_t threads, iters;
  bench::DeviceSpan<const float> x0, b, c;
  bench::DeviceSpan<float> out;
  explicit Fma(bench::Setup& s)
      : threads(s.size("threads", full_device(), 1'003)),
        iters(s.size("iters", 16'384, 4'099)),
        // b near 1 so that b^N is far from 0 at N = iters: skipping iterations shows.
        x0(s.input<float>("x0", threads, bench::uniform(-1, 1))),
        b(s.input<float>("b", threads, bench::uniform(0.9995, 0.99995))),
        c(s.input<float>("c", threads, bench::uniform(0.5, 1.5))),
        out(s.output<float>("out", threads)) {
    s.flops(2.0 * threads * kChains * iters, bench::ceiling::fp32);
  }
  static int64_t full_device() {  // 2048 threads on every SM
    int device = 0, sms = 0;
    BENCH_CUDA_CHECK(cudaGetDevice(&device));
    BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return int64_t{sms} * 2048;
  }
};

__global__ void __launch_bounds__(kBlock) fma_chains(const float* __restrict__ x0, const float* __restrict__ b,
                                                     const float* __restrict__ c, float* __restrict__ out,
                                                     int64_t threads, int iters) {
  const int64_t t = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (t >= threads) return;
  const float bt = b[t], ct = c[t];
  float x[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) x[k] = x0[t] + k;
#pragma unroll 16  // 128 FFMAs per loop branch: the loop's own instructions cost ~2% of issue
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int k = 0; k < kChains; ++k) x[k] = fmaf(x[k], bt, ct);
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) sum += x[k];
  out[t] = sum;
}

void launch_fma(const Fma& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.threads + kBlock - 1) / kBlock);
  fma_chains<<<blocks, kBlock, 0, stream>>>(w.x0.data(), w.b.data(), w.c.data(), w.out.data(), w.threads,
                                            static_cast<int>(w.iters));
  BENCH_CHECK_LAUNCH();
}

void reference(const Fma& w, bench::HostData& h) {
  auto x0 = h.input<float>("x0");
  auto b = h.input<float>("b");
  auto c = h.input<float>("c");
  auto out = h.expected("out");
  for (int64_t t = 0; t < w.threads; ++t) {
    const double bn = std::pow(double(b[t]), double(w.iters));
    const double fixed = double(c[t]) * (1 - bn) / (1 - double(b[t]));
    double sum = 0;
    for (int k = 0; k < kChains; ++k) sum += bn * (double(x0[t]) + k) + fixed;
    out[t] = sum;
  }
}

// The float chain rounds once per step and carries that error on, decaying by b per step; a CPU
// emulation of these inputs gave relative L2 8e-7 and a worst element of 1.5e-5, so 1e-4 (not
// FP32's 1e-5) leaves room. Running half the iterations instead moves the result by 27%.
BENCH_EXAMPLE(calibrate, fp32_tflops, Fma)
    .baseline("ffma_register_chains", launch_fma)
    .reference(reference)
    .tolerance(bench::relative_l2(1e-4));

}  // namespace
