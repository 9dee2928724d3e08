// ch05/jpeg_decode: a dataset of JPEG files becomes the network's input (FP16 channel planes,
// normalised per channel), and the decode, not the normalisation, is now the CPU's cost.
//
//   1. baseline: as a data loader worker does it: libjpeg-turbo decodes every image on one CPU
//      thread into pinned memory, the decoded uint8 batch goes up, and the GPU normalises it
//      (gpu_preprocess's optimized side): the CPU still touches every pixel, through the IDCT;
//   2. optimized: nvJPEG decodes the whole batch on the GPU (nvjpegDecodeBatched, GPU-assisted
//      Huffman decoding), straight into device memory, and the same kernel normalises it: only
//      the compressed bytes cross the link (a few times fewer than the decoded ones);
//   3. a step beside it, nvjpeg_batched_hardware: the same call with nvJPEG's hardware backend,
//      the GPU's fixed-function JPEG decode engines (NVJPG; the A100, H100 and H200 have them)
//      instead of CUDA kernels, so the decode leaves the SMs free. SKIPPED, with the reason, on a
//      GPU without those engines. Not the optimized side: that must run on every GPU it supports.
// The images are encoded by the example itself with libjpeg (baseline JPEG, quality 90, no
// chroma subsampling), once and untimed; both sides start from those bytes in host memory.
// Timed with a host clock around the batch and a device synchronize (Mode::host): the baseline's
// cost is CPU work, host_bound.
// Needs libjpeg (libjpeg-dev) for the example and nvJPEG for its optimized side; found or not at
// configure time (chapters/ch05/CMakeLists.txt), and SKIPPED with what to install when not.
//
//   ./bench compare --chapter ch05 --example jpeg_decode
#include <bench/bench.hpp>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "normalise.cuh"
#include "pinned.hpp"

#ifndef BENCH_HAVE_LIBJPEG  // set by chapters/ch05/CMakeLists.txt: 1 when libjpeg was found
#define BENCH_HAVE_LIBJPEG 0
#endif
#ifndef BENCH_HAVE_NVJPEG  // set by chapters/ch05/CMakeLists.txt: 1 when nvJPEG was found
#define BENCH_HAVE_NVJPEG 0
#endif
#if BENCH_HAVE_LIBJPEG
#include "libjpeg_codec.hpp"
#endif
#if BENCH_HAVE_NVJPEG
#include <nvjpeg.h>
#endif

namespace {

using ch05::kChannels;

#if BENCH_HAVE_LIBJPEG
// A test image: a smooth gradient per image and channel (what photographs mostly are) with a
// hashed texture of up to +-12 levels on top, so that a pixel shifted or an image swapped is many
// levels off, far beyond the decoders' rounding differences.
uint8_t test_pixel(int64_t img, int64_t y, int64_t x, int c) {
  const int64_t gradient = 40 + (x * (3 + c) + y * (5 - c) + img * 37) % 170;
  const int64_t texture =
      static_cast<int64_t>(((img * 131 + y) * 8191 + x * 3 + c) * 2654435761u >> 27 & 31) - 12;
  return static_cast<uint8_t>(gradient + texture);
}
#endif

struct JpegBatch {
  int64_t images, height, width;
  std::vector<std::vector<uint8_t>> jpegs;         // the files' bytes: where both sides start
  std::vector<uint8_t> decoded;                    // libjpeg's decode of them, for the reference
  bench::DeviceSpan<__half> out;                   // [images][3][height][width]
  bench::DeviceBuffer<uint8_t> decoded_on_device;  // the same, for the timing-size check
  explicit JpegBatch(bench::Setup& s)
      : images(s.size("images", 256, 3)),
        height(s.size("height", 224, 17)),
        width(s.size("width", 224, 13)),
        out(s.output<__half>("out", images * kChannels * height * width)),
        decoded_on_device(values()) {
#if BENCH_HAVE_LIBJPEG
    std::vector<uint8_t> rgb(pixels() * kChannels);
    decoded.resize(values());
    int64_t jpeg_bytes = 0;
    for (int64_t img = 0; img < images; ++img) {
      for (int64_t p = 0; p < pixels(); ++p)
        for (int c = 0; c < kChannels; ++c)
          rgb[p * kChannels + c] = test_pixel(img, p / width, p % width, c);
      jpegs.push_back(ch05::encode_or_throw(rgb.data(), int(height), int(width)));
      ch05::decode_or_throw(jpegs.back(), decoded.data() + img * pixels() * kChannels, int(height),
                            int(width));
      jpeg_bytes += int64_t(jpegs.back().size());
    }
    BENCH_CUDA_CHECK(
        cudaMemcpy(decoded_on_device.data(), decoded.data(), values(), cudaMemcpyHostToDevice));
    // The fewest bytes: the compressed files up the link once (the tensor is written on the GPU).
    s.bytes(double(jpeg_bytes), bench::ceiling::h2d_pinned);
#else
    throw bench::Unsupported(
        "built without libjpeg, which encodes this example's images: install "
        "libjpeg-dev (libjpeg-turbo), then reconfigure");
#endif
  }
  int64_t pixels() const { return height * width; }
  int64_t values() const { return images * pixels() * kChannels; }
};

void normalise_on_gpu(const JpegBatch& w, const uint8_t* raw, cudaStream_t stream) {
  ch05::normalise_hwc_to_chw<<<ch05::normalise_blocks(w.images, w.pixels()), 256, 0, stream>>>(
      raw, w.out.data(), w.images, w.pixels(), ch05::imagenet());
  BENCH_CHECK_LAUNCH();
}

class DecodeOnCpu {
 public:
  DecodeOnCpu(const JpegBatch& w, cudaStream_t)
      : decoded_(w.values()), raw_on_device_(w.values()) {}
  void operator()(const JpegBatch& w, cudaStream_t stream) {
#if BENCH_HAVE_LIBJPEG
    for (int64_t img = 0; img < w.images; ++img)
      ch05::decode_or_throw(w.jpegs[img], decoded_.data() + img * w.pixels() * kChannels,
                            int(w.height), int(w.width));
#endif
    BENCH_CUDA_CHECK(cudaMemcpyAsync(raw_on_device_.data(), decoded_.data(), w.values(),
                                     cudaMemcpyHostToDevice, stream));
    normalise_on_gpu(w, raw_on_device_.data(), stream);
  }

