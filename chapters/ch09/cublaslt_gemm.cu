// ch09/cublaslt_gemm: a naive GEMM kernel → cuBLASLt BF16, and cuBLASLt BF16 → FP8 E4M3.
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32
// accumulate, TN layout (kernels/cublaslt_gemm.hpp). Roofline at 4096^3: 1365 flop/byte (BF16
// operands): compute-bound; the ceiling is the BF16 tensor-core rate, FP8's is twice that.
//
// cublaslt_gemm, what changes from baseline to optimized:
//   1. baseline: one thread per output walks k in global memory, FP32 FMA, no reuse (the
//      starting point of any GEMM lesson, ~1% of the tensor-core ceiling);
//   2. optimized: one cuBLASLt matmul (plan and heuristic chosen once in untimed setup):
//      TMA + wgmma kernels, tuned per shape.
// cublaslt_gemm_fp8 (8192^3), what changes from baseline to optimized:
//   1. baseline: cuBLASLt BF16 as above;
//   2. optimized: per-tensor FP8 E4M3 with current scaling: each call measures amax of A and of
//      B, quantises them (q = x * 448 / amax(x)) and runs cuBLASLt with FP8 operands, FP32
//      accumulate, BF16 out and the dequantisation scales amax / 448 passed as A/B scale
//      pointers; all of it timed (~0.4 GB of extra memory traffic at 8192^3).
// FP8 error bound: E4M3 keeps 3 mantissa bits, so each quantised operand is off by at most 2^-4
// relative (rms ~2.6e-2); a product carries ~sqrt(2) of that and random-sign sums keep it:
// expect ~4e-2 relative L2 on uniform inputs. The FP8 example's tolerance is 6e-2 (it holds the
// BF16 baseline too); a wrong or missing scale is off by orders of magnitude. BF16: 1e-2.
//
//   ./bench compare --chapter ch09 --example cublaslt_gemm
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "tensor_core_gemm.cuh"  // the BF16 GEMM workload, cuBLASLt rung and references


namespace {

using ch09::bf16;
using fp8 = __nv_fp8_e4m3;

template <int64_t M, int64_t N, int64_t K>
struct Gemm : ch09::GemmBf16 {  // A, B, D and the flop count as tensor_core_gemm's
  // Verification at 512 x 400 x 272: multiples of 16 (FP8 needs them), not of any tile; the shape
  // calibrate runs FP8 at.
  explicit Gemm(bench::Setup& s) : GemmBf16(s, s.size("m", M, 512), s.size("n", N, 400), s.size("k", K, 272)) {}
};

__global__ void naive_gemm(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ d, int m, int n,
                           int k) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, j = blockIdx.y;
  if (i >= m) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc += __bfloat162float(a[i * k + p]) * __bfloat162float(b[j * k + p]);
  d[j * m + i] = __float2bfloat16(acc);
}

