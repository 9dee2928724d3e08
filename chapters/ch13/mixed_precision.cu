// ch13/mixed_precision: one training step of a two-layer MLP in FP32 → BF16 tensor-core GEMMs
// with FP32 master weights (what autocast plus an FP32 optimizer does in a framework).
//
// The step: z = x W1ᵀ + b1, a = silu(z), y = a W2ᵀ + b2, loss = Σ(y − target)² / 2B; backward
// dy = (y − target)/B, da = dy W2, dz = da · silu'(z), dW2 = dyᵀ a, dW1 = dzᵀ x, db = column sums
// of dy and dz; SGD: W ← W − lr dW. Six GEMMs hold 6·B·(d_in·hidden + hidden·d_out) flops (206
// GFLOP at batch 4096, 1024→4096→1024). In FP32 they run on the SIMT FP32 pipes (H100: ~67 TFLOP/s
// peak); with BF16 operands and FP32 accumulation they run on the tensor cores (~990 TFLOP/s
// dense peak), and the elementwise kernels move half the bytes for the activations they store.
//
// What changes from baseline to optimized:
//   1. baseline: every GEMM cublasGemmEx FP32 × FP32 → FP32 with CUBLAS_COMPUTE_32F and
//      CUBLAS_DEFAULT_MATH: no TF32 (that needs CUBLAS_TF32_TENSOR_OP_MATH or _32F_FAST_TF32);
//      activations and gradients stored in FP32;
//   2. optimized: x, W1, W2 cast to BF16 at the start of the step (the FP32 masters stay the ones
//      updated); every GEMM BF16 × BF16 → FP32 with FP32 accumulation (tensor cores); the GEMM
//      operands the elementwise kernels produce (a, dy, dz) are written in BF16; pre-activations,
//      GEMM outputs, weight gradients, bias sums and the update stay in FP32.
// Loss scaling is not needed here, and so not done: BF16 keeps FP32's 8-bit exponent, so the
// smallest gradients (dy ~ 1/B ≈ 2.4e-4, dz ~ 1e-5 and their products) are far from its
// underflow (1.2e-38). FP16 (5-bit exponent, normals down to 6.1e-5) would hold dz only as
// subnormals, losing bits, and flush what falls under 6e-8: there a scaled loss (unscaled before
// the update) is what keeps them.
// cuBLASLt through kernels/cublaslt_gemm.hpp does not fit: it takes one layout, both operands
// contiguous along k (x W1ᵀ is one), while the backward pass also needs dy W2 and dyᵀ a, whose
// operands are not; cublasGemmEx takes the transposes per call, with no transposed copies.
//
// Verification (batch 67, 40 → 72 → 24): the updated W1, b1, W2, b2 against an FP64 CPU step.
// Tolerance relative L2 1e-2 on each updated tensor, from the arithmetic: a BF16 operand is off
// by at most 2^-9 relative (round to nearest), a product of two by ~2^-8; FP32 sums of such
// products keep that relative error for same-sign sums and less for random-sign ones, and the
// chain x→z→a→y→dy→dz passes through four BF16 roundings, so a gradient is off by at most a
// few × 2^-9 (≈ 4e-3), less in rms. The updates are a large part of the weights (lr =
// kLearningRate with these inits: leaving any tensor un-updated is off by 0.23 to 0.99), so the
// updated weights are off by less than the gradients: a CPU emulation of this step with BF16
// rounding (FP64 otherwise) gave 2e-4 to 1e-3 at the verification size and up to 1.5e-3 at
// batch 256, 1024 → 4096 → 1024. FP32 is off by ~1e-6. At the timing size the check uses the
// FP32 step as a device reference.
//
//   ./bench compare --chapter ch13 --example mixed_precision
#include <bench/bench.hpp>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <kernels/cublas_check.hpp>
#include <kernels/event_span.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
constexpr float kLearningRate = 0.25f;

