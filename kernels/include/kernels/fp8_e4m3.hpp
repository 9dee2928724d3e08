// kernels/fp8_e4m3.hpp: the one FP8 E4M3 scale rule every quantising kernel and reference of the
// suite uses, and the host's exact model of the cast (for CPU references and tests). Host and
// device include it; it needs no CUDA header.
//
// A group (a tensor, a row, a 128-value block, a head's cache) with abs-max `amax` gets
//   dequant = amax' / 448,   quant = 448 / amax',   amax' = max(amax, 1e-30)   (FP32, IEEE
//   division) code    = E4M3(x * quant)   (the product in FP32, then round to nearest even,
//   saturating to ±448) x      ~= value(code) * dequant
// 448 is E4M3's largest finite value, so the group's largest |x| lands on it. The clamp keeps an
// all-zero group finite: its codes are 0 whatever the scale. The product rather than x / dequant:
// one division per group, not per value, and every side computes the same FP32 product.
// The device cast is cvt.rn.satfinite.e4m3x2.f32 (__nv_cvt_float2_to_fp8x2 with __NV_SATFINITE);
// round_e4m3 below gives the value it produces for every finite float.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define KERNELS_HOST_DEVICE __host__ __device__
#else
#define KERNELS_HOST_DEVICE
#endif

namespace kernels {

inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kMinAmax = 1e-30f;  // an all-zero group's stand-in amax

struct E4m3Scales {
  float dequant;  // amax / 448: what a consumer multiplies codes by
  float quant;    // 448 / amax: what the cast multiplies x by
};

KERNELS_HOST_DEVICE inline E4m3Scales e4m3_scales(float amax) {
  const float a = amax < kMinAmax ? kMinAmax : amax;
  return {a / kE4m3Max, kE4m3Max / a};
}

// The E4M3 value nearest y (ties to the even code), saturating to ±448: normals 2^e x 1.mmm for
// e in [-6, 8], subnormals m x 2^-9. Exact in double: every step scales by a power of two.
inline double round_e4m3(double y) {
  const double a = std::fabs(y);
  if (!(a < kE4m3Max)) return std::copysign(double{kE4m3Max}, y);  // satfinite (and ±inf)
  int k = 0;
  std::frexp(a, &k);                           // a = f x 2^k, f in [0.5, 1)
  const int e = k - 1 < -6 ? -6 : k - 1;       // subnormals share the smallest normal's step
  const double step = std::ldexp(1.0, e - 3);  // 3 mantissa bits
  // The default rounding mode, to nearest even: an even multiple of the step is an even code.
  // Below 448 nothing rounds past it (the top binade's step is 32: 440 -> 448).
  return std::copysign(std::nearbyint(a / step) * step, y);
}

}  // namespace kernels
