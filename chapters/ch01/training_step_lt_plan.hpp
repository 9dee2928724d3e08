// ch01/training_step: a cuBLASLt matmul planned once, with an epilogue and alpha/beta, and tuned
// untimed over the heuristic's candidates (LtPlan), and the cuBLASLt handle that owns them.
#pragma once

#include <cublasLt.h>

#include <bench/bench.hpp>
#include <cmath>
#include <cstddef>
#include <kernels/cublas_check.hpp>
#include <kernels/event_span.hpp>
#include <string>

namespace {

using kernels::check_cublas;

// One cuBLASLt matmul planned once (pointers of the epilogue included): D (m x n, column-major)
// = alpha op(A) op(B) + beta C, BF16 A and B, FP32 accumulate; every matrix here has leading
// dimension `ld`. C has D's type and layout and is read only where beta != 0 (the weight update:
// alpha = -lr, beta = 1, C = the FP32 master weights, D = the updated ones; cuBLASLt allows C != D
// when both have the same type, shape and order, and lists BF16 A/B with FP32 C/D under
// CUBLAS_COMPUTE_32F with an FP32 scale type).
// Epilogue rules (cublasLt.h): the bias, and DGELU_BGRAD's bias gradient, have D's row count
// and D's type (BF16 here); the bias gradient is a sum over D's columns, the batch here; the
// GELU aux matrix is m x n with a leading dimension divisible by 8.
class LtPlan {
 public:
  LtPlan(cublasLtHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
         int64_t k, int64_t ld, cudaDataType d_type,
         const bench::DeviceBuffer<std::byte>& workspace,
         cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT, const void* bias = nullptr,
         const void* aux = nullptr, float alpha = 1, float beta = 0)
      : handle_(handle), workspace_(workspace), alpha_(alpha), beta_(beta) {
    check_cublas(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    set(CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set(CUBLASLT_MATMUL_DESC_TRANSB, tb);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    if (bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (aux != nullptr) {
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld);
    }
    const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
    check_cublas(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, na ? m : k, na ? k : m, ld),
                 "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, nb ? k : n, nb ? n : k, ld),
                 "cublasLtMatrixLayoutCreate");
    check_cublas(cublasLtMatrixLayoutCreate(&d_, d_type, m, n, ld), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const size_t bytes = workspace.bytes();
    check_cublas(cublasLtMatmulPreferenceSetAttribute(
                     pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes),
                 "cublasLtMatmulPreferenceSetAttribute");
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, desc_, a_, b_, d_, d_, pref,
                                                             kCandidates, candidates_, &found_);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found_ == 0)
      throw bench::Unsupported(std::string("cuBLASLt has no algorithm for epilogue ") +
                               std::to_string(int(epilogue)) + ": " + cublasLtGetStatusString(st));
    algo_ = candidates_[0].algo;
  }
  // Untimed setup: the heuristic's first candidate is not always the fastest (see
  // kernels/cublaslt_gemm.hpp), so each one that runs is timed, 2 passes of 5 calls, on operands
  // the caller has filled, and the fastest kept. Returns its time per call, in ms.
  double pick_fastest(const void* a, const void* b, const void* c, void* d, cudaStream_t stream) {
    kernels::EventSpan span;
    double best_ms = INFINITY;
    for (int i = 0; i < found_; ++i) {
      if (candidates_[i].state != CUBLAS_STATUS_SUCCESS ||
          try_run(candidates_[i].algo, a, b, c, d, stream) != CUBLAS_STATUS_SUCCESS)
        continue;
      for (int pass = 0; pass < 2; ++pass) {
        span.begin(stream);
        for (int rep = 0; rep < kTuningCalls; ++rep)
          check_cublas(try_run(candidates_[i].algo, a, b, c, d, stream), "cublasLtMatmul");
        span.end(stream);
        if (span.ms() < best_ms) best_ms = span.ms(), algo_ = candidates_[i].algo;
      }
    }
    if (best_ms == INFINITY)
      throw bench::Unsupported("none of cuBLASLt's candidates runs this matmul");
    return best_ms / kTuningCalls;
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(desc_);
  }
  void run(const void* a, const void* b, const void* c, void* d, cudaStream_t stream) const {
    check_cublas(try_run(algo_, a, b, c, d, stream), "cublasLtMatmul");
  }

 private:
  // 16, not kernels/cublaslt_gemm.hpp's 8: the epilogue GEMMs' heuristic ranking is the suspect
  // for the gap to PyTorch, and tuning each of 15 plans on 16 candidates costs ~1 s of setup.
  static constexpr int kCandidates = 16;
  static constexpr int kTuningCalls = 5;
  cublasStatus_t try_run(const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                         const void* c, void* d, cudaStream_t stream) const {
    return cublasLtMatmul(handle_, desc_, &alpha_, a, a_, b, b_, &beta_, c, d_, d, d_, &algo,
                          workspace_.data(), workspace_.bytes(), stream);
  }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    check_cublas(cublasLtMatmulDescSetAttribute(desc_, attr, &value, sizeof value),
                 "cublasLtMatmulDescSetAttribute");
  }
  cublasLtHandle_t handle_;
  const bench::DeviceBuffer<std::byte>& workspace_;
  float alpha_, beta_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulHeuristicResult_t candidates_[kCandidates] = {};
  int found_ = 0;
  cublasLtMatmulAlgo_t algo_{};
};

class LtHandle {
 public:
  LtHandle() { check_cublas(cublasLtCreate(&handle_), "cublasLtCreate"); }
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  ~LtHandle() { cublasLtDestroy(handle_); }
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace
