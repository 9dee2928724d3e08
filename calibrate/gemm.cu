// calibrate/gemm: the tensor-core ceilings, through cuBLASLt at 8192^3 on random data.
//   D (m x n) = A (m x k) B (k x n), "TN": A and B both stored k-contiguous (A row-major, B
//   column-major), D column-major; the only layout FP8 accepts, and Hopper's fastest for all.
//   TF32: FP32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32;  BF16 / FP16: 16-bit in and out, FP32
//   accumulate;  FP8: E4M3 in with unit scales (cuBLASLt's default: no scale pointers), BF16 out,
//   FP32 accumulate.
// Verified against a CPU double reference at 496 (FP8: 512) x 400 x 272 (multiples of 16)
// and, at 8192^3, against a simple shared-memory-tiled FP32 kernel.
// Timed sustained (Mode::sustained: hot, after a 1 s soak, sampled >= 1 s): at 8192^3 the board
// reaches its power limit within the first second and holds it, so the figure is what the tensor cores do
// under that limit, repeatable from run to run. Cold samples with gaps between them caught the
// clock higher by a varying amount (H100 BF16: 781 in one cold run, ~686 sustained).
// That burst is what a single or short GEMM sees, so it is a ceiling of its own: the same cases
// timed cold are `<dtype>_burst_tflops`, and a case is scored against the figure of its mode
// (bench::ceiling_for_mode): sustained against sustained, everything else against the burst.
//
//   build/<preset>/calibrate/calibrate --benchmark_filter='tf32|bf16|fp16|fp8'
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/reference_gemm.cuh>

#include <type_traits>

namespace {

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return CUDA_R_16BF;
  else if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  else return CUDA_R_8F_E4M3;
}

template <class In, class Out>
struct Gemm {
  using InT = In;
  using OutT = Out;
  int64_t m, n, k;
  bench::DeviceSpan<const In> a, b;
  bench::DeviceSpan<Out> d;
  // Verification at 496 x 400 x 272: multiples of 16 (FP8 needs them), not of any tile.
  Gemm(bench::Setup& s, const char* ceiling, int64_t verify_m = 496)
      : m(s.size("m", 8192, verify_m)),
        n(s.size("n", 8192, 400)),
        k(s.size("k", 8192, 272)),
        a(s.input<In>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<In>("b", n * k, bench::uniform(-1, 1))),
        d(s.output<Out>("d", m * n)) {
    s.flops(2.0 * m * n * k, ceiling);
  }
};
struct Tf32 : Gemm<float, float> {
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F_FAST_TF32;
  explicit Tf32(bench::Setup& s) : Gemm(s, bench::ceiling::tf32) {}
};
struct Bf16 : Gemm<__nv_bfloat16, __nv_bfloat16> {
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  explicit Bf16(bench::Setup& s) : Gemm(s, bench::ceiling::bf16) {}
};
struct Fp16 : Gemm<__half, __half> {
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  explicit Fp16(bench::Setup& s) : Gemm(s, bench::ceiling::fp16) {}
};
struct Fp8 : Gemm<__nv_fp8_e4m3, __nv_bfloat16> {
  static constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
  // The FP8 shape ch09's FP8 example verifies at (512 x 400 x 272), where cuBLASLt's candidates run.
  explicit Fp8(bench::Setup& s) : Gemm(s, bench::ceiling::fp8, 512) {}
};

// The plan (handle, descriptors, heuristic candidates, workspace) is kernels::LtGemm, made once
// and untimed, with the fastest candidate that runs picked on the real buffers; the timed call is
// one cublasLtMatmul on the case's stream.
template <class W>
class LtMatmul {
 public:
  LtMatmul(const W& w, cudaStream_t stream)
      : gemm_(w.m, w.n, w.k,
              {.ab = cuda_type<typename W::InT>(), .d = cuda_type<typename W::OutT>(), .compute = W::kCompute}) {
    gemm_.pick_fastest(w.d.data(), stream);
  }
  void operator()(const W& w, cudaStream_t stream) { gemm_.run(w.a.data(), w.b.data(), w.d.data(), stream); }

 private:
  kernels::LtGemm gemm_;
};

// The timing-size check: FP32 products of the same (already rounded) inputs, FP32 sums.
template <class W>
void device_reference(const W& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

template <class W>
void reference(const W& w, bench::HostData& h) {
  using In = typename W::InT;
  kernels::reference_gemm_tn(h.input<In>("a"), h.input<In>("b"), h.expected("d"), w.m, w.n, w.k);
}

// TF32 keeps 10 mantissa bits of each FP32 operand: each product is off by up to ~2^-10 relative,
// and over random signs the result lands near 3e-4 relative L2; 2e-3 accepts TF32 and still
// rejects BF16 operands (~3e-3).
BENCH_EXAMPLE(calibrate, tf32_tflops, Tf32)
    .stateful<LtMatmul<Tf32>>(bench::Role::baseline, "cublaslt_tf32")
    .reference(reference<Tf32>)
    .device_reference(device_reference<Tf32>)
    .tolerance(bench::relative_l2(2e-3))
    .mode(bench::Mode::sustained);
// BF16 / FP16 / FP8: the inputs are exact in the reference; the error is the output's rounding,
// which the default BF16 (8e-3) and FP16 (1e-3) relative-L2 bounds already cover.
BENCH_EXAMPLE(calibrate, bf16_tflops, Bf16)
    .stateful<LtMatmul<Bf16>>(bench::Role::baseline, "cublaslt_bf16")
    .reference(reference<Bf16>)
    .device_reference(device_reference<Bf16>)
    .mode(bench::Mode::sustained);
BENCH_EXAMPLE(calibrate, fp16_tflops, Fp16)
    .stateful<LtMatmul<Fp16>>(bench::Role::baseline, "cublaslt_fp16")
    .reference(reference<Fp16>)
    .device_reference(device_reference<Fp16>)
    .mode(bench::Mode::sustained);
BENCH_EXAMPLE(calibrate, fp8_tflops, Fp8)
    .stateful<LtMatmul<Fp8>>(bench::Role::baseline, "cublaslt_fp8_e4m3")
    .reference(reference<Fp8>)
    .device_reference(device_reference<Fp8>)
    .min_compute_capability(89)
    .mode(bench::Mode::sustained);

// The burst ceilings: the same plans and checks, timed cold.
BENCH_EXAMPLE(calibrate, tf32_burst_tflops, Tf32)
    .stateful<LtMatmul<Tf32>>(bench::Role::baseline, "cublaslt_tf32")
    .reference(reference<Tf32>)
    .device_reference(device_reference<Tf32>)
    .tolerance(bench::relative_l2(2e-3));
BENCH_EXAMPLE(calibrate, bf16_burst_tflops, Bf16)
    .stateful<LtMatmul<Bf16>>(bench::Role::baseline, "cublaslt_bf16")
    .reference(reference<Bf16>)
    .device_reference(device_reference<Bf16>);
BENCH_EXAMPLE(calibrate, fp16_burst_tflops, Fp16)
    .stateful<LtMatmul<Fp16>>(bench::Role::baseline, "cublaslt_fp16")
    .reference(reference<Fp16>)
    .device_reference(device_reference<Fp16>);
BENCH_EXAMPLE(calibrate, fp8_burst_tflops, Fp8)
    .stateful<LtMatmul<Fp8>>(bench::Role::baseline, "cublaslt_fp8_e4m3")
    .reference(reference<Fp8>)
    .device_reference(device_reference<Fp8>)
    .min_compute_capability(89);

}  // namespace