struct MlpStep {
  int64_t batch, d_in, hidden, d_out;
  // x [batch][d_in], target [batch][d_out], w1 [hidden][d_in], w2 [d_out][hidden]
  bench::DeviceSpan<const float> x, target, w1, b1, w2, b2;
  bench::DeviceSpan<float> w1_new, b1_new, w2_new, b2_new;
  static double bound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }
  explicit MlpStep(bench::Setup& s)
      : batch(s.size("batch", 4096, 67)),
        d_in(s.size("d_in", 1024, 40)),
        hidden(s.size("hidden", 4096, 72)),
        d_out(s.size("d_out", 1024, 24)),
        x(s.input<float>("x", batch * d_in, bench::uniform(0, 1))),
        target(s.input<float>("target", batch * d_out, bench::uniform(0.5, 1.5))),
        w1(s.input<float>("w1", hidden * d_in, bench::uniform(-bound(d_in), bound(d_in)))),
        b1(s.input<float>("b1", hidden, bench::uniform(-0.1, 0.1))),
        w2(s.input<float>("w2", d_out * hidden, bench::uniform(-bound(hidden), bound(hidden)))),
        b2(s.input<float>("b2", d_out, bench::uniform(-0.1, 0.1))),
        w1_new(s.output<float>("w1_new", hidden * d_in)),
        b1_new(s.output<float>("b1_new", hidden)),
        w2_new(s.output<float>("w2_new", d_out * hidden)),
        b2_new(s.output<float>("b2_new", d_out)) {
    // The six GEMMs; the elementwise work is O(batch x hidden) next to it.
    s.flops(6.0 * batch * (d_in * hidden + hidden * d_out), bench::ceiling::bf16);
    // Fewest bytes: every input read once, the updated weights and biases written once (the
    // activations and gradients between the GEMMs are each side's own traffic).
    s.bytes(double(x.bytes() + target.bytes() + w1.bytes() + b1.bytes() + w2.bytes() + b2.bytes() +
                   w1_new.bytes() + b1_new.bytes() + w2_new.bytes() + b2_new.bytes()));
  }
};

// --- elementwise kernels, templated on the type the GEMM operands are stored in (T) --------------
constexpr int kThreads = 256;
unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
template <class T>
__device__ T store_as(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return __float2bfloat16_rn(v);
}
__device__ float sigmoid(float z) { return 1.0f / (1.0f + __expf(-z)); }

__global__ void cast_to_bf16(const float* __restrict__ src, bf16* __restrict__ dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}
// z += b1 (kept in FP32 for the backward pass); a = silu(z) = z sigmoid(z)
template <class T>
__global__ void bias_silu(float* __restrict__ z, const float* __restrict__ b1, T* __restrict__ a,
                          int64_t n, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= n) return;
  const float v = z[i] + b1[i % cols];
  z[i] = v;
  a[i] = store_as<T>(v * sigmoid(v));
}
// dy = (y + b2 − target) / batch
template <class T>
__global__ void loss_grad(const float* __restrict__ y, const float* __restrict__ b2,
                          const float* __restrict__ target, T* __restrict__ dy, int64_t n,
                          int64_t cols, float inv_batch) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i < n) dy[i] = store_as<T>((y[i] + b2[i % cols] - target[i]) * inv_batch);
}
// dz = da · silu'(z), silu'(z) = s (1 + z (1 − s))
template <class T>
__global__ void silu_grad(const float* __restrict__ da, const float* __restrict__ z,
                          T* __restrict__ dz, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= n) return;
  const float s = sigmoid(z[i]);
  dz[i] = store_as<T>(da[i] * s * (1.0f + z[i] * (1.0f - s)));
}
// out[c] += Σ over kRowsPerBlock rows of m[r][c] (out zeroed first): column sums = bias gradients
constexpr int kRowsPerBlock = 64;
template <class T>
__global__ void column_sum(const T* __restrict__ m, float* __restrict__ out, int64_t rows,
                           int64_t cols) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * int64_t{kRowsPerBlock},
                r1 = r0 + kRowsPerBlock < rows ? r0 + kRowsPerBlock : rows;
  float sum = 0.0f;
  for (int64_t r = r0; r < r1; ++r) sum += static_cast<float>(m[r * cols + c]);
  atomicAdd(out + c, sum);
}
__global__ void sgd(const float* __restrict__ w, const float* __restrict__ grad,
                    float* __restrict__ w_new, int64_t n, float lr) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i < n) w_new[i] = fmaf(-lr, grad[i], w[i]);
}