 private:
  ch05::PinnedArray<uint8_t> decoded_;
  bench::DeviceBuffer<uint8_t> raw_on_device_;
};

// Which of nvJPEG's batched decoders runs: CUDA kernels with GPU-assisted Huffman decoding, or
// the GPU's JPEG decode engines.
enum class Engine { gpu_hybrid, hardware };

#if BENCH_HAVE_NVJPEG
const char* nvjpeg_status_name(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    default: return "an nvjpegStatus_t this build does not name";
  }
}
void nvjpeg_check(nvjpegStatus_t status, const char* call) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + nvjpeg_status_name(status) + " (" +
                             std::to_string(int(status)) + ")");
}

template <Engine engine>
class DecodeOnGpu {
 public:
  DecodeOnGpu(const JpegBatch& w, cudaStream_t)
      : raw_on_device_(w.values()), destinations_(new nvjpegImage_t[w.images]()) {
    // GPU_HYBRID: the Huffman decoding of a batch (of more than 100 baseline images) runs on the
    // GPU too, not only the IDCT and colour conversion. HARDWARE: baseline, single-scan JPEGs on
    // the decode engines. A GPU or build without that backend says so (SKIPPED); any other
    // failure is a failure, named.
    const nvjpegStatus_t created =
        nvjpegCreateEx(kBackend, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &handle_);
    if (created == NVJPEG_STATUS_ARCH_MISMATCH || created == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
        created == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED)
      throw bench::Unsupported(
          std::string(kCreate) + ": " + nvjpeg_status_name(created) + " on this GPU" +
          (engine == Engine::hardware ? " (nvJPEG's hardware backend needs a GPU with JPEG decode "
                                        "engines: A100, A30, H100, H200, L4 and their kin)"
                                      : ""));
    nvjpeg_check(created, kCreate);
    try {
      if (engine == Engine::hardware) require_every_image_on_the_engines(w);
      nvjpeg_check(nvjpegJpegStateCreate(handle_, &state_), "nvjpegJpegStateCreate");
      // max_cpu_threads (1) is no longer used by nvJPEG; the batch size must be the number of
      // images each nvjpegDecodeBatched call passes.
      nvjpeg_check(
          nvjpegDecodeBatchedInitialize(handle_, state_, int(w.images), 1, NVJPEG_OUTPUT_RGBI),
          "nvjpegDecodeBatchedInitialize");
    } catch (...) {  // the destructor does not run for a half-made object
      release();
      throw;
    }
    // Each image decodes to interleaved RGB at its place in the batch: the layout the CPU side's
    // decode leaves, so the same normalisation kernel follows.
    for (int64_t img = 0; img < w.images; ++img) {
      bytes_.push_back(w.jpegs[img].data());
      lengths_.push_back(w.jpegs[img].size());
      destinations_[img].channel[0] = raw_on_device_.data() + img * w.pixels() * kChannels;
      destinations_[img].pitch[0] = size_t(w.width) * kChannels;
    }
  }
  DecodeOnGpu(const DecodeOnGpu&) = delete;
  DecodeOnGpu& operator=(const DecodeOnGpu&) = delete;
  ~DecodeOnGpu() { release(); }
  void operator()(const JpegBatch& w, cudaStream_t stream) {
    nvjpeg_check(nvjpegDecodeBatched(handle_, state_, bytes_.data(), lengths_.data(),
                                     destinations_.get(), stream),
                 "nvjpegDecodeBatched");
    normalise_on_gpu(w, raw_on_device_.data(), stream);
  }