template <class W>
void launch_naive(const W& w, cudaStream_t stream) {
  naive_gemm<<<dim3(unsigned((w.m + 127) / 128), unsigned(w.n)), 128, 0, stream>>>(w.a.data(), w.b.data(), w.d.data(),
                                                                                    int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

// --- FP8: per-tensor scales -----------------------------------------------------------------------
__global__ void abs_max(const bf16* __restrict__ x, int64_t n, unsigned* __restrict__ amax_bits) {
  float v = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    v = fmaxf(v, fabsf(__bfloat162float(x[i])));
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) atomicMax(amax_bits, __float_as_uint(v));  // non-negative floats order as ints
}
// Four scales, each in its own 16-byte slot: cuBLASLt 13 on the H100 refuses (NOT_SUPPORTED, at
// launch, for every candidate) a scale pointer that is not 16-byte aligned.
constexpr int kScaleSlot = 4;  // floats
enum Scale { kDequantA = 0, kDequantB = kScaleSlot, kQuantA = 2 * kScaleSlot, kQuantB = 3 * kScaleSlot };
__global__ void make_scales(const unsigned* __restrict__ amax_bits, float* __restrict__ scales) {
  for (int t = 0; t < 2; ++t) {
    const float amax = fmaxf(__uint_as_float(amax_bits[t]), 1e-12f);
    scales[t == 0 ? kDequantA : kDequantB] = amax / 448.0f;
    scales[t == 0 ? kQuantA : kQuantB] = 448.0f / amax;
  }
}
__global__ void quantize(const bf16* __restrict__ x, fp8* __restrict__ q, int64_t n, const float* __restrict__ scale) {
  const float s = *scale;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    q[i] = fp8(__bfloat162float(x[i]) * s);  // round to nearest, saturating to +-448
}

template <class W>
class LtFp8 {
 public:
  LtFp8(const W& w, cudaStream_t stream)
      : qa_(w.m * w.k), qb_(w.n * w.k), amax_(2), scales_(4 * kScaleSlot),
        gemm_(w.m, w.n, w.k, {.ab = CUDA_R_8F_E4M3, .d = CUDA_R_16BF}, nullptr, scales_.data() + kDequantA,
              scales_.data() + kDequantB) {
    // No quantize_inputs here: a stateful variant is built before the harness fills w.a and w.b,
    // so abs_max read uninitialised memory (initcheck). LtGemm times its candidates on FP8
    // operands and scales of its own; every call computes qa_, qb_ and scales_ before its GEMM.
    gemm_.pick_fastest(w.d.data(), stream);
  }
  void operator()(const W& w, cudaStream_t stream) {
    quantize_inputs(w, stream);
    gemm_.run(qa_.data(), qb_.data(), w.d.data(), stream);
  }

 private:
  // Current scaling: this call's amax of each operand, its scales, then the FP8 copies. All
  // timed: the FP8 speedup pays for everything it needs. (Scales computed once in setup would
  // come from whatever the inputs held then, not from the data each call multiplies.)
  void quantize_inputs(const W& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemsetAsync(amax_.data(), 0, amax_.bytes(), stream));
    abs_max<<<1024, 256, 0, stream>>>(w.a.data(), w.m * w.k, amax_.data());
    BENCH_CHECK_LAUNCH();
    abs_max<<<1024, 256, 0, stream>>>(w.b.data(), w.n * w.k, amax_.data() + 1);
    BENCH_CHECK_LAUNCH();
    make_scales<<<1, 1, 0, stream>>>(amax_.data(), scales_.data());
    BENCH_CHECK_LAUNCH();
    quantize<<<2048, 256, 0, stream>>>(w.a.data(), qa_.data(), w.m * w.k, scales_.data() + kQuantA);
    BENCH_CHECK_LAUNCH();
    quantize<<<2048, 256, 0, stream>>>(w.b.data(), qb_.data(), w.n * w.k, scales_.data() + kQuantB);
    BENCH_CHECK_LAUNCH();
  }
  bench::DeviceBuffer<fp8> qa_, qb_;
  bench::DeviceBuffer<unsigned> amax_;
  bench::DeviceBuffer<float> scales_;
  kernels::LtGemm gemm_;
};

using Gemm4096 = Gemm<4096, 4096, 4096>;
using Gemm8192 = Gemm<8192, 8192, 8192>;

BENCH_EXAMPLE(ch09, cublaslt_gemm, Gemm4096)
    .baseline("naive_thread_per_output", launch_naive<Gemm4096>)
    .stateful<kernels::CublasltGemmBf16>(bench::Role::optimized, "cublaslt_bf16")
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));

BENCH_EXAMPLE(ch09, cublaslt_gemm_fp8, Gemm8192)
    .stateful<kernels::CublasltGemmBf16>(bench::Role::baseline, "cublaslt_bf16")
    .stateful<LtFp8<Gemm8192>>(bench::Role::optimized, "cublaslt_fp8_e4m3_per_tensor",
                               {.min_compute_capability = 89, .compute_ceiling = bench::ceiling::fp8})
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(6e-2))
    .mode(bench::Mode::sustained);  // both sides run at the power limit (see tensor_core_gemm.cu)

}  // namespace
