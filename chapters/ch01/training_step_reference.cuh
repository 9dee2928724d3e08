// ch01/training_step: the references both sides are checked against: the FP32 step over the
// suite's trusted GEMM on the device (timing size), and a double-precision step on the CPU
// (verification size).
#pragma once

#include <kernels/reference_gemm.cuh>
#include <memory>
#include <vector>

#include "training_step_fp32.cuh"
#include "training_step_model.cuh"

namespace {

// ---- References ------------------------------------------------------------------------------
// At the timing size (docs/validity.md row 2): the FP32 step with the suite's simple trusted GEMM
// (kernels/reference_gemm.cuh, both operands k-contiguous) in place of cuBLAS, the operands
// transposed first where the product needs it, and no synchronisation.
// out (cols x rows) = in (rows x cols)^T, row-major, through 32 x 32 shared-memory tiles.
__global__ void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  __shared__ float tile[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x, r0 = blockIdx.y * 32;
  for (int j = threadIdx.y; j < 32; j += 8)
    if (r0 + j < rows && c < cols) tile[j][threadIdx.x] = in[(r0 + j) * cols + c];
  __syncthreads();
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int64_t out_row = blockIdx.x * 32 + j, out_col = r0 + threadIdx.x;
    if (out_row < cols && out_col < rows) out[out_row * rows + out_col] = tile[threadIdx.x][j];
  }
}

class ReferenceGemms {
 public:
  explicit ReferenceGemms(const Mlp& m)
      : b_(m.batch), d_(m.width), wt_(m.weights()), at_(m.activations()), dzt_(m.activations()) {}
  void forward(const float* a, const float* w, float* z, cudaStream_t s) {
    kernels::reference_gemm_tn(w, a, z, d_, b_, d_, s);
  }
  void input_grad(const float* dz, const float* w, float* da, cudaStream_t s) {
    transpose_into(w, wt_.data(), d_, d_, s);
    kernels::reference_gemm_tn(wt_.data(), dz, da, d_, b_, d_, s);
  }
  void weight_grad(const float* dz, const float* a, float* dw, cudaStream_t s) {
    transpose_into(a, at_.data(), b_, d_, s);
    transpose_into(dz, dzt_.data(), b_, d_, s);
    kernels::reference_gemm_tn(at_.data(), dzt_.data(), dw, d_, d_, b_, s);
  }

 private:
  static void transpose_into(const float* in, float* out, int64_t rows, int64_t cols,
                             cudaStream_t s) {
    transpose<<<dim3(unsigned((cols + 31) / 32), unsigned((rows + 31) / 32)), dim3(32, 8), 0, s>>>(
        in, out, rows, cols);
    BENCH_CHECK_LAUNCH();
  }
  int64_t b_, d_;
  bench::DeviceBuffer<float> wt_, at_, dzt_;
};

struct ReferenceState {
  Fp32Buffers buffers;
  ReferenceGemms gemms;
  explicit ReferenceState(const Mlp& m) : buffers(m), gemms(m) {}
};

void device_reference(const Mlp& m, cudaStream_t stream) {
  if (!m.reference_state)
    m.reference_state = std::make_shared<ReferenceState>(m);  // once, then reused
  fp32_step(m, static_cast<ReferenceState*>(m.reference_state.get())->buffers,
            static_cast<ReferenceState*>(m.reference_state.get())->gemms, /*sync=*/false, stream);
}

// On the CPU, in double, at the verification size.
void reference(const Mlp& m, bench::HostData& h) {
  auto x = h.input<float>("x"), t = h.input<float>("target"), w = h.input<float>("w"),
       b = h.input<float>("b");
  auto w_out = h.expected("w_out"), b_out = h.expected("b_out"), loss = h.expected("loss");
  const int64_t rows = m.batch, d = m.width, n = m.activations(), dd = m.weights();
  std::vector<std::vector<double>> z(kLayers, std::vector<double>(n)),
      a(kLayers + 1, std::vector<double>(n));
  a[0].assign(x.begin(), x.end());
  for (int l = 0; l < kLayers; ++l)
    for (int64_t s = 0; s < rows; ++s)
      for (int64_t o = 0; o < d; ++o) {
        double sum = b[l * d + o];
        for (int64_t i = 0; i < d; ++i) sum += a[l][s * d + i] * w[l * dd + o * d + i];
        z[l][s * d + o] = sum;
        a[l + 1][s * d + o] = gelu_tanh(sum);
      }
  std::vector<double> grad(n), dz(n);  // dL/da of the layer being differentiated, then dL/dz
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = a[kLayers][i] - t[i];
    squares += diff * diff;
    grad[i] = diff / double(n);
  }
  loss[0] = squares / (2.0 * n);
  for (int l = kLayers - 1; l >= 0; --l) {
    for (int64_t i = 0; i < n; ++i) dz[i] = grad[i] * gelu_tanh_grad(z[l][i]);
    for (int64_t o = 0; o < d; ++o) {
      double db = 0;
      for (int64_t s = 0; s < rows; ++s) db += dz[s * d + o];
      b_out[l * d + o] = b[l * d + o] - double(m.lr) * db;
      for (int64_t i = 0; i < d; ++i) {
        double dw = 0;
        for (int64_t s = 0; s < rows; ++s) dw += dz[s * d + o] * a[l][s * d + i];
        w_out[l * dd + o * d + i] = w[l * dd + o * d + i] - double(m.lr) * dw;
      }
    }
    if (l > 0)
      for (int64_t s = 0; s < rows; ++s)
        for (int64_t i = 0; i < d; ++i) {
          double sum = 0;
          for (int64_t o = 0; o < d; ++o) sum += dz[s * d + o] * w[l * dd + o * d + i];
          grad[s * d + i] = sum;
        }
  }
}

}  // namespace
