// ch01/training_step: the BF16 step, one class for every BF16 side. A Recipe says where the
// elementwise work around the GEMMs runs (a cuBLASLt epilogue or a pass of
// training_step_passes.cuh); the GEMMs' shapes and tuning, the top layer and loss, and the SGD
// are the same code for all.
#pragma once

#include <array>
#include <kernels/event_span.hpp>
#include <memory>
#include <string>
#include <vector>

#include "training_step_fp32.cuh"
#include "training_step_lt_plan.hpp"
#include "training_step_model.cuh"
#include "training_step_passes.cuh"

namespace {

// Where a BF16 step's time goes: an event pair around each part, recorded between its launches on
// the one stream (nothing the GPU waits for: a timestamp written when the work before it is
// done), read by metrics() after the last timed call.
enum Part : int {
  kCastInput = 0,
  kForward = 1,                        // + layer: the forward GEMM
  kGelu = kForward + kLayers,          // + layer (below the top): GELU after a plain GEMM
  kLoss = kGelu + kLayers - 1,         // loss, top layer's dL/dz and bias gradient
  kWeightGrad = kLoss + 1,             // + layer: the weight-gradient GEMM, SGD in its epilogue
  kInputGrad = kWeightGrad + kLayers,  // + layer - 1: layers 1.. (layer 0's is not computed)
  kDgelu = kInputGrad + kLayers - 1,   // + layer - 1: dGELU and bias gradient after a plain GEMM
  kUpdate = kDgelu + kLayers - 1,      // bias SGD and the next step's BF16 copies
  kParts
};

// Where the elementwise work around the GEMMs runs. Each BF16 variant is one recipe; everything
// else (the GEMMs' shapes and tuning, the top layer and loss, the SGD) is the same code, so the
// difference between two variants is what their recipes differ in, on this GPU and cuBLASLt.
enum class Forward {
  gelu_epilogue,  // GELU_AUX_BIAS: + bias, GELU, and the pre-activation z kept as the aux matrix
  gelu_kernel,    // BIAS epilogue writes z, then gelu_bf16 writes GELU(z)
};
enum class Backward {
  dgelu_bgrad_epilogue,   // DGELU_BGRAD: * GELU'(z) and the bias gradient, in the dgrad GEMM
  dgelu_epilogue_bgradb,  // DGELU in the dgrad GEMM; the bias gradient from the wgrad GEMM's
                          // BGRADB (the sum over the batch of its B operand, dz)
  dgelu_kernel,           // plain dgrad GEMM, then dgelu_bias_columns and finish_columns
};
struct Recipe {
  Forward forward;
  Backward backward;
};

class Bf16Step {
 public:
  Bf16Step(const Mlp& m, cudaStream_t stream, Recipe recipe)
      : recipe_(recipe),
        n_(m.activations()),
        d_(m.width),
        dd_(m.weights()),
        rows_(m.batch),
        lr_(m.lr),
        gemm_flops_(2.0 * double(m.batch) * double(m.width) * double(m.width)),
        workspace_(size_t{32} << 20),
        x_(n_),
        z_(kLayers * n_),
        a_(kLayers * n_),
        dz_(2 * n_),
        db16_(kLayers * d_),
        w_next_(kLayers * dd_),
        b_next_(kLayers * d_),
        db32_(kLayers * d_),
        partials_(kChunks * d_),
        loss_partials_(kChunks * strip_grid(d_).x) {
    // Row-major activations (batch x width) are column-major width x batch for cuBLASLt, and a
    // row-major out x in weight matrix is column-major in x out, i.e. W^T:
    //   forward      z^T  = W a^T              (op T, op N), epilogue GELU_AUX_BIAS or BIAS; the
    //                top layer always BIAS: its activation is recomputed by the loss kernel
    //   input grad   dz'^T = W^T dz^T           (op N, op N), epilogue DGELU_BGRAD, DGELU or none
    //   weight grad  W_out^T = W^T - lr a^T dz  (op N, op T), alpha = -lr, beta = 1, C = W^T:
    //                the SGD update of the FP32 master weights, in the GEMM's epilogue (every
    //                recipe), with BGRADB for the bias gradient in one recipe
    const int64_t d = d_, b = m.batch;
    const bool bgradb = recipe_.backward == Backward::dgelu_epilogue_bgradb;
    for (int l = 0; l < kLayers; ++l) {
      forward_.emplace_back(std::make_unique<LtPlan>(
          lt_.get(), CUBLAS_OP_T, CUBLAS_OP_N, d, b, d, d, CUDA_R_16BF, workspace_,
          gelu_in_gemm(l) ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS,
          m.b_bf16.data() + l * d, gelu_in_gemm(l) ? z(l) : nullptr));
      weight_grad_.emplace_back(std::make_unique<LtPlan>(
          lt_.get(), CUBLAS_OP_N, CUBLAS_OP_T, d, d, b, d, CUDA_R_32F, workspace_,
          bgradb ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT,
          bgradb ? db32_.data() + l * d : nullptr, nullptr, /*alpha=*/-m.lr, /*beta=*/1.0f));
      // layer l's input gradient is layer l-1's output gradient: GELU' and bias gradient of l-1
      if (l > 0) input_grad_.emplace_back(input_grad_plan(l - 1));
    }
    // Every operand the candidates read gets values first (the harness fills m.w, and
    // inputs_filled overwrites m.w_bf16, only after this constructor). The update GEMMs are tuned
    // on a scratch FP32 matrix as both C and D (zeros), not on the harness's w and w_out.
    auto fill = [&](bf16* p, int64_t n, float scale) {
      fill_for_tuning<<<kStreamBlocks, kBlock, 0, stream>>>(p, n, scale);
      BENCH_CHECK_LAUNCH();
    };
    fill(m.w_bf16.data(), m.w_bf16.size(), 1.0f / std::sqrt(float(d)));
    fill(m.b_bf16.data(), m.b_bf16.size(), 1.0f);
    fill(x_.data(), x_.size(), 1.0f);
    fill(a_.data(), a_.size(), 1.0f);
    fill(z_.data(), z_.size(), 1.0f);
    fill(dz_.data(), dz_.size(), 1e-3f);
    bench::DeviceBuffer<float> master_scratch(dd_);
    BENCH_CUDA_CHECK(cudaMemsetAsync(master_scratch.data(), 0, dd_ * sizeof(float), stream));
    const bf16* w = m.w_bf16.data();
    for (int l = 0; l < kLayers; ++l) {
      tuned_ms_[kForward + l] =
          forward_[l]->pick_fastest(w + l * dd_, input(l), forward_out(l), forward_out(l), stream);
      tuned_ms_[kWeightGrad + l] = weight_grad_[l]->pick_fastest(
          input(l), dz(l), master_scratch.data(), master_scratch.data(), stream);
      if (l > 0)
        tuned_ms_[kInputGrad + l - 1] = input_grad_[l - 1]->pick_fastest(
            w + l * dd_, dz(l), input_grad_out(l - 1), input_grad_out(l - 1), stream);
    }
    if (bgradb) bias_grad_scale_ = measure_bgradb_scale(master_scratch.data(), stream);
    if (recipe_.backward == Backward::dgelu_bgrad_epilogue) time_plain_gemms(w, d, b, stream);
  }

