// Tests kernels/reference_attention.cuh's GPU kernel, the device reference that `bench compare`
// checks ch15-ch19's attention samples against, against its previous form (copied below as
// previous_reference_attention: one CTA a query, K read by every query's CTA): the outputs must be
// bitwise equal, which holds only if the new kernel performs the same FP32 operations in the same
// order for every (query, output dimension). Head dims 64 and 128; 1, 3, 8 (one whole CTA of
// queries) and 333 queries (a partial last CTA); 1, 100, 128 (one whole tile) and 4113 keys (a
// partial last tile); 1 and 5 (batch, head) pairs; every key visible, causal, and a sliding window
// with scattered far keys (tiles that some queries of a CTA see and others do not). Prints the
// time of both forms at ch16's b1 s4096 d128 (32 heads) and ch18's decode shape (32 pairs, 1
// query, 65536 keys); the times are reported, not asserted.
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
    previous_reference_attention(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                 const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                                 int64_t n_q, int64_t n_k, Visible visible) {
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

Inputs random_inputs(int64_t bh, int64_t n_q, int64_t n_k, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  Inputs in{std::vector<bf16>(bh * n_q * dim), std::vector<bf16>(bh * n_k * dim),
            std::vector<bf16>(bh * n_k * dim)};
  for (auto* x : {&in.q, &in.k, &in.v})
    for (auto& e : *x) e = __float2bfloat16(normal(rng));
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
void expect_identical(int64_t bh, int64_t n_q, int64_t n_k, Visible visible, const std::string& what) {
  SCOPED_TRACE(what);
  const Inputs in = random_inputs(bh, n_q, n_k, kDim, unsigned(bh * 1000003 + n_q * 1009 + n_k));
  const std::size_t count = in.q.size();
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v);
  bf16 *previous = upload(filled(count, 0xffff)), *now = upload(filled(count, 0x7fc1));  // NaNs
  launch_previous_reference_attention<kDim>(q, k, v, previous, bh, n_q, n_k, visible);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  kernels::reference_attention<kDim>(q, k, v, now, bh, n_q, n_k, visible, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<bf16> want = download(previous, count), got = download(now, count);
  int64_t differ = 0, not_finite = 0, first = -1;
  const std::vector<uint16_t> want_bits = bits(want), got_bits = bits(got);
  for (std::size_t i = 0; i < count; ++i) {
    not_finite += !std::isfinite(__bfloat162float(got[i]));
    if (want_bits[i] != got_bits[i] && differ++ == 0) first = int64_t(i);
  }
  EXPECT_EQ(not_finite, 0);
  EXPECT_EQ(differ, 0) << "first at element " << first << " (pair " << first / (n_q * kDim) << ", query "
                       << first / kDim % n_q << ", dim " << first % kDim << "): previous "
                       << (first >= 0 ? __bfloat162float(want[first]) : 0.0f) << ", now "
                       << (first >= 0 ? __bfloat162float(got[first]) : 0.0f);
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
        expect_identical<kDim>(bh, n_q, n_k, WindowAndScattered{offset, n_k, 200}, shape + " window");
      }
}

TEST(ReferenceAttention, BitIdenticalToPreviousFormD64) { expect_identical_over_shapes<64>(); }
TEST(ReferenceAttention, BitIdenticalToPreviousFormD128) { expect_identical_over_shapes<128>(); }

// K and V are read in 16-byte pieces: a pointer off that grid is refused before any launch.
TEST(ReferenceAttention, RefusesKvNotOn16Bytes) {
  bf16* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 4 * 128 * sizeof(bf16)), cudaSuccess);
  EXPECT_THROW(kernels::reference_attention(buffer, buffer + 1, buffer, buffer + 128, 1, 1, 1, AllKeys{}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(kernels::reference_attention(buffer, buffer, buffer + 4, buffer + 128, 1, 1, 1, AllKeys{}, nullptr),
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

template <class Visible>
void time_both(const char* name, int64_t bh, int64_t n_q, int64_t n_k, Visible visible) {
  constexpr int d = kernels::kRefHeadDim;
  const Inputs in = random_inputs(bh, n_q, n_k, d, 7);
  bf16 *q = upload(in.q), *k = upload(in.k), *v = upload(in.v), *out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, in.q.size() * sizeof(bf16)), cudaSuccess);
  const float previous = best_ms([&] { launch_previous_reference_attention<d>(q, k, v, out, bh, n_q, n_k, visible); });
  const float now = best_ms([&] { kernels::reference_attention<d>(q, k, v, out, bh, n_q, n_k, visible, nullptr); });
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::printf("[ reference_attention ] %s: previous %.3f ms, now %.3f ms (%.1fx)\n", name, previous, now,
              previous / now);
  for (void* p : {(void*)q, (void*)k, (void*)v, (void*)out}) cudaFree(p);
}

TEST(ReferenceAttention, TimesBothForms) {
  time_both("prefill b1 h32 s4096 d128, all keys", 32, 4096, 4096, AllKeys{});
  time_both("prefill b1 h32 s4096 d128, causal", 32, 4096, 4096, Causal{0});
  time_both("decode 32 pairs, 1 query, 65536 keys, d128", 32, 1, 65536, AllKeys{});
}

}  // namespace
