// ch16/fp8_linear: an inference linear layer Y = X·Wᵀ + b served in BF16 → served in FP8 E4M3,
// with the activation quantised on every call, inside the timed work.
//
// A linear layer at prefill is a large GEMM: tokens 8192, in 8192, out 8192 is one 8192-token
// prefill chunk through an 8192-wide projection (the attention output projection of a 70B-class
// model; its MLP projections are wider still), 1.1 TFLOP per call and 1365 flop per BF16 byte:
// compute-bound, so the tensor cores' rate sets the time. Hopper's FP8 tensor cores run twice
// the BF16 rate (H100 dense peak ~1979 vs ~989 TFLOP/s; what cuBLASLt reaches of each: the
// README's ceilings), so FP8 operands can nearly halve the GEMM. The price is the quantisation:
// weights are quantised once when the model is loaded, but each call's activations are new and
// must be measured and cast before the GEMM can read them.
//
// What changes from baseline to optimized:
//   1. baseline: cuBLASLt BF16 × BF16 → BF16, FP32 accumulate, bias added in the epilogue;
//   2. optimized: W quantised once (untimed, as at model load) to E4M3 with a per-tensor scale;
//      per call, timed: amax of X, its scale, X cast to E4M3 (kernels/fp8_quantize.cuh: ~320 MB
//      of traffic, ~0.1 ms at 3 TB/s), then cuBLASLt E4M3 × E4M3 → BF16 with FP32 accumulate,
//      the two dequantisation scales passed as A/B scale pointers and the bias in the epilogue.
// The weight is the model's, not an input of a call: the workload makes it once from a fixed
// seed (recorded in the fingerprint), where the harness refills its inputs before every sample,
// so the optimized variant can quantise it at construction like an inference engine at load.
// X and b stay harness inputs, fresh for every sample. Per-channel weight scales (one per output
// row) are not done here: cuBLASLt takes them as an outer-vector scale mode, not yet tried on
// this suite's GPUs.
//
// Accuracy bound: E4M3 keeps 3 mantissa bits, so round to nearest is off by at most 2^-4
// relative per element; over the spread of mantissas in random data the rms is ~2^-3/√24 ≈ 0.026
// (uniform) to 0.027 (normal), and a product of two quantised operands carries √2 of that,
// ~0.037. A dot product of K random-sign terms sums K independent errors as it sums K terms, so
// the relative L2 error of Y stays ~0.037 whatever K is (an FP64 emulation of this rounding at
// 64 x 272 x 48 gave 0.038 without the bias, 0.036 with it; per-tensor scaling keeps all but ~1e-4
// of values above E4M3's subnormal range). Tolerance: relative L2 6e-2 against the FP64 CPU
// reference at the verification size and against the plain FP32-accumulate GPU GEMM of the same
// BF16 operands (the BF16 layer's answer) at the timing size. A wrong or missing scale is off by
// orders of magnitude, a stale or transposed weight by ~1.4. The BF16 baseline meets it easily
// (~2^-9 output rounding).
//
// Timed sustained: both sides hold the board at its power limit (ch09's tensor_core_gemm.cu).
//
//   ./bench compare --chapter ch16 --example fp8_linear
#include <bench/bench.hpp>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <kernels/cublaslt_gemm.hpp>
#include <kernels/fp8_quantize.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/reference_gemm.cuh>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
constexpr int64_t kWeightSeed = 0x5eed16;

// The model's weight: uniform(-a, a) with a = √(3 / in), variance 1 / in, so that Y has unit
// scale for unit-scale X (what a trained layer's initialisation aims at). A counter hash
// (splitmix64) per element: the same weight for every variant and every run.
__global__ void make_weight(bf16* __restrict__ w, int64_t n, uint64_t seed, float amplitude) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t h = seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    const float unit = static_cast<float>(h >> 40) * 0x1p-24f;  // [0, 1)
    w[i] = __float2bfloat16((2.0f * unit - 1.0f) * amplitude);
  }
}

struct Linear {
  int64_t tokens, in, out;
  bench::DeviceSpan<const bf16> x, bias;  // x [tokens][in], bias [out]
  bench::DeviceSpan<bf16> y;              // y [tokens][out]
  bench::DeviceBuffer<bf16> weight;       // [out][in] (nn.Linear's layout): the model's, made once
  std::vector<bf16> host_weight;          // its copy for the CPU reference (verification size only)

  // Verification: 203 tokens (odd: cuBLASLt's n, which FP8 leaves free), in 272 and out 144
  // (multiples of 16, as FP8 cuBLASLt needs for k and m, and of no larger tile).
  explicit Linear(bench::Setup& s)
      : tokens(s.size("tokens", 8192, 203)), in(s.size("in", 8192, 272)), out(s.size("out", 8192, 144)),
        x(s.input<bf16>("x", tokens * in, bench::normal(0, 1))),
        bias(s.input<bf16>("bias", out, bench::uniform(-0.5, 0.5))),
        y(s.output<bf16>("y", tokens * out)),
        weight(out * in) {
    s.param("weight_seed", kWeightSeed);
    s.flops(2.0 * tokens * in * out, bench::ceiling::bf16);
    // Fewest bytes: X and the bias read, Y written, and the weight as the FP8 side reads it, one
    // E4M3 byte a value and its dequantisation scale (the BF16 side reads 2 bytes a weight: it is
    // under-counted, which lowers only its bandwidth fraction, far below its compute one).
    s.bytes(double(x.bytes() + bias.bytes() + y.bytes()) + double(out * in) * sizeof(fp8) +
            sizeof(float));
    make_weight<<<4 * kernels::sm_count(), 256>>>(weight.data(), out * in, kWeightSeed,
                                                  std::sqrt(3.0f / static_cast<float>(in)));
    BENCH_CHECK_LAUNCH();
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());  // made on the legacy stream; done before any use
    if (s.verifying()) {
      host_weight.resize(static_cast<size_t>(out * in));
      BENCH_CUDA_CHECK(cudaMemcpy(host_weight.data(), weight.data(), weight.bytes(), cudaMemcpyDeviceToHost));
    }
  }
};

