// kernels/reference_rows.cuh: the one piece of a row-wise device reference (an example's
// .device_reference, docs/validity.md row 2) that is not one thread per output: a block's sum, or
// largest value, in double. One block per row; each thread sums a strided share of the row, then a
// plain tree in shared memory folds the shares. No shuffles, no vector loads, nothing the variants
// under test use: slow next to them, plainly right.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace kernels