 private:
  static constexpr nvjpegBackend_t kBackend =
      engine == Engine::hardware ? NVJPEG_BACKEND_HARDWARE : NVJPEG_BACKEND_GPU_HYBRID;
  static constexpr const char* kCreate = engine == Engine::hardware
                                             ? "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)"
                                             : "nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID)";
  bench::DeviceBuffer<uint8_t> raw_on_device_;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  std::vector<const unsigned char*> bytes_;
  std::vector<size_t> lengths_;
  // Not a std::vector: nvcc's front end fails on std::vector of nvjpegImage_t, an unnamed struct.
  std::unique_ptr<nvjpegImage_t[]> destinations_;

  // The engines take baseline, single-scan JPEGs and not every subsampling; nvjpegDecodeBatched
  // would fail on an image they cannot take, so each is asked first (SKIPPED, naming it). The
  // example's own images are baseline 4:4:4, which they take.
  void require_every_image_on_the_engines(const JpegBatch& w) {
    nvjpegJpegStream_t parsed = nullptr;
    nvjpeg_check(nvjpegJpegStreamCreate(handle_, &parsed), "nvjpegJpegStreamCreate");
    std::string refused;
    nvjpegStatus_t failed = NVJPEG_STATUS_SUCCESS;
    const char* failed_call = "";
    for (int64_t img = 0; img < w.images && refused.empty(); ++img) {
      failed =
          nvjpegJpegStreamParse(handle_, w.jpegs[img].data(), w.jpegs[img].size(), 0, 0, parsed);
      failed_call = "nvjpegJpegStreamParse";
      int not_supported = 1;  // nvJPEG sets 0 when the backend can decode the stream
      if (failed == NVJPEG_STATUS_SUCCESS) {
        failed = nvjpegDecodeBatchedSupported(handle_, parsed, &not_supported);
        failed_call = "nvjpegDecodeBatchedSupported";
      }
      if (failed != NVJPEG_STATUS_SUCCESS) break;
      if (not_supported != 0)
        refused = "nvJPEG's hardware decoder does not take image " + std::to_string(img) +
                  " of the batch (nvjpegDecodeBatchedSupported)";
    }
    nvjpegJpegStreamDestroy(parsed);
    nvjpeg_check(failed, failed_call);
    if (!refused.empty()) throw bench::Unsupported(refused);
  }

  void release() {
    cudaDeviceSynchronize();  // a decode may still be using the state's buffers
    if (state_) nvjpegJpegStateDestroy(state_);
    if (handle_) nvjpegDestroy(handle_);
    state_ = nullptr;
    handle_ = nullptr;
  }
};
#else
template <Engine>
struct DecodeOnGpu {  // never constructed: the side is SKIPPED first (nvjpeg_missing below)
  DecodeOnGpu(const JpegBatch&, cudaStream_t) { throw bench::Unsupported("built without nvJPEG"); }
  void operator()(const JpegBatch&, cudaStream_t) {}
};
#endif

