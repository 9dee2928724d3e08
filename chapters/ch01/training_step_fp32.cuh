// ch01/training_step: the FP32 baseline, a first training loop as written: cublasSgemm (CUDA
// cores), one kernel per elementwise operation, and the host waiting after every layer. fp32_step
// also runs the device reference (training_step_reference.cuh) over its own GEMMs, and the BF16
// sides reuse column_partials and finish_columns.
#pragma once

#include <cublas_v2.h>

#include <kernels/event_span.hpp>
#include <kernels/group_reduce.cuh>
#include <vector>

#include "training_step_model.cuh"

namespace {

// ---- FP32 kernels: the baseline's, and the device reference's around its own GEMMs ----------
__global__ void add_bias(float* z, const float* bias, int64_t n, int64_t width) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) z[i] += bias[i % width];
}
__global__ void gelu(const float* z, float* a, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) a[i] = gelu_f(z[i]);
}
__global__ void dgelu(const float* da, const float* z, float* dz, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dz[i] = da[i] * gelu_grad_f(z[i]);
}
// dL/dy = (y - t) * scale, and per block the sum of (y - t)^2.
__global__ void loss_grad(const float* y, const float* t, float* dy, float* partials, int64_t n,
                          float scale) {
  float sum = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float diff = y[i] - t[i];
    dy[i] = diff * scale;
    sum = fmaf(diff, diff, sum);
  }
  sum = kernels::group_reduce<kBlock>(sum, kernels::Sum{});
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
// Column sums of a row-major rows x width matrix (a bias gradient: a sum over the batch): block
// (x, y) sums columns x*kBlock.. over the y-th slice of the rows; finish_columns adds the slices.
template <class T>
__global__ void column_partials(const T* v, float* partials, int64_t rows, int64_t width) {
  const int64_t col = blockIdx.x * int64_t{kBlock} + threadIdx.x,
                per = (rows + kChunks - 1) / kChunks;
  if (col >= width) return;
  float sum = 0;
  for (int64_t r = blockIdx.y * per; r < rows && r < (blockIdx.y + 1) * per; ++r)
    sum += float(v[r * width + col]);
  partials[blockIdx.y * width + col] = sum;
}
template <class Out>
__global__ void finish_columns(const float* partials, Out* out, int64_t width) {
  const int64_t col = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (col >= width) return;
  float sum = 0;
  for (int c = 0; c < kChunks; ++c) sum += partials[c * width + col];
  out[col] = Out(sum);
}
__global__ void finish_loss(const float* partials, int count, float* loss, float scale) {
  float sum = 0;
  for (int i = threadIdx.x; i < count; i += kBlock) sum += partials[i];
  sum = kernels::group_reduce<kBlock>(sum, kernels::Sum{});
  if (threadIdx.x == 0) *loss = sum * scale;
}
__global__ void sgd(const float* p, const float* g, float* out, int64_t n, float lr) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = p[i] - lr * g[i];
}

void column_sums(const float* v, float* out, int64_t rows, int64_t width, float* partials,
                 cudaStream_t stream) {
  const unsigned cols = static_cast<unsigned>((width + kBlock - 1) / kBlock);
  column_partials<<<dim3(cols, kChunks), kBlock, 0, stream>>>(v, partials, rows, width);
  BENCH_CHECK_LAUNCH();
  finish_columns<<<cols, kBlock, 0, stream>>>(partials, out, width);
  BENCH_CHECK_LAUNCH();
}

// The FP32 step's buffers: each layer's pre-activation z and activation a, one gradient each.
struct Fp32Buffers {
  bench::DeviceBuffer<float> z, a, dz, da, dw, db, column_partials, loss_partials;
  explicit Fp32Buffers(const Mlp& m)
      : z(kLayers * m.activations()),
        a(kLayers * m.activations()),
        dz(m.activations()),
        da(m.activations()),
        dw(m.weights()),
        db(kLayers * m.width),
        column_partials(kChunks * m.width),
        loss_partials(kLossBlocks) {}
};

