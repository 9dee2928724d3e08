// Tests kernels/reference_attention.cuh's four GPU forms, the device reference that `bench compare`
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
// - The mma form (prefill on tensor cores, the wrapper's choice at d64 and d128) against the CPU
//   reference in double over the tiled form's shapes, masks and bounds (its S is FP32-accumulated
//   from exact BF16 products and its P carried as BF16 hi + lo, ~16 bits, so its error before the
//   output's rounding is far below the bounds' BF16 term, as the tiled form's is); and against the
//   tiled form at a mid-size shape (8 pairs, 1024 queries and keys): within one BF16 unit in the
//   last place of each other.
// - The split form (decode with long contexts: the rows form's loop over chunks of the keys in
//   separate CTAs, then a log-sum-exp merge; not the rows form's order of operations once there
//   are two chunks) against the CPU reference in double with the tiled form's bounds: 1, 3 and 8
//   queries, keys ragged against the chunk (1000, 4113), chunks of 1 and 3 tiles and the
//   wrapper's own; every key, causal from the start (whole chunks no query sees), a short
//   window at the end (the same, at the other end), windows with scattered keys (a chunk some
//   queries of a CTA see and others not), large growing scores. With one chunk it must equal the
//   rows form bitwise (the partial and the merge then change no bit).
// - The wrapper picks the mma form from 64 queries up (the tiled form at other head dims); below,
//   the split form where the rows form's grid is short of the target and the keys span several
//   tiles, else the rows form (bitwise each); the chunk rule at ch16/paged_attention's and ch15's
//   decode shapes.
// Prints the time of the rows and tiled forms at ch16's shapes (b4 and b1 x 32 heads, s4096,
// d128 and d64) and of the wrapper at ch18's decode shape, of the tiled and mma forms at ch16's
// shapes, and of the rows and split forms at ch16/paged_attention's decode shapes; the times are
// reported, not asserted.
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

// Only the `window` keys up to the query's own position: with the queries at the end of a long
// context, every chunk but the last one or two is seen by no query.
struct WindowOnly {
  int64_t offset, window;
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const {
    return kj <= qi + offset && qi + offset - kj < window;
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

using kernels::detail::RefForm;

// How a case runs: through the wrapper, which must pick `form`, or `form` launched directly (the
// split form with chunks of chunk_keys).
struct Run {
  RefForm form;
  bool through_wrapper = true;
  int64_t chunk_keys = 0;
};

// The tiled, mma or split form against the CPU reference in double.
// Each output within BF16's rounding of the exact value (unit roundoff 2^-8, relative) plus 1e-4
// of the largest output (FP32 rounding of the scores and sums, ~1e-5 here); relative L2 below
// 2.5e-3 (the output's BF16 rounding alone gives ~1.6e-3 on these inputs).
// The output starts as NaN, so an unwritten element fails.
template <int kDim, class Visible>
void expect_near_cpu(int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                     const std::string& what, Run run, bool large = false) {
  SCOPED_TRACE(what);
  const Inputs in = random_inputs(bh, n_q, n_k, kDim, unsigned(bh * 7919 + n_q * 101 + n_k), large);
  std::vector<double> want(in.q.size());
  kernels::reference_attention<kDim>(std::span<const bf16>(in.q), std::span<const bf16>(in.k),
                                     std::span<const bf16>(in.v), std::span<double>(want), bh, n_q,
                                     n_k, visible);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v),
       *out = upload(filled(in.q.size(), 0x7fc1));
  kernels::ReferenceAttentionScratch scratch;
  if (run.through_wrapper) {
    ASSERT_EQ(int(kernels::detail::reference_form<kDim>(q, out, bh, n_q, n_k)), int(run.form))
        << "the wrapper would take another form";
    kernels::reference_attention<kDim>(q, k, v, out, bh, n_q, n_k, visible, nullptr, scratch);
  } else if (run.form == RefForm::split) {
    kernels::detail::launch_reference_attention_split<kDim>(q, k, v, out, bh, n_q, n_k, visible,
                                                            run.chunk_keys, scratch, nullptr);
  } else if (run.form == RefForm::mma) {
    kernels::detail::launch_reference_attention_mma<kDim>(q, k, v, out, bh, n_q, n_k, visible,
                                                          nullptr);
  } else {
    ASSERT_EQ(int(run.form), int(RefForm::tiled));
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

// The tiled form (launched directly: the wrapper now takes the mma form at these head dims) or
// the mma form (through the wrapper, which must pick it) on the prefill shapes.
template <int kDim>
void expect_prefill_near_cpu_over_shapes(RefForm form) {
  struct Shape {
    int64_t bh, n_q, n_k;
  };
  const Run run{form, form == RefForm::mma};
  // One whole tile each way; ragged both ways (333 = 5 x 64 + 13); fewer queries than keys; a long
  // ragged key range (4113 = 64 x 64 + 17) with a ragged last CTA of queries (130 = 2 x 64 + 2).
  for (const Shape s :
       {Shape{2, 64, 64}, Shape{3, 333, 333}, Shape{1, 200, 1000}, Shape{2, 130, 4096 + 17}}) {
    const std::string shape = "d" + std::to_string(kDim) + " bh" + std::to_string(s.bh) + " n_q" +
                              std::to_string(s.n_q) + " n_k" + std::to_string(s.n_k);
    const int64_t offset = s.n_k - s.n_q;  // the queries are the last n_q positions
    expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, AllKeys{}, shape + " all keys", run);
    expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, Causal{offset}, shape + " causal", run);
    expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, WindowAndScattered{offset, s.n_k, 100},
                          shape + " window", run);
  }
  const std::string large = "d" + std::to_string(kDim) + " bh2 n_q333 n_k777 large scores";
  expect_near_cpu<kDim>(2, 333, 777, AllKeys{}, large + " all keys", run, true);
  expect_near_cpu<kDim>(2, 333, 777, Causal{777 - 333}, large + " causal", run, true);
  expect_near_cpu<kDim>(2, 333, 777, WindowAndScattered{777 - 333, 777, 100}, large + " window",
                        run, true);
  // A CTA with 1 or 3 of its 64 queries (the wrapper never sends these here, the kernel must
  // still serve them).
  for (int64_t n_q : {1, 3})
    expect_near_cpu<kDim>(
        2, n_q, 300, Causal{300 - n_q},
        "d" + std::to_string(kDim) + " bh2 n_q" + std::to_string(n_q) + " n_k300 causal",
        Run{form, false});
}