  void operator()(const Mlp& m, cudaStream_t stream) {
    span_.begin(stream);
    parts_[kCastInput].begin(stream);
    to_bf16<<<kStreamBlocks, kBlock, 0, stream>>>(m.x.data(), x_.data(), n_);
    BENCH_CHECK_LAUNCH();
    parts_[kCastInput].end(stream);
    const int top = kLayers - 1;
    for (int l = 0; l < kLayers; ++l) {
      parts_[kForward + l].begin(stream);
      forward_[l]->run(w16(m, l), input(l), forward_out(l), forward_out(l), stream);
      parts_[kForward + l].end(stream);
      if (l < top && records(kGelu + l)) {  // the top layer's GELU is the loss kernel's
        parts_[kGelu + l].begin(stream);
        gelu_bf16<<<kStreamBlocks, kBlock, 0, stream>>>(z(l), a(l), n_);
        BENCH_CHECK_LAUNCH();
        parts_[kGelu + l].end(stream);
      }
    }
    parts_[kLoss].begin(stream);
    loss_top_grad<<<strip_grid(d_), kBlock, 0, stream>>>(z(top), m.target.data(), dz(top),
                                                         partials_.data(), loss_partials_.data(),
                                                         rows_, d_, 1.0f / n_);
    BENCH_CHECK_LAUNCH();
    // (with BGRADB every layer's bias gradient, the top one's included, comes from its weight-
    // gradient GEMM, so the loss kernel's column partials are left unused)
    if (recipe_.backward != Backward::dgelu_epilogue_bgradb) finish_bias_grad(top, stream);
    finish_loss<<<1, kBlock, 0, stream>>>(loss_partials_.data(), int(loss_partials_.size()),
                                          m.loss.data(), 0.5f / n_);
    BENCH_CHECK_LAUNCH();
    parts_[kLoss].end(stream);
    for (int l = top; l >= 0; --l) {
      // w_out = w - lr dW: layer l's weights are final here; w_bf16 (the step's operand) is not
      // touched, so the input-gradient GEMM below still reads the weights the forward pass used.
      parts_[kWeightGrad + l].begin(stream);
      weight_grad_[l]->run(input(l), dz(l), m.w.data() + l * dd_, m.w_out.data() + l * dd_, stream);
      parts_[kWeightGrad + l].end(stream);
      if (l == 0) continue;
      parts_[kInputGrad + l - 1].begin(stream);
      input_grad_[l - 1]->run(w16(m, l), dz(l), input_grad_out(l - 1), input_grad_out(l - 1),
                              stream);
      parts_[kInputGrad + l - 1].end(stream);
      if (records(kDgelu + l - 1)) {
        parts_[kDgelu + l - 1].begin(stream);
        dgelu_bias_columns<<<strip_grid(d_), kBlock, 0, stream>>>(
            input_grad_out(l - 1), z(l - 1), dz(l - 1), partials_.data(), rows_, d_);
        BENCH_CHECK_LAUNCH();
        finish_bias_grad(l - 1, stream);
        parts_[kDgelu + l - 1].end(stream);
      }
    }
    parts_[kUpdate].begin(stream);
    if (recipe_.backward == Backward::dgelu_bgrad_epilogue)
      bias_sgd_and_bf16_copies<<<kStreamBlocks, kBlock, 0, stream>>>(
          m.w_out.data(), w_next_.data(), kLayers * dd_, m.b.data(), db16_.data(), -lr_,
          m.b_out.data(), b_next_.data(), kLayers * d_);
    else
      bias_sgd_and_bf16_copies<<<kStreamBlocks, kBlock, 0, stream>>>(
          m.w_out.data(), w_next_.data(), kLayers * dd_, m.b.data(), db32_.data(), bias_grad_scale_,
          m.b_out.data(), b_next_.data(), kLayers * d_);
    BENCH_CHECK_LAUNCH();
    parts_[kUpdate].end(stream);
    span_.end(stream);
  }

  // The last timed call's breakdown (µs; TFLOP/s of each GEMM at 2 batch width^2; GB/s of the
  // elementwise parts on the bytes they must move), and the setup's tuning figures: what each
  // GEMM kind reached on the idle board, and (the DGELU_BGRAD variant) cuBLASLt's best plain BF16
  // GEMM of each shape (no epilogue, BF16 out, as PyTorch's autocast matmuls). forward (GEMMs,
  // and GELU where a kernel does it) + backward (GEMMs, and dGELU where a kernel does it) + sgd
  // + loss + cast + other = the step; other_us is what lies between the parts (launch gaps,
  // event records).
  std::vector<bench::Metric> metrics() const {
    std::array<double, kParts> us{};
    for (int p = 0; p < kParts; ++p)
      if (records(p)) us[p] = 1e3 * parts_[p].ms();
    auto sum = [&](int first, int count) {
      double total = 0;
      for (int p = first; p < first + count; ++p) total += us[p];
      return total;
    };
    const double step_us = 1e3 * span_.ms(), forward = sum(kForward, kLayers),
                 gelu = sum(kGelu, kLayers - 1), wgrad = sum(kWeightGrad, kLayers),
                 dgrad = sum(kInputGrad, kLayers - 1), dgelu = sum(kDgelu, kLayers - 1),
                 listed = sum(0, kParts);
    const double n = double(n_), nw = double(kLayers * dd_), nb = double(kLayers * d_);
    auto gbps = [](double bytes, double time_us) { return bytes / (time_us * 1e3); };
    auto tflops = [&](double flops, double time_us) { return flops / (time_us * 1e6); };
    std::vector<bench::Metric> out = {
        {"samples_per_s", double(rows_) / (step_us * 1e-6)},
        {"forward_us", forward + gelu},
        {"backward_us", wgrad + dgrad + dgelu},
        {"wgrad_sgd_us", wgrad},
        {"dgrad_us", dgrad},
        {"sgd_us", us[kUpdate]},
        {"loss_us", us[kLoss]},
        {"cast_us", us[kCastInput]},
        {"other_us", step_us - listed},
        {"gemm_tflops", tflops(gemm_flops_ * (2 * kLayers - 1), forward + wgrad + dgrad)},
        // bytes: x read FP32, written BF16; loss: z BF16 and t FP32 read, dz BF16 written;
        // update: w_out read, BF16 copy written, and b, db, b_out, b_next
        {"cast_gbps", gbps(n * 6, us[kCastInput])},
        {"loss_gbps", gbps(n * 8, us[kLoss])},
        {"sgd_gbps", gbps(nw * 6 + nb * 12, us[kUpdate])},
    };
    if (recipe_.forward == Forward::gelu_kernel) {  // z read, a written (BF16)
      out.push_back({"gelu_us", gelu});
      out.push_back({"gelu_gbps", gbps((kLayers - 1) * n * 4, gelu)});
    }
    if (recipe_.backward == Backward::dgelu_kernel) {  // dh read, z read, dz written (BF16)
      out.push_back({"dgelu_us", dgelu});
      out.push_back({"dgelu_gbps", gbps((kLayers - 1) * n * 6, dgelu)});
    }
    auto per_gemm = [&](const std::string& kind, int first, int layer0, int count) {
      for (int i = 0; i < count; ++i)
        out.push_back(
            {kind + std::to_string(layer0 + i) + "_tflops", tflops(gemm_flops_, us[first + i])});
      out.push_back({"setup_" + kind + "_tflops", tflops(gemm_flops_, 1e3 * tuned_ms_[first])});
    };
    per_gemm("forward", kForward, 0, kLayers);
    per_gemm("wgrad_sgd", kWeightGrad, 0, kLayers);
    per_gemm("dgrad", kInputGrad, 1, kLayers - 1);
    const char* plain_names[] = {"setup_plain_forward_tflops", "setup_plain_dgrad_tflops",
                                 "setup_plain_wgrad_tflops"};
    for (int i = 0; i < 3; ++i)
      if (plain_ms_[i] > 0)
        out.push_back({plain_names[i], tflops(gemm_flops_, 1e3 * plain_ms_[i])});
    return out;
  }

