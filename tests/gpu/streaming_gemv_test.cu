// Tests kernels/streaming_gemv.cuh and kernels/streaming_mma.cuh, which ch20's streaming_gemv and
// streaming_mma rungs time, against the host, and kernels/pdl.cuh's ordering. The product: 1, 2, 3,
// 5 and 8 tokens (1, 2, 4 and 8 activation rows in shared memory, the padding rows zero and never
// stored), k = 2000 (a whole 128-vector step of the warp and a tail), 4001 row groups (more than
// the persistent grid's warps, so warps stride; not a multiple of the 8 warps a block). The opt-in:
// a smaller GEMV of the same kernel, planned after a larger one, leaves the larger one launchable.
// The chain: a second GEMV launched programmatically reads the first one's output in its prologue;
// that output is NaN until the first kernel writes it, so a prologue that ran before the wait would
// show as NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <kernels/cuda_graph.hpp>
#include <kernels/streaming_gemv.cuh>
#include <kernels/streaming_mma.cuh>
#include <optional>
#include <random>
#include <vector>

#include "device_copy.hpp"
#include "relative_l2.hpp"

namespace {

namespace gemv = kernels::gemv;
using bf16 = __nv_bfloat16;

// out [t][j] = in [t] · W [j], the rows in order.
struct Plain {
  const bf16* in;
  bf16* out;
  int64_t n;
  __device__ int64_t row(int64_t group, int slot) const {
    return group * gemv::kRowsPerWarp + slot;
  }
  __device__ void fill_row(bf16* act_row, int token, int64_t k) const {
    for (int64_t i = threadIdx.x; i < k; i += gemv::kThreads) act_row[i] = in[token * k + i];
  }
  __device__ void store(int64_t group, int slot, int token,
                        const float (&sums)[gemv::kRowsPerWarp]) const {
    out[token * n + row(group, slot)] = __float2bfloat16(gemv::pick(sums, slot));
  }
};

std::vector<bf16> random_bf16(std::size_t count, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<bf16> v(count);
  for (auto& x : v) x = __float2bfloat16(uniform(rng));
  return v;
}

// in [tokens][k] · w [n][k]ᵀ in double.
std::vector<double> product(const std::vector<bf16>& in, const std::vector<bf16>& w, int tokens,
                            int64_t n, int64_t k) {
  std::vector<double> out(std::size_t(tokens * n));
  for (int t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += double(__bfloat162float(in[t * k + p])) * double(__bfloat162float(w[j * k + p]));
      out[std::size_t(t * n + j)] = sum;
    }
  return out;
}

// FP32 sums of k = 2000 to 8192 products are exact to ~1e-6; the BF16 output rounding (2^-9
// relative at most, ~1.1e-3 RMS) dominates. A wrong row, token or k offset is an O(1) error.
constexpr double kTolerance = 3e-3;

// Relative L2 of op's product of random activations with w (on the device at w_d) against the
// host's; the output starts as NaN, so an element never stored fails it.
template <class Gemv>
double product_error(const Gemv& op, const std::vector<bf16>& w, const bf16* w_d, int tokens,
                     int64_t n, int64_t k) {
  const std::vector<bf16> in = random_bf16(std::size_t(tokens * k), 1.0f, 20 + tokens);
  bf16 *in_d = upload(in), *out_d = nullptr;
  EXPECT_EQ(cudaMalloc(&out_d, tokens * n * sizeof(bf16)), cudaSuccess);
  // On a stream of its own, as in ch20; the output is NaN until the GEMV stores it.
  const kernels::OwnedStream stream;
  EXPECT_EQ(cudaMemsetAsync(out_d, 0xff, tokens * n * sizeof(bf16), stream.get()), cudaSuccess);
  op(w_d, Plain{in_d, out_d, n}, stream.get());
  EXPECT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  const double error =
      relative_l2(download(out_d, std::size_t(tokens * n)), product(in, w, tokens, n, k));
  cudaFree(in_d);
  cudaFree(out_d);
  return error;
}

// Each token count's product against the host's, for one GEMV form on one weight matrix of
// `groups` row groups and k columns.
template <template <class> class Gemv>
void expect_matches_host(int64_t groups, int64_t k, unsigned seed,
                         std::initializer_list<int> token_counts) {
  const int64_t n = groups * gemv::kRowsPerWarp;
  const std::vector<bf16> w = random_bf16(std::size_t(n * k), 0.05f, seed);
  bf16* w_d = upload(w);
  for (int tokens : token_counts) {
    const Gemv<Plain> op(tokens, groups, k);
    EXPECT_LT(product_error(op, w, w_d, tokens, n, k), kTolerance) << tokens << " tokens";
  }
  cudaFree(w_d);
}

// k = 2000: 250 vectors a row, one whole 128-vector step and a 122-vector tail, so the first
// group (whose first step was loaded before the wait) also reloads, and the tail is masked.
TEST(StreamingGemv, MatchesTheHostForEachTokenCount) {
  expect_matches_host<gemv::StreamingGemv>(4001, 2000, 20, {1, 2, 3, 5, 8});
}

// The dynamic shared-memory opt-in belongs to the kernel, which two GEMVs of one Op and token
// count share (ch20's o and down projections): a smaller one planned after a larger one must not
// lower it below what the larger one launches with.
TEST(StreamingGemv, ASmallerPlanOfTheSameKernelLeavesTheLargerOneLaunchable) {
  constexpr int tokens = 8;
  constexpr int64_t kGroups = 300, n = kGroups * gemv::kRowsPerWarp, k_large = 8192, k_small = 64;
  std::optional<gemv::StreamingGemv<Plain>> large;
  try {
    large.emplace(tokens, kGroups, k_large);  // 128 KB of activations: past the 48 KB default
  } catch (const bench::Unsupported& e) {
    GTEST_SKIP() << e.what();
  }
  const gemv::StreamingGemv<Plain> small(tokens, kGroups, k_small);  // 1 KB
  const std::vector<bf16> w = random_bf16(std::size_t(n * k_large), 0.02f, 30);
  bf16* w_d = upload(w);
  EXPECT_LT(product_error(*large, w, w_d, tokens, n, k_large), kTolerance);
  cudaFree(w_d);
}

// y1 = x · W1ᵀ; y2 = y1 · W2ᵀ launched programmatically behind it, so its blocks may be resident
// (and its weight loads out) long before y1 is written. y1 and y2 start as NaN each run, so a
// read of y1 before the wait shows.
template <template <class> class Gemv>
void expect_the_chain_to_wait(int tokens, int64_t n1, int64_t k1, int64_t n2, int runs) {
  const std::vector<bf16> x = random_bf16(std::size_t(tokens * k1), 1.0f, 1),
                          w1 = random_bf16(std::size_t(n1 * k1), 0.02f, 2),
                          w2 = random_bf16(std::size_t(n2 * n1), 0.02f, 3);
  bf16 *x_d = upload(x), *w1_d = upload(w1), *w2_d = upload(w2), *y1_d = nullptr, *y2_d = nullptr;
  ASSERT_EQ(cudaMalloc(&y1_d, tokens * n1 * sizeof(bf16)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y2_d, tokens * n2 * sizeof(bf16)), cudaSuccess);
  const Gemv<Plain> first(tokens, n1 / gemv::kRowsPerWarp, k1),
      second(tokens, n2 / gemv::kRowsPerWarp, n1);
  kernels::OwnedStream stream, capture_stream;
  const kernels::Graph graph = kernels::capture(capture_stream.get(), [&](cudaStream_t s) {
    first(w1_d, Plain{x_d, y1_d, n1}, s);
    second(w2_d, Plain{y1_d, y2_d, n2}, s);
  });
  kernels::GraphExec exec;
  exec.instantiate(graph.get());

  // The reference rounds y1 to BF16, as the first kernel stores it.
  const std::vector<double> y1 = product(x, w1, tokens, n1, k1);
  std::vector<bf16> y1_rounded(y1.size());
  for (std::size_t i = 0; i < y1.size(); ++i) y1_rounded[i] = __float2bfloat16(float(y1[i]));
  const std::vector<double> y2 = product(y1_rounded, w2, tokens, n2, n1);
  for (int run = 0; run < runs; ++run) {
    ASSERT_EQ(cudaMemsetAsync(y1_d, 0xff, tokens * n1 * sizeof(bf16), stream.get()), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(y2_d, 0xff, tokens * n2 * sizeof(bf16), stream.get()), cudaSuccess);
    exec.launch(stream.get());
    ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
    EXPECT_LT(relative_l2(download(y2_d, std::size_t(tokens * n2)), y2), kTolerance)
        << "run " << run;
  }
  for (bf16* p : {x_d, w1_d, w2_d, y1_d, y2_d}) cudaFree(p);
}

// W1 is 128 MB: y2's blocks wait a long time.
TEST(StreamingGemv, ProgrammaticLaunchWaitsForTheKernelAhead) {
  expect_the_chain_to_wait<gemv::StreamingGemv>(4, 8192, 8192, 1024, 5);
}

// The tensor-core form: 1 to 32 tokens, each of its four kernels (1 to 4 token tiles: 16 tokens is
// the two-tile one, which ch20's batch-16 sweep point runs; 1, 3 and 17 pad the last 8-token tile
// with zeros), 2501 groups (313 tiles of 8 groups, the last one ragged with 5; more tiles than the
// persistent grid has blocks, so blocks stride), k = 2000 (16 slabs of 128 columns, the last one
// 80 wide: a masked tail, and 2 slabs a warp, so each warp reloads after its first slab).
TEST(StreamingMma, MatchesTheHostForEachTokenCount) {
  expect_matches_host<gemv::StreamingMma>(2501, 2000, 40, {1, 3, 8, 16, 17, 32});
}

// A fragment mistake must show: the kernel with b0 and b1 swapped (a B fragment whose k does not
// match A's) is an O(1) error, far past the tolerance. If this passes with the mistake in, the
// test above could not see a wrong k numbering either.
TEST(StreamingMma, APlantedFragmentMistakeFails) {
  constexpr int tokens = 8;
  constexpr int64_t kGroups = 301, n = kGroups * gemv::kRowsPerWarp, k = 1024;
  const std::vector<bf16> w = random_bf16(std::size_t(n * k), 0.05f, 41);
  bf16* w_d = upload(w);
  const gemv::StreamingMma<Plain> planted(tokens, kGroups, k, gemv::Fragments::planted_b_swap);
  EXPECT_GT(product_error(planted, w, w_d, tokens, n, k), 0.3);
  const gemv::StreamingMma<Plain> correct(tokens, kGroups, k);
  EXPECT_LT(product_error(correct, w, w_d, tokens, n, k), kTolerance);
  cudaFree(w_d);
}

// With the fill kernels between: y2's fill reads y1 after its wait, and y2's product reads the
// fill's rows after its own. 32 tokens, the kernel of 4 token tiles.
TEST(StreamingMma, ProgrammaticLaunchesWaitForTheKernelAhead) {
  expect_the_chain_to_wait<gemv::StreamingMma>(32, 8192, 4096, 1024, 3);
}

}  // namespace
