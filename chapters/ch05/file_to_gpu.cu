// ch05/file_to_gpu: load a file from storage into GPU memory, as a checkpoint or a dataset shard
// is loaded, with cold reads (the bytes come from the disk, not from the page cache).
//
//   1. baseline: read() into an ordinary (pageable) buffer, then cudaMemcpy it up, chunk by
//      chunk, one after the other: the disk idles while the bytes cross the link and the link
//      idles while the disk reads; the page cache adds a CPU copy of every byte, and the pageable
//      cudaMemcpy another through the driver's bounce buffer. The file's pages are dropped from
//      the page cache (posix_fadvise DONTNEED) at the start of every call, so the reads are cold;
//   2. optimized: the file opened with O_DIRECT (the disk DMAs straight into our buffer, no page
//      cache, no CPU copy, and never a warm cache), into two pinned buffers taken in turn: while
//      chunk i goes up with cudaMemcpyAsync from one, chunk i+1 is read into the other. An event
//      per buffer says when its upload is done and it may be refilled. The slower of the disk and
//      the link sets the pace, and the other hides behind it;
//   vendor (cufile): cuFileRead (GPUDirect Storage) into the device buffer, where libcufile was
//      found at configure time. With the nvidia-fs driver loaded the disk DMAs into GPU memory
//      directly; without it cuFile runs in compatibility mode (POSIX reads through its own
//      bounce buffers), which is not GDS: the rung's `cufile_nvidia_fs` metric says which, and
//      the chapter README reports the mode with the number.
// The file (`mib` MiB of a known pattern) is written by the workload into a fresh folder under
// BENCH_STORAGE_DIR (default /var/tmp) and removed afterwards. The optimized rung measures, in
// its own setup and on the same file, the disk's O_DIRECT read rate (no GPU) and the pinned
// host-to-device rate (no disk), and reports its own rate against the slower of the two
// (`pct_of_bound`): the pipeline's goal is that bound. Timed with a host clock (Mode::host); every
// side's time is set by the machine's disk, CPU and link, so every side is host_bound.
//
//   ./bench compare --chapter ch05 --example file_to_gpu
//   BENCH_STORAGE_DIR=/mnt/nvme ./bench compare --chapter ch05 --example file_to_gpu --sweep
#include <bench/bench.hpp>

#include "scratch_file.hpp"

#ifndef BENCH_HAVE_CUFILE  // set by chapters/ch05/CMakeLists.txt: 1 when libcufile was found
#define BENCH_HAVE_CUFILE 0
#endif
#if BENCH_HAVE_CUFILE
#include <cufile.h>
#endif

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

