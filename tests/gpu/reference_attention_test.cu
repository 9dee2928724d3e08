// Tests kernels/reference_attention.cuh's two GPU forms, the device reference that `bench compare`
// checks ch15-ch19's attention samples against.
// - The rows form (decode, n_q < 64) against its previous form (copied below as
//   previous_reference_attention: one CTA a query, K read by every query's CTA): the outputs must
//   be bitwise equal, which holds only if it performs the same FP32 operations in the same order
//   for every (query, output dimension). Head dims 64 and 128; 1, 3, 8 (one whole CTA of queries)
//   and 333 queries (a partial last CTA); 1, 100, 128 (one whole tile) and 4113 keys (a partial
//   last tile); 1 and 5 (batch, head) pairs; every key visible, causal, and a sliding window with
//   scattered far keys (tiles that some queries of a CTA see and others do not).
// - The tiled form (prefill, n_q >= 64; not the same operation order, so not bitwise) against the
//   CPU reference in double: every output within BF16's rounding of the exact value plus a small
//   FP32 allowance, and the relative L2 error below 2.5e-3 (BF16 rounding alone gives ~1.6e-3).
//   Head dims 64 and 128; queries and keys whole tiles (64), ragged (333, 130, 4113), and 1 and 3
//   queries (a CTA almost empty); causal, ragged windows with scattered keys, and scores of
//   magnitude ~100 growing along the keys (expf without the running max overflows; the max moves
//   up tile after tile, so every rescale is exercised).
// - The wrapper picks the tiled form from 64 queries up, the rows form below (bitwise each).
// Prints the time of the rows and tiled forms at ch16's shapes (b4 and b1 x 32 heads, s4096,
// d128 and d64) and of the wrapper at ch18's decode shape; the times are reported, not asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_attention.cuh>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_copy.hpp"

namespace {

using bf16 = __nv_bfloat16;

// ---- The previous form of kernels::detail::reference_attention, unchanged: the oracle. ----
template <int kDim, class Visible>
__global__ void __launch_bounds__(kDim)
    previous_reference_attention(const __nv_bfloat16* __restrict__ q,
                                 const __nv_bfloat16* __restrict__ k,
                                 const __nv_bfloat16* __restrict__ v,
                                 __nv_bfloat16* __restrict__ out, int64_t n_q, int64_t n_k,
                                 Visible visible) {
  using kernels::group_reduce, kernels::Max, kernels::Sum;
  constexpr int d = kDim;
  const int64_t qi = blockIdx.x, bh = blockIdx.y;
  const int t = threadIdx.x;
  __shared__ float q_row[d], p_tile[d];
  q_row[t] = __bfloat162float(q[(bh * n_q + qi) * d + t]);
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  for (int64_t j0 = 0; j0 < n_k; j0 += d) {
    __syncthreads();  // q_row written; the previous tile's p_tile read
    const int64_t j = j0 + t;
    float s = -INFINITY;
    if (j < n_k && visible(qi, j)) {
      s = 0.0f;
      for (int e = 0; e < d; ++e) s += q_row[e] * __bfloat162float(k_bh[j * d + e]);
      s *= scale;
    }
    const float tile_max = group_reduce<d>(s, Max{});
    if (tile_max == -INFINITY) continue;  // no visible key in this tile (uniform across the block)
    const float m_new = fmaxf(m, tile_max);
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new), c = expf(m - m_new);
    p_tile[t] = p;
    l = l * c + group_reduce<d>(p, Sum{});  // contains the barrier that publishes p_tile
    acc *= c;
    for (int e = 0; e < d && j0 + e < n_k; ++e)
      acc += p_tile[e] * __bfloat162float(v_bh[(j0 + e) * d + t]);
    m = m_new;
  }
  out[(bh * n_q + qi) * d + t] = __float2bfloat16(acc / l);
}

template <int kDim, class Visible>
void launch_previous_reference_attention(const bf16* q, const bf16* k, const bf16* v, bf16* out,
                                         int64_t bh, int64_t n_q, int64_t n_k, Visible visible) {
  previous_reference_attention<kDim>
      <<<dim3(unsigned(n_q), unsigned(bh)), kDim, 0, nullptr>>>(q, k, v, out, n_q, n_k, visible);
}
// ---- End of the previous form. ----

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};
// Query qi sees keys up to qi + offset (the queries are the last n_q positions of the sequence).
struct Causal {
  int64_t offset;
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const { return kj <= qi + offset; }
};
// The `window` keys up to the query's own position `last`, and scattered older keys (about one in
// 509, at places that differ between neighbouring queries): a CTA's queries see different tiles.
struct WindowAndScattered {
  int64_t offset, n_k, window;
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const {
    const int64_t last = qi + offset < n_k - 1 ? qi + offset : n_k - 1;
    return kj <= last && (last - kj < window || (7 * kj + 3 * qi) % 509 == 0);
  }
};

