// ch16/paged_attention: a paged KV cache (ch13/kv_cache_growth) is only free if attention reads
// the pages where they lie. Without a paged kernel a framework gathers each sequence's pages into
// a contiguous cache every decode step, and the step moves the KV bytes three times, not once.
//
// The work: one decode step, one query token per sequence, batch 32 or 64 (the axis `batch`; 8
// and 16 too with --sweep), 32 heads, head_dim 128, BF16. Lengths uniform in [1024, 32768] (fixed
// seed: 1141 to 32616; 487,414 keys per head at batch 32, 1,037,171 at 64: 8.0 / 17.0 GB of K
// and V, 160-340x the L2). Pages of 16 positions (vLLM's default block size, the hardest common
// case: the most table reads, the shortest runs), laid out [page][head][16][128] so a head's rows
// of a page are one 4 KB run, handed out from one pool in shuffled order (no sequence's pages are
// adjacent), and a block table [sequence][page index].
// The hardware: decode does 2 FMAs per byte of K and V, so it runs at HBM speed and its cost is
// the bytes it moves. A page costs one 4-byte table read per 8 keys a warp loads (from L1/L2: the
// table is 120-260 KB, read by every head's CTAs), and 4 KB runs are whole DRAM bursts.
//
// What changes from baseline to optimized (the kernel of kernels/decode_attention.cuh):
//   1. baseline "gather_then_attend": gather_pages copies each sequence's pages into a packed
//      [sequence][head][position][128] cache (dense SDPA's (B, H, S, D), sequences back to back,
//      no padding), then the kernel reads that (PackedKv): K and V read, written, read again;
//   2. optimized "paged": the same kernel and split reading each key through the block table
//      (kernels::decode::PagedKv): page = table[sequence][j / 16], row j % 16 of that page.
// Same math (FP32 scores, statistics, accumulators), same split, same occupancy (73 and 80
// registers: 3 CTAs per SM), so the two outputs agree to the bit.
// Splits: 1024-2048 (sequence, head) pairs already exceed the 396 resident CTAs of an H100, so
// ch18's rule (one wave) gives one split; but the lengths differ 28x and CTAs start in order, so
// the last long pairs would run on a nearly idle GPU. So every pair is cut into chunks of one
// size: keys / (32 x resident CTAs), rounded up to the 64-key CTA step, >= 256 (H100: 1280 keys,
// 25 chunks for the longest pair, at batch 32; 2624 and 13 at 64): ~32 waves of equal CTAs, a
// tail of at most one chunk. Chunks past a short pair's end exit at once; the log-sum-exp merge
// folds the rest (partials: 0.1% of the KV bytes). Metrics: splits, chunk_keys; the baseline also
// gather_us and attend_us (its phases, event-timed on the last sample): attend_us is this kernel
// on a contiguous cache, the dense rate the paged side should match.
// Bytes: K and V once (keys x heads x 512), q and out (pairs x 256 each), the table's used
// entries (4 bytes a page); the gather's 2x the KV bytes more is the point. Held to the HBM read
// ceiling (a read-only stream, as ch18/flash_decoding); target >= 90% of it.
// Tolerance: relative L2 3e-3, as ch18: BF16 output rounding (<= 2^-9) plus FP32 sums of up to
// 32k terms (~1e-5). Verified at 5 sequences of 1003, 5, 250, 777 and 64 keys (partial pages, a
// pair shorter than a warp step, 1 to 4 chunks of 256 so empty chunks) against an FP64 CPU
// reference; at the timing size against a device reference (one plain gather kernel copies every
// sequence's pages into a packed cache, paged_reference_gather.cuh, then
// kernels/reference_attention.cuh, a sequence at a time).
//
//   ./bench compare --chapter ch16 --example paged_attention
#include <algorithm>
#include <kernels/decode_attention.cuh>
#include <kernels/event_span.hpp>
#include <kernels/occupancy.cuh>
#include <kernels/reference_attention.cuh>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "paged_reference_gather.cuh"

