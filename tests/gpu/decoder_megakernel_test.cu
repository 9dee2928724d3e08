// Tests ch20's megakernel (chapters/ch20/megakernel.cuh: the decoder layer's step as one persistent
// launch with grid barriers, each head merged by the block that counts in its last chunk) against
// ch20's FP64 CPU layer, at a small size of the layer's structure: 8 query heads over 2 KV heads
// (GQA groups of 4, so a head mix-up shows), MLP 4400 (550 16-byte vectors a row: 4 whole
// 128-vector slabs and a tail; 2200 gate/up row groups, more than the grid has warps at every token
// count, so warps stride), 700 cached keys (2 chunks, not a whole number of attention steps). 1, 2,
// 3, 5 and 8 tokens cover the four kernels (1, 2, 4 and 8 activation rows, the padding rows zero
// and never stored). Each output starts as NaN, so an element no phase stores fails; the step runs
// three times on one plan, so a grid barrier not left ready for the next launch (its arrival count
// not left at a multiple of the grid) fails the second run, by its timeout's trap if it would
// otherwise hang. A 2000-key
// cache merges 7 splits, the last one short; a cache of zero keys with larger RMSNorm gains makes
// the new key, which joins only in the merge, weigh in y. The per-head merge counters must be left
// at zero by every launch: four launches of one plan where 7 chunks count in per head, and of one
// where blocks run two attention items, merging a head between them, each checked, then the
// counters read back. And the shared-memory opt-in, which plans of one kernel share. The L2-ahead
// plan (rung 7b) at a size whose W_o rows are two slabs, and its refusal where the cache fills the
// L2. The tests of the layer's outputs and of the merge run both attention forms: rung 7's (a
// block per query head and chunk) and rung 7c's (a block per KV head and chunk, on tensor cores,
// ch20/group_attention_mma.cuh), whose splits differ (chunks of whole 128-key CTA steps: 3 at 700
// keys, the last 188 keys, 8 at 2000), and rung 7e's narrow down projection, cooperative and
// chained (rung 7f); two chained steps as two layers, the second reading the first's output.
#include <gtest/gtest.h>

#include <ch20/megakernel.cuh>
#include <cmath>
#include <cstdint>
#include <kernels/cuda_graph.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "device_copy.hpp"
#include "relative_l2.hpp"