// --- the step, for T = float (baseline) or bf16 (optimized) ------------------------------------
template <class T>
class TrainStep {
 public:
  TrainStep(const MlpStep& w, cudaStream_t)
      : z_(w.batch * w.hidden),
        a_(w.batch * w.hidden),
        y_(w.batch * w.d_out),
        dy_(w.batch * w.d_out),
        da_(w.batch * w.hidden),
        dz_(w.batch * w.hidden),
        dw1_(w.hidden * w.d_in),
        dw2_(w.d_out * w.hidden),
        db1_(w.hidden),
        db2_(w.d_out) {
    // compute-sanitizer's initcheck does not see cuBLAS's BF16 GEMM kernels store their output on
    // Hopper: it flagged bias_silu's reads of z, though a NaN-filled z comes back with every
    // element written (a probe at this file's verification shape, H100, CUDA 13.0). Zeroing the
    // GEMM outputs once here, untimed, keeps the sanitizer's report about our kernels; every value
    // read is still the GEMM's, and the FP64 reference checks them.
    for (const bench::DeviceBuffer<float>* gemm_out : {&z_, &y_, &da_, &dw1_, &dw2_})
      BENCH_CUDA_CHECK(cudaMemset(gemm_out->data(), 0, gemm_out->bytes()));
    if constexpr (is_bf16) {
      x_lo_ = bench::DeviceBuffer<T>(w.batch * w.d_in);
      w1_lo_ = bench::DeviceBuffer<T>(w.hidden * w.d_in);
      w2_lo_ = bench::DeviceBuffer<T>(w.d_out * w.hidden);
    }
    kernels::check_cublas(cublasCreate(&handle_), "cublasCreate");
    // FP32 compute, no TF32: CUBLAS_DEFAULT_MATH leaves FP32 GEMMs on the FP32 pipes; BF16
    // operands use the tensor cores with FP32 accumulation under the same setting.
    kernels::check_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;
  ~TrainStep() {
    cublasDestroy(handle_);
  }

  void operator()(const MlpStep& w, cudaStream_t stream) {
    kernels::check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    step_.begin(stream);
    const T* x = operand(w.x.data(), x_lo_, w.batch * w.d_in, stream);
    const T* w1 = operand(w.w1.data(), w1_lo_, w.hidden * w.d_in, stream);
    const T* w2 = operand(w.w2.data(), w2_lo_, w.d_out * w.hidden, stream);
    const int64_t B = w.batch, hb = B * w.hidden, ob = B * w.d_out;
    gemm(false, true, B, w.hidden, w.d_in, x, w1, z_.data());  // z = x W1ᵀ
    bias_silu<<<blocks_for(hb), kThreads, 0, stream>>>(z_.data(), w.b1.data(), a_.data(), hb,
                                                       w.hidden);
    BENCH_CHECK_LAUNCH();
    gemm(false, true, B, w.d_out, w.hidden, a_.data(), w2, y_.data());  // y = a W2ᵀ (b2 added next)
    loss_grad<<<blocks_for(ob), kThreads, 0, stream>>>(y_.data(), w.b2.data(), w.target.data(),
                                                       dy_.data(), ob, w.d_out,
                                                       1.0f / static_cast<float>(B));
    BENCH_CHECK_LAUNCH();
    gemm(false, false, B, w.hidden, w.d_out, dy_.data(), w2, da_.data());  // da = dy W2
    silu_grad<<<blocks_for(hb), kThreads, 0, stream>>>(da_.data(), z_.data(), dz_.data(), hb);
    BENCH_CHECK_LAUNCH();
    gemm(true, false, w.d_out, w.hidden, B, dy_.data(), a_.data(), dw2_.data());  // dW2 = dyᵀ a
    gemm(true, false, w.hidden, w.d_in, B, dz_.data(), x, dw1_.data());           // dW1 = dzᵀ x
    column_sums(dy_.data(), db2_.data(), B, w.d_out, stream);
    column_sums(dz_.data(), db1_.data(), B, w.hidden, stream);
    update(w.w1.data(), dw1_.data(), w.w1_new.data(), w.w1.size(), stream);
    update(w.b1.data(), db1_.data(), w.b1_new.data(), w.b1.size(), stream);
    update(w.w2.data(), dw2_.data(), w.w2_new.data(), w.w2.size(), stream);
    update(w.b2.data(), db2_.data(), w.b2_new.data(), w.b2.size(), stream);
    step_.end(stream);
    batch_ = B;
  }
  std::vector<bench::Metric> metrics() const {  // the last step's samples per second
    const double ms = step_.ms();
    return {{"samples_per_s", ms > 0 ? 1e3 * static_cast<double>(batch_) / ms : 0.0}};
  }

 private:
  static constexpr bool is_bf16 = std::is_same_v<T, bf16>;
  // The GEMM operand for an FP32 master: itself (FP32), or a BF16 copy made now.
  static const T* operand(const float* master, const bench::DeviceBuffer<T>& low, int64_t n,
                          cudaStream_t stream) {
    if constexpr (is_bf16) {
      cast_to_bf16<<<blocks_for(n), kThreads, 0, stream>>>(master, low.data(), n);
      BENCH_CHECK_LAUNCH();
      return low.data();
    } else {
      return master;
    }
  }
  // Row-major C[m][n] (FP32) = op(A) op(B), op(A) m x k, op(B) k x n; a transposed operand is
  // stored [k][m] (A) or [n][k] (B). cuBLAS is column-major, so it computes Cᵀ = op(B)ᵀ op(A)ᵀ.
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
            float* c) const {
    constexpr cudaDataType type = is_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const float alpha = 1.0f, beta = 0.0f;
    kernels::check_cublas(
        cublasGemmEx(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &alpha, b, type,
                     int(trans_b ? k : n), a, type, int(trans_a ? m : k), &beta, c, CUDA_R_32F,
                     int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
  static void column_sums(const T* m, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemsetAsync(out, 0, cols * sizeof(float), stream));
    const dim3 grid(blocks_for(cols),
                    static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
    column_sum<<<grid, kThreads, 0, stream>>>(m, out, rows, cols);
    BENCH_CHECK_LAUNCH();
  }
  static void update(const float* w, const float* grad, float* w_new, int64_t n,
                     cudaStream_t stream) {
    sgd<<<blocks_for(n), kThreads, 0, stream>>>(w, grad, w_new, n, kLearningRate);
    BENCH_CHECK_LAUNCH();
  }

  bench::DeviceBuffer<float> z_;
  bench::DeviceBuffer<T> a_;
  bench::DeviceBuffer<float> y_;
  bench::DeviceBuffer<T> dy_;
  bench::DeviceBuffer<float> da_;
  bench::DeviceBuffer<T> dz_;
  bench::DeviceBuffer<float> dw1_, dw2_, db1_, db2_;
  bench::DeviceBuffer<T> x_lo_, w1_lo_, w2_lo_;  // BF16 copies of the FP32 masters (optimized only)
  cublasHandle_t handle_ = nullptr;
  kernels::EventSpan step_;  // the last step's GPU timeline
  int64_t batch_ = 0;
};

// The FP32 step, as a device reference for the timing size (an FP64 CPU step there is ~200 GFLOP).
void device_reference(const MlpStep& w, cudaStream_t stream) {
  TrainStep<float> fp32(w, stream);
  fp32(w, stream);
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // its buffers are freed on return
}

void reference(const MlpStep& w, bench::HostData& h) {
  auto x = h.input<float>("x"), target = h.input<float>("target");
  auto w1 = h.input<float>("w1"), b1 = h.input<float>("b1"), w2 = h.input<float>("w2"),
       b2 = h.input<float>("b2");
  const int64_t B = w.batch, I = w.d_in, H = w.hidden, O = w.d_out;
  std::vector<double> z(B * H), a(B * H), dy(B * O), dz(B * H);
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < H; ++j) {
      double v = b1[j];
      for (int64_t p = 0; p < I; ++p) v += double(x[r * I + p]) * w1[j * I + p];
      z[r * H + j] = v;
      a[r * H + j] = v / (1.0 + std::exp(-v));
    }
  for (int64_t r = 0; r < B; ++r)
    for (int64_t o = 0; o < O; ++o) {
      double v = b2[o];
      for (int64_t j = 0; j < H; ++j) v += a[r * H + j] * w2[o * H + j];
      dy[r * O + o] = (v - target[r * O + o]) / double(B);
    }
  for (int64_t r = 0; r < B; ++r)
    for (int64_t j = 0; j < H; ++j) {
      double da = 0;
      for (int64_t o = 0; o < O; ++o) da += dy[r * O + o] * w2[o * H + j];
      const double s = 1.0 / (1.0 + std::exp(-z[r * H + j]));
      dz[r * H + j] = da * s * (1.0 + z[r * H + j] * (1.0 - s));
    }
  // W_new[j][p] = W[j][p] − lr Σ_r grad[r][j] in[r][p]; b_new[j] = b[j] − lr Σ_r grad[r][j]
  auto sgd_layer = [B](const std::vector<double>& grad, int64_t outs, const auto& in, int64_t ins,
                       auto weight, auto bias, std::span<double> w_new, std::span<double> b_new) {
    const double lr = kLearningRate;
    for (int64_t j = 0; j < outs; ++j) {
      double db = 0;
      for (int64_t r = 0; r < B; ++r) db += grad[r * outs + j];
      b_new[j] = bias[j] - lr * db;
      for (int64_t p = 0; p < ins; ++p) {
        double g = 0;
        for (int64_t r = 0; r < B; ++r) g += grad[r * outs + j] * in[r * ins + p];
        w_new[j * ins + p] = weight[j * ins + p] - lr * g;
      }
    }
  };
  sgd_layer(dz, H, x, I, w1, b1, h.expected("w1_new"), h.expected("b1_new"));
  sgd_layer(dy, O, a, H, w2, b2, h.expected("w2_new"), h.expected("b2_new"));
}

BENCH_EXAMPLE(ch13, mixed_precision, MlpStep)
    .stateful<TrainStep<float>>(bench::Role::baseline, "fp32_cublas_no_tf32",
                                {.compute_ceiling = bench::ceiling::fp32})
    .stateful<TrainStep<bf16>>(bench::Role::optimized, "bf16_tensor_core_fp32_master")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(1e-2));

}  // namespace
