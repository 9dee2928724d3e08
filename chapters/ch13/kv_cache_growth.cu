// ch13/kv_cache_growth: a decode loop that grows its KV cache by reallocating and copying it every
// token → a preallocated pool of fixed-size blocks and a block table.
//
// Each generated token appends one K row and one V row (head_dim BF16 values) for every layer and
// KV head of the model. A cache kept as one contiguous [rows][tokens][head_dim] tensor (what
// torch.cat along the sequence does) must move to a bigger buffer to grow: allocate, copy every
// token so far, free the old buffer. The copy is the cost that grows: quadratic in the sequence
// length, ~137 GB over a 4096-token generation of this model, 32 MiB per token on average. A
// block pool allocates all of it once: the cache is blocks of kBlockTokens positions, a block is
// taken from the pool's free list when a position crosses into a new one, a block table maps
// block index → physical block, and the token is written where it stays. Nothing is copied.
//
// The baseline allocates the way a framework does, from a caching pool (kernels::KeepAllPool,
// stream-ordered, memory kept across generations): the lesson is the copy, not the driver. With
// cudaMalloc/cudaFree per token instead (the first version of this file), cudaFree's wait for
// the device and the driver's mapping added time per token and noise per sample that buried the
// copy (README); ch13/caching_allocator is the lesson about that.
//
// What changes from baseline to optimized:
//   1. baseline: per token, cudaMallocFromPoolAsync(rows x (t+1) x head_dim), cudaMemcpy2DAsync
//      of the t old positions of every row, the append kernel, cudaFreeAsync of the old buffer;
//   2. optimized: per token, the same append kernel into its block of a pool allocated in untimed
//      setup (every 16th token first takes a block from the free list and records it in the
//      device block table, in the same launch).
// Both end by writing the cache into the output in contiguous [rows][tokens][head_dim] order (a
// copy of the baseline's buffer, a gather through the block table for the pool), checked exactly
// against the tokens' rows: the block table is exercised, since the free list hands blocks out in
// reverse order. Per-token time (`per_token_us`, GPU timeline from first to last token) and the
// bytes copied per token are reported as metrics. Mode::host: a generation is thousands of
// enqueued operations; the optimized loop is 4096 small launches whose rate the host's launch
// path sets, so it is host_bound (scored by the spread over machines), and the baseline's early
// tokens are too small to keep the GPU busier than the host (host_bound as well).
//
//   ./bench compare --chapter ch13 --example kv_cache_growth
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <kernels/event_span.hpp>
#include <kernels/mem_pool.hpp>

#include <cstdint>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kVecPerRow = kHeadDim * sizeof(bf16) / sizeof(uint4);  // 16-byte pieces per row
constexpr int64_t kBlockTokens = 16;                                     // positions per pool block
constexpr int kThreads = 256;

struct Decode {
  int64_t tokens, layers, kv_heads, rows;  // rows = layers x {K, V} x kv_heads, per token
  bench::DeviceSpan<const bf16> token_kv;  // [tokens][rows][head_dim]: what each step produced
  bench::DeviceSpan<bf16> cache;           // [rows][tokens][head_dim]: the cache at the end
  explicit Decode(bench::Setup& s)
      : tokens(s.size("tokens", 4096, 45)),  // 45: two full blocks and a ragged third
        layers(s.size("layers", 4, 3)),
        kv_heads(s.size("kv_heads", 8, 2)),
        rows(layers * 2 * kv_heads),
        token_kv(s.input<bf16>("token_kv", tokens * rows * kHeadDim, bench::uniform(-1, 1))),
        cache(s.output<bf16>("cache", rows * tokens * kHeadDim)) {
    s.param("head_dim", kHeadDim);
    // Each row read once and written once: 64 MiB each way when timing.
    s.bytes(2.0 * static_cast<double>(token_kv.bytes()));
  }
  int64_t token_bytes() const { return rows * kHeadDim * int64_t{sizeof(bf16)}; }
};