namespace {

// The file's words: a hash of the position, so a chunk landing at the wrong offset is caught.
__host__ __device__ inline uint32_t file_word(int64_t i) {
  const uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(x >> 32) ^ static_cast<uint32_t>(i);
}

struct FileLoad {
  int64_t words, chunk_words;  // the file, and one read's worth (a multiple of 4 KiB: O_DIRECT)
  bench::DeviceSpan<uint32_t> dst;
  std::shared_ptr<ch05::ScratchFile> file;
  explicit FileLoad(bench::Setup& s)
      : words(s.size("words", s.axis("mib") << 18,
                     (int64_t{8} << 18) + 3 * 1024)),  // verifying: 8 MiB + 3 pages
        chunk_words(
            s.size("chunk_words", int64_t{4} << 20, int64_t{1} << 18)),  // 16 MiB; verifying: 1 MiB
        dst(s.output<uint32_t>("dst", words)) {
    file = std::make_shared<ch05::ScratchFile>(words * 4,
                                               [](uint32_t* out, int64_t first, int64_t count) {
                                                 for (int64_t i = 0; i < count; ++i)
                                                   out[i] = file_word(first + i);
                                               });
    s.bytes(double(words) * 4,
            bench::ceiling::h2d_pinned);  // every byte read once and sent up once
  }
  int64_t bytes() const { return words * 4; }
  int64_t chunk_bytes() const { return chunk_words * 4; }
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class ReadThenCopy {
 public:
  ReadThenCopy(const FileLoad& w, cudaStream_t)
      : fd_(w.file->path(), O_RDONLY), buffer_(w.chunk_words) {}
  void operator()(const FileLoad& w, cudaStream_t) {
    Split call;
    double t = seconds_now();
    ch05::evict_page_cache(fd_.get());
    call.evict_s = seconds_now() - t;
    for (int64_t at = 0; at < w.bytes(); at += w.chunk_bytes()) {
      const int64_t bytes = std::min(w.chunk_bytes(), w.bytes() - at);
      t = seconds_now();
      ch05::read_fully(fd_.get(), buffer_.data(), bytes, at);
      const double read = seconds_now();
      BENCH_CUDA_CHECK(cudaMemcpy(reinterpret_cast<char*>(w.dst.data()) + at, buffer_.data(), bytes,
                                  cudaMemcpyHostToDevice));
      call.read_s += read - t;
      call.copy_s += seconds_now() - read;
    }
    calls_.push_back(call);
  }
  // Where the fastest and the slowest call spent their time (ms): the eviction, the reads and
  // the copies. When the samples fall into clusters, this says which part moved.
  std::vector<bench::Metric> metrics() const {
    if (calls_.empty()) return {};
    const auto [fastest, slowest] =
        std::minmax_element(calls_.begin(), calls_.end(),
                            [](const Split& a, const Split& b) { return a.total() < b.total(); });
    return {{"fastest_call_evict_ms", 1e3 * fastest->evict_s},
            {"fastest_call_read_ms", 1e3 * fastest->read_s},
            {"fastest_call_copy_ms", 1e3 * fastest->copy_s},
            {"slowest_call_evict_ms", 1e3 * slowest->evict_s},
            {"slowest_call_read_ms", 1e3 * slowest->read_s},
            {"slowest_call_copy_ms", 1e3 * slowest->copy_s}};
  }

 private:
  struct Split {
    double evict_s = 0, read_s = 0, copy_s = 0;
    double total() const { return evict_s + read_s + copy_s; }
  };
  ch05::FileDescriptor fd_;
  std::vector<uint32_t> buffer_;  // pageable
  std::vector<Split> calls_;      // every call's: the verification and warm-up calls too
};

class DirectReadPipeline {
 public:
  DirectReadPipeline(const FileLoad& w, cudaStream_t stream)
      : fd_(w.file->path(), O_RDONLY | O_DIRECT) {
    for (int b = 0; b < 2; ++b) {
      BENCH_CUDA_CHECK(
          cudaMallocHost(&pinned_[b], w.chunk_bytes()));  // page-aligned, as O_DIRECT needs
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_[b], cudaEventDisableTiming));
    }
    measure_bounds(w, stream);
  }
  DirectReadPipeline(const DirectReadPipeline&) = delete;
  DirectReadPipeline& operator=(const DirectReadPipeline&) = delete;
  ~DirectReadPipeline() {
    cudaDeviceSynchronize();  // no upload may still read a pinned buffer
    for (int b = 0; b < 2; ++b) {
      cudaEventDestroy(uploaded_[b]);
      cudaFreeHost(pinned_[b]);
    }
  }
  void operator()(const FileLoad& w, cudaStream_t stream) {
    const double start = seconds_now();
    int b = 0;
    for (int64_t at = 0; at < w.bytes(); at += w.chunk_bytes(), b ^= 1) {
      const int64_t bytes = std::min(w.chunk_bytes(), w.bytes() - at);
      BENCH_CUDA_CHECK(cudaEventSynchronize(uploaded_[b]));  // its previous chunk is on the GPU
      ch05::read_fully(fd_.get(), pinned_[b], bytes, at);    // meanwhile the other one goes up
      BENCH_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<char*>(w.dst.data()) + at, pinned_[b],
                                       bytes, cudaMemcpyHostToDevice, stream));
      BENCH_CUDA_CHECK(cudaEventRecord(uploaded_[b], stream));
    }
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    call_seconds_.push_back(seconds_now() - start);
    bytes_ = w.bytes();
  }
  std::vector<bench::Metric> metrics() const {
    std::vector<double> sorted = call_seconds_;
    std::sort(sorted.begin(), sorted.end());
    const double achieved = sorted.empty() ? 0 : double(bytes_) / sorted[sorted.size() / 2] * 1e-9;
    const double bound = std::min(storage_gbps_, link_gbps_);
    return {{"storage_read_gbps", storage_gbps_},
            {"h2d_pinned_gbps", link_gbps_},
            {"bound_gbps", bound},
            {"achieved_gbps", achieved},
            {"pct_of_bound", bound > 0 ? 100 * achieved / bound : 0}};
  }

 private:
  // The two ceilings of this machine, measured now on this file: the whole file read with
  // O_DIRECT into one pinned buffer (disk only), and the pinned buffer sent up over the whole
  // device buffer (link only). Best of two passes each.
  void measure_bounds(const FileLoad& w, cudaStream_t stream) {
    for (int pass = 0; pass < 2; ++pass) {
      double start = seconds_now();
      for (int64_t at = 0; at < w.bytes(); at += w.chunk_bytes())
        ch05::read_fully(fd_.get(), pinned_[0], std::min(w.chunk_bytes(), w.bytes() - at), at);
      storage_gbps_ = std::max(storage_gbps_, double(w.bytes()) / (seconds_now() - start) * 1e-9);
      start = seconds_now();
      for (int64_t at = 0; at < w.bytes(); at += w.chunk_bytes())
        BENCH_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<char*>(w.dst.data()) + at, pinned_[0],
                                         std::min(w.chunk_bytes(), w.bytes() - at),
                                         cudaMemcpyHostToDevice, stream));
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      link_gbps_ = std::max(link_gbps_, double(w.bytes()) / (seconds_now() - start) * 1e-9);
    }
  }
  ch05::FileDescriptor fd_;
  void* pinned_[2] = {};
  cudaEvent_t uploaded_[2] = {};
  double storage_gbps_ = 0, link_gbps_ = 0;
  std::vector<double> call_seconds_;
  int64_t bytes_ = 0;
};

