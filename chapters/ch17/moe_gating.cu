// ch17/moe_gating: a mixture-of-experts gate picks, for every token, the few experts it is sent to
// and their weights. Run op by op, as PyTorch eager runs it, that is ten kernels that each write a
// tokens x experts intermediate for the next to read back; fused, it is one pass over the logits
// with everything else in registers.
//
// The work (moe_gating_rule.hpp defines the choice exactly, ties included), per token:
//   deepseek_v3: 256 expert logits; choice score sigmoid(logit) + bias[expert]; 8 groups of 32
//     experts, a group scored by its two best choice scores; the 4 best groups kept; the 8 best
//     experts of those; weights sigmoid(logit) of the 8, renormalised to sum to 1 (no bias);
//   mixtral: 8 logits; the 2 largest; weights their softmax probabilities renormalised over the 2.
// Outputs: indices (int32, tokens x k, best first) and weights (float, tokens x k).
//
// The ladder:
//   1. baseline "separate_kernels": the ops as separate generic kernels (elementwise sigmoid, bias
//      add, a warp-per-row top-k used four times, row sums, the group mask, a gather, a divide),
//      each reading its input from and writing its output to global memory;
//   2. optimized "fused": one kernel. deepseek_v3: a warp per token, lane l holding experts
//      8l..8l+7 (two 16-byte loads, the warp's 1 KiB row read once, the next token's row loaded
//      while this one is ranked) and the bias in registers for every token the warp serves; each
//      lane sorts its 8 keys (a 19-comparator network), the 4 lanes of a group merge their two
//      best by shuffles, every lane ranks the 8 group scores, and 8 rounds of a warp maximum
//      (redux.sync on the score bits, the lowest lane among equals: the lowest index) pop the
//      winners. mixtral: a thread per token, 32 bytes of logits, top 2 in registers.
// Ranking is identical everywhere by construction: the same sigmoid bits (moe_gating_rule.hpp) and
// the same integer key on both sides. The inputs make ties common on purpose: logits are whole
// numbers in [-8, 8] and the bias is -1, 0 or 1, so equal choice scores and equal group sums meet
// the tie rule in every checked run (tests/unit/moe_gating_rule_test.cpp shows a reversed rule
// fails on such inputs). No kernel's work depends on the values (fixed rounds of selection), so
// the timing loses nothing by it.
// Bytes: the logits read once, the bias, both outputs written once; held to the HBM read ceiling
// (the outputs are 1/16 of the traffic at deepseek_v3).
// Tolerance: allclose(1e-6, 0). Indices are whole numbers, so one wrong index fails; weights are at
// most 1 and carry FP32 rounding of a sigmoid, an 8-term sum and a division (a few 1e-7) against a
// double reference; BF16 arithmetic (~2e-3) fails.
//
//   ./bench compare --chapter ch17 --example moe_gating
#include <algorithm>
#include <bench/bench.hpp>
#include <cmath>
#include <kernels/occupancy.cuh>
#include <string>
#include <vector>

#include "moe_gating_rule.hpp"

