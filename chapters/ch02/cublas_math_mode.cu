// ch02/cublas_math_mode: the same cuBLAS SGEMM call, with and without TF32 tensor-core math.
//
// What changes from baseline to optimized:
//   1. baseline: cublasSgemm with the default math mode: true FP32 multiply-adds on the SIMT
//      FP32 units (~60 TFLOP/s at best on an H100);
//   2. optimized: one more line, cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH): cuBLAS
//      may now round each FP32 operand to TF32 (10 mantissa bits, FP32's 8-bit exponent) and run
//      the product on the tensor cores, accumulating in FP32. Same call, same FP32 in and out.
// The price is precision: TF32 operands carry ~2^-11 relative rounding, so over random data the
// result is ~3e-4 relative L2 from the exact product, versus ~1e-6 for FP32. The example's
// tolerance (relative L2 2e-3) is TF32's and applies to both variants; a BF16 product (~3e-3)
// would still fail it. Whether TF32 is acceptable is the model's call, not the library's.
// 8192^3, TN layout (both operands k-contiguous); checked at 8192^3 against a simple tiled FP32
// kernel (kernels/reference_gemm.cuh) and at 333 x 257 x 301 against a CPU double reference.
//
//   ./bench compare --chapter ch02 --example cublas_math_mode
#include <bench/bench.hpp>
#include <cublas_v2.h>
#include <kernels/cublas_check.hpp>
#include <kernels/reference_gemm.cuh>

namespace {

using kernels::check_cublas;

struct Sgemm {
  int64_t m, n, k;
  bench::DeviceSpan<const float> a, b;
  bench::DeviceSpan<float> d;
  explicit Sgemm(bench::Setup& s)
      : m(s.size("m", 8192, 333)),
        n(s.size("n", 8192, 257)),
        k(s.size("k", 8192, 301)),
        a(s.input<float>("a", m * k, bench::uniform(-1, 1))),   // m x k, row-major
        b(s.input<float>("b", n * k, bench::uniform(-1, 1))),   // k x n, column-major
        d(s.output<float>("d", m * n)) {                        // m x n, column-major
    s.flops(2.0 * m * n * k, bench::ceiling::tf32);
    s.bytes(double(a.bytes() + b.bytes() + d.bytes()));  // fewest bytes: A, B read; D written
  }
};

template <cublasMath_t Math>
class CublasSgemm {
 public:
  CublasSgemm(const Sgemm&, cudaStream_t) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetMathMode(handle_, Math), "cublasSetMathMode");
  }
  CublasSgemm(const CublasSgemm&) = delete;
  CublasSgemm& operator=(const CublasSgemm&) = delete;
  ~CublasSgemm() { cublasDestroy(handle_); }
  void operator()(const Sgemm& w, cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    const int m = int(w.m), n = int(w.n), k = int(w.k);
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cublas(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.a.data(), k, w.b.data(), k, &beta,
                             w.d.data(), m),
                 "cublasSgemm");
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

void device_reference(const Sgemm& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

void reference(const Sgemm& w, bench::HostData& h) {
  kernels::reference_gemm_tn(h.input<float>("a"), h.input<float>("b"), h.expected("d"), w.m, w.n, w.k);
}

BENCH_EXAMPLE(ch02, cublas_math_mode, Sgemm)
    .stateful<CublasSgemm<CUBLAS_DEFAULT_MATH>>(bench::Role::baseline, "sgemm_fp32_math")
    .stateful<CublasSgemm<CUBLAS_TF32_TENSOR_OP_MATH>>(bench::Role::optimized, "sgemm_tf32_tensor_op_math")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(2e-3))
    .mode(bench::Mode::sustained);  // TF32 at 8192^3 runs at the power limit, like the tf32 ceiling

}  // namespace
