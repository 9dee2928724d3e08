// Tests kernels/decode_attention_mma.cuh, the tensor-core form of grouped-query decode attention
// (ch20's rungs 5c and 6d), against attention in double over the same BF16 cache, and against the
// FMA kernel it replaces (decode::attention<4> without the draft mask), which writes the same
// partials; its two ways of filling the stages (TMA, cp.async) must give the same bits. 1000 keys a
// pair: not a whole number of 64-key stages, and with 3 or 5 splits the chunks are not either, so a
// stage that ends inside a chunk and the pair's last, short stage both run; with 32 splits a chunk
// is 32 keys, so two of a CTA's four warps see no key at all; and one more split than the keys need
// launches CTAs that have none (they write no partial, and the merge leaves them out). One split
// writes the output directly; several go through decode::merge_splits. Bound 3e-3 (relative L2). A
// CPU model of this test's data (same seeds and distributions) gives 1.7e-3 for the output's BF16
// rounding alone and 2.3e-3 with p also rounded to BF16 as the A operand of P V; one key of each
// pair dropped gives 1.7e-2 to 2.7e-2. The planted case below changes one key of each pair after
// the reference is taken, and must leave the bound with a finite output. With one split the kernel
// may fold in a key from outside the cache (ch20's appended token): held to attention over the
// 1001 keys, and, as the control, the same pass without the fold must leave that bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <kernels/decode_attention.cuh>
#include <kernels/decode_attention_mma.cuh>
#include <kernels/reference_attention.cuh>
#include <random>
#include <span>
#include <vector>

#include "device_copy.hpp"
#include "relative_l2.hpp"

namespace {

namespace decode = kernels::decode;
using bf16 = __nv_bfloat16;
constexpr int kQueries = decode::mma::kGroup;
constexpr int64_t kPairs = 6, kKeys = 1000, kDim = decode::kHeadDim;

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};

struct Cache {
  std::vector<bf16> q, k, v;
  Cache() : q(kPairs * kQueries * kDim), k(kPairs * kKeys * kDim), v(k.size()) {
    std::mt19937 rng(20);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (auto& x : q) x = __float2bfloat16(normal(rng));
    for (std::size_t i = 0; i < k.size(); ++i)
      k[i] = __float2bfloat16(uniform(rng)), v[i] = __float2bfloat16(uniform(rng));
  }
};

// Which kernel a pass runs: the FMA kernel, or the mma kernel with its stages filled by cp.async
// or by TMA (launch's default).
enum class Form { fma, mma_cp_async, mma_tma };

// Key kKeys of each pair, the one outside the cache that a pass may fold in: K and V rows
// [pair][128], drawn as the cache's are.
struct NewRows {
  std::vector<bf16> k, v;
  NewRows() : k(kPairs * kDim), v(k.size()) {
    std::mt19937 rng(22);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (std::size_t i = 0; i < k.size(); ++i)
      k[i] = __float2bfloat16(uniform(rng)), v[i] = __float2bfloat16(uniform(rng));
  }
};

