// kernels/dependent_fma.cuh: a compute-bound per-element function whose cost is set by a count,
// for lessons about scheduling (streams, priorities, work distribution) rather than arithmetic.
#pragma once

#include <cuda_runtime.h>

namespace kernels {

// x_{k+1} = x_k * t + x0 with t = x0 / 2, `iters` dependent FMAs, then halved. Deterministic;
// for |x0| <= 1 the result lies in [-1/3, 1], so calls compose without growing. Instantiate
// with double for a CPU or device reference: the rounding errors shrink by |t| <= 1/2 per step.
template <class T>
__host__ __device__ inline T dependent_fma_chain(T x0, int iters) {
  const T t = T(0.5f) * x0;
  T p = x0;
  for (int k = 0; k < iters; ++k) p = p * t + x0;
  return T(0.5f) * p;
}

}  // namespace kernels