#ifndef BENCH_NVJPEG_OTHER_MAJOR  // set by chapters/ch05/CMakeLists.txt when nvJPEG is not linked
#define BENCH_NVJPEG_OTHER_MAJOR 0
#endif
// Why the nvJPEG side cannot run: not found, or found for another CUDA major version than this
// build's toolkit (CMake does not link that one: chapters/ch05/CMakeLists.txt says why).
std::string nvjpeg_missing(const JpegBatch&) {
  if (BENCH_HAVE_NVJPEG) return "";
  const int toolkit = CUDART_VERSION / 1000;
  const std::string install =
      "install nvJPEG for CUDA " + std::to_string(toolkit) + " (the toolkit's libnvjpeg-dev-" +
      std::to_string(toolkit) + "-x, or the pip wheel " +
      (toolkit >= 13 ? std::string("nvidia-nvjpeg ") + std::to_string(toolkit) + ".x"
                     : std::string("nvidia-nvjpeg-cu") + std::to_string(toolkit)) +
      "), then reconfigure";
  if (BENCH_NVJPEG_OTHER_MAJOR == 0) return "built without nvJPEG: " + install;
  return "the nvJPEG found at configure time is for CUDA " +
         (BENCH_NVJPEG_OTHER_MAJOR > 0 ? std::to_string(BENCH_NVJPEG_OTHER_MAJOR)
                                       : std::string("an unknown version")) +
         ", this build's toolkit is CUDA " + std::to_string(toolkit) + ", so it was not linked: " +
         install;
}

// The CPU path's result: libjpeg's decode, normalised in double.
void reference(const JpegBatch& w, bench::HostData& h) {
  auto out = h.expected("out");
  ch05::normalised_planes(out, w.images, w.pixels(),
                          [&](int64_t i) { return double(w.decoded[i]); });
}

// The timing-size check (docs/validity.md row 2): the same, on the device, from libjpeg's decode
// uploaded at setup; no variant's code or buffers.
__global__ void reference_normalise(const uint8_t* decoded, __half* out, int64_t images,
                                    int64_t pixels) {
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // out is [images][3][pixels]
  if (o >= images * kChannels * pixels) return;
  const int64_t p = o % pixels, c = o / pixels % kChannels, img = o / pixels / kChannels;
  out[o] = __double2half(ch05::normalised(decoded[(img * pixels + p) * kChannels + c], int(c)));
}

void device_reference(const JpegBatch& w, cudaStream_t stream) {
  reference_normalise<<<static_cast<unsigned>((w.values() + 255) / 256), 256, 0, stream>>>(
      w.decoded_on_device.data(), w.out.data(), w.images, w.pixels());
  BENCH_CHECK_LAUNCH();
}

// Two JPEG decoders agree to within rounding, not exactly: nvJPEG's IDCT and colour conversion
// round differently from libjpeg's integer ones, and nothing bounds the difference per value (the
// JPEG standard bounds an IDCT's error against the exact transform, not two decoders' against each
// other; torchvision's own nvJPEG-against-libjpeg-turbo test bounds the mean difference, 2 levels,
// not the largest). One level off in each of Y, Cb and Cr becomes 1 + 1.772 + 1 (its own
// rounding) < 4 levels in blue (B = Y + 1.772 Cb'); two levels off, which libjpeg's own float
// IDCT reaches against its integer one, become under 7.5. The bound is 8 levels at the smallest
// standard deviation (0.224), 8 / (255 x 0.224) = 0.140 after normalisation, plus FP16's rounding
// (2^-11 relative, inside rtol): one value over it fails the whole batch, and a first run lost to
// a rounding difference costs more than the margin. It still catches a wrong index: over 8 of the
// batch's decoded images (a CPU check with libjpeg), a pixel shifted by one puts 51% of the
// values more than 8 levels off, the next image 96%, red and blue swapped 60% (test_pixel's
// texture). The libjpeg side is within FP16 rounding of the reference.
constexpr double kLevelsApart = 8;

BENCH_EXAMPLE(ch05, jpeg_decode, JpegBatch)
    .stateful<DecodeOnCpu>(bench::Role::baseline, "libjpeg_one_thread_then_gpu_normalise",
                           {.blocks_host = true, .host_bound = true})
    .stateful<DecodeOnGpu<Engine::hardware>>(bench::Role::step, "nvjpeg_batched_hardware",
                                             {.blocks_host = true})
    .variant_requires(nvjpeg_missing)
    .stateful<DecodeOnGpu<Engine::gpu_hybrid>>(bench::Role::optimized, "nvjpeg_batched_gpu_hybrid",
                                               {.blocks_host = true})
    .variant_requires(nvjpeg_missing)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(kLevelsApart / (255.0 * 0.224), 1e-3))
    .mode(bench::Mode::host);

}  // namespace