namespace {

// Scalars for the kernels (a namespace-scope struct is a host object to nvcc), the struct for the
// reference.
constexpr int kDsExperts = 256, kDsGroups = 8, kDsKeptGroups = 4, kDsTopK = 8;
constexpr ch17::GroupLimitedGate kDeepSeekV3{kDsExperts, kDsGroups, kDsKeptGroups, kDsTopK};
constexpr int kMixtralExperts = 8, kMixtralTopK = 2;

struct Gating {
  bool deepseek;
  int64_t tokens, experts, top_k;
  bench::DeviceSpan<const float> logits, bias;  // bias: deepseek_v3 only
  bench::DeviceSpan<int32_t> indices;
  bench::DeviceSpan<float> weights;
  explicit Gating(bench::Setup& s)
      : deepseek(s.string_axis("config") == "deepseek_v3"),
        tokens(s.size("tokens", s.axis("tokens"), 301)),
        experts(deepseek ? kDeepSeekV3.experts : kMixtralExperts),
        top_k(deepseek ? kDeepSeekV3.top_k : kMixtralTopK),
        logits(s.input<float>("logits", tokens * experts, bench::integers(-8, 8))),
        indices(s.output<int32_t>("indices", tokens * top_k)),
        weights(s.output<float>("weights", tokens * top_k)) {
    if (deepseek) bias = s.input<float>("bias", experts, bench::integers(-1, 1));
    s.param("experts", experts);
    s.param("top_k", top_k);
    s.bytes(double(logits.bytes() + bias.bytes() + indices.bytes() + weights.bytes()),
            bench::ceiling::hbm_read);
  }
};

// ---- 1. Baseline: one generic kernel per op, intermediates through global memory --------------
constexpr int kBlock = 256;
unsigned blocks_for(int64_t threads) { return unsigned((threads + kBlock - 1) / kBlock); }
// One op: enough blocks of kBlock threads for `threads`, on the case's stream, checked.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), int64_t threads, cudaStream_t stream, Args... args) {
  kernel<<<blocks_for(threads), kBlock, 0, stream>>>(Params(args)...);
  BENCH_CHECK_LAUNCH();
}

__global__ void sigmoid_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = ch17::sigmoid(x[i]);
}
__global__ void add_bias_kernel(const float* x, const float* bias, float* y, int64_t n, int cols) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = x[i] + bias[i % cols];
}
// A thread a row: the rows are 8 wide here.
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int cols) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float top = -INFINITY, sum = 0;
  for (int c = 0; c < cols; ++c) top = fmaxf(top, x[r * cols + c]);
  for (int c = 0; c < cols; ++c) sum += expf(x[r * cols + c] - top);
  for (int c = 0; c < cols; ++c) y[r * cols + c] = expf(x[r * cols + c] - top) / sum;
}
// torch.topk's role: a warp per row, k rounds, each taking the best key below the last one taken.
__global__ void top_k_rows_kernel(const float* x, int64_t rows, int cols, int k, float* values,
                                  int32_t* indices) {
  const int64_t row = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps
  uint64_t previous = ~uint64_t{0};
  for (int round = 0; round < k; ++round) {
    uint64_t best = 0;
    for (int c = lane; c < cols; c += 32) {
      const uint64_t key = ch17::rank_key(x[row * cols + c], uint32_t(c));
      if (key < previous && key > best) best = key;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, best, offset);
      best = other > best ? other : best;
    }
    if (lane == 0 && values != nullptr) values[row * k + round] = ch17::score_of(best);
    if (lane == 0) indices[row * k + round] = int32_t(ch17::index_of(best));
    previous = best;
  }
}
__global__ void sum_rows_kernel(const float* x, int64_t rows, int cols, float* sums) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  float sum = 0;
  for (int c = 0; c < cols; ++c) sum += x[r * cols + c];
  sums[r] = sum;
}
// Experts of groups not kept become -inf (masked_fill).
__global__ void mask_groups_kernel(const float* x, const int32_t* kept, int64_t n, int cols,
                                   int per_group, int kept_groups, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int64_t row = i / cols;
  const int group = int(i % cols) / per_group;
  bool is_kept = false;
  for (int j = 0; j < kept_groups; ++j) is_kept |= kept[row * kept_groups + j] == group;
  y[i] = is_kept ? x[i] : -INFINITY;
}
__global__ void gather_rows_kernel(const float* x, const int32_t* indices, int64_t n, int cols,
                                   int k, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = x[(i / k) * cols + indices[i]];
}
__global__ void divide_rows_kernel(const float* x, const float* sums, int64_t n, int k, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = x[i] / sums[i / k];
}