struct Inputs {
  std::vector<bf16> q, k, v;
};

// Normal values, standard deviation 1.5. With `large`, q and k have 6 (scores of standard
// deviation ~36 at either head dim) and key j is scaled by 0.25 + 1.75 j / n_k, so the largest
// scores (~100 and more) come late and a query's running max rises tile after tile.
Inputs random_inputs(int64_t bh, int64_t n_q, int64_t n_k, int dim, unsigned seed,
                     bool large = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f), wide(0.0f, 6.0f);
  Inputs in{std::vector<bf16>(bh * n_q * dim), std::vector<bf16>(bh * n_k * dim),
            std::vector<bf16>(bh * n_k * dim)};
  for (auto* x : {&in.q, &in.k, &in.v})
    for (auto& e : *x) e = __float2bfloat16(large && x != &in.v ? wide(rng) : normal(rng));
  if (large)
    for (std::size_t i = 0; i < in.k.size(); ++i) {
      const int64_t j = int64_t(i) / dim % n_k;
      in.k[i] =
          __float2bfloat16(__bfloat162float(in.k[i]) * (0.25f + 1.75f * float(j) / float(n_k)));
    }
  return in;
}

// `count` copies of the BF16 value with these bits.
std::vector<bf16> filled(std::size_t count, uint16_t pattern) {
  bf16 value;
  std::memcpy(&value, &pattern, sizeof value);
  return std::vector<bf16>(count, value);
}

std::vector<uint16_t> bits(const std::vector<bf16>& x) {
  std::vector<uint16_t> b(x.size());
  std::memcpy(b.data(), x.data(), x.size() * sizeof(bf16));
  return b;
}

// Runs both forms on one case; the outputs start as different NaN patterns, so a kernel that
// wrote nothing can neither match the other nor pass as finite.
template <int kDim, class Visible>
void expect_identical(int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                      const std::string& what) {
  SCOPED_TRACE(what);
  const Inputs in = random_inputs(bh, n_q, n_k, kDim, unsigned(bh * 1000003 + n_q * 1009 + n_k));
  const std::size_t count = in.q.size();
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
  bf16 *previous = upload(filled(count, 0xffff)), *now = upload(filled(count, 0x7fc1));  // NaNs
  launch_previous_reference_attention<kDim>(q, k, v, previous, bh, n_q, n_k, visible);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  kernels::detail::launch_reference_attention_rows<kDim>(q, k, v, now, bh, n_q, n_k, visible,
                                                         nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<bf16> want = download(previous, count), got = download(now, count);
  int64_t differ = 0, not_finite = 0, first = -1;
  const std::vector<uint16_t> want_bits = bits(want), got_bits = bits(got);
  for (std::size_t i = 0; i < count; ++i) {
    not_finite += !std::isfinite(__bfloat162float(got[i]));
    if (want_bits[i] != got_bits[i] && differ++ == 0) first = int64_t(i);
  }
  EXPECT_EQ(not_finite, 0);
  EXPECT_EQ(differ, 0) << "first at element " << first << " (pair " << first / (n_q * kDim)
                       << ", query " << first / kDim % n_q << ", dim " << first % kDim
                       << "): previous " << (first >= 0 ? __bfloat162float(want[first]) : 0.0f)
                       << ", now " << (first >= 0 ? __bfloat162float(got[first]) : 0.0f);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)previous, (void*)now}) cudaFree(p);
}

template <int kDim>
void expect_identical_over_shapes() {
  for (int64_t bh : {1, 5})
    for (int64_t n_q : {1, 3, 8, 333})
      for (int64_t n_k : {1, 100, 128, 4096 + 17}) {
        const std::string shape = "d" + std::to_string(kDim) + " bh" + std::to_string(bh) + " n_q" +
                                  std::to_string(n_q) + " n_k" + std::to_string(n_k);
        // With more queries than keys the first queries take position 0: each sees a key.
        const int64_t offset = std::max<int64_t>(n_k - n_q, 0);
        expect_identical<kDim>(bh, n_q, n_k, AllKeys{}, shape + " all keys");
        expect_identical<kDim>(bh, n_q, n_k, Causal{offset}, shape + " causal");
        expect_identical<kDim>(bh, n_q, n_k, WindowAndScattered{offset, n_k, 200},
                               shape + " window");
      }
}

TEST(ReferenceAttention, BitIdenticalToPreviousFormD64) { expect_identical_over_shapes<64>(); }
TEST(ReferenceAttention, BitIdenticalToPreviousFormD128) { expect_identical_over_shapes<128>(); }

