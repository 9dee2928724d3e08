// ch05/gpu_preprocess: turn a batch of decoded images (uint8, height x width x RGB, as a decoder
// leaves them) into the network's input (FP16, channel planes, each channel normalised by its
// mean and standard deviation), and get it onto the GPU.
//
//   1. baseline: as a CPU data loader does it: one host thread converts every pixel (HWC → CHW,
//      (x / 255 − mean) / std, to FP16) into a pinned FP16 batch, which then goes up with
//      cudaMemcpyAsync: the CPU touches every value, and twice the raw bytes cross the link;
//   2. optimized: the raw uint8 batch goes up as it is (1 byte per value instead of FP16's 2),
//      and one kernel does the layout change and the normalisation on the GPU, where it takes
//      microseconds.
// Both start from the same decoded images in pinned host memory (made once, untimed: decoding is
// not timed on either side; jpeg_decode times the decode, on the CPU and with nvJPEG) and write the
// same FP16 tensor with the same float arithmetic (one multiply-add per value, then round to
// nearest FP16), so the two sides agree exactly and the reference (in double) to FP16 rounding.
// Timed with a host clock around the batch and a device synchronize (Mode::host): the baseline's
// cost is CPU work, host_bound; the optimized side's time is mostly its upload's, paced by the
// host's PCIe path, which differs between hosts of one GPU kind (README), so it is host_bound
// too and the pair is scored against the spread recorded over machines (docs/expectations.md).
//
//   ./bench compare --chapter ch05 --example gpu_preprocess
#include <bench/bench.hpp>
#include <cstdint>

#include "normalise.cuh"
#include "pinned.hpp"

namespace {

using ch05::imagenet;
using ch05::kChannels;
using ch05::Normalisation;

struct ImageBatch {
  int64_t images, height, width;
  bench::DeviceSpan<__half> out;  // [images][3][height][width]
  explicit ImageBatch(bench::Setup& s)
      : images(s.size("images", 256, 3)),
        height(s.size("height", 224, 17)),
        width(s.size("width", 224, 13)),
        out(s.output<__half>("out", images * kChannels * height * width)) {
    // The fewest bytes: the raw values up the link once (the FP16 tensor is written on the GPU).
    s.bytes(double(values()), bench::ceiling::h2d_pinned);
  }
  int64_t pixels() const { return height * width; }
  int64_t values() const { return images * pixels() * kChannels; }
};

// The decoded images: a hash of the position, every byte value present.
__host__ __device__ uint8_t raw_value(int64_t i) {
  return static_cast<uint8_t>((static_cast<uint64_t>(i) * 2654435761u) >> 13);
}

// The decoder's output, in pinned memory on both sides.
class DecodedImages {
 public:
  explicit DecodedImages(const ImageBatch& w) : raw_(w.values()) {
    for (int64_t i = 0; i < w.values(); ++i) raw_.data()[i] = raw_value(i);
  }
  const uint8_t* data() const { return raw_.data(); }

 private:
  ch05::PinnedArray<uint8_t> raw_;
};

class CpuNormalise {
 public:
  CpuNormalise(const ImageBatch& w, cudaStream_t) : decoded_(w), staged_(w.out.size()) {}
  void operator()(const ImageBatch& w, cudaStream_t stream) {
    const uint8_t* raw = decoded_.data();
    __half* staged = staged_.data();
    for (int64_t img = 0; img < w.images; ++img)
      for (int64_t p = 0; p < w.pixels(); ++p)
        for (int c = 0; c < kChannels; ++c) {
          const float x = raw[(img * w.pixels() + p) * kChannels + c];
          staged[(img * kChannels + c) * w.pixels() + p] =
              __float2half_rn(fmaf(x, norm_.scale[c], norm_.shift[c]));
        }
    BENCH_CUDA_CHECK(
        cudaMemcpyAsync(w.out.data(), staged, w.out.bytes(), cudaMemcpyHostToDevice, stream));
  }

 private:
  DecodedImages decoded_;
  Normalisation norm_ = imagenet();
  ch05::PinnedArray<__half> staged_;  // the FP16 tensor, staged for the upload
};

class GpuNormalise {
 public:
  GpuNormalise(const ImageBatch& w, cudaStream_t) : decoded_(w), raw_on_device_(w.values()) {}
  void operator()(const ImageBatch& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(raw_on_device_.data(), decoded_.data(), w.values(),
                                     cudaMemcpyHostToDevice, stream));
    ch05::normalise_hwc_to_chw<<<ch05::normalise_blocks(w.images, w.pixels()), 256, 0, stream>>>(
        raw_on_device_.data(), w.out.data(), w.images, w.pixels(), norm_);
    BENCH_CHECK_LAUNCH();
  }

 private:
  DecodedImages decoded_;
  bench::DeviceBuffer<uint8_t> raw_on_device_;
  Normalisation norm_ = imagenet();
};

void reference(const ImageBatch& w, bench::HostData& h) {
  auto out = h.expected("out");
  ch05::normalised_planes(out, w.images, w.pixels(),
                          [](int64_t i) { return double(raw_value(i)); });
}

// FP16's own rounding (2^-11 relative) sets the error: inside FP16's default relative-L2 bound.
// The timing-size check (docs/validity.md row 2): one thread per output value computes its raw
// byte (raw_value, the batch's definition) and normalises it in double as the CPU reference does;
// no host staging, no upload.
__global__ void reference_normalise(__half* out, int64_t images, int64_t pixels) {
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // out is [images][3][pixels]
  if (o >= images * kChannels * pixels) return;
  const int64_t p = o % pixels, c = o / pixels % kChannels, img = o / pixels / kChannels;
  out[o] = __double2half(ch05::normalised(raw_value((img * pixels + p) * kChannels + c), c));
}

void device_reference(const ImageBatch& w, cudaStream_t stream) {
  reference_normalise<<<static_cast<unsigned>((w.values() + 255) / 256), 256, 0, stream>>>(
      w.out.data(), w.images, w.pixels());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch05, gpu_preprocess, ImageBatch)
    .stateful<CpuNormalise>(bench::Role::baseline, "cpu_hwc_to_chw_fp16_then_upload",
                            {.blocks_host = true, .host_bound = true})
    .stateful<GpuNormalise>(bench::Role::optimized, "upload_uint8_normalise_on_gpu",
                            {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace
