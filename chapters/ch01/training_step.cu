// ch01/training_step: one training step of an MLP, written as a first training loop is (FP32,
// one kernel per operation, the host waiting after every layer) → BF16 tensor cores, the
// elementwise work folded into a GEMM's epilogue where that costs the GEMM little and into one
// pass of its own where the epilogue slows the GEMM more than the pass costs, and nothing for the
// host to wait for.
//
// The model: 4 layers, each y = GELU(x W^T + b), W width x width (row-major out x in, as
// PyTorch's Linear), GELU in cuBLASLt's tanh form; batch x width activations, row-major (one
// sample's features contiguous). Loss: L = sum (y - t)^2 / (2 batch width), a mean squared error
// against a fixed target t, so backward starts from dL/dy = (y - t) / (batch width). One step =
// forward, loss, backward, SGD (w -= lr dL/dw, b -= lr dL/db) for every layer; its outputs are
// the updated weights and biases of all 4 layers and the loss. The first layer's input gradient
// is not needed and neither side computes it.
//   1. baseline: FP32 everywhere. GEMMs are cublasSgemm in the default math mode (CUDA cores,
//      no tensor cores: FP32 FFMA), then separate kernels for the bias, GELU, the loss gradient,
//      dGELU, the bias-gradient reduction and the SGD update of each layer, with a
//      cudaStreamSynchronize after each layer (forward and backward), as a loop that checks on
//      the GPU layer by layer does;
//   BF16 sides (four, one recipe each, see Recipe): tensor-core GEMMs through cuBLASLt with
//      FP32 accumulate, and what every one shares: the input batch cast to BF16 inside the step;
//      weight gradients and the SGD update in one BF16 GEMM (FP32 master weights, w_out = w - lr
//      dW computed as cuBLASLt's alpha A B + beta C with alpha = -lr, beta = 1, C = w, D = w_out,
//      FP32, so dW never exists in memory); the top layer's forward GEMM with the bias epilogue
//      alone, storing z and no activation, and one kernel that recomputes GELU(z) in FP32 for
//      the loss, the loss gradient times GELU'(z) and its column sums (the top bias gradient);
//      one kernel at the end that updates the biases and writes the BF16 copies of the new
//      weights and biases that the next step's GEMMs read (the step pays for them); no host
//      synchronisation. Where they differ is where the elementwise work around the other GEMMs
//      runs:
//   2. step bf16_cublaslt_fused_epilogues: all of it in cuBLASLt's epilogues. Forward:
//      CUBLASLT_EPILOGUE_GELU_AUX_BIAS adds the bias, applies GELU and also stores the
//      pre-activation (the "aux" matrix) that backward needs. Backward: each input-gradient GEMM
//      uses CUBLASLT_EPILOGUE_DGELU_BGRAD, which multiplies by GELU'(aux of the layer below) and
//      reduces that layer's bias gradient over the batch in the same pass. Measured, those
//      DGELU_BGRAD GEMMs ran at about half the rate of the same GEMM with no epilogue, enough to
//      lose the step to PyTorch's (README, "Where the step goes");
//   3. step bf16_cublaslt_dgelu_epilogue_bgradb: which half of that epilogue is slow. GELU' stays
//      in the input-gradient GEMM (CUBLASLT_EPILOGUE_DGELU, no bias gradient); the bias gradient
//      comes from the weight-gradient GEMM's CUBLASLT_EPILOGUE_BGRADB, a sum over the batch of
//      its B operand, which is that same dz;
//   4. step bf16_cublaslt_plain_gemms: no activation epilogues at all, as PyTorch's eager step
//      runs: the forward GEMM with the bias epilogue, then gelu_bf16; a plain input-gradient GEMM,
//      then dgelu_bias_columns (dGELU and the bias gradient in one pass);
//   5. optimized bf16_cublaslt_gelu_epilogue_dgelu_kernel: the forward's GELU_AUX_BIAS (its
//      extra cost over a plain GEMM is about what a separate GELU pass would cost, 4 bytes an
//      element), and backward's plain input-gradient GEMM followed by dgelu_bias_columns: the
//      GEMM's output and the aux read once, dz written once, 6 bytes an element, ~70 µs a layer
//      at the copy ceiling, a fraction of what DGELU_BGRAD's slower GEMM cost. The optimized
//      side on the strength of that arithmetic; the run decides (it is the fastest of 2-5 only
//      if the plain GEMM's speed holds next to the kernel).
// Same arithmetic on both sides (the BF16 rounding aside): same GEMMs, same loss, same update.
// Cost model: model FLOPs, 6 batch width^2 layers (forward 2, backward 4 per weight, the usual
// MFU convention; the skipped first-layer input gradient is 1/12 of it), against the BF16
// ceiling; the baseline is held to the FP32 one. Samples/s is reported as a metric.
// Metrics (each BF16 side, the last timed call, from events between its launches): forward_us,
// backward_us (= wgrad_sgd_us + dgrad_us, + dgelu_us where a kernel does dGELU), sgd_us,
// loss_us, cast_us, other_us (the gaps), each GEMM's TFLOP/s, the elementwise parts' GB/s on
// their bytes, and setup figures: each GEMM kind's tuned TFLOP/s and (step 2) cuBLASLt's best
// plain GEMM of each shape (what the epilogues cost).
// Timed sustained: both sides hold the board at its power limit, as a training run does.
//
//   ./bench compare --chapter ch01 --example training_step
//
// Files: training_step_model.cuh (the model, GELU), training_step_fp32.cuh (the baseline),
// training_step_passes.cuh (the BF16 sides' elementwise kernels), training_step_lt_plan.hpp
// (cuBLASLt plans), training_step_bf16.cuh (the BF16 step and its recipes' choices),
// training_step_reference.cuh (the references). Below: the variants and the registration.
#include <bench/bench.hpp>

