// The comparison the GPU tests of BF16 kernels (kernels/streaming_gemv.cuh, ch20's megakernel, the
// decode attention kernels) make against an FP64 host result: relative L2 error, infinite if any
// output is not finite, so an element a kernel never wrote (the tests fill outputs with NaN first)
// fails any tolerance.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <vector>

inline double relative_l2(const std::vector<__nv_bfloat16>& out, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double got = __bfloat162float(out[i]);
    if (!std::isfinite(got)) return INFINITY;
    err += (got - ref[i]) * (got - ref[i]), norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}