// The tiled form (launched directly, or through the wrapper) against the CPU reference in double.
// Each output within BF16's rounding of the exact value (unit roundoff 2^-8, relative) plus 1e-4
// of the largest output (FP32 rounding of the scores and sums, ~1e-5 here); relative L2 below
// 2.5e-3 (the output's BF16 rounding alone gives ~1.6e-3 on these inputs).
// The output starts as NaN, so an unwritten element fails.
template <int kDim, class Visible>
void expect_tiled_near_cpu(int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                           const std::string& what, bool large = false,
                           bool through_wrapper = true) {
  SCOPED_TRACE(what);
  const Inputs in = random_inputs(bh, n_q, n_k, kDim, unsigned(bh * 7919 + n_q * 101 + n_k), large);
  std::vector<double> want(in.q.size());
  kernels::reference_attention<kDim>(std::span<const bf16>(in.q), std::span<const bf16>(in.k),
                                     std::span<const bf16>(in.v), std::span<double>(want), bh, n_q,
                                     n_k, visible);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v),
       *out = upload(filled(in.q.size(), 0x7fc1));
  if (through_wrapper) {
    ASSERT_GE(n_q, kernels::detail::kTiledQueries) << "the wrapper would take the rows form";
    kernels::reference_attention<kDim>(q, k, v, out, bh, n_q, n_k, visible, nullptr);
  } else {
    kernels::detail::launch_reference_attention_tiled<kDim>(q, k, v, out, bh, n_q, n_k, visible,
                                                            nullptr);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<bf16> got = download(out, in.q.size());
  double max_want = 0, err2 = 0, want2 = 0;
  for (double w : want) max_want = std::max(max_want, std::fabs(w));
  int64_t outside = 0, first = -1;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = __bfloat162float(got[i]), err = std::fabs(g - want[i]);
    err2 += (g - want[i]) * (g - want[i]), want2 += want[i] * want[i];
    if (!(err <= std::ldexp(std::fabs(want[i]), -8) + 1e-4 * max_want) && outside++ == 0)
      first = int64_t(i);
  }
  EXPECT_EQ(outside, 0) << "first at element " << first << " (pair " << first / (n_q * kDim)
                        << ", query " << first / kDim % n_q << ", dim " << first % kDim
                        << "): want " << (first >= 0 ? want[first] : 0.0) << ", got "
                        << (first >= 0 ? __bfloat162float(got[first]) : 0.0f);
  EXPECT_LT(std::sqrt(err2 / want2), 2.5e-3);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out}) cudaFree(p);
}

template <int kDim>
void expect_tiled_near_cpu_over_shapes() {
  struct Shape {
    int64_t bh, n_q, n_k;
  };
  // One whole tile each way; ragged both ways (333 = 5 x 64 + 13); fewer queries than keys; a long
  // ragged key range (4113 = 64 x 64 + 17) with a ragged last CTA of queries (130 = 2 x 64 + 2).
  for (const Shape s :
       {Shape{2, 64, 64}, Shape{3, 333, 333}, Shape{1, 200, 1000}, Shape{2, 130, 4096 + 17}}) {
    const std::string shape = "d" + std::to_string(kDim) + " bh" + std::to_string(s.bh) + " n_q" +
                              std::to_string(s.n_q) + " n_k" + std::to_string(s.n_k);
    const int64_t offset = s.n_k - s.n_q;  // the queries are the last n_q positions
    expect_tiled_near_cpu<kDim>(s.bh, s.n_q, s.n_k, AllKeys{}, shape + " all keys");
    expect_tiled_near_cpu<kDim>(s.bh, s.n_q, s.n_k, Causal{offset}, shape + " causal");
    expect_tiled_near_cpu<kDim>(s.bh, s.n_q, s.n_k, WindowAndScattered{offset, s.n_k, 100},
                                shape + " window");
  }
  const std::string large = "d" + std::to_string(kDim) + " bh2 n_q333 n_k777 large scores";
  expect_tiled_near_cpu<kDim>(2, 333, 777, AllKeys{}, large + " all keys", true);
  expect_tiled_near_cpu<kDim>(2, 333, 777, Causal{777 - 333}, large + " causal", true);
  expect_tiled_near_cpu<kDim>(2, 333, 777, WindowAndScattered{777 - 333, 777, 100},
                              large + " window", true);
  // A CTA with 1 or 3 of its 64 queries (the wrapper never sends these here, the kernel must
  // still serve them).
  for (int64_t n_q : {1, 3})
    expect_tiled_near_cpu<kDim>(
        2, n_q, 300, Causal{300 - n_q},
        "d" + std::to_string(kDim) + " bh2 n_q" + std::to_string(n_q) + " n_k300 causal", false,
        false);
}