namespace {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
constexpr int kPageSize = 16;
using Paged = decode::PagedKv<kPageSize>;
constexpr int64_t kRowPieces = decode::kLanesPerKey;  // 16-byte pieces in a 128-dimension row
constexpr int kMinLength = 1024, kMaxLength = 32768;
constexpr int kVerifyLengths[] = {1003, 5, 250, 777, 64};
constexpr uint64_t kLayoutSeed = 16;
constexpr int64_t kWavesOfChunks = 32, kMinKeysPerSplit = 256;

// The cache's structure (fixed seed, the same for every variant and run): lengths, the block table.
struct Layout {
  std::vector<int> lengths;
  std::vector<int64_t> starts;   // positions before each sequence in the packed cache
  std::vector<int> block_table;  // [sequence][max_pages]; -1 past a sequence's pages (never read)
  int64_t tokens = 0, pages = 0;
  int max_pages = 0, max_length = 0;
  Layout(int64_t batch, bool verifying) {
    std::mt19937_64 rng(kLayoutSeed);  // its raw output is fixed by the C++ standard
    for (int64_t s = 0; s < batch; ++s) {
      lengths.push_back(verifying ? kVerifyLengths[s % 5] : kMinLength + int(rng() % (kMaxLength - kMinLength + 1)));
      starts.push_back(tokens);
      tokens += lengths.back();
      pages += (lengths.back() + kPageSize - 1) / kPageSize;
      max_length = std::max(max_length, lengths.back());
    }
    max_pages = (max_length + kPageSize - 1) / kPageSize;
    std::vector<int> order(size_t(pages), 0);  // pool pages in the order they are handed out
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);  // Fisher-Yates
    block_table.assign(size_t(batch) * max_pages, -1);
    for (size_t s = 0, next = 0; s < lengths.size(); ++s)
      for (int p = 0; p * kPageSize < lengths[s]; ++p) block_table[s * max_pages + p] = order[next++];
  }
};

template <class T>
bench::DeviceBuffer<T> upload(const std::vector<T>& host) {
  bench::DeviceBuffer<T> d(int64_t(host.size()));
  BENCH_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

struct PagedDecode {
  int64_t batch, heads, pairs;
  Layout layout;
  bench::DeviceBuffer<int> lengths, block_table;
  bench::DeviceBuffer<int64_t> starts;
  bench::DeviceSpan<const bf16> q, k_pages, v_pages;  // q [pair][128]; pools [page][head][16][128]
  bench::DeviceSpan<bf16> out;                        // [pair][128], pair = sequence x heads + head
  explicit PagedDecode(bench::Setup& s)
      : batch(s.size("batch", s.axis("batch"), 5)),
        heads(s.size("heads", 32, 32)),
        pairs(batch * heads),
        layout(batch, s.verifying()),
        lengths(upload(layout.lengths)),
        block_table(upload(layout.block_table)),
        starts(upload(layout.starts)),
        q(s.input<bf16>("q", pairs * kHeadDim, bench::normal(0, 4))),  // a peaked softmax, as ch18
        k_pages(s.input<bf16>("k_pages", layout.pages * heads * kPageSize * kHeadDim, bench::uniform(-1, 1))),
        v_pages(s.input<bf16>("v_pages", layout.pages * heads * kPageSize * kHeadDim, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", pairs * kHeadDim)) {
    s.param("page_size", kPageSize);
    s.param("layout_seed", int64_t(kLayoutSeed));
    s.param("kv_tokens", layout.tokens);
    const double kv_bytes = 2.0 * layout.tokens * heads * kHeadDim * sizeof(bf16);
    s.bytes(kv_bytes + 2.0 * pairs * kHeadDim * sizeof(bf16) + 4.0 * layout.pages, bench::ceiling::hbm_read);
    s.flops(4.0 * layout.tokens * heads * kHeadDim);  // q.k and p v: 2 FMAs per key and dimension
  }
  Paged paged() const {
    return {k_pages.data(), v_pages.data(), block_table.data(), lengths.data(), int(heads), layout.max_pages};
  }
};

// The baseline's packed cache: sequence s, head h, position j at row starts[s] x heads + h x
// length + j: each pair's keys contiguous, as ContiguousKv has them, at per-sequence offsets.
struct PackedKv {
  const bf16* k;  // [sequence][head][position][128], sequences back to back
  const bf16* v;
  const int64_t* starts;
  const int* lengths;
  int heads;
  __device__ decode::PairKeys<decode::RowsFrom> pair(int64_t bh) const {
    const int64_t seq = bh / heads, n_k = __ldg(lengths + seq);
    return {n_k, {__ldg(starts + seq) * heads + bh % heads * n_k}};
  }
};

// Baseline, step 1: CTA (p, s) copies page p of sequence s (all heads, its valid rows, K and V) to
// the packed cache. Both sides are 16-byte accesses in 4 KB runs (a head's rows of one page); four
// pieces of K and four of V in flight per thread. CTAs past a sequence's last page exit.
constexpr int kGatherThreads = 256, kGatherUnroll = 4;
__global__ void __launch_bounds__(kGatherThreads)
    gather_pages(Paged src, bf16* __restrict__ k_packed, bf16* __restrict__ v_packed, const int64_t* __restrict__ starts) {
  const int seq = blockIdx.y;
  const int64_t length = src.lengths[seq], pos0 = int64_t{blockIdx.x} * kPageSize;
  if (pos0 >= length) return;
  const int64_t page = src.block_table[int64_t{seq} * src.max_pages + blockIdx.x];
  const int64_t page_pieces = int64_t{src.heads} * kPageSize * kRowPieces;  // i = (head x 16 + row) x 16 + c
  const auto* k_page = reinterpret_cast<const uint4*>(src.k) + page * page_pieces;
  const auto* v_page = reinterpret_cast<const uint4*>(src.v) + page * page_pieces;
  const int64_t first_row = starts[seq] * src.heads + pos0;  // head 0's row of position pos0
  auto* k_out = reinterpret_cast<uint4*>(k_packed) + first_row * kRowPieces;
  auto* v_out = reinterpret_cast<uint4*>(v_packed) + first_row * kRowPieces;
  for (int64_t i0 = threadIdx.x; i0 < page_pieces; i0 += kGatherUnroll * kGatherThreads) {
    uint4 k_raw[kGatherUnroll], v_raw[kGatherUnroll];
    int64_t to[kGatherUnroll];
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const int64_t i = i0 + u * kGatherThreads, head = i / (kPageSize * kRowPieces);
      const int64_t row = i / kRowPieces % kPageSize, c = i % kRowPieces;
      to[u] = i < page_pieces && pos0 + row < length ? (head * length + row) * kRowPieces + c : -1;
      if (to[u] >= 0) k_raw[u] = kernels::load_stream(k_page + i), v_raw[u] = kernels::load_stream(v_page + i);
    }
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u)
      if (to[u] >= 0) k_out[to[u]] = k_raw[u], v_out[to[u]] = v_raw[u];
  }
}