TEST(ReferenceAttention, TiledNearCpuD64) {
  expect_prefill_near_cpu_over_shapes<64>(RefForm::tiled);
}
TEST(ReferenceAttention, TiledNearCpuD128) {
  expect_prefill_near_cpu_over_shapes<128>(RefForm::tiled);
}
// The mma form with the tiled form's bounds, no looser: each output within BF16's rounding of the
// exact value (2^-8 relative) plus 1e-4 of the largest output, relative L2 below 2.5e-3. Its S is
// exact BF16 products summed at FP32 precision and its P enters P V as hi + lo (relative error
// <= 2^-16 a p, 256 times below the bound's 2^-8, and random in sign over the keys), so before
// the output's one rounding (itself <= 2^-9) it is within ~1e-5 (relative) of the exact value, as
// the tiled form is. A plain bf16(P) (up to 2^-9 a p, as large as the output's own rounding) could
// use up the per-element bound's margin where a few keys carry a row.
TEST(ReferenceAttention, MmaNearCpuD64) { expect_prefill_near_cpu_over_shapes<64>(RefForm::mma); }
TEST(ReferenceAttention, MmaNearCpuD128) { expect_prefill_near_cpu_over_shapes<128>(RefForm::mma); }

// The mma form against the tiled form (two independent FP32-accurate computations, each rounded
// once to BF16) at a mid-size shape, every key visible and causal: each output within one BF16
// unit in the last place of the tiled one (2^-7 of its magnitude: the two may round a value near
// a rounding boundary to neighbouring BF16 numbers) plus 1e-4 of the largest output (values near
// 0, where the P split's 2^-16 shows as an absolute error). Prints the largest difference and
// how many outputs differ at all (expected: well under 1%).
template <int kDim>
void expect_mma_near_tiled() {
  constexpr int64_t bh = 8, n = 1024;
  for (const bool causal : {false, true}) {
    const std::string what = "d" + std::to_string(kDim) + " bh8 s1024" + (causal ? " causal" : "");
    SCOPED_TRACE(what);
    const Inputs in = random_inputs(bh, n, n, kDim, causal ? 17u : 16u);
    const std::size_t count = in.q.size();
    bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
    bf16 *tiled = upload(filled(count, 0xffff)), *mma = upload(filled(count, 0x7fc1));  // NaNs
    const auto run = [&](auto visible) {
      kernels::detail::launch_reference_attention_tiled<kDim>(q, k, v, tiled, bh, n, n, visible,
                                                              nullptr);
      kernels::detail::launch_reference_attention_mma<kDim>(q, k, v, mma, bh, n, n, visible,
                                                            nullptr);
    };
    causal ? run(Causal{0}) : run(AllKeys{});
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<bf16> want = download(tiled, count), got = download(mma, count);
    double max_want = 0, max_err = 0;
    for (bf16 w : want) max_want = std::max(max_want, double(std::fabs(__bfloat162float(w))));
    int64_t outside = 0, differ = 0, first = -1;
    for (std::size_t i = 0; i < count; ++i) {
      const double w = __bfloat162float(want[i]), g = __bfloat162float(got[i]);
      const double err = std::fabs(g - w);
      max_err = std::max(max_err, err);
      differ += g != w;
      if (!(err <= std::ldexp(std::fabs(w), -7) + 1e-4 * max_want) && outside++ == 0)
        first = int64_t(i);
    }
    EXPECT_EQ(outside, 0) << "first at element " << first << ": tiled "
                          << (first >= 0 ? __bfloat162float(want[first]) : 0.0f) << ", mma "
                          << (first >= 0 ? __bfloat162float(got[first]) : 0.0f);
    std::printf(
        "[ reference_attention ] %s: mma vs tiled max abs difference %.3g (largest output "
        "%.3g), %lld of %zu outputs differ\n",
        what.c_str(), max_err, max_want, static_cast<long long>(differ), count);
    for (void* p : {(void*)q, (void*)k, (void*)v, (void*)tiled, (void*)mma}) cudaFree(p);
  }
}