// Untimed: the intermediates, as PyTorch's caching allocator would hand them over.
struct SeparateKernels {
  bench::DeviceBuffer<float> scores, choice, pair_values, group_score, masked, gathered, sums;
  bench::DeviceBuffer<int32_t> pair_indices, kept;
  SeparateKernels(const Gating& w, cudaStream_t)
      : scores(w.tokens * w.experts),
        choice(w.deepseek ? w.tokens * w.experts : 1),
        pair_values(w.deepseek ? w.tokens * kDsGroups * 2 : 1),
        group_score(w.deepseek ? w.tokens * kDsGroups : 1),
        masked(w.deepseek ? w.tokens * w.experts : 1),
        gathered(w.tokens * w.top_k),
        sums(w.tokens),
        pair_indices(w.deepseek ? w.tokens * kDsGroups * 2 : 1),
        kept(w.deepseek ? w.tokens * kDsKeptGroups : 1) {}
  void operator()(const Gating& w, cudaStream_t stream) const {
    const int64_t n = w.tokens * w.experts, nk = w.tokens * w.top_k, rows = w.tokens;
    const int E = int(w.experts), K = int(w.top_k);
    if (w.deepseek) {
      const int64_t group_rows = rows * kDsGroups;  // choice viewed as (tokens x groups) x 32
      const int per_group = kDsExperts / kDsGroups;
      launch(sigmoid_kernel, n, stream, w.logits.data(), scores.data(), n);
      launch(add_bias_kernel, n, stream, scores.data(), w.bias.data(), choice.data(), n, E);
      launch(top_k_rows_kernel, 32 * group_rows, stream, choice.data(), group_rows, per_group, 2,
             pair_values.data(), pair_indices.data());
      launch(sum_rows_kernel, group_rows, stream, pair_values.data(), group_rows, 2,
             group_score.data());
      launch(top_k_rows_kernel, 32 * rows, stream, group_score.data(), rows, kDsGroups,
             kDsKeptGroups, nullptr, kept.data());
      launch(mask_groups_kernel, n, stream, choice.data(), kept.data(), n, E, per_group,
             kDsKeptGroups, masked.data());
      launch(top_k_rows_kernel, 32 * rows, stream, masked.data(), rows, E, K, nullptr,
             w.indices.data());
    } else {  // softmax for the weights; the ranking on the logits themselves (moe_gating_rule.hpp)
      launch(softmax_rows_kernel, rows, stream, w.logits.data(), scores.data(), rows, E);
      launch(top_k_rows_kernel, 32 * rows, stream, w.logits.data(), rows, E, K, nullptr,
             w.indices.data());
    }
    launch(gather_rows_kernel, nk, stream, scores.data(), w.indices.data(), nk, E, K,
           gathered.data());
    launch(sum_rows_kernel, rows, stream, gathered.data(), rows, K, sums.data());
    launch(divide_rows_kernel, nk, stream, gathered.data(), sums.data(), nk, K, w.weights.data());
  }
};

// ---- 2. Optimized: one kernel -------------------------------------------------------------------
constexpr int kWarpsPerBlock = 8;
constexpr int kPerLane = 8;  // deepseek_v3: lane l holds experts 8l..8l+7; a group is 4 lanes
static_assert(kDsExperts == 32 * kPerLane && kDsExperts / kDsGroups == 4 * kPerLane &&
              kDsTopK <= 32);

__device__ inline void load8(const float* p, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    fused_group_limited_gate(const float* logits, const float* bias, int64_t tokens,
                             int32_t* indices, float* weights) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x % 32, group = lane / 4;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  int64_t token = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  float b[kPerLane], next[kPerLane];
  load8(bias + kPerLane * lane, b);
  if (token < tokens) load8(logits + token * kDsExperts + kPerLane * lane, next);
  for (; token < tokens; token += warps) {
    uint64_t key[kPerLane];
    float score[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      score[i] = ch17::sigmoid(next[i]);
      key[i] = ch17::rank_key(score[i] + b[i], uint32_t(kPerLane * lane + i));
    }
    if (token + warps < tokens)
      load8(logits + (token + warps) * kDsExperts + kPerLane * lane, next);
    ch17::sort8_best_first(key, score);
    // The group's score: its two best choice scores over its 4 lanes, larger + smaller.
    float best = ch17::score_of(key[0]), second = ch17::score_of(key[1]);
#pragma unroll
    for (int offset = 1; offset < 4; offset *= 2) {
      const float other_best = __shfl_xor_sync(kAll, best, offset);
      const float other_second = __shfl_xor_sync(kAll, second, offset);
      second = fmaxf(fminf(best, other_best), fmaxf(second, other_second));
      best = fmaxf(best, other_best);
    }
    const uint64_t group_key = ch17::rank_key(best + second, uint32_t(group));
    int groups_ahead = 0;
#pragma unroll
    for (int g = 0; g < kDsGroups; ++g)
      groups_ahead += __shfl_sync(kAll, group_key, 4 * g) > group_key;
    // 8 rounds: the warp's best head; the lowest lane among equal scores holds the lowest index.
    uint32_t head = groups_ahead < kDsKeptGroups ? uint32_t(key[0] >> 32) : 0;
    int32_t my_index = 0;
    float my_score = 0;
#pragma unroll
    for (int round = 0; round < kDsTopK; ++round) {
      const uint32_t top = __reduce_max_sync(kAll, head);
      const int winner = __ffs(__ballot_sync(kAll, head == top)) - 1;
      const int32_t index = int32_t(__shfl_sync(kAll, ch17::index_of(key[0]), winner));
      const float s = __shfl_sync(kAll, score[0], winner);
      if (lane == round) my_index = index, my_score = s;
      if (lane == winner) {
#pragma unroll
        for (int i = 0; i + 1 < kPerLane; ++i) key[i] = key[i + 1], score[i] = score[i + 1];
        key[kPerLane - 1] = 0;
        head = uint32_t(key[0] >> 32);
      }
    }
    float sum = lane < kDsTopK ? my_score : 0.0f;
#pragma unroll
    for (int offset = 1; offset < kDsTopK; offset *= 2) sum += __shfl_xor_sync(kAll, sum, offset);
    if (lane < kDsTopK) {
      indices[token * kDsTopK + lane] = my_index;
      weights[token * kDsTopK + lane] = my_score / sum;
    }
  }
}

__global__ void fused_softmax_top2_gate(const float* logits, int64_t tokens, int2* indices,
                                        float2* weights) {
  const int64_t token = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (token >= tokens) return;
  float x[kMixtralExperts];
  load8(logits + token * kMixtralExperts, x);
  uint64_t first = ch17::rank_key(x[0], 0), second = 0;
#pragma unroll
  for (int i = 1; i < kMixtralExperts; ++i) {
    const uint64_t key = ch17::rank_key(x[i], uint32_t(i));
    second = key > first ? first : (key > second ? key : second);
    first = key > first ? key : first;
  }
  // softmax over the two: exp(l2 - l1) / (1 + exp(l2 - l1)) and 1 / (1 + exp(l2 - l1))
  const float ratio = ch17::exp_bitwise(ch17::score_of(second) - ch17::score_of(first));
  const float w_first = 1.0f / (1.0f + ratio);
  indices[token] = make_int2(int(ch17::index_of(first)), int(ch17::index_of(second)));
  weights[token] = make_float2(w_first, ratio * w_first);
}

