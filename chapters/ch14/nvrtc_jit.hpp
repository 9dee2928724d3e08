// ch14/nvrtc_jit.hpp: compile CUDA source at run time with NVRTC, cache the cubin on disk,
// load it and launch it: the chapter's one piece of JIT machinery (jit_specialization and
// codegen_fusion use it).
//
//   ch14::JitKernel k(source, "fused", {"--fmad=false"});   // compile, or load from the cache
//   void* args[] = {&x, &y, &n};
//   k.launch(grid, block, args, stream);
//   k.stats().compile_ms;                                    // 0 when it came from the cache
//
// MeasuredJitKernel (at the end) is what the examples use: a JitKernel plus its first-call
// costs, measured both without and with the cache, as bench::Metrics.
//
// What a first call costs, and why a cache is worth having: NVRTC parses, optimises and runs
// ptxas in-process (tens to hundreds of milliseconds even for a small kernel), then the driver
// loads the cubin (well under a millisecond). The cubin depends only on the source, the options,
// the target architecture and the compiler, so those four, hashed, name the cache file: a
// second process with the same inputs reads the file and skips NVRTC entirely. The cache lives
// in $XDG_CACHE_HOME/cudabench/nvrtc (default ~/.cache/cudabench/nvrtc); files are written to a
// temporary name and renamed, so two processes racing on one key never see half a file. Without
// a writable cache directory every load compiles (stats().cache_hit stays false).
//
// Loading goes through the runtime's library API (cudaLibraryLoadData, cudaLibraryGetKernel,
// CUDA 12.0+): the same driver calls as cuLibraryLoadData/cuLibraryGetKernel, reached without
// linking libcuda, so the binary still starts (and skips) on a machine without a driver. A
// cudaKernel_t is launched by cudaLaunchKernel like any __global__ function.
#pragma once

#include <cuda_runtime.h>
#include <nvrtc.h>

#include <bench/bench.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>  // getpid: a temporary file name no other process uses

namespace ch14 {

struct JitStats {
  double compile_ms = 0;   // NVRTC: source to cubin (0 on a cache hit)
  double load_ms = 0;      // cache file read (on a hit) + cudaLibraryLoadData + GetKernel
  bool cache_hit = false;  // the cubin came from the on-disk cache
  int registers = 0;       // per thread, as ptxas allocated them
};

class JitKernel {
 public:
  // read_write: use the cached cubin when there is one, else compile and store it.
  // refresh: always compile (to time NVRTC), then store the result.
  enum class Cache { read_write, refresh };

