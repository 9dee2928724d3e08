// kernels/reference_rows.cuh: the one piece of a row-wise device reference (an example's
// .device_reference, docs/validity.md row 2) that is not one thread per output: a block's sum, or
// largest value, in double. One block per row; each thread sums a strided share of the row, then a
// plain tree in shared memory folds the shares. No shuffles, no vector loads, nothing the variants
// under test use: slow next to them, plainly right. Built on it, the row norms two chapters check
// against (ch09's LayerNorm and RMSNorm, ch16's decode layer).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kernels {

constexpr int kReferenceRowBlock = 256;  // threads per row in every row-wise device reference

// Every thread of the block (kReferenceRowBlock of them) calls it and receives the block's sum.
__device__ inline double reference_block_sum(double v) {
  __shared__ double shares[kReferenceRowBlock];
  shares[threadIdx.x] = v;
  __syncthreads();
  for (int width = kReferenceRowBlock / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shares[threadIdx.x] += shares[threadIdx.x + width];
    __syncthreads();
  }
  const double sum = shares[0];
  __syncthreads();  // the slots may be reused by a second call
  return sum;
}

// The same for the block's largest value (a softmax row's max).
__device__ inline double reference_block_max(double v) {
  __shared__ double shares[kReferenceRowBlock];
  shares[threadIdx.x] = v;
  __syncthreads();
  for (int width = kReferenceRowBlock / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      shares[threadIdx.x] = fmax(shares[threadIdx.x], shares[threadIdx.x + width]);
    __syncthreads();
  }
  const double top = shares[0];
  __syncthreads();
  return top;
}

// LayerNorm (beta given: centred on the row's mean) or RMSNorm (beta null) of each row of x (cols
// wide), in double, one block of kReferenceRowBlock threads a row:
//   y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma (+ beta), stored as FP32.
// x, gamma and beta of any type convertible to float (BF16, FP32).
template <class In, class Weight>
__global__ void __launch_bounds__(kReferenceRowBlock)
    reference_row_norm(const In* x, const Weight* gamma, const Weight* beta, float* y, int64_t cols,
                       double eps) {
  const In* row = x + blockIdx.x * cols;
  const auto at = [](const auto* v, int64_t i) { return double(static_cast<float>(v[i])); };
  double mean = 0;
  if (beta != nullptr) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kReferenceRowBlock) sum += at(row, j);
    mean = reference_block_sum(sum) / double(cols);
  }
  double sq = 0;
  for (int64_t j = threadIdx.x; j < cols; j += kReferenceRowBlock)
    sq += (at(row, j) - mean) * (at(row, j) - mean);
  const double rstd = 1.0 / sqrt(reference_block_sum(sq) / double(cols) + eps);
  for (int64_t j = threadIdx.x; j < cols; j += kReferenceRowBlock)
    y[blockIdx.x * cols + j] =
        float((at(row, j) - mean) * rstd * at(gamma, j) + (beta != nullptr ? at(beta, j) : 0.0));
}

}  // namespace kernels