TEST(ReferenceAttention, MmaNearTiledD64) { expect_mma_near_tiled<64>(); }
TEST(ReferenceAttention, MmaNearTiledD128) { expect_mma_near_tiled<128>(); }

// The split form at decode shapes. Launched directly with chunks of 1 and 3 tiles (many chunks,
// the last one ragged: 1000 and 4113 keys are multiples of neither), and through the wrapper,
// whose rule cuts these few (query group, bh) CTAs' keys into chunks of one tile.
template <int kDim>
void expect_split_near_cpu_over_shapes() {
  struct Shape {
    int64_t bh, n_q, n_k;
  };
  for (const Shape s : {Shape{3, 1, 1000}, Shape{2, 8, 1000}, Shape{2, 3, 4096 + 17}})
    for (const int64_t chunk_tiles : {int64_t{1}, int64_t{3}, int64_t{0}}) {  // 0: the wrapper
      const std::string shape = "d" + std::to_string(kDim) + " bh" + std::to_string(s.bh) +
                                " n_q" + std::to_string(s.n_q) + " n_k" + std::to_string(s.n_k) +
                                (chunk_tiles == 0 ? std::string(" wrapper")
                                                  : " chunk " + std::to_string(chunk_tiles * kDim));
      const Run split{RefForm::split, chunk_tiles == 0, chunk_tiles * kDim};
      const int64_t offset = s.n_k - s.n_q;  // the queries are the last n_q positions
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, AllKeys{}, shape + " all keys", split);
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, Causal{offset}, shape + " causal at the end",
                            split);
      // The queries at positions 0 .. n_q - 1: every chunk past the first is seen by no query.
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, Causal{0}, shape + " causal from the start",
                            split);
      // The last 100 keys only: every chunk but the last one or two is seen by no query.
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, WindowOnly{offset, 100}, shape + " short window",
                            split);
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, WindowAndScattered{offset, s.n_k, 200},
                            shape + " window and scattered keys", split);
      // Maxima of ~100 late in the keys: the merge's rescale of the early chunks underflows.
      expect_near_cpu<kDim>(s.bh, s.n_q, s.n_k, AllKeys{}, shape + " large scores", split, true);
    }
}

TEST(ReferenceAttention, SplitNearCpuD64) { expect_split_near_cpu_over_shapes<64>(); }
TEST(ReferenceAttention, SplitNearCpuD128) { expect_split_near_cpu_over_shapes<128>(); }

