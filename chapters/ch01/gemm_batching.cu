// ch01/gemm_batching: many small matrix products (64 x 64 x 64, FP32), one cuBLAS call each →
// one call for all of them.
//
// A 64^3 product is 0.5 MFLOP: a few microseconds of one kernel that fills a handful of SMs, less
// than it takes the host to launch it. A loop of such calls runs at the launch rate, with the GPU
// mostly idle (the goodput lesson: time spent, not work done). Batching hands cuBLAS the whole
// set at once, so one kernel spreads every product over the whole GPU.
//   1. baseline: a loop of `count` cublasSgemm calls, one per product;
//   2. step: cublasSgemmBatched, one call with device arrays of pointers to each A, B and C
//      (built once, untimed: the pointers depend on the buffers, never on their contents). The
//      form for products whose operands are scattered;
//   3. optimized: cublasSgemmStridedBatched, one call with a fixed stride between products, where
//      the operands lie back to back: no pointer arrays to read.
// `count` is an axis, so the crossover shows (`bench compare --sweep`): at a handful of products
// the loop is as fast as one batched call; the default points are where batching pays.
// Launch-bound: sampled hot (back-to-back calls). The loop's time is the host's launch rate, and
// so is a batched call's: one call costs the host more than its kernel costs the GPU, so the
// queue runs dry between calls, and a call's time follows the host more than the count (the
// README has it across hosts). Every side is host_bound, and the pair is scored against the
// spread of speedups seen over machines.
//
//   ./bench compare --chapter ch01 --example gemm_batching [--sweep]
#include <cublas_v2.h>

#include <bench/bench.hpp>
#include <kernels/cublas_check.hpp>
#include <vector>

namespace {

using kernels::check_cublas;

// Products i = 0..count-1: C_i (dim x dim) = A_i B_i, all column-major, stored back to back.
struct SmallGemms {
  int64_t count, dim;
  bench::DeviceSpan<const float> a, b;
  bench::DeviceSpan<float> c;
  explicit SmallGemms(bench::Setup& s)
      : count(s.size("count", s.axis("count"), 7)),
        dim(s.size("dim", 64, 37)),  // odd when verifying: no tile divides it
        a(s.input<float>("a", count * dim * dim, bench::uniform(-1, 1))),
        b(s.input<float>("b", count * dim * dim, bench::uniform(-1, 1))),
        c(s.output<float>("c", count * dim * dim)) {
    s.bytes(3.0 * count * dim * dim * sizeof(float));
    s.flops(2.0 * count * dim * dim * dim);
  }
  int64_t matrix_elements() const { return dim * dim; }
};

class CublasHandle {
 public:
  CublasHandle() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() { cublasDestroy(handle_); }
  cublasHandle_t on(cudaStream_t stream) const {
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    return handle_;
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

constexpr float kOne = 1.0f, kZero = 0.0f;

struct OneCallPerProduct {
  CublasHandle cublas;
  OneCallPerProduct(const SmallGemms&, cudaStream_t) {}
  void operator()(const SmallGemms& w, cudaStream_t stream) {
    const cublasHandle_t h = cublas.on(stream);
    const int d = static_cast<int>(w.dim);
    for (int64_t i = 0; i < w.count; ++i) {
      const int64_t at = i * w.matrix_elements();
      check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &kOne, w.a.data() + at, d,
                               w.b.data() + at, d, &kZero, w.c.data() + at, d),
                   "cublasSgemm");
    }
  }
};

class PointerArrayBatch {
 public:
  PointerArrayBatch(const SmallGemms& w, cudaStream_t stream)
      : operands_(2 * w.count), results_(w.count) {
    std::vector<const float*> operands(
        static_cast<size_t>(2 * w.count));  // A_0..A_{n-1}, B_0..B_{n-1}
    std::vector<float*> results(static_cast<size_t>(w.count));
    for (int64_t i = 0; i < w.count; ++i) {
      const int64_t at = i * w.matrix_elements();
      operands[i] = w.a.data() + at;
      operands[w.count + i] = w.b.data() + at;
      results[i] = w.c.data() + at;
    }
    BENCH_CUDA_CHECK(cudaMemcpyAsync(operands_.data(), operands.data(), operands_.bytes(),
                                     cudaMemcpyHostToDevice, stream));
    BENCH_CUDA_CHECK(cudaMemcpyAsync(results_.data(), results.data(), results_.bytes(),
                                     cudaMemcpyHostToDevice, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors go out of scope
  }
  void operator()(const SmallGemms& w, cudaStream_t stream) {
    const int d = static_cast<int>(w.dim);
    const float* const* a = operands_.data();
    check_cublas(
        cublasSgemmBatched(cublas_.on(stream), CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &kOne, a, d,
                           a + w.count, d, &kZero, results_.data(), d, static_cast<int>(w.count)),
        "cublasSgemmBatched");
  }

 private:
  CublasHandle cublas_;
  bench::DeviceBuffer<const float*> operands_;
  bench::DeviceBuffer<float*> results_;
};

struct StridedBatch {
  CublasHandle cublas;
  StridedBatch(const SmallGemms&, cudaStream_t) {}
  void operator()(const SmallGemms& w, cudaStream_t stream) {
    const int d = static_cast<int>(w.dim);
    const long long stride = w.matrix_elements();
    check_cublas(
        cublasSgemmStridedBatched(cublas.on(stream), CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &kOne,
                                  w.a.data(), d, stride, w.b.data(), d, stride, &kZero, w.c.data(),
                                  d, stride, static_cast<int>(w.count)),
        "cublasSgemmStridedBatched");
  }
};

void reference(const SmallGemms& w, bench::HostData& h) {
  auto a = h.input<float>("a");
  auto b = h.input<float>("b");
  auto c = h.expected("c");
  const int64_t d = w.dim, size = w.matrix_elements();
  for (int64_t i = 0; i < w.count; ++i)
    for (int64_t col = 0; col < d; ++col)
      for (int64_t row = 0; row < d; ++row) {
        double sum = 0;
        for (int64_t p = 0; p < d; ++p)
          sum += double(a[i * size + p * d + row]) * b[i * size + col * d + p];
        c[i * size + col * d + row] = sum;
      }
}

// The timing-size check (docs/validity.md row 2): one thread per element of C, its dot product in
// double, column-major as cuBLAS reads the operands; no cuBLAS.
__global__ void reference_gemms(const float* a, const float* b, float* c, int64_t count, int64_t d) {
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (o >= count * d * d) return;
  const int64_t size = d * d, i = o / size, col = o % size / d, row = o % d;
  double sum = 0;
  for (int64_t p = 0; p < d; ++p) sum += double(a[i * size + p * d + row]) * b[i * size + col * d + p];
  c[o] = static_cast<float>(sum);
}

void device_reference(const SmallGemms& w, cudaStream_t stream) {
  const int64_t elements = w.count * w.matrix_elements();
  reference_gemms<<<static_cast<unsigned>((elements + 255) / 256), 256, 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), w.count, w.dim);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch01, gemm_batching, SmallGemms)
    .int_axis("count", {1, 4, 16, 64, 256, 512, 2048}, {64, 512})
    .stateful<OneCallPerProduct>(bench::Role::baseline, "cublasSgemm_loop", {.host_bound = true})
    .stateful<PointerArrayBatch>(bench::Role::step, "cublasSgemmBatched_pointer_array",
                                 {.host_bound = true})
    .stateful<StridedBatch>(bench::Role::optimized, "cublasSgemmStridedBatched",
                            {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::hot);

}  // namespace