// The FP32 step, over any GEMM engine with forward (z = a w^T), input_grad (da = dz w) and
// weight_grad (dw = dz^T a) on row-major operands. `sync`: wait for the GPU after every layer.
template <class Gemms>
void fp32_step(const Mlp& m, const Fp32Buffers& f, Gemms& gemms, bool sync, cudaStream_t stream) {
  const int64_t n = m.activations(), d = m.width;
  auto wait = [&] {
    if (sync) BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  const float* in = m.x.data();
  for (int l = 0; l < kLayers; ++l) {
    float *z = f.z.data() + l * n, *a = f.a.data() + l * n;
    gemms.forward(in, m.w.data() + l * m.weights(), z, stream);
    add_bias<<<kStreamBlocks, kBlock, 0, stream>>>(z, m.b.data() + l * d, n, d);
    BENCH_CHECK_LAUNCH();
    gelu<<<kStreamBlocks, kBlock, 0, stream>>>(z, a, n);
    BENCH_CHECK_LAUNCH();
    in = a;
    wait();
  }
  const int top = kLayers - 1;
  loss_grad<<<kLossBlocks, kBlock, 0, stream>>>(in, m.target.data(), f.da.data(),
                                                f.loss_partials.data(), n, 1.0f / n);
  BENCH_CHECK_LAUNCH();
  finish_loss<<<1, kBlock, 0, stream>>>(f.loss_partials.data(), kLossBlocks, m.loss.data(),
                                        0.5f / n);
  BENCH_CHECK_LAUNCH();
  for (int l = top; l >= 0; --l) {  // f.da holds dL/da of layer l
    dgelu<<<kStreamBlocks, kBlock, 0, stream>>>(f.da.data(), f.z.data() + l * n, f.dz.data(), n);
    BENCH_CHECK_LAUNCH();
    column_sums(f.dz.data(), f.db.data() + l * d, m.batch, d, f.column_partials.data(), stream);
    gemms.weight_grad(f.dz.data(), l == 0 ? m.x.data() : f.a.data() + (l - 1) * n, f.dw.data(),
                      stream);
    sgd<<<kStreamBlocks, kBlock, 0, stream>>>(m.w.data() + l * m.weights(), f.dw.data(),
                                              m.w_out.data() + l * m.weights(), m.weights(), m.lr);
    BENCH_CHECK_LAUNCH();
    sgd<<<(d + kBlock - 1) / kBlock, kBlock, 0, stream>>>(m.b.data() + l * d, f.db.data() + l * d,
                                                          m.b_out.data() + l * d, d, m.lr);
    BENCH_CHECK_LAUNCH();
    if (l > 0) gemms.input_grad(f.dz.data(), m.w.data() + l * m.weights(), f.da.data(), stream);
    wait();
  }
}

// cuBLAS's FP32 GEMM (CUDA cores: the default math mode allows no TF32). Row-major X (rows x d)
// is column-major X^T with leading dimension d, so each product is written for cuBLAS transposed.
class SgemmEngine {
 public:
  explicit SgemmEngine(const Mlp& m) : batch_(int(m.batch)), d_(int(m.width)) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
  }
  SgemmEngine(const SgemmEngine&) = delete;
  SgemmEngine& operator=(const SgemmEngine&) = delete;
  ~SgemmEngine() { cublasDestroy(handle_); }
  void forward(const float* a, const float* w, float* z, cudaStream_t s) {
    gemm(s, CUBLAS_OP_T, CUBLAS_OP_N, d_, batch_, d_, w, a, z);
  }
  void input_grad(const float* dz, const float* w, float* da, cudaStream_t s) {
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_N, d_, batch_, d_, w, dz, da);
  }
  void weight_grad(const float* dz, const float* a, float* dw, cudaStream_t s) {
    gemm(s, CUBLAS_OP_N, CUBLAS_OP_T, d_, d_, batch_, a, dz, dw);
  }

 private:
  void gemm(cudaStream_t s, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
            const float* a, const float* b, float* c) {
    const float one = 1, zero = 0;
    check_cublas(cublasSetStream(handle_, s), "cublasSetStream");
    check_cublas(cublasSgemm(handle_, ta, tb, m, n, k, &one, a, d_, b, d_, &zero, c, d_),
                 "cublasSgemm");
  }
  int batch_, d_;
  cublasHandle_t handle_ = nullptr;
};

class Fp32SyncPerLayer {
 public:
  Fp32SyncPerLayer(const Mlp& m, cudaStream_t) : buffers_(m), gemms_(m), batch_(double(m.batch)) {}
  void operator()(const Mlp& m, cudaStream_t stream) {
    span_.begin(stream);
    fp32_step(m, buffers_, gemms_, /*sync=*/true, stream);
    span_.end(stream);
  }
  std::vector<bench::Metric> metrics() const {
    return {{"samples_per_s", batch_ / (span_.ms() * 1e-3)}};
  }

 private:
  Fp32Buffers buffers_;
  SgemmEngine gemms_;
  kernels::EventSpan span_;
  double batch_;
};

}  // namespace
