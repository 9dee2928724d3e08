// bench/check.hpp: the suite's one CUDA error check.
//
//   BENCH_CUDA_CHECK(cudaMemcpyAsync(...));   // throws bench::CudaError naming the call
//   kernel<<<grid, block, 0, stream>>>(...);
//   BENCH_CHECK_LAUNCH();                      // a launch error names the launch site
//
// The macro stays small; the message is built out of line. The harness catches CudaError per
// case: the case is FAILED with the message, and a sticky error (the context is lost) ends the
// process after printing it, so the next example starts in a clean process.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace bench {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// A case that cannot run here (unsupported hardware, not enough memory): reported SKIPPED.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
inline void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, call, file, line);
}
}  // namespace detail

}  // namespace bench

#define BENCH_CUDA_CHECK(call) ::bench::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define BENCH_CHECK_LAUNCH() \
  ::bench::detail::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