  // `source` must define `extern "C" __global__ void <kernel_name>(...)`.
  JitKernel(const std::string& source, const std::string& kernel_name,
            std::vector<std::string> options, Cache cache = Cache::read_write) {
    int device = 0, major = 0, minor = 0, nvrtc_major = 0, nvrtc_minor = 0;
    BENCH_CUDA_CHECK(cudaGetDevice(&device));
    BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    check_nvrtc(nvrtcVersion(&nvrtc_major, &nvrtc_minor), "nvrtcVersion");
    // A cubin for exactly this GPU: no PTX JIT in the driver at load time. Line info, as every
    // nvcc-compiled kernel of the suite has (cmake/BenchChapter.cmake), for Nsight and
    // compute-sanitizer reports.
    options.push_back("--gpu-architecture=sm_" + std::to_string(major * 10 + minor));
    options.push_back("--generate-line-info");

    std::string key_text = source + '\n' + kernel_name;
    for (const auto& o : options) key_text += '\n' + o;
    key_text += "\nnvrtc " + std::to_string(nvrtc_major) + '.' + std::to_string(nvrtc_minor);
    const std::filesystem::path file = cache_dir() / (hex(fnv1a(key_text)) + ".cubin");

    std::vector<char> cubin;
    auto t0 = Clock::now();
    if (cache == Cache::read_write && !cache_dir().empty()) cubin = read_file(file);
    stats_.cache_hit = !cubin.empty();
    auto t1 = t0;
    cudaError_t loaded = cudaErrorInvalidKernelImage;
    if (stats_.cache_hit) {
      loaded =
          cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      if (loaded != cudaSuccess) {  // a damaged or foreign file: forget it and compile afresh
        (void)cudaGetLastError();   // the failed call must not fail the next launch check
        stats_.cache_hit = false;
        t0 = Clock::now();
      }
    }
    if (!stats_.cache_hit) {
      cubin = compile(source, options);
      stats_.compile_ms = ms_since(t0);
      if (!cache_dir().empty()) write_file(file, cubin);
      t1 = Clock::now();
      loaded =
          cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    }
    BENCH_CUDA_CHECK(loaded);
    BENCH_CUDA_CHECK(cudaLibraryGetKernel(&kernel_, library_, kernel_name.c_str()));
    // Asking for the attributes loads the kernel into this context now (with lazy loading, the
    // CUDA 12 default, it would otherwise happen inside the first launch), so load_ms is the
    // whole first-call cost short of the launch itself.
    cudaFuncAttributes attributes{};
    BENCH_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel_)));
    stats_.registers = attributes.numRegs;
    stats_.load_ms = ms_since(t1);  // on a hit t1 = t0: the file read counts
  }
  ~JitKernel() {
    if (library_ != nullptr) cudaLibraryUnload(library_);  // no check: destructors must not throw
  }
  JitKernel(const JitKernel&) = delete;
  JitKernel& operator=(const JitKernel&) = delete;

  void launch(dim3 grid, dim3 block, void** args, cudaStream_t stream) const {
    BENCH_CUDA_CHECK(
        cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), grid, block, args, 0, stream));
  }
  const JitStats& stats() const { return stats_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  }
  static void check_nvrtc(nvrtcResult r, const char* what) {
    if (r != NVRTC_SUCCESS)
      throw std::runtime_error(std::string(what) + ": " + nvrtcGetErrorString(r));
  }

  static std::vector<char> compile(const std::string& source,
                                   const std::vector<std::string>& options) {
    nvrtcProgram prog = nullptr;
    check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "ch14_jit.cu", 0, nullptr, nullptr),
                "nvrtcCreateProgram");
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    const nvrtcResult compiled =
        nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    if (compiled != NVRTC_SUCCESS) {
      size_t log_size = 0;
      nvrtcGetProgramLogSize(prog, &log_size);
      std::string log(log_size, '\0');
      nvrtcGetProgramLog(prog, log.data());
      nvrtcDestroyProgram(&prog);
      throw std::runtime_error("NVRTC failed to compile the generated kernel:\n" + log);
    }
    size_t size = 0;
    check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    std::vector<char> cubin(size);
    check_nvrtc(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
    nvrtcDestroyProgram(&prog);
    return cubin;
  }

  // $XDG_CACHE_HOME/cudabench/nvrtc, else ~/.cache/cudabench/nvrtc; empty when neither exists
  // or the folder cannot be made (then nothing is cached).
  static const std::filesystem::path& cache_dir() {
    static const std::filesystem::path dir = [] {
      std::filesystem::path base;
      if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
        base = xdg;
      else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
        base = std::filesystem::path(home) / ".cache";
      else
        return std::filesystem::path{};
      std::error_code ec;
      std::filesystem::create_directories(base / "cudabench" / "nvrtc", ec);
      return ec ? std::filesystem::path{} : base / "cudabench" / "nvrtc";
    }();
    return dir;
  }
  static std::vector<char> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return in ? std::vector<char>(std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>())
              : std::vector<char>{};
  }
  static void write_file(const std::filesystem::path& path, const std::vector<char>& bytes) {
    std::filesystem::path tmp = path;
    tmp += ".tmp" + std::to_string(::getpid()) + '_' +
           std::to_string(Clock::now().time_since_epoch().count());
    {
      std::ofstream out(tmp, std::ios::binary);
      if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        return;  // cache is optional
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  static uint64_t fnv1a(const std::string& text) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h;
  }
  static std::string hex(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
  }

  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  JitStats stats_;
};

// A JitKernel for a stateful variant, with the first-call figures as bench::Metrics. It first
// looks in the cache before this process has compiled anything: a hit there is a cubin an
// earlier process left, and its load time is what a second process really pays; then it
// compiles once bypassing the cache (what a process with an empty cache pays). A miss has just
// compiled, which is that figure, so it does not compile again. Last it loads the kernel it
// will launch through the cache. Built in the variant's constructor, so none of it
// is timed.
//   jit_compile_ms            NVRTC, source to cubin
//   jit_load_ms               loading that cubin into the context
//   jit_cached_first_call_ms  reading the cubin from the cache and loading it (same process)
//   jit_cache_hit             1 when that load did come from the cache (0: no writable cache)
//   jit_later_process_first_call_ms   the first look's load, when an earlier process had left
//                                     the cubin (absent in a process that found none)
//   jit_registers             per thread, as ptxas allocated them
class MeasuredJitKernel {
 public:
  MeasuredJitKernel(const std::string& source, const std::string& kernel_name,
                    const std::vector<std::string>& options) {
    {
      JitKernel first(source, kernel_name, options);
      if (first.stats().cache_hit) {
        later_process_ = first.stats();
        cold_ = JitKernel(source, kernel_name, options, JitKernel::Cache::refresh).stats();
      } else {
        cold_ = first.stats();  // the miss compiled it (and stored it): already the cold figure
      }
    }
    kernel_ = std::make_unique<JitKernel>(source, kernel_name, options);
  }
  void launch(dim3 grid, dim3 block, void** args, cudaStream_t stream) const {
    kernel_->launch(grid, block, args, stream);
  }
  std::vector<bench::Metric> metrics() const {
    const JitStats& warm = kernel_->stats();
    std::vector<bench::Metric> out = {{"jit_compile_ms", cold_.compile_ms},
                                      {"jit_load_ms", cold_.load_ms},
                                      {"jit_cached_first_call_ms", warm.load_ms},
                                      {"jit_cache_hit", warm.cache_hit ? 1.0 : 0.0},
                                      {"jit_registers", double(warm.registers)}};
    if (later_process_) out.push_back({"jit_later_process_first_call_ms", later_process_->load_ms});
    return out;
  }

 private:
  std::optional<JitStats> later_process_;
  JitStats cold_;
  std::unique_ptr<JitKernel> kernel_;
};

}  // namespace ch14