// With a single chunk the split form's partial is the rows form's m, l and acc, and the merge
// multiplies by expf(0) = 1 and adds to -0: it must equal the rows form bitwise, which holds only
// if the partial kernel walks the keys exactly as the rows form does and the merge and its
// plumbing (slots, strides, the queries of a partial last CTA) are right.
template <int kDim>
void expect_one_chunk_identical_over_shapes() {
  for (int64_t bh : {1, 5})
    for (int64_t n_q : {1, 3, 8, 333})
      for (int64_t n_k : {1, 100, 4096 + 17}) {
        const std::string shape = "d" + std::to_string(kDim) + " bh" + std::to_string(bh) + " n_q" +
                                  std::to_string(n_q) + " n_k" + std::to_string(n_k);
        const int64_t offset = std::max<int64_t>(n_k - n_q, 0);
        const auto one_chunk = [&](auto visible, const std::string& what) {
          SCOPED_TRACE(what);
          const Inputs in = random_inputs(bh, n_q, n_k, kDim, unsigned(bh * 31 + n_q * 7 + n_k));
          const std::size_t count = in.q.size();
          bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
          bf16 *rows = upload(filled(count, 0xffff)), *split = upload(filled(count, 0x7fc1));
          kernels::ReferenceAttentionScratch scratch;
          kernels::detail::launch_reference_attention_rows<kDim>(q, k, v, rows, bh, n_q, n_k,
                                                                 visible, nullptr);
          kernels::detail::launch_reference_attention_split<kDim>(
              q, k, v, split, bh, n_q, n_k, visible, (n_k + kDim - 1) / kDim * kDim, scratch,
              nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          EXPECT_EQ(bits(download(rows, count)), bits(download(split, count)));
          for (void* p : {(void*)q, (void*)k, (void*)v, (void*)rows, (void*)split}) cudaFree(p);
        };
        one_chunk(AllKeys{}, shape + " all keys");
        one_chunk(Causal{offset}, shape + " causal");
        one_chunk(WindowAndScattered{offset, n_k, 200}, shape + " window");
      }
}

TEST(ReferenceAttention, SplitOfOneChunkBitIdenticalToRowsD64) {
  expect_one_chunk_identical_over_shapes<64>();
}
TEST(ReferenceAttention, SplitOfOneChunkBitIdenticalToRowsD128) {
  expect_one_chunk_identical_over_shapes<128>();
}

// The chunk rule at the callers' decode shapes (a sequence or a request a call): the grid comes
// to about the target of 132 SMs x 4 CTAs (d128), never past it by more than one chunk's worth of
// CTAs, and the chunks are whole tiles that cover the keys.
TEST(ReferenceAttention, SplitRuleFillsTheTarget) {
  constexpr int d = kernels::kRefHeadDim;
  constexpr int64_t kTarget = 132 * 4;
  struct Shape {
    int64_t bh, n_q, n_k, splits;  // splits: as the rule gives them (worked out by hand)
  };
  // ch16/paged_attention: 32 heads, 1 query, 1141 .. 32616 keys (batch 64's range); ch18's
  // decode shape; ch15's documents (8 heads, 4 queries, ~7000 keys) and a chat (8 heads, 40
  // queries, 600 keys).
  for (const Shape s : {Shape{32, 1, 32616, 16}, Shape{32, 1, 1141, 9}, Shape{32, 1, 65536, 16},
                        Shape{8, 4, 7000, 55}, Shape{8, 40, 600, 5}}) {
    SCOPED_TRACE("bh " + std::to_string(s.bh) + " n_q " + std::to_string(s.n_q) + " n_k " +
                 std::to_string(s.n_k));
    const auto split = kernels::detail::reference_split<d>(s.bh, s.n_q, s.n_k);
    const int64_t ctas = (s.n_q + 7) / 8 * s.bh;
    EXPECT_EQ(split.splits, s.splits);
    EXPECT_EQ(split.chunk_keys % d, 0);
    EXPECT_GE(split.splits * split.chunk_keys, s.n_k);
    EXPECT_LT((split.splits - 1) * split.chunk_keys, s.n_k);
    EXPECT_LE(split.splits * ctas, kTarget + ctas);
    // Short of the target only where chunks of one tile run out of keys.
    if (split.chunk_keys > d) EXPECT_GE(2 * split.splits * ctas, kTarget);
  }
  // Enough CTAs already (ch18's flash_decoding at batch 32 x 32 heads): the rows form.
  EXPECT_EQ(kernels::detail::reference_split<d>(1024, 1, 65536).splits, 1);
}

// The wrapper's choice, bitwise the form it names: the split form for a few CTAs' worth of 63
// queries over 4 tiles of keys, the rows form for the same over one tile and for many (query
// group, bh) CTAs, the mma form from 64 queries (d128 here, d64 too); the tiled form from 64
// queries at a head dim the mma form does not serve (the choice alone: d96), and neither for a q
// or out off the 16-byte grid.
TEST(ReferenceAttention, WrapperPicksTheForm) {
  constexpr int d = kernels::kRefHeadDim;
  struct Case {
    int64_t bh, n_q, n_k;
    RefForm form;
  };
  for (const Case c : {Case{3, 63, 500, RefForm::split}, Case{3, 63, 100, RefForm::rows},
                       Case{600, 1, 500, RefForm::rows}, Case{3, 64, 500, RefForm::mma}}) {
    SCOPED_TRACE("bh " + std::to_string(c.bh) + " n_q " + std::to_string(c.n_q) + " n_k " +
                 std::to_string(c.n_k));
    const Inputs in = random_inputs(c.bh, c.n_q, c.n_k, d, unsigned(c.n_q + c.n_k));
    const std::size_t count = in.q.size();
    bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
    bf16 *form = upload(filled(count, 0xffff)), *wrapped = upload(filled(count, 0x7fc1));  // NaNs
    const Causal visible{c.n_k - c.n_q};
    EXPECT_EQ(int(kernels::detail::reference_form<d>(q, form, c.bh, c.n_q, c.n_k)), int(c.form));
    kernels::ReferenceAttentionScratch scratch;
    switch (c.form) {
      case RefForm::rows:
        kernels::detail::launch_reference_attention_rows<d>(q, k, v, form, c.bh, c.n_q, c.n_k,
                                                            visible, nullptr);
        break;
      case RefForm::split:
        kernels::detail::launch_reference_attention_split<d>(
            q, k, v, form, c.bh, c.n_q, c.n_k, visible,
            kernels::detail::reference_split<d>(c.bh, c.n_q, c.n_k).chunk_keys, scratch, nullptr);
        break;
      case RefForm::tiled:
        kernels::detail::launch_reference_attention_tiled<d>(q, k, v, form, c.bh, c.n_q, c.n_k,
                                                             visible, nullptr);
        break;
      case RefForm::mma:
        kernels::detail::launch_reference_attention_mma<d>(q, k, v, form, c.bh, c.n_q, c.n_k,
                                                           visible, nullptr);
        break;
    }
    // The overload without a scratch (its own, waited for).
    kernels::reference_attention<d>(q, k, v, wrapped, c.bh, c.n_q, c.n_k, visible, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(bits(download(form, count)), bits(download(wrapped, count)));
    for (void* p : {(void*)q, (void*)k, (void*)v, (void*)form, (void*)wrapped}) cudaFree(p);
  }
  // The choice alone (pointers on and off the 16-byte grid; nothing is read).
  using kernels::detail::reference_form;
  alignas(16) static bf16 grid[16];
  EXPECT_EQ(int(reference_form<64>(grid, grid, 3, 64, 500)), int(RefForm::mma));
  EXPECT_EQ(int(reference_form<96>(grid, grid, 3, 64, 500)), int(RefForm::tiled));
  EXPECT_EQ(int(reference_form<d>(grid + 1, grid, 3, 64, 500)), int(RefForm::split));
  EXPECT_EQ(int(reference_form<d>(grid, grid + 1, 3, 64, 500)), int(RefForm::split));
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

// The tiled form against the mma form (the wrapper's prefill choice at d64 and d128) at ch16's
// shapes: ms a call, best of three after a warm-up; the ratio is tiled / mma.
// A measurement, not a test (skipped by `./bench test`). Run it when the reference changes:
//   build/default/tests/gpu/gpu_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='ReferenceAttention.DISABLED_TimesMmaForm'
template <int kDim, class Visible>
void time_tiled_and_mma(const char* name, int64_t bh, int64_t n, Visible visible) {
  const Inputs in = random_inputs(bh, n, n, kDim, 7);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v), *out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, in.q.size() * sizeof(bf16)), cudaSuccess);
  const float tiled = best_ms([&] {
    kernels::detail::launch_reference_attention_tiled<kDim>(q, k, v, out, bh, n, n, visible,
                                                            nullptr);
  });
  const float mma = best_ms([&] {
    kernels::detail::launch_reference_attention_mma<kDim>(q, k, v, out, bh, n, n, visible, nullptr);
  });
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::printf("[ reference_attention ] %s: tiled %.3f ms, mma %.3f ms (%.2fx)\n", name, tiled, mma,
              tiled / mma);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out}) cudaFree(p);
}