// Untimed: the deepseek_v3 grid, as many warps as fit on the GPU at once (each loops over tokens).
struct Fused {
  unsigned grid = 1;
  Fused(const Gating& w, cudaStream_t) {
    const int64_t resident = int64_t{kernels::sm_count()} *
                             kernels::blocks_per_sm(fused_group_limited_gate, 32 * kWarpsPerBlock);
    grid = unsigned(
        std::max<int64_t>(1, std::min(resident, (w.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock)));
  }
  void operator()(const Gating& w, cudaStream_t stream) const {
    if (w.deepseek) {
      fused_group_limited_gate<<<grid, 32 * kWarpsPerBlock, 0, stream>>>(
          w.logits.data(), w.bias.data(), w.tokens, w.indices.data(), w.weights.data());
    } else {
      fused_softmax_top2_gate<<<blocks_for(w.tokens), kBlock, 0, stream>>>(
          w.logits.data(), w.tokens, reinterpret_cast<int2*>(w.indices.data()),
          reinterpret_cast<float2*>(w.weights.data()));
    }
    BENCH_CHECK_LAUNCH();
  }
};

// The choice by the rule in moe_gating_rule.hpp; the weights in double. One token's, for the CPU
// reference below and, a thread a token, the device reference after it: the same code, so the
// device reference chooses what the CPU one does (the rule's sigmoid has the same bits on both),
// and its weights differ only by the device's double exp (within an ulp of double, far under the
// tolerance).
template <class Weight>
__host__ __device__ void gate_one_token(bool deepseek, int experts, int top_k, const float* x,
                                        const float* bias, int32_t* indices, Weight* weights) {
  const ch17::GroupLimitedGate gate{kDsExperts, kDsGroups, kDsKeptGroups, kDsTopK};
  float choice[kDsExperts];  // deepseek_v3's choice scores (mixtral ranks its logits)
  int32_t chosen[kDsTopK];
  double p[kDsTopK], sum = 0;
  if (deepseek)
    ch17::choose_group_limited(gate, x, bias, choice, chosen);
  else
    ch17::top_k_by_rule(x, experts, top_k, chosen);
  for (int j = 0; j < top_k; ++j) {
    const double logit = x[chosen[j]];
    p[j] = deepseek ? 1.0 / (1.0 + exp(-logit)) : exp(logit - double(x[chosen[0]]));
    sum += p[j];
  }
  for (int j = 0; j < top_k; ++j) {
    indices[j] = chosen[j];
    weights[j] = Weight(p[j] / sum);  // double for the CPU reference, float as the outputs are
  }
}

void reference(const Gating& w, bench::HostData& h) {
  const auto logits = h.input<float>("logits");
  const float* bias = w.deepseek ? h.input<float>("bias").data() : nullptr;
  auto indices = h.expected("indices"), weights = h.expected("weights");
  for (int64_t t = 0; t < w.tokens; ++t) {
    int32_t chosen[kDsTopK];
    double p[kDsTopK];
    gate_one_token(w.deepseek, int(w.experts), int(w.top_k), logits.data() + t * w.experts, bias,
                   chosen, p);
    for (int64_t j = 0; j < w.top_k; ++j) {
      indices[t * w.top_k + j] = chosen[j];
      weights[t * w.top_k + j] = p[j];
    }
  }
}

// The device reference (docs/validity.md row 2: timed samples checked on the device): a thread a
// token, each running the CPU reference's code for its token; slow next to the variants (a
// thread ranks 256 experts eight times over, its choice scores in local memory), plainly right.
__global__ void gate_reference(bool deepseek, int experts, int top_k, const float* logits,
                               const float* bias, int64_t tokens, int32_t* indices,
                               float* weights) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t < tokens)
    gate_one_token(deepseek, experts, top_k, logits + t * experts, bias, indices + t * top_k,
                   weights + t * top_k);
}

void device_reference(const Gating& w, cudaStream_t stream) {
  gate_reference<<<blocks_for(w.tokens), kBlock, 0, stream>>>(
      w.deepseek, int(w.experts), int(w.top_k), w.logits.data(), w.bias.data(), w.tokens,
      w.indices.data(), w.weights.data());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch17, moe_gating, Gating)
    .int_axis("tokens", {1, 128, 8192, 16384}, {8192})
    .string_axis("config", {"deepseek_v3", "mixtral"})
    .stateful<SeparateKernels>(bench::Role::baseline, "separate_kernels")
    .stateful<Fused>(bench::Role::optimized, "fused")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(1e-6, 0));

}  // namespace