// D (out x tokens, column-major) = W (out x in, row-major) · X (in x tokens, column-major): the
// suite's TN layout (kernels/cublaslt_gemm.hpp) is exactly nn.Linear's row-major X, W and Y.
kernels::LtGemm make_gemm(const Linear& w, cudaDataType operands, const float* weight_scale = nullptr,
                          const float* x_scale = nullptr) {
  return kernels::LtGemm(w.out, w.tokens, w.in, {.ab = operands, .d = CUDA_R_16BF, .epilogue = CUBLASLT_EPILOGUE_BIAS},
                         w.bias.data(), weight_scale, x_scale);
}

class LinearBf16 {
 public:
  LinearBf16(const Linear& w, cudaStream_t stream) : gemm_(make_gemm(w, CUDA_R_16BF)) {
    gemm_.pick_fastest(w.y.data(), stream);
  }
  void operator()(const Linear& w, cudaStream_t stream) { gemm_.run(w.weight.data(), w.x.data(), w.y.data(), stream); }

 private:
  kernels::LtGemm gemm_;
};

class LinearFp8 {
 public:
  LinearFp8(const Linear& w, cudaStream_t stream)
      : blocks_(4 * kernels::sm_count()), weight_q_(w.out * w.in), x_q_(w.tokens * w.in), scales_(2),
        gemm_(make_gemm(w, CUDA_R_8F_E4M3, &scales_.data()[kWeight].dequant, &scales_.data()[kActivation].dequant)) {
    gemm_.pick_fastest(w.y.data(), stream);  // on LtGemm's own operands and scales
    // Model load: the weight's E4M3 copy and its scale, once. (The weight is the workload's own,
    // made in its constructor: unlike x, it holds its values already.)
    kernels::quantize_e4m3_per_tensor(w.weight.data(), weight_q_.data(), w.out * w.in, scales_.data() + kWeight,
                                      blocks_, stream);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    x_ = w.x.data();
    x_count_ = w.tokens * w.in;
  }
  void operator()(const Linear& w, cudaStream_t stream) {
    quantize_activation(stream);  // this call's X: its amax, its scale, its E4M3 copy
    gemm_.run(weight_q_.data(), x_q_.data(), w.y.data(), stream);
  }
  // The activation quantisation's share of the timed call, timed alone (after the samples).
  std::vector<bench::Metric> metrics() {
    constexpr int kReps = 20;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BENCH_CUDA_CHECK(cudaEventCreate(&start));
    BENCH_CUDA_CHECK(cudaEventCreate(&stop));
    quantize_activation(stream);  // warm
    BENCH_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < kReps; ++i) quantize_activation(stream);
    BENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
    BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
    return {{"activation_quantize_us", 1e3 * ms / kReps}};
  }

 private:
  enum Slot { kWeight = 0, kActivation = 1 };
  void quantize_activation(cudaStream_t stream) {
    kernels::quantize_e4m3_per_tensor(x_, x_q_.data(), x_count_, scales_.data() + kActivation, blocks_, stream);
  }
  int blocks_;
  bench::DeviceBuffer<fp8> weight_q_, x_q_;
  bench::DeviceBuffer<kernels::Fp8Scales> scales_;  // [kWeight], [kActivation]: 32 bytes each
  kernels::LtGemm gemm_;
  const bf16* x_ = nullptr;
  int64_t x_count_ = 0;
};

std::string fp8_shape_requirement(const Linear& w) {
  if (w.in % 16 != 0 || w.out % 16 != 0)
    return "cuBLASLt FP8 needs in (k) and out (m) to be multiples of 16; this workload has in " +
           std::to_string(w.in) + ", out " + std::to_string(w.out);
  return {};
}

// The checks: y = x Wᵀ + b in double on the CPU (verification size); at the timing size the
// plain FP32-accumulate GPU GEMM of the same BF16 operands, then the bias.
void reference(const Linear& w, bench::HostData& h) {
  const auto x = h.input<bf16>("x");
  const auto bias = h.input<bf16>("bias");
  auto y = h.expected("y");
  kernels::reference_gemm_tn(std::span<const bf16>(w.host_weight), x, y, w.out, w.tokens, w.in);
  for (int64_t t = 0; t < w.tokens; ++t)
    for (int64_t o = 0; o < w.out; ++o) y[t * w.out + o] += static_cast<double>(static_cast<float>(bias[o]));
}

__global__ void add_bias(bf16* __restrict__ y, const bf16* __restrict__ bias, int64_t rows, int cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __float2bfloat16(__bfloat162float(y[i]) + __bfloat162float(bias[i % cols]));
}

void device_reference(const Linear& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.weight.data(), w.x.data(), w.y.data(), w.out, w.tokens, w.in, stream);
  add_bias<<<4 * kernels::sm_count(), 256, 0, stream>>>(w.y.data(), w.bias.data(), w.tokens, int(w.out));
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch16, fp8_linear, Linear)
    .stateful<LinearBf16>(bench::Role::baseline, "cublaslt_bf16_bias")
    .stateful<LinearFp8>(bench::Role::optimized, "cublaslt_fp8_e4m3_per_tensor_x_quantised_per_call",
                         {.min_compute_capability = 89, .compute_ceiling = bench::ceiling::fp8})
    .variant_requires(fp8_shape_requirement)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(6e-2))
    .mode(bench::Mode::sustained);

}  // namespace