// Writes token t's rows (src: [rows][head_dim]) at position `slot` of a [rows][row_capacity]
// layout at dst. The pool's launch also records the block it opened in the block table.
__global__ void append_token(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t rows,
                             int64_t row_capacity, int64_t slot, int* __restrict__ table_entry,
                             int block) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (table_entry != nullptr && i == 0) *table_entry = block;
  if (i >= rows * kVecPerRow) return;
  const int64_t row = i / kVecPerRow, v = i % kVecPerRow;
  dst[(row * row_capacity + slot) * kVecPerRow + v] = src[i];
}

// cache[row][t] = pool[table[t / kBlockTokens]][row][t % kBlockTokens], in 16-byte pieces.
__global__ void gather_blocks(const uint4* __restrict__ pool, const int* __restrict__ table,
                              uint4* __restrict__ cache, int64_t rows, int64_t tokens) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= rows * tokens * kVecPerRow) return;
  const int64_t v = i % kVecPerRow, t = (i / kVecPerRow) % tokens, row = i / (kVecPerRow * tokens);
  const int64_t block = table[t / kBlockTokens];
  cache[i] = pool[((block * rows + row) * kBlockTokens + t % kBlockTokens) * kVecPerRow + v];
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
const uint4* token_rows(const Decode& w, int64_t t) {
  return reinterpret_cast<const uint4*>(w.token_kv.data()) + t * w.rows * kVecPerRow;
}

// The generation's figures from its GPU timeline (first token to last) and the bytes it copied.
std::vector<bench::Metric> generation_metrics(const Decode& w, const kernels::EventSpan& generation,
                                              double copied_bytes) {
  const double t = static_cast<double>(w.tokens);
  return {{"per_token_us", 1e3 * generation.ms() / t}, {"copied_mib_per_token", copied_bytes / t / (1 << 20)}};
}

// --- baseline: one contiguous buffer, reallocated and copied every token ------------------------
struct GrowEveryToken {
  const Decode* w;
  kernels::KeepAllPool pool;  // built untimed; keeps its memory, so a reallocation is bookkeeping
  kernels::EventSpan generation;
  double copied_bytes = 0;  // per generation
  GrowEveryToken(const Decode& workload, cudaStream_t) : w(&workload) {}
  void operator()(const Decode& d, cudaStream_t stream) {
    generation.begin(stream);
    const size_t row_bytes = kHeadDim * sizeof(bf16);
    uint4* buffer = nullptr;
    copied_bytes = 0;
    for (int64_t t = 0; t < d.tokens; ++t) {  // t positions held; grow to t + 1
      void* grown = nullptr;
      BENCH_CUDA_CHECK(cudaMallocFromPoolAsync(&grown, static_cast<size_t>(d.rows * (t + 1)) * row_bytes,
                                               pool.get(), stream));
      if (t > 0) {
        BENCH_CUDA_CHECK(cudaMemcpy2DAsync(grown, (t + 1) * row_bytes, buffer, t * row_bytes,
                                           t * row_bytes, static_cast<size_t>(d.rows),
                                           cudaMemcpyDeviceToDevice, stream));
        copied_bytes += static_cast<double>(t) * static_cast<double>(d.token_bytes());
        BENCH_CUDA_CHECK(cudaFreeAsync(buffer, stream));  // reusable once the copy has run
      }
      append_token<<<blocks_for(d.rows * kVecPerRow), kThreads, 0, stream>>>(
          token_rows(d, t), static_cast<uint4*>(grown), d.rows, t + 1, t, nullptr, 0);
      BENCH_CHECK_LAUNCH();
      buffer = static_cast<uint4*>(grown);
    }
    BENCH_CUDA_CHECK(cudaMemcpyAsync(d.cache.data(), buffer, d.cache.bytes(),
                                     cudaMemcpyDeviceToDevice, stream));
    generation.end(stream);
    BENCH_CUDA_CHECK(cudaFreeAsync(buffer, stream));
  }
  std::vector<bench::Metric> metrics() const { return generation_metrics(*w, generation, copied_bytes); }
};

