// ch01/training_step: the model both sides train (see training_step.cu): its inputs and outputs
// (Mlp), the shared sizes and launch constants, and the tanh GELU with its slope, in double for
// the CPU reference and in FP32 for the kernels.
#pragma once

#include <cuda_bf16.h>

#include <bench/bench.hpp>
#include <cmath>
#include <kernels/cublas_check.hpp>
#include <memory>

namespace {

using bf16 = __nv_bfloat16;
using kernels::check_cublas;

constexpr int kLayers = 4;
constexpr int kBlock = 256;
constexpr int kChunks = 64;          // the batch is cut into this many slices for column sums
constexpr int kLossBlocks = 1056;    // the FP32 loss kernel's grid: 8 blocks per SM of an H100
constexpr int kStreamBlocks = 2112;  // grid-stride elementwise kernels: 16 blocks per SM

// Learning rate: the loss is a mean over width and batch, so dL/dw of the upper layers, dominated
// by its mean over the batch, is ~1/width while a weight is ~1/sqrt(width). lr = kStepSize
// sqrt(width) moves the weights by ~25% (relative L2 over all 4 layers) and the biases by ~8% at
// any width: a large step for training, but what makes the check see the update (see the
// tolerance, at the bottom).
constexpr double kStepSize = 2.0;

struct Mlp {
  int64_t batch, width;
  float lr;
  bench::DeviceSpan<const float> x, target, w, b;  // w: layers x width x width; b: layers x width
  bench::DeviceSpan<float> w_out, b_out, loss;
  bench::DeviceBuffer<bf16> w_bf16, b_bf16;  // the BF16 copies the previous step's SGD wrote
  mutable std::shared_ptr<void>
      reference_state;  // the device reference's buffers, made on first use
  // Verification: width 264 and batch 120, multiples of 8 (cuBLASLt's aux leading dimension and
  // 16-byte rows) but of no tile size, so every GEMM and reduction has ragged edges.
  explicit Mlp(bench::Setup& s)
      : batch(s.size("batch", 8192, 120)),
        width(s.size("width", 4096, 264)),
        lr(static_cast<float>(kStepSize * std::sqrt(double(width)))),
        x(s.input<float>("x", batch * width, bench::uniform(-1, 1))),
        target(s.input<float>("target", batch * width, bench::uniform(-1, 1))),
        // variance 1/width: activations keep their size from layer to layer
        w(s.input<float>("w", kLayers * width * width,
                         bench::uniform(-std::sqrt(3.0 / width), std::sqrt(3.0 / width)))),
        b(s.input<float>("b", kLayers * width, bench::uniform(-1, 1))),
        w_out(s.output<float>("w_out", kLayers * width * width)),
        b_out(s.output<float>("b_out", kLayers * width)),
        loss(s.output<float>("loss", 1)),
        w_bf16(kLayers * width * width),
        b_bf16(kLayers * width) {
    s.flops(6.0 * batch * width * width * kLayers, bench::ceiling::bf16);
    // Fewest bytes: every input read once, the new weights, biases and the loss written once (the
    // activations, gradients and BF16 copies are each side's own traffic).
    s.bytes(double(x.bytes() + target.bytes() + w.bytes() + b.bytes() + w_out.bytes() +
                   b_out.bytes() + loss.bytes()));
  }
  int64_t activations() const { return batch * width; }
  int64_t weights() const { return width * width; }
  void inputs_filled(cudaStream_t stream);  // in training_step_passes.cuh, with the BF16 casts
};

__host__ __device__ inline double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
__host__ __device__ inline double gelu_tanh_grad(double v) {
  const double th = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
  return 0.5 * (1.0 + th) +
         0.5 * v * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * v * v);
}
// FP32 on the device; `th` is the tanh both share (the loss kernel needs GELU and its slope of
// the same value, and tanhf is most of their cost).
__device__ inline float gelu_tanh_f(float v) {
  return tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
}
__device__ inline float gelu_f(float v, float th) { return 0.5f * v * (1.0f + th); }
__device__ inline float gelu_grad_f(float v, float th) {
  return 0.5f * (1.0f + th) +
         0.5f * v * (1.0f - th * th) * 0.7978845608f * (1.0f + 3 * 0.044715f * v * v);
}
__device__ inline float gelu_f(float v) { return gelu_f(v, gelu_tanh_f(v)); }
__device__ inline float gelu_grad_f(float v) { return gelu_grad_f(v, gelu_tanh_f(v)); }

// Grid-stride loops: for (int64_t i = first_index(); i < n; i += grid_stride()).
__device__ inline int64_t first_index() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

}  // namespace