// The output of one pass over the cache with `splits` splits (as decode::chunk_for cuts it), by
// `form`; with `empty_split`, one more split than the keys fill; with `fresh` (one split, an mma
// form), that key folded in.
std::vector<bf16> run(const Cache& c, int splits, Form form, bool empty_split = false,
                      const NewRows* fresh = nullptr) {
  bf16 *q_d = upload(c.q), *k_d = upload(c.k), *v_d = upload(c.v), *out_d = nullptr;
  bf16 *k_new = fresh ? upload(fresh->k) : nullptr, *v_new = fresh ? upload(fresh->v) : nullptr;
  EXPECT_EQ(cudaMalloc(&out_d, c.q.size() * sizeof(bf16)), cudaSuccess);
  EXPECT_EQ(cudaMemset(out_d, 0xff, c.q.size() * sizeof(bf16)), cudaSuccess);  // NaN until written
  const int64_t chunk = decode::chunk_for(kKeys, splits, kQueries);
  const int used = int((kKeys + chunk - 1) / chunk) + (empty_split ? 1 : 0);
  float *part_ml = nullptr, *part_o = nullptr;
  EXPECT_EQ(cudaMalloc(&part_ml, kPairs * kQueries * used * 2 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&part_o, kPairs * kQueries * used * kDim * sizeof(float)), cudaSuccess);
  const decode::Args args{q_d, out_d, part_ml, part_o, kQueries, 0, chunk, used};
  const decode::ContiguousKv cache{k_d, v_d, kKeys};
  if (form != Form::fma) {
    decode::mma::launch(args, cache, kPairs, nullptr, /*programmatic=*/false,
                        /*by_tma=*/form == Form::mma_tma, decode::mma::NewKey{k_new, v_new});
    if (used > 1)
      decode::merge_splits<kQueries, decode::ContiguousKv, /*kDraftMask=*/false>
          <<<dim3(unsigned(kQueries), unsigned(kPairs)), kDim>>>(args, cache);
  } else {
    decode::launch<kQueries, decode::ContiguousKv, /*kDraftMask=*/false>(args, cache, kPairs,
                                                                         nullptr);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto out = download(out_d, c.q.size());
  for (void* p : {(void*)q_d, (void*)k_d, (void*)v_d, (void*)out_d, (void*)part_ml, (void*)part_o,
                  (void*)k_new, (void*)v_new})
    cudaFree(p);
  return out;
}

// Attention in double over the cache, and with `fresh`, over its kKeys + 1 keys a pair.
std::vector<double> reference(const Cache& c, const NewRows* fresh = nullptr) {
  std::vector<double> ref(c.q.size());
  if (!fresh) {
    kernels::reference_attention(std::span<const bf16>(c.q), std::span<const bf16>(c.k),
                                 std::span<const bf16>(c.v), std::span<double>(ref), kPairs,
                                 kQueries, kKeys, AllKeys{});
    return ref;
  }
  std::vector<bf16> k((kKeys + 1) * kPairs * kDim), v(k.size());
  for (int64_t p = 0; p < kPairs; ++p) {
    const auto at = [&](int64_t key) { return (p * (kKeys + 1) + key) * kDim; };
    std::copy_n(c.k.begin() + p * kKeys * kDim, kKeys * kDim, k.begin() + at(0));
    std::copy_n(c.v.begin() + p * kKeys * kDim, kKeys * kDim, v.begin() + at(0));
    std::copy_n(fresh->k.begin() + p * kDim, kDim, k.begin() + at(kKeys));
    std::copy_n(fresh->v.begin() + p * kDim, kDim, v.begin() + at(kKeys));
  }
  kernels::reference_attention(std::span<const bf16>(c.q), std::span<const bf16>(k),
                               std::span<const bf16>(v), std::span<double>(ref), kPairs, kQueries,
                               kKeys + 1, AllKeys{});
  return ref;
}

TEST(DecodeAttentionMma, MatchesAttentionInDoubleWithOneSplitAndSeveral) {
  const Cache c;
  const auto ref = reference(c);
  for (int splits : {1, 3, 5, 32}) {
    const auto by_tma = run(c, splits, Form::mma_tma);
    const double mma = relative_l2(by_tma, ref);
    const double fma = relative_l2(run(c, splits, Form::fma), ref);
    EXPECT_LT(mma, 3e-3) << splits << " splits (the FMA kernel: " << fma << ")";
    EXPECT_LT(fma, 3e-3) << splits << " splits";
    // The two ways of filling the stages feed the same operands to the same arithmetic.
    const auto by_cp_async = run(c, splits, Form::mma_cp_async);
    EXPECT_EQ(0, std::memcmp(by_tma.data(), by_cp_async.data(), by_tma.size() * sizeof(bf16)))
        << splits << " splits: the TMA and cp.async forms differ";
  }
  for (int splits : {1, 5})
    for (Form form : {Form::mma_tma, Form::mma_cp_async})
      EXPECT_LT(relative_l2(run(c, splits, form, /*empty_split=*/true), ref), 3e-3)
          << splits << " splits and one with no keys"
          << (form == Form::mma_tma ? " (TMA)" : " (cp.async)");
}

TEST(DecodeAttentionMma, FoldsAKeyFromOutsideTheCacheWithOneSplit) {
  const Cache c;
  const NewRows fresh;
  const auto ref = reference(c, &fresh);
  for (Form form : {Form::mma_tma, Form::mma_cp_async}) {
    const char* name = form == Form::mma_tma ? " (TMA)" : " (cp.async)";
    EXPECT_LT(relative_l2(run(c, 1, form, false, &fresh), ref), 3e-3) << name;
    EXPECT_GT(relative_l2(run(c, 1, form), ref), 3e-3) << name << ": the control, no fold";
  }
}

// The planted slip: key 20 of each pair (in the second warp's tile of the first stage) replaced
// by other values after the reference was taken. The output must leave the bound, and stay
// finite (a kernel that wrote nothing would leave NaN, which also leaves the bound).
TEST(DecodeAttentionMma, APlantedWrongKeyLeavesTheBound) {
  Cache c;
  const auto ref = reference(c);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t p = 0; p < kPairs; ++p)
    for (int64_t e = 0; e < kDim; ++e) {
      const int64_t i = (p * kKeys + 20) * kDim + e;
      c.k[i] = __float2bfloat16(uniform(rng)), c.v[i] = __float2bfloat16(uniform(rng));
    }
  const double planted = relative_l2(run(c, 3, Form::mma_tma), ref);
  EXPECT_TRUE(std::isfinite(planted));
  EXPECT_GT(planted, 3e-3);
}

}  // namespace
