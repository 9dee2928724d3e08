// kernels/cublas_check.hpp: the cuBLAS / cuBLASLt status check (bench/check.hpp covers CUDA
// runtime calls only). A failed call throws, so the harness FAILS the case with the call's text.
//   kernels::check_cublas(cublasLtMatmul(...), "cublasLtMatmul");
#pragma once

#include <cublasLt.h>

#include <stdexcept>
#include <string>

namespace kernels {

inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + ": " + cublasLtGetStatusString(status));
}

}  // namespace kernels
