// ch05's image normalisation, shared by gpu_preprocess (decoded images) and jpeg_decode (JPEG
// bytes): uint8 HWC RGB, as a decoder leaves it, to FP16 channel planes, each channel
// normalised by ImageNet's mean and standard deviation.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace ch05 {

constexpr int kChannels = 3;

// The reference's value of byte x in channel c, in double: (x / 255 - mean) / std.
__host__ __device__ inline double normalised(double x, int c) {
  const double mean[kChannels] = {0.485, 0.456, 0.406}, stddev[kChannels] = {0.229, 0.224, 0.225};
  return (x / 255.0 - mean[c]) / stddev[c];
}

// The reference's output: every image's HWC bytes (byte_at(i), i = (image * pixels + p) * 3 + c)
// as normalised channel planes, out[(image * 3 + c) * pixels + p].
template <class Out, class ByteAt>
void normalised_planes(Out& out, int64_t images, int64_t pixels, ByteAt byte_at) {
  for (int64_t img = 0; img < images; ++img)
    for (int64_t p = 0; p < pixels; ++p)
      for (int c = 0; c < kChannels; ++c)
        out[(img * kChannels + c) * pixels + p] =
            normalised(byte_at((img * pixels + p) * kChannels + c), c);
}

// The same, folded into one float multiply-add per value: x * scale + shift.
struct Normalisation {
  float scale[kChannels], shift[kChannels];
};
inline Normalisation imagenet() {
  Normalisation n{};
  for (int c = 0; c < kChannels; ++c) {
    n.scale[c] = static_cast<float>(normalised(1, c) - normalised(0, c));
    n.shift[c] = static_cast<float>(normalised(0, c));
  }
  return n;
}

// One thread per pixel: its three bytes in, one value to each channel plane out. (static: each
// of the chapter's files that includes it gets its own copy.)
static __global__ void normalise_hwc_to_chw(const uint8_t* __restrict__ raw,
                                            __half* __restrict__ out, int64_t images,
                                            int64_t pixels, Normalisation norm) {
  const int64_t total = images * pixels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t img = i / pixels, p = i - img * pixels;
#pragma unroll
    for (int c = 0; c < kChannels; ++c)
      out[(img * kChannels + c) * pixels + p] = __float2half_rn(
          fmaf(static_cast<float>(raw[i * kChannels + c]), norm.scale[c], norm.shift[c]));
  }
}

inline unsigned normalise_blocks(int64_t images, int64_t pixels) {
  const int64_t total = images * pixels, blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
}

}  // namespace ch05