// --- optimized: a preallocated block pool and a block table --------------------------------------
struct BlockPool {
  const Decode* w;
  int64_t num_blocks;
  bench::DeviceBuffer<uint4> pool;  // [num_blocks][rows][kBlockTokens][head_dim]
  bench::DeviceBuffer<int> table;   // logical block -> physical block
  std::vector<int> free_list;
  kernels::EventSpan generation;
  BlockPool(const Decode& d, cudaStream_t)
      : w(&d),
        num_blocks((d.tokens + kBlockTokens - 1) / kBlockTokens),
        pool(num_blocks * d.rows * kBlockTokens * kVecPerRow),
        table(num_blocks) {}
  void operator()(const Decode& d, cudaStream_t stream) {
    generation.begin(stream);
    free_list.clear();  // a fresh sequence: every block is free; handed out last to first
    for (int b = 0; b < num_blocks; ++b) free_list.push_back(b);
    int block = -1;
    for (int64_t t = 0; t < d.tokens; ++t) {
      const int64_t slot = t % kBlockTokens;
      int* table_entry = nullptr;
      if (slot == 0) {  // crossing into a new block: take one from the pool
        block = free_list.back();
        free_list.pop_back();
        table_entry = table.data() + t / kBlockTokens;
      }
      uint4* dst = pool.data() + block * d.rows * kBlockTokens * kVecPerRow;
      append_token<<<blocks_for(d.rows * kVecPerRow), kThreads, 0, stream>>>(
          token_rows(d, t), dst, d.rows, kBlockTokens, slot, table_entry, block);
      BENCH_CHECK_LAUNCH();
    }
    gather_blocks<<<blocks_for(d.rows * d.tokens * kVecPerRow), kThreads, 0, stream>>>(
        pool.data(), table.data(), reinterpret_cast<uint4*>(d.cache.data()), d.rows, d.tokens);
    BENCH_CHECK_LAUNCH();
    generation.end(stream);
  }
  std::vector<bench::Metric> metrics() const { return generation_metrics(*w, generation, 0.0); }
};

void reference(const Decode& w, bench::HostData& h) {
  auto token_kv = h.input<bf16>("token_kv");
  auto cache = h.expected("cache");
  for (int64_t t = 0; t < w.tokens; ++t)
    for (int64_t row = 0; row < w.rows; ++row)
      for (int64_t e = 0; e < kHeadDim; ++e)
        cache[(row * w.tokens + t) * kHeadDim + e] =
            __bfloat162float(token_kv[(t * w.rows + row) * kHeadDim + e]);
}

// The timing-size check (docs/validity.md row 2): one thread per element copies it from its
// token's row to its place in the cache, with no pool, no block table and no growth.
__global__ void reference_cache(const bf16* token_kv, bf16* cache, int64_t tokens, int64_t rows) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // index into the cache
  if (i >= rows * tokens * kHeadDim) return;
  const int64_t e = i % kHeadDim, t = i / kHeadDim % tokens, row = i / kHeadDim / tokens;
  cache[i] = token_kv[(t * rows + row) * kHeadDim + e];
}

void device_reference(const Decode& w, cudaStream_t stream) {
  const int64_t elements = w.rows * w.tokens * kHeadDim;
  reference_cache<<<static_cast<unsigned>((elements + 255) / 256), 256, 0, stream>>>(w.token_kv.data(), w.cache.data(), w.tokens, w.rows);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch13, kv_cache_growth, Decode)
    .stateful<GrowEveryToken>(bench::Role::baseline, "realloc_copy_per_token",
                              {.host_bound = true})
    .stateful<BlockPool>(bench::Role::optimized, "block_pool_block_table", {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

}  // namespace