TEST(ReferenceAttention, DISABLED_TimesMmaForm) {
  time_tiled_and_mma<128>("ch16 b4 h32 s4096 d128, all keys", 128, 4096, AllKeys{});
  time_tiled_and_mma<128>("ch16 b4 h32 s4096 d128, causal", 128, 4096, Causal{0});
  time_tiled_and_mma<128>("ch16 b1 h32 s8192 d128, all keys", 32, 8192, AllKeys{});
  time_tiled_and_mma<64>("ch16 b4 h32 s4096 d64, all keys", 128, 4096, AllKeys{});
  time_tiled_and_mma<64>("ch16 b4 h32 s4096 d64, causal", 128, 4096, Causal{0});
}

// The rows form against the split form (the wrapper's chunks) on one call of ch16/paged_attention's
// device reference (32 heads, 1 query) at the batch-32 lengths' longest, a typical and the
// shortest sequence, and on all 32 sequences in a row as device_reference calls them (one scratch
// for all): that sum is the attention part of a check (the gather comes on top). Then ch15's
// document decode (8 heads, 4 queries, ~7000 keys).
// Run it when the reference changes, and after this form lands on a GPU:
//   build/default/tests/gpu/gpu_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='ReferenceAttention.DISABLED_TimesRowsAndSplitAtDecode'
template <class Visible>
void time_rows_and_split(const char* name, int64_t bh, int64_t n_q,
                         const std::vector<int64_t>& lengths, Visible visible) {
  constexpr int d = kernels::kRefHeadDim;
  int64_t keys = 0;
  for (int64_t n : lengths) keys += n;
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  // One K and V block for every call (each call reads its first n_k rows of each bh): the times
  // are those of the shapes; the values do not matter.
  const Inputs in = random_inputs(bh, n_q, longest, d, 11);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v), *out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, in.q.size() * sizeof(bf16)), cudaSuccess);
  kernels::ReferenceAttentionScratch scratch;
  const float rows = best_ms([&] {
    for (int64_t n : lengths)
      kernels::detail::launch_reference_attention_rows<d>(q, k, v, out, bh, n_q, n, visible,
                                                          nullptr);
  });
  const float split = best_ms([&] {
    for (int64_t n : lengths)
      kernels::detail::launch_reference_attention_split<d>(
          q, k, v, out, bh, n_q, n, visible,
          kernels::detail::reference_split<d>(bh, n_q, n).chunk_keys, scratch, nullptr);
  });
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto plan = kernels::detail::reference_split<d>(bh, n_q, longest);
  std::printf("[ reference_attention ] %s (%zu calls, %lld keys a head; longest: %lld chunks of "
              "%lld keys): rows %.3f ms, split %.3f ms (%.1fx)\n",
              name, lengths.size(), static_cast<long long>(keys),
              static_cast<long long>(plan.splits), static_cast<long long>(plan.chunk_keys), rows,
              split, rows / split);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out}) cudaFree(p);
}

TEST(ReferenceAttention, DISABLED_TimesRowsAndSplitAtDecode) {
  // ch16/paged_attention's batch-32 lengths: uniform in [1024, 32768] from its layout seed.
  std::mt19937_64 rng(16);
  std::vector<int64_t> batch32;
  for (int s = 0; s < 32; ++s) batch32.push_back(1024 + int64_t(rng() % (32768 - 1024 + 1)));
  const int64_t longest = *std::max_element(batch32.begin(), batch32.end());
  const int64_t shortest = *std::min_element(batch32.begin(), batch32.end());
  time_rows_and_split("paged_attention b32, the longest sequence", 32, 1, {longest}, AllKeys{});
  time_rows_and_split("paged_attention b32, a 16k sequence", 32, 1, {16384}, AllKeys{});
  time_rows_and_split("paged_attention b32, the shortest sequence", 32, 1, {shortest}, AllKeys{});
  time_rows_and_split("paged_attention b32, all 32 sequences", 32, 1, batch32, AllKeys{});
  time_rows_and_split("ch15 document decode, 7000 keys", 8, 4, {7000}, Causal{7000 - 4});
}

}  // namespace