#include "training_step_bf16.cuh"
#include "training_step_fp32.cuh"
#include "training_step_model.cuh"
#include "training_step_reference.cuh"

namespace {

// The variants: one recipe each (the roles are at the bottom, with the example's registration).
template <Forward kForwardRecipe, Backward kBackwardRecipe>
class Bf16StepWith : public Bf16Step {
 public:
  Bf16StepWith(const Mlp& m, cudaStream_t stream)
      : Bf16Step(m, stream, Recipe{kForwardRecipe, kBackwardRecipe}) {}
};
using Bf16FusedEpilogues = Bf16StepWith<Forward::gelu_epilogue, Backward::dgelu_bgrad_epilogue>;
using Bf16DgeluEpilogueBgradb =
    Bf16StepWith<Forward::gelu_epilogue, Backward::dgelu_epilogue_bgradb>;
using Bf16GeluEpilogueDgeluKernel = Bf16StepWith<Forward::gelu_epilogue, Backward::dgelu_kernel>;
using Bf16PlainGemms = Bf16StepWith<Forward::gelu_kernel, Backward::dgelu_kernel>;

// Tolerance, relative L2 per output. The BF16 side rounds every GEMM operand, activation, aux
// value and gradient to BF16 (2^-9 relative, unbiased) and accumulates in FP32; the errors
// compound over 4 layers forward and back to ~0.3% of the gradient, and a weight's error is that
// share of its update. A CPU emulation of both sides at the verification size (double, with and
// without BF16 rounding at the same points) gave: weights 7.9e-4 (update 25% of the weights),
// biases 2.2e-4 (update 7.2%), loss 2.7e-4; at batch 512, width 1024 the weights' error was 0.34%
// of their update, as at the small size. 3e-3 holds those with 3x margin, and a step that skips
// the update misses it by 24-84x; skipping only the first layer's (the smallest, 2.3%) by ~4x.
// The update inside the weight-gradient GEMM's epilogue (w + (-lr) acc, in FP32) rounds once
// less than a separate pass over an FP32 dW did: a difference at FP32's 2^-24 of the weights,
// far below the BF16 errors above, so the derivation and the tolerance stand. The plain-GEMM rung
// rounds twice more per layer (z before GELU, the input gradient before dGELU). The same CPU
// emulation, update in FP32 as the epilogue does it, 3 seeds at the verification size: fused
// side weights 6.6e-4 to 9.2e-4, biases 1.8e-4 to 2.6e-4, loss 1.3e-4 to 2.7e-4; rung weights
// 7.0e-4 to 9.1e-4, biases 1.8e-4 to 2.5e-4, loss 1.5e-5 to 3.1e-4; at batch 512, width 1024
// both 8.4e-4 on the weights. 3e-3 holds every one with 3.2x margin or more.
// The third version's sides (the same emulation, 3 seeds at the verification size; batch 512,
// width 1024 in brackets): the loss kernel's GELU(z) in FP32 removes the top activation's
// rounding on every BF16 side, the dGELU kernel rounds the input gradient before GELU' (once
// more a layer than an epilogue), and BGRADB and the kernel sum the bias gradient in FP32 from
// the BF16 dz instead of rounding it to BF16. DGELU_BGRAD side weights 6.5e-4 to 9.0e-4 [8.4e-4],
// biases 1.8e-4 to 2.4e-4, loss 1.0e-4 to 2.9e-4; DGELU + BGRADB and the optimized side
// weights 6.5e-4 to 9.1e-4 [8.4e-4], biases 1.5e-4 to 2.0e-4, loss 1.0e-4 to 2.9e-4; plain
// GEMMs weights 6.8e-4 to 9.2e-4 [8.4e-4], biases 1.5e-4 to 2.0e-4, loss 1.0e-4 to 2.1e-4.
// 3e-3 holds every one with 3.2x margin or more.
BENCH_EXAMPLE(ch01, training_step, Mlp)
    .stateful<Fp32SyncPerLayer>(bench::Role::baseline, "fp32_sgemm_sync_per_layer",
                                {.blocks_host = true, .compute_ceiling = bench::ceiling::fp32})
    .stateful<Bf16FusedEpilogues>(bench::Role::step, "bf16_cublaslt_fused_epilogues")
    .stateful<Bf16DgeluEpilogueBgradb>(bench::Role::step, "bf16_cublaslt_dgelu_epilogue_bgradb")
    .stateful<Bf16PlainGemms>(bench::Role::step, "bf16_cublaslt_plain_gemms")
    .stateful<Bf16GeluEpilogueDgeluKernel>(bench::Role::optimized,
                                           "bf16_cublaslt_gelu_epilogue_dgelu_kernel")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(3e-3))
    .mode(bench::Mode::sustained);

}  // namespace