namespace {

using bf16 = __nv_bfloat16;

std::vector<bf16> random_bf16(std::size_t count, float low, float high, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<bf16> v(count);
  for (auto& x : v) x = __float2bfloat16(uniform(rng));
  return v;
}

std::vector<bf16> weights(int64_t rows, int64_t k, unsigned seed) {  // unit-scale outputs
  const float a = std::sqrt(3.0f / float(k));
  return random_bf16(std::size_t(rows * k), -a, a, seed);
}

// As ch20's registration: each output passes a few BF16 roundings (~3e-3 in all); a wrong row,
// head, chunk or phase order is an O(1) error.
constexpr double kTolerance = 1e-2;

// How the random inputs are drawn where a test needs other than the default: RMSNorm 1's gains
// (they scale q, k and v, so the scores grow as their square) and a K cache of zeros (every cached
// score 0).
struct Inputs {
  float norm1_low = 0.5f, norm1_high = 1.5f;
  bool zero_k_cache = false;
};

// A layer's random inputs (from seed, drawn as `inputs` asks), on the host, in the order of
// ch20::reference::HostLayer and of the device copies upload() makes.
struct LayerInputs {
  std::vector<bf16> x, norm1, norm2, w_qkv, w_o, w_gate_up, w_down, k_cache, v_cache;
  LayerInputs(const ch20::LayerDims& dims, unsigned seed, const Inputs& inputs) {
    const auto kv_rows = std::size_t(dims.batch * dims.kv_heads * dims.past * ch20::kHeadDim);
    x = random_bf16(std::size_t(dims.batch * dims.hidden), -1.7f, 1.7f, seed);
    norm1 = random_bf16(std::size_t(dims.hidden), inputs.norm1_low, inputs.norm1_high, seed + 1);
    norm2 = random_bf16(std::size_t(dims.hidden), 0.5f, 1.5f, seed + 2);
    w_qkv = weights(dims.qkv_dim, dims.hidden, seed + 3);
    w_o = weights(dims.hidden, dims.hidden, seed + 4);
    w_gate_up = weights(2 * dims.ffn, dims.hidden, seed + 5);
    w_down = weights(dims.hidden, dims.ffn, seed + 6);
    k_cache = inputs.zero_k_cache ? std::vector<bf16>(kv_rows, __float2bfloat16(0.0f))
                                  : random_bf16(kv_rows, -1.7f, 1.7f, seed + 7);
    v_cache = random_bf16(kv_rows, -1.7f, 1.7f, seed + 8);
  }
  // The FP64 host layer on these inputs, x replaced by `x_in` (a layer's input from the one
  // before it).
  void reference(const ch20::LayerDims& dims, const std::vector<bf16>& x_in, std::vector<double>& y,
                 std::vector<double>& k_new, std::vector<double>& v_new) const {
    ch20::reference::layer(dims,
                           {x_in, norm1, norm2, w_qkv, w_o, w_gate_up, w_down, k_cache, v_cache},
                           {y, k_new, v_new});
  }
  // Device copies, in the order of ch20::mega::Io (free them with cudaFree).
  std::vector<bf16*> upload_all() const {
    return {upload(x),         upload(norm1),  upload(norm2),   upload(w_qkv),  upload(w_o),
            upload(w_gate_up), upload(w_down), upload(k_cache), upload(v_cache)};
  }
};

// Runs `plan` (made for dims) `runs` times on random inputs of dims and compares y, k_new and
// v_new with the FP64 CPU layer after each run.
void expect_matches_host(const ch20::LayerDims& dims, const ch20::mega::DecoderMegakernel& plan,
                         cudaStream_t stream, int runs, const Inputs& inputs = {}) {
  const int64_t kv_new = dims.batch * dims.kv_heads * ch20::kHeadDim;
  const LayerInputs layer(dims, unsigned(100 * dims.batch + dims.ffn), inputs);
  const std::vector<bf16>& x = layer.x;
  std::vector<double> y(x.size()), k_ref(static_cast<std::size_t>(kv_new)), v_ref(k_ref.size());
  layer.reference(dims, x, y, k_ref, v_ref);

  const std::vector<bf16*> in = layer.upload_all();
  // The outputs start as NaN: an element no phase stores fails the comparison.
  const std::vector<bf16> poison_y(y.size(), __float2bfloat16(NAN)),
      poison_kv(k_ref.size(), __float2bfloat16(NAN));
  bf16 *y_d = upload(poison_y), *k_new_d = upload(poison_kv), *v_new_d = upload(poison_kv);
  const ch20::mega::Io io{in[0], in[1], in[2], in[3], in[4],   in[5],
                          in[6], in[7], in[8], y_d,   k_new_d, v_new_d};
  for (int run = 0; run < runs; ++run) {
    plan(io, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << dims.batch << " tokens, run " << run;
    EXPECT_LT(relative_l2(download(y_d, y.size()), y), kTolerance)
        << dims.batch << " tokens, run " << run << ", grid " << plan.grid() << ", " << plan.splits()
        << " splits";
    EXPECT_LT(relative_l2(download(k_new_d, k_ref.size()), k_ref), kTolerance)
        << dims.batch << " tokens, run " << run;
    EXPECT_LT(relative_l2(download(v_new_d, v_ref.size()), v_ref), kTolerance)
        << dims.batch << " tokens, run " << run;
    // NaN again before the next run. A copy from pageable memory may return before its bytes
    // land, and the plan's non-blocking stream is not ordered after it: without the device
    // synchronize, the poison could land after the next run's stores and fail a correct kernel.
    for (bf16* out : {y_d, k_new_d, v_new_d})
      ASSERT_EQ(cudaMemcpy(out, out == y_d ? poison_y.data() : poison_kv.data(),
                           (out == y_d ? poison_y.size() : poison_kv.size()) * sizeof(bf16),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  for (bf16* p : in) cudaFree(p);
  for (bf16* p : {y_d, k_new_d, v_new_d}) cudaFree(p);
}

// The plan, or the reason this GPU cannot hold it (the caller skips with it): a GPU or partition
// that cannot keep the persistent grid resident is not a failure.
using ch20::mega::Attention;
using ch20::mega::Launch;
// A plan's form: its attention phase, (rung 7e) the down projection in narrow groups, and (rung
// 7f) the launch.
struct Form {
  Attention attention = Attention::per_head;
  bool narrow_down = false;
  Launch launch = Launch::cooperative;
};
constexpr Form kForms[] = {{Attention::per_head},
                           {Attention::group_mma},
                           {Attention::group_mma_merge_at_once},
                           {Attention::group_mma_merge_at_once, true},
                           {Attention::group_mma_merge_at_once, true, Launch::chained}};
const char* name(Form f) {
  return f.launch == Launch::chained           ? "group_mma_merge_at_once, narrow down, chained"
         : f.narrow_down                       ? "group_mma_merge_at_once, narrow down"
         : f.attention == Attention::group_mma ? "group_mma"
         : f.attention == Attention::group_mma_merge_at_once ? "group_mma_merge_at_once"
                                                             : "per_head";
}

std::optional<ch20::mega::DecoderMegakernel> plan_or_reason(const ch20::LayerDims& dims,
                                                            cudaStream_t stream, std::string& why,
                                                            Form form = {}) {
  try {
    return std::optional<ch20::mega::DecoderMegakernel>(std::in_place, dims, stream,
                                                        ch20::mega::L2Ahead::none, form.attention,
                                                        form.narrow_down, form.launch);
  } catch (const bench::Unsupported& e) {
    why = e.what();
    return std::nullopt;
  }
}

TEST(DecoderMegakernel, MatchesTheHostLayerForEachTokenCount) {
  for (const Form form : kForms)
    for (int tokens : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE(name(form));
      const ch20::LayerDims dims = ch20::LayerDims::of(tokens, 8, 2, 4400, 700);
      const kernels::OwnedStream stream;
      std::string why;
      const auto plan = plan_or_reason(dims, stream.get(), why, form);
      if (!plan) GTEST_SKIP() << why;
      // Three runs of one plan: its barrier and merge counters must be left ready for the next
      // launch.
      expect_matches_host(dims, *plan, stream.get(), 3);
      if (HasFatalFailure())
        return;  // a trapped barrier loses the context: the rest would only echo it
    }
}

// The narrow down projection is rung 7d's only: asked of another attention form it is an error.
TEST(DecoderMegakernel, NarrowDownWithAnotherAttentionIsAnError) {
  const kernels::OwnedStream stream;
  try {
    ch20::mega::DecoderMegakernel(ch20::LayerDims::of(1, 8, 2, 4400, 700), stream.get(),
                                  ch20::mega::L2Ahead::none, Attention::group_mma, true);
    FAIL() << "a narrow down projection with rung 7c's attention was accepted";
  } catch (const bench::Unsupported& e) {
    GTEST_SKIP() << e.what();  // this GPU holds no megakernel at all
  } catch (const std::invalid_argument&) {
  }
}

// At 700 keys every plan above has 2 splits. A longer cache at 1 token gets 7 (chunks of 320 keys,
// the last one 80), as the timing size gets 8 at batch 1: the merge folds more than two partials,
// and a short last chunk.
TEST(DecoderMegakernel, MergesManySplitsWithAShortLastChunk) {
  for (const Form form : kForms) {
    SCOPED_TRACE(name(form));
    const ch20::LayerDims dims = ch20::LayerDims::of(1, 8, 2, 4400, 2000);
    const kernels::OwnedStream stream;
    std::string why;
    const auto plan = plan_or_reason(dims, stream.get(), why, form);
    if (!plan) GTEST_SKIP() << why;
    EXPECT_GE(plan->splits(), 4) << "grid " << plan->grid();
    expect_matches_host(dims, *plan, stream.get(), 1);
  }
}

// Rung 7d's merge loads the first 32 splits' partials at once and folds any past them one by one:
// over 5120 keys at 1 token a group's 2 KV heads get 40 splits (chunks of 128 keys) on a grid of
// 2 blocks an SM of 132, so both paths run. (5000 keys round to chunks of 256 keys: 20 splits.)
TEST(DecoderMegakernel, MergesAtOncePastThirtyTwoSplits) {
  const ch20::LayerDims dims = ch20::LayerDims::of(1, 8, 2, 4400, 5120);
  const kernels::OwnedStream stream;
  std::string why;
  const auto plan = plan_or_reason(dims, stream.get(), why, {Attention::group_mma_merge_at_once});
  if (!plan) GTEST_SKIP() << why;
  if (plan->splits() <= 32)
    GTEST_SKIP() << "grid " << plan->grid() << ": " << plan->splits()
                 << " splits, no split past the merge's first 32";
  expect_matches_host(dims, *plan, stream.get(), 2);
}

// Each head is merged by the block whose chunk completes its counter, which resets it for the next
// launch. At 1 token over 2000 keys 7 blocks count in per head; at 8 tokens with 16 / 4 heads
// there are 256 attention items (2 splits) for a grid of one block an SM, so most blocks run two,
// some merging a head after their first while their other warps start the second. Four launches
// of each plan must all match the host layer (a counter left short or past its count would merge a
// head early, with stale partials, or never, leaving the output NaN), and the counters must read
// zero after. The group form's items are KV heads: at 8 tokens over 16 KV heads (groups of 2,
// hidden 4096) there are 256 of them (2 splits), so its blocks too run two.
TEST(DecoderMegakernel, MergeCountersAreLeftAtZeroAcrossLaunches) {
  for (const Form form : kForms)
    for (const ch20::LayerDims& dims :
         {ch20::LayerDims::of(1, 8, 2, 4400, 2000),
          ch20::mega::per_kv_head(form.attention) ? ch20::LayerDims::of(8, 32, 16, 1104, 700)
                                                  : ch20::LayerDims::of(8, 16, 4, 4400, 700)}) {
      SCOPED_TRACE(name(form));
      const kernels::OwnedStream stream;
      std::string why;
      const auto plan = plan_or_reason(dims, stream.get(), why, form);
      if (!plan) GTEST_SKIP() << why;
      if (dims.batch == 1) {
        EXPECT_GE(plan->splits(), 4) << "grid " << plan->grid();
      } else {
        const int64_t heads =
            ch20::mega::per_kv_head(form.attention) ? dims.kv_heads : dims.q_heads;
        EXPECT_GT(dims.batch * heads * plan->splits(), int64_t{plan->grid()})
            << "every block runs one attention item at most: no merge between two items";
      }
      expect_matches_host(dims, *plan, stream.get(), 4);
      if (HasFatalFailure()) return;
      const std::vector<uint32_t> counts =
          download(plan->merge_counts().data(), std::size_t(plan->merge_counts().size()));
      EXPECT_EQ(counts, std::vector<uint32_t>(counts.size(), 0u)) << dims.batch << " tokens";
    }
}

// With random inputs the new key is one of 701 (weight ~1e-3): y would hardly change if the merge
// dropped it or read another head's (~1e-3 relative, under the tolerance). Here the cached keys
// are zeros (every cached score 0: the cache's part of the softmax is 700 x e^0) and RMSNorm 1's
// gains are ~2, which makes the new key's score q.k / sqrt(128) ~N(0, 4^2) nats: a head whose
// score is above 4 gives it 7% of the weight or more, one above ln 700 most of it. An FP64
// host emulation of exactly these inputs (not run on a GPU) puts the BF16 roundings at 3.5e-3 and
// 3.3e-3 relative L2 in y at 1 and 5 tokens, and the same layer without the new key 6.7e-2 and
// 3.5e-1 away. Larger gains separate them more but amplify the roundings through the larger
// scores: at ~3 the roundings alone reached 1.07e-2 at 1 token.
TEST(DecoderMegakernel, TheNewKeyWeighsInTheMerge) {
  for (const Form form : kForms)
    for (int tokens : {1, 5}) {
      SCOPED_TRACE(name(form));
      const ch20::LayerDims dims = ch20::LayerDims::of(tokens, 8, 2, 4400, 700);
      const kernels::OwnedStream stream;
      std::string why;
      const auto plan = plan_or_reason(dims, stream.get(), why, form);
      if (!plan) GTEST_SKIP() << why;
      expect_matches_host(dims, *plan, stream.get(), 1,
                          {.norm1_low = 1.5f, .norm1_high = 2.5f, .zero_k_cache = true});
      if (HasFatalFailure()) return;
    }
}

// The dynamic shared-memory opt-in belongs to the kernel, which every plan of one padded token
// count shares: a smaller plan made after a larger one must leave the larger one launchable.
TEST(DecoderMegakernel, ASmallerPlanOfTheSameKernelLeavesTheLargerOneLaunchable) {
  const ch20::LayerDims large = ch20::LayerDims::of(8, 8, 2, 4400, 700),  // 70 KB of activations
      small = ch20::LayerDims::of(5, 8, 2, 1000, 700);                    // 16 KB
  const kernels::OwnedStream stream;
  std::string why;
  const auto large_plan = plan_or_reason(large, stream.get(), why);
  if (!large_plan) GTEST_SKIP() << why;
  const ch20::mega::DecoderMegakernel small_plan(small, stream.get());
  expect_matches_host(large, *large_plan, stream.get(), 1);
}

// The L2-ahead plan (rung 7b) prefetches W_o's rows past their first slab during the attention. At
// hidden 1024 a row is one slab, so the test sizes above prefetch nothing: here 16 query heads make
// hidden 2048, two slabs a row, and every line of the second slab fits the L2 beside a 700-key
// cache (2048 rows x 16 lines). A prefetch changes no arithmetic: the plan must match the host
// layer as rung 7 does, over three launches, at 1 and 2 tokens.
TEST(DecoderMegakernel, TheL2AheadPlanPrefetchesTheRestOfWoAndMatchesTheHostLayer) {
  for (int tokens : {1, 2}) {
    const ch20::LayerDims dims = ch20::LayerDims::of(tokens, 16, 4, 4400, 700);
    const kernels::OwnedStream stream;
    std::optional<ch20::mega::DecoderMegakernel> plan;
    try {
      plan.emplace(dims, stream.get(), ch20::mega::L2Ahead::o_rest);
    } catch (const bench::Unsupported& e) {
      GTEST_SKIP() << e.what();
    }
    EXPECT_EQ(plan->o_rest_lines(), int64_t{2048} * 16) << tokens << " tokens";
    expect_matches_host(dims, *plan, stream.get(), 3);
    if (HasFatalFailure()) return;
  }
}

// A cache larger than the L2 leaves no room for W_o: the L2-ahead plan says so (rung 7b is then
// SKIPPED, rung 7 the same launch), and rung 7's plan of the same dims prefetches nothing. Hidden
// 2048 (16 query heads), so that W_o has lines past its first slabs to refuse: at hidden 1024 a
// row is one slab and there is nothing to prefetch, whatever the cache.
TEST(DecoderMegakernel, TheL2AheadPlanIsUnsupportedWhereTheCacheFillsTheL2) {
  const int64_t l2 = kernels::l2_cache_bytes();
  const int64_t past = l2 / (8 * 4 * ch20::kHeadDim * 2 * 2) + 1;  // 8 sequences x 4 KV heads
  const ch20::LayerDims dims = ch20::LayerDims::of(8, 16, 4, 4400, past);
  ASSERT_GT(ch20::l2_ahead::rest_lines(dims.hidden), 0);
  const kernels::OwnedStream stream;
  EXPECT_THROW(ch20::mega::DecoderMegakernel(dims, stream.get(), ch20::mega::L2Ahead::o_rest),
               bench::Unsupported);
  std::string why;
  const auto plain = plan_or_reason(dims, stream.get(), why);
  if (!plain) GTEST_SKIP() << why;
  EXPECT_EQ(plain->o_rest_lines(), 0);
}

// The phase stamps (the breakdown metrics() reports after the samples): every phase takes time,
// no barrier ends before the phase ahead of it (the next phase's first start is after the last
// block's end: the global timer is one clock for all SMs), and the plan still computes the layer
// after stamped launches (the barrier and merge counters left as a launch needs them).
TEST(DecoderMegakernel, PhaseStampsCoverEveryPhaseInOrder) {
  const ch20::LayerDims dims = ch20::LayerDims::of(2, 8, 2, 4400, 700);
  const kernels::OwnedStream stream;
  std::string why;
  const auto plan = plan_or_reason(dims, stream.get(), why);
  if (!plan) GTEST_SKIP() << why;
  const int64_t kv = dims.batch * dims.kv_heads * dims.past * ch20::kHeadDim;
  bench::DeviceBuffer<bf16> x(dims.batch * dims.hidden), norm(dims.hidden),
      w_qkv(dims.qkv_dim * dims.hidden), w_o(dims.hidden * dims.hidden),
      w_gate_up(2 * dims.ffn * dims.hidden), w_down(dims.hidden * dims.ffn), k_cache(kv),
      v_cache(kv), y(x.size()), k_new(dims.batch * dims.kv_heads * ch20::kHeadDim),
      v_new(k_new.size());
  for (bench::DeviceBuffer<bf16>* b :
       {&x, &norm, &w_qkv, &w_o, &w_gate_up, &w_down, &k_cache, &v_cache})
    ASSERT_EQ(cudaMemset(b->data(), 0, b->bytes()), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the plan's stream does not wait for it
  const ch20::mega::Io io{x.data(),       norm.data(),      norm.data(),   w_qkv.data(),
                          w_o.data(),     w_gate_up.data(), w_down.data(), k_cache.data(),
                          v_cache.data(), y.data(),         k_new.data(),  v_new.data()};
  const auto times = plan->phase_times(io, stream.get(), 3);
  // 5 phases, 4 barriers, the timer's step, the out-of-order count
  ASSERT_EQ(times.size(), std::size_t(2 * ch20::mega::kPhases + 1));
  double spans = 0;
  for (const auto& [name, value] : times) {
    if (name.starts_with("phase_us_")) EXPECT_GT(value, 0.0) << name;
    if (name.starts_with("barrier_us_")) EXPECT_GE(value, 0.0) << name;
    if (name.starts_with("phase_us_") || name.starts_with("barrier_us_")) spans += value;
    if (name == "stamp_step_ns") EXPECT_GT(value, 0.0) << name;
    if (name == "stamps_out_of_order") EXPECT_EQ(value, 0.0) << "blocks whose stamps fall back";
  }
  EXPECT_LT(spans, 1e5) << "a span of over 0.1 s is a wrapped difference, not a phase";
  expect_matches_host(dims, *plan, stream.get(), 1);
}

// Two chained steps (rung 7f) as two layers of a model: the second step's x is the first step's y,
// and it is launched programmatically right behind it, so its blocks start, and issue their first
// weights, while the first step's down phase still writes y. y1 and y2 start as NaN: a second step
// that read its x (or anything else the first writes: the activations, the counters, the grid
// barrier's count, all shared by the one plan) before its wait would show. Each step is compared
// with the FP64 host layer, the second on the first's output as the kernel stored it (BF16). Three
// runs of the pair; at 1 and 5 tokens.
TEST(DecoderMegakernel, AChainedStepReadsTheStepAheadsOutputOnlyAfterItsWait) {
  for (int tokens : {1, 5}) {
    const ch20::LayerDims dims = ch20::LayerDims::of(tokens, 8, 2, 4400, 700);
    const kernels::OwnedStream stream;
    std::string why;
    const auto plan = plan_or_reason(dims, stream.get(), why,
                                     {Attention::group_mma_merge_at_once, true, Launch::chained});
    if (!plan) GTEST_SKIP() << why;
    const int64_t kv_new = dims.batch * dims.kv_heads * ch20::kHeadDim;
    const LayerInputs layer(dims, unsigned(7 * tokens), {});
    const std::vector<bf16>& x = layer.x;
    // Layer 1 on x, then layer 2 on layer 1's y rounded to BF16, the same weights and cache.
    std::vector<double> y1(x.size()), y2(x.size()), k1(static_cast<std::size_t>(kv_new)),
        v1(k1.size()), k2(k1.size()), v2(k1.size());
    layer.reference(dims, x, y1, k1, v1);
    std::vector<bf16> x2(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x2[i] = __float2bfloat16(float(y1[i]));
    layer.reference(dims, x2, y2, k2, v2);

    const std::vector<bf16*> in = layer.upload_all();
    const std::vector<bf16> nan_y(x.size(), __float2bfloat16(NAN)),
        nan_kv(k1.size(), __float2bfloat16(NAN));
    bf16 *y1_d = upload(nan_y), *y2_d = upload(nan_y), *k1_d = upload(nan_kv),
         *v1_d = upload(nan_kv), *k2_d = upload(nan_kv), *v2_d = upload(nan_kv);
    const ch20::mega::Io first{in[0], in[1], in[2], in[3], in[4], in[5],
                               in[6], in[7], in[8], y1_d,  k1_d,  v1_d},
        second{y1_d, in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], y2_d, k2_d, v2_d};
    for (int run = 0; run < 3; ++run) {
      (*plan)(first, stream.get());
      (*plan)(second, stream.get());
      ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(y1_d, y1.size()), y1), kTolerance) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(k1_d, k1.size()), k1), kTolerance) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(v1_d, v1.size()), v1), kTolerance) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(k2_d, k2.size()), k2), kTolerance) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(v2_d, v2.size()), v2), kTolerance) << tokens << " tokens";
      EXPECT_LT(relative_l2(download(y2_d, y2.size()), y2), kTolerance)
          << tokens << " tokens, run " << run;
      for (bf16* out : {y1_d, y2_d})
        ASSERT_EQ(
            cudaMemcpy(out, nan_y.data(), nan_y.size() * sizeof(bf16), cudaMemcpyHostToDevice),
            cudaSuccess);
      for (bf16* out : {k1_d, v1_d, k2_d, v2_d})
        ASSERT_EQ(
            cudaMemcpy(out, nan_kv.data(), nan_kv.size() * sizeof(bf16), cudaMemcpyHostToDevice),
            cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<uint32_t> counts =
          download(plan->merge_counts().data(), std::size_t(plan->merge_counts().size()));
      EXPECT_EQ(counts, std::vector<uint32_t>(counts.size(), 0u)) << tokens << " tokens";
    }
    for (bf16* p : in) cudaFree(p);
    for (bf16* p : {y1_d, y2_d, k1_d, v1_d, k2_d, v2_d}) cudaFree(p);
    if (HasFatalFailure()) return;
  }
}

// Past 8 tokens the megakernel is not the tool (the FMAs set the time): the plan says so, as a
// skip, rather than launching a kernel that holds no more than 8 tokens' activations.
TEST(DecoderMegakernel, NineTokensAreUnsupported) {
  const kernels::OwnedStream stream;
  EXPECT_THROW(ch20::mega::DecoderMegakernel(ch20::LayerDims::of(9, 8, 2, 4400, 700), stream.get()),
               bench::Unsupported);
}

}  // namespace