 private:
  // Whether this recipe runs (and times) a part: the separate GELU and dGELU passes exist only
  // where a kernel, not an epilogue, does that work.
  bool records(int part) const {
    if (part >= kGelu && part < kGelu + kLayers - 1) return recipe_.forward == Forward::gelu_kernel;
    if (part >= kDgelu && part < kDgelu + kLayers - 1)
      return recipe_.backward == Backward::dgelu_kernel;
    return true;
  }
  // GELU in the forward GEMM's epilogue: below the top layer, where the recipe says so.
  bool gelu_in_gemm(int l) const {
    return l < kLayers - 1 && recipe_.forward == Forward::gelu_epilogue;
  }
  // The forward GEMM's D: the activation where the epilogue applies GELU (z is then its aux),
  // else the pre-activation.
  bf16* forward_out(int l) const { return gelu_in_gemm(l) ? a(l) : z(l); }
  // The input-gradient GEMM's D for layer l (the output gradient of layer l): dz(l) itself where
  // an epilogue applies GELU'; for the dGELU kernel, dL/da of layer l, written over a(l), which
  // is dead by then (its last reader, layer l+1's weight-gradient GEMM, ran just before).
  bf16* input_grad_out(int l) const {
    return recipe_.backward == Backward::dgelu_kernel ? a(l) : dz(l);
  }
  std::unique_ptr<LtPlan> input_grad_plan(int l) {
    const int64_t d = d_, b = rows_;
    switch (recipe_.backward) {
      case Backward::dgelu_bgrad_epilogue:
        return std::make_unique<LtPlan>(lt_.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, b, d, d,
                                        CUDA_R_16BF, workspace_, CUBLASLT_EPILOGUE_DGELU_BGRAD,
                                        db16_.data() + l * d, z(l));
      case Backward::dgelu_epilogue_bgradb:
        return std::make_unique<LtPlan>(lt_.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, b, d, d,
                                        CUDA_R_16BF, workspace_, CUBLASLT_EPILOGUE_DGELU, nullptr,
                                        z(l));
      case Backward::dgelu_kernel:
        break;
    }
    return std::make_unique<LtPlan>(lt_.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, b, d, d, CUDA_R_16BF,
                                    workspace_);
  }
  // Layer l's bias gradient from the column partials in partials_: BF16 next to DGELU_BGRAD's
  // (D's type, what that recipe's update reads), FP32 otherwise.
  void finish_bias_grad(int l, cudaStream_t stream) {
    if (recipe_.backward == Backward::dgelu_bgrad_epilogue)
      finish_columns<<<column_blocks(d_), kBlock, 0, stream>>>(partials_.data(),
                                                               db16_.data() + l * d_, d_);
    else
      finish_columns<<<column_blocks(d_), kBlock, 0, stream>>>(partials_.data(),
                                                               db32_.data() + l * d_, d_);
    BENCH_CHECK_LAUNCH();
  }
  // Untimed, BGRADB recipe only. cuBLASLt's header says where BGRADB's bias gradient goes (the
  // bias pointer, D's type) and what it sums (B over k: dz over the batch), not whether the
  // GEMM's alpha (-lr here) scales it. So it is measured once: layer 0's plan runs on the tuning
  // operands and its bias gradient is compared with the file's own column sums of the same dz.
  // Returns the factor of the bias update, b_out = b + factor db: -lr for the plain sum, 1 for a
  // sum already scaled by alpha. Neither (to 1%, relative L2) leaves the variant unsupported.
  float measure_bgradb_scale(float* scratch, cudaStream_t stream) {
    weight_grad_[0]->run(input(0), dz(0), scratch, scratch, stream);
    bench::DeviceBuffer<float> ours(d_);
    column_partials<<<dim3(column_blocks(d_), kChunks), kBlock, 0, stream>>>(
        dz(0), partials_.data(), rows_, d_);
    BENCH_CHECK_LAUNCH();
    finish_columns<<<column_blocks(d_), kBlock, 0, stream>>>(partials_.data(), ours.data(), d_);
    BENCH_CHECK_LAUNCH();
    std::vector<float> epilogue(d_), sums(d_);
    BENCH_CUDA_CHECK(cudaMemcpyAsync(epilogue.data(), db32_.data(), d_ * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaMemcpyAsync(sums.data(), ours.data(), d_ * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    auto relative_error = [&](double factor) {
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < d_; ++i) {
        const double want = factor * sums[i];
        diff += (epilogue[i] - want) * (epilogue[i] - want);
        norm += want * want;
      }
      return std::sqrt(diff / norm);
    };
    if (relative_error(1.0) < 1e-2) return -lr_;
    if (relative_error(-lr_) < 1e-2) return 1.0f;
    throw bench::Unsupported(
        "cuBLASLt's BGRADB bias gradient is neither the column sum of dz nor that sum times "
        "alpha (relative L2 " +
        std::to_string(relative_error(1.0)) + ", " + std::to_string(relative_error(-lr_)) + ")");
  }
  // Untimed: cuBLASLt's best plain GEMM of each of the step's three shapes, on the step's own
  // (already filled) buffers, which the first timed call overwrites. A shape it has no algorithm
  // for is left out of the metrics, not an error.
  void time_plain_gemms(const bf16* w, int64_t d, int64_t b, cudaStream_t stream) {
    auto best_ms = [&](cublasOperation_t ta, cublasOperation_t tb, int64_t rows, int64_t cols,
                       int64_t k, const void* a_op, const void* b_op, void* out) {
      try {
        LtPlan plain(lt_.get(), ta, tb, rows, cols, k, d, CUDA_R_16BF, workspace_);
        return plain.pick_fastest(a_op, b_op, out, out, stream);
      } catch (const bench::Unsupported&) {
        return 0.0;
      }
    };
    plain_ms_[0] = best_ms(CUBLAS_OP_T, CUBLAS_OP_N, d, b, d, w, x_.data(), a(0));
    plain_ms_[1] = best_ms(CUBLAS_OP_N, CUBLAS_OP_N, d, b, d, w, dz(1), a(1));
    plain_ms_[2] = best_ms(CUBLAS_OP_N, CUBLAS_OP_T, d, d, b, x_.data(), dz(0), w_next_.data());
  }
  bf16* z(int l) const { return z_.data() + l * n_; }
  bf16* a(int l) const { return a_.data() + l * n_; }
  const bf16* input(int l) const { return l == 0 ? x_.data() : a(l - 1); }
  bf16* dz(int l) const { return dz_.data() + (l % 2) * n_; }  // layer l's output gradient
  const bf16* w16(const Mlp& m, int l) const { return m.w_bf16.data() + l * dd_; }
  Recipe recipe_;
  int64_t n_, d_, dd_, rows_;
  float lr_;
  double gemm_flops_;
  float bias_grad_scale_ = -lr_;  // the bias update's factor on db32_ (see measure_bgradb_scale)
  LtHandle lt_;
  bench::DeviceBuffer<std::byte> workspace_;
  bench::DeviceBuffer<bf16> x_, z_, a_, dz_, db16_, w_next_, b_next_;
  bench::DeviceBuffer<float> db32_, partials_, loss_partials_;
  std::vector<std::unique_ptr<LtPlan>> forward_, input_grad_, weight_grad_;
  kernels::EventSpan span_;
  std::array<kernels::EventSpan, kParts> parts_;
  std::array<double, kParts> tuned_ms_{};  // the GEMM parts' best time per call at setup
  std::array<double, 3> plain_ms_{};       // forward, dgrad, wgrad shapes without epilogues
};

}  // namespace
