// The out-of-line half of BENCH_CUDA_CHECK: builds the message that names the call.
#include <string>

#include "bench/check.hpp"

namespace bench::detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::string message = std::string(call) + " failed: " + cudaGetErrorName(code) + " (" +
                        cudaGetErrorString(code) + ") at " + file + ":" + std::to_string(line);
  throw CudaError(code, message);
}

}  // namespace bench::detail