#if BENCH_HAVE_CUFILE
// True GPUDirect Storage needs the nvidia-fs kernel driver; without it cuFile falls back to
// compatibility mode. Reported, never assumed.
bool nvidia_fs_loaded() { return ::access("/proc/driver/nvidia-fs/version", R_OK) == 0; }

class CuFileRead {
 public:
  CuFileRead(const FileLoad& w, cudaStream_t)
      : fd_(w.file->path(), O_RDONLY | O_DIRECT), dst_(w.dst.data()) {
    // A machine without a usable cuFile setup (no nvidia-fs and no compatibility-mode config it
    // accepts) cannot run the rung at all: SKIPPED with cuFile's reason, not FAILED.
    if (const CUfileError_t opened = cuFileDriverOpen(); opened.err != CU_FILE_SUCCESS)
      throw bench::Unsupported(std::string("cuFileDriverOpen failed: ") + CUFILE_ERRSTR(opened.err));
    CUfileDescr_t descr{};
    descr.handle.fd = fd_.get();
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    // Without the nvidia-fs driver cuFile reads only in compatibility mode, and only when its
    // configuration allows it (cufile.json's allow_compat_mode); refused, the rung cannot run on
    // this machine: SKIPPED with cuFile's reason (seen on the lent H100s and H200s, whose virtio
    // disk udev has not described: cuFile cannot identify its filesystem, even in compatibility
    // mode).
    if (const CUfileError_t r = cuFileHandleRegister(&handle_, &descr); r.err != CU_FILE_SUCCESS) {
      cuFileDriverClose();
      throw bench::Unsupported(
          std::string("cuFileHandleRegister failed: ") + CUFILE_ERRSTR(r.err) +
          (nvidia_fs_loaded() ? ""
                              : " (no nvidia-fs driver: not GPUDirect Storage; "
                                "compatibility mode needs allow_compat_mode in cufile.json)") +
          "; cuFile's log says why (CUFILE_ENV_PATH_JSON=chapters/ch05/cufile_compat.json "
          "allows compatibility mode and logs to /tmp/cufile_*.log)");
    }
    // A registered destination lets the transfers go straight into it; unregistered, cuFile
    // stages through GPU bounce buffers of its own. Registration failing is not an error.
    registered_ = cuFileBufRegister(w.dst.data(), w.bytes(), 0).err == CU_FILE_SUCCESS;
  }
  CuFileRead(const CuFileRead&) = delete;
  CuFileRead& operator=(const CuFileRead&) = delete;
  ~CuFileRead() {
    if (registered_) cuFileBufDeregister(dst_);
    cuFileHandleDeregister(handle_);
    cuFileDriverClose();
  }
  void operator()(const FileLoad& w, cudaStream_t) {
    for (int64_t at = 0; at < w.bytes(); at += w.chunk_bytes()) {
      const int64_t bytes = std::min(w.chunk_bytes(), w.bytes() - at);
      const ssize_t got =
          cuFileRead(handle_, w.dst.data(), bytes, at, at);  // file offset, device offset
      if (got != bytes)
        throw std::runtime_error("cuFileRead returned " + std::to_string(got) + " of " +
                                 std::to_string(bytes) + " bytes");
    }
  }
  std::vector<bench::Metric> metrics() const {
    return {{"cufile_nvidia_fs", nvidia_fs_loaded() ? 1.0 : 0.0},
            {"cufile_buffer_registered", registered_ ? 1.0 : 0.0}};
  }