// The split of the keys (untimed, from the machine and the lengths; header comment) and its partials.
struct SplitPlan {
  int splits = 1;
  int64_t chunk = 0;
  bench::DeviceBuffer<float> part_ml, part_o;
  template <class Kernel>
  SplitPlan(const PagedDecode& w, Kernel kernel) {
    const int64_t wave = int64_t{kernels::sm_count()} * kernels::blocks_per_sm(kernel, decode::kThreads);
    const int64_t per_chunk = (w.layout.tokens * w.heads + kWavesOfChunks * wave - 1) / (kWavesOfChunks * wave);
    chunk = std::max(kMinKeysPerSplit, decode::chunk_for(per_chunk, 1, 1));
    splits = int((w.layout.max_length + chunk - 1) / chunk);
    if (splits > 1)
      part_ml = bench::DeviceBuffer<float>(w.pairs * splits * 2), part_o = bench::DeviceBuffer<float>(w.pairs * splits * kHeadDim);
  }
  decode::Args args(const PagedDecode& w) const {
    return {w.q.data(), w.out.data(), part_ml.data(), part_o.data(), 1, 0, chunk, splits};
  }
  std::vector<bench::Metric> metrics() const { return {{"splits", double(splits)}, {"chunk_keys", double(chunk)}}; }
};

struct GatherThenAttend {
  bench::DeviceBuffer<bf16> k_packed, v_packed;
  SplitPlan plan;
  kernels::EventSpan gather, attend;
  GatherThenAttend(const PagedDecode& w, cudaStream_t)
      : k_packed(w.layout.tokens * w.heads * kHeadDim),
        v_packed(w.layout.tokens * w.heads * kHeadDim),
        plan(w, decode::attention<1, PackedKv>) {}
  void operator()(const PagedDecode& w, cudaStream_t stream) {
    gather.begin(stream);
    gather_pages<<<dim3(unsigned(w.layout.max_pages), unsigned(w.batch)), kGatherThreads, 0, stream>>>(
        w.paged(), k_packed.data(), v_packed.data(), w.starts.data());
    BENCH_CHECK_LAUNCH();
    gather.end(stream);
    attend.begin(stream);
    const PackedKv packed{k_packed.data(), v_packed.data(), w.starts.data(), w.lengths.data(), int(w.heads)};
    decode::launch<1>(plan.args(w), packed, w.pairs, stream);
    attend.end(stream);
  }
  std::vector<bench::Metric> metrics() const {
    auto m = plan.metrics();
    m.push_back({"gather_us", 1e3 * gather.ms()});
    m.push_back({"attend_us", 1e3 * attend.ms()});
    return m;
  }
};