TEST(ReferenceAttention, TiledNearCpuD64) { expect_tiled_near_cpu_over_shapes<64>(); }
TEST(ReferenceAttention, TiledNearCpuD128) { expect_tiled_near_cpu_over_shapes<128>(); }

// The wrapper's choice: bitwise the rows form below 64 queries, bitwise the tiled form from 64.
TEST(ReferenceAttention, WrapperPicksByQueryCount) {
  constexpr int d = kernels::kRefHeadDim;
  for (int64_t n_q : {63, 64}) {
    SCOPED_TRACE("n_q " + std::to_string(n_q));
    const int64_t bh = 3, n_k = 500;
    const Inputs in = random_inputs(bh, n_q, n_k, d, unsigned(n_q));
    const std::size_t count = in.q.size();
    bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
    bf16 *form = upload(filled(count, 0xffff)), *wrapped = upload(filled(count, 0x7fc1));  // NaNs
    const Causal visible{n_k - n_q};
    if (n_q < kernels::detail::kTiledQueries)
      kernels::detail::launch_reference_attention_rows<d>(q, k, v, form, bh, n_q, n_k, visible,
                                                          nullptr);
    else
      kernels::detail::launch_reference_attention_tiled<d>(q, k, v, form, bh, n_q, n_k, visible,
                                                           nullptr);
    kernels::reference_attention<d>(q, k, v, wrapped, bh, n_q, n_k, visible, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(bits(download(form, count)), bits(download(wrapped, count)));
    for (void* p : {(void*)q, (void*)k, (void*)v, (void*)form, (void*)wrapped}) cudaFree(p);
  }
}

// K and V are read in 16-byte pieces: a pointer off that grid is refused before any launch.
TEST(ReferenceAttention, RefusesKvNotOn16Bytes) {
  bf16* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 4 * 128 * sizeof(bf16)), cudaSuccess);
  EXPECT_THROW(kernels::reference_attention(buffer, buffer + 1, buffer, buffer + 128, 1, 1, 1,
                                            AllKeys{}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(kernels::reference_attention(buffer, buffer, buffer + 4, buffer + 128, 1, 1, 1,
                                            AllKeys{}, nullptr),
               std::invalid_argument);
  cudaFree(buffer);
}

// Milliseconds a call, the best of three after a warm-up.
template <class Launch>
float best_ms(Launch launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  launch();
  float best = INFINITY;
  for (int r = 0; r < 3; ++r) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start), cudaEventDestroy(stop);
  return best;
}

template <int kDim, class Visible>
void time_both(const char* name, int64_t bh, int64_t n_q, int64_t n_k, Visible visible) {
  const Inputs in = random_inputs(bh, n_q, n_k, kDim, 7);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v), *out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, in.q.size() * sizeof(bf16)), cudaSuccess);
  using kernels::detail::launch_reference_attention_rows,
      kernels::detail::launch_reference_attention_tiled;
  const float rows = best_ms(
      [&] { launch_reference_attention_rows<kDim>(q, k, v, out, bh, n_q, n_k, visible, nullptr); });
  const float tiled = best_ms([&] {
    launch_reference_attention_tiled<kDim>(q, k, v, out, bh, n_q, n_k, visible, nullptr);
  });
  const float wrapper = best_ms(
      [&] { kernels::reference_attention<kDim>(q, k, v, out, bh, n_q, n_k, visible, nullptr); });
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::printf("[ reference_attention ] %s: rows %.3f ms, tiled %.3f ms (%.2fx), wrapper %.3f ms\n",
              name, rows, tiled, rows / tiled, wrapper);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out}) cudaFree(p);
}

// A measurement, not a test: it asserts nothing about the times, so it stays out of `./bench
// test` (gtest skips DISABLED_ tests; 45 s on an H100). Run it when the reference changes:
//   build/default/tests/gpu/gpu_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='ReferenceAttention.DISABLED_TimesBothForms'
TEST(ReferenceAttention, DISABLED_TimesBothForms) {
  time_both<128>("ch16 b4 h32 s4096 d128, all keys", 128, 4096, 4096, AllKeys{});
  time_both<128>("ch16 b4 h32 s4096 d128, causal", 128, 4096, 4096, Causal{0});
  time_both<128>("ch16 b1 h32 s8192 d128, all keys", 32, 8192, 8192, AllKeys{});
  time_both<64>("ch16 b4 h32 s4096 d64, all keys", 128, 4096, 4096, AllKeys{});
  time_both<64>("ch16 b4 h32 s4096 d64, causal", 128, 4096, 4096, Causal{0});
  time_both<128>("ch18 decode 32 pairs, 1 query, 65536 keys, d128", 32, 1, 65536, AllKeys{});
}

}  // namespace