 private:
  ch05::FileDescriptor fd_;
  void* dst_;
  CUfileHandle_t handle_{};
  bool registered_ = false;
};
#else
struct CuFileRead {  // never constructed: the rung is SKIPPED first (cufile_missing below)
  CuFileRead(const FileLoad&, cudaStream_t) { throw bench::Unsupported("built without cuFile"); }
  void operator()(const FileLoad&, cudaStream_t) {}
};
#endif

std::string cufile_missing(const FileLoad&) {
  return BENCH_HAVE_CUFILE ? ""
                           : "built without cuFile (GPUDirect Storage): install the CUDA "
                             "repository's libcufile-dev, "
                             "or `pip install nvidia-cufile`, then reconfigure";
}

void reference(const FileLoad& w, bench::HostData& h) {
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.words; ++i) dst[i] = file_word(i);
}

__global__ void write_file_words(uint32_t* dst, int64_t words) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < words;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = file_word(i);
}
void device_reference(const FileLoad& w, cudaStream_t stream) {
  write_file_words<<<1024, 256, 0, stream>>>(w.dst.data(), w.words);
  BENCH_CHECK_LAUNCH();
}

constexpr bench::VariantOptions kHostSide{.blocks_host = true, .host_bound = true};

BENCH_EXAMPLE(ch05, file_to_gpu, FileLoad)
    .int_axis("mib", {256, 1024, 4096}, {1024})
    .stateful<ReadThenCopy>(bench::Role::baseline, "read_pageable_then_cudaMemcpy", kHostSide)
    .stateful<DirectReadPipeline>(bench::Role::optimized, "o_direct_pinned_double_buffer",
                                  kHostSide)
    .stateful<CuFileRead>(bench::Role::vendor, "cufile", kHostSide)
    .variant_requires(cufile_missing)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

}  // namespace