struct PagedAttend {
  SplitPlan plan;
  PagedAttend(const PagedDecode& w, cudaStream_t) : plan(w, decode::attention<1, Paged>) {}
  void operator()(const PagedDecode& w, cudaStream_t stream) {
    decode::launch<1>(plan.args(w), w.paged(), w.pairs, stream);
  }
  std::vector<bench::Metric> metrics() const { return plan.metrics(); }
};

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};
// The CPU reference in double: each sequence's pages copied out by plain loops, then attention.
void reference(const PagedDecode& w, bench::HostData& h) {
  const auto q = h.input<bf16>("q"), k_pages = h.input<bf16>("k_pages"), v_pages = h.input<bf16>("v_pages");
  const auto out = h.expected("out");
  const int64_t head_dim = kHeadDim;
  for (int64_t s = 0; s < w.batch; ++s) {
    const int64_t n = w.layout.lengths[s], slice = w.heads * head_dim;
    std::vector<bf16> k(size_t(w.heads * n * head_dim)), v(k.size());
    for (int64_t head = 0; head < w.heads; ++head)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t page = w.layout.block_table[s * w.layout.max_pages + j / kPageSize];
        const int64_t from = ((page * w.heads + head) * kPageSize + j % kPageSize) * head_dim;
        const int64_t to = (head * n + j) * head_dim;
        std::copy_n(k_pages.data() + from, head_dim, k.data() + to);
        std::copy_n(v_pages.data() + from, head_dim, v.data() + to);
      }
    kernels::reference_attention(q.subspan(s * slice, slice), std::span<const bf16>(k), std::span<const bf16>(v),
                                 out.subspan(s * slice, slice), w.heads, 1, n, AllKeys{});
  }
}
// At the timing size: ONE plain gather kernel copies every sequence's pages, through the block
// table, into a packed [sequence][head][position][128] cache (paged_reference_gather.cuh: each
// 16-byte piece on its own, the CPU reference's index arithmetic), then the plain GPU reference
// attention a sequence at a time on its [head][position][128] block. The driver's 2D copy of each
// page it replaces was ~130,000 calls a check at batch 64 (README). The packed
// scratch is as large as the pools, allocated per check: 8.0 GB at batch 32, 17.0 GB at batch 64
// (K and V together), beside the pools' 17.0 GB and, while gather_then_attend is checked, its own
// 17.0 GB packed cache: 51 GB at most on an 80 GB H100.
void device_reference(const PagedDecode& w, cudaStream_t stream) {
  const bench::DeviceBuffer<bf16> k(w.layout.tokens * w.heads * kHeadDim), v(k.size());
  ch16::paged::launch_gather_pages_for_reference(
      w.k_pages.data(), w.v_pages.data(), w.block_table.data(), w.layout.max_pages,
      w.lengths.data(), w.starts.data(), w.batch, w.layout.max_length, int(w.heads), kPageSize,
      k.data(), v.data(), stream);
  kernels::ReferenceAttentionScratch scratch;  // the split form's partials, for every sequence
  for (int64_t s = 0; s < w.batch; ++s) {
    const int64_t at = s * w.heads * kHeadDim, packed_at = w.layout.starts[s] * w.heads * kHeadDim;
    kernels::reference_attention(w.q.data() + at, k.data() + packed_at, v.data() + packed_at,
                                 w.out.data() + at, w.heads, 1, w.layout.lengths[s], AllKeys{},
                                 stream, scratch);
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch buffers are freed
}

BENCH_EXAMPLE(ch16, paged_attention, PagedDecode)
    .int_axis("batch", {8, 16, 32, 64}, /*defaults=*/{32, 64})
    .stateful<GatherThenAttend>(bench::Role::baseline, "gather_then_attend")
    .stateful<PagedAttend>(bench::Role::optimized, "paged")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(3e-3));

}  // namespace
