// ch15/serving_engine.cuh: the small serving engine both of the chapter's scheduling lessons run
// (paged_kv_cache.cu, continuous_batching.cu): one request trace, one decode step, one way to
// replay a schedule (serving_schedule.hpp) on the GPU. The examples differ only in the Policy
// they hand it; every kernel and every cuBLAS call below is the same on both sides.
//
// The model: one layer, `heads` heads of 128 (model width D = heads x 128), an MLP D -> F -> D.
// A step, for the requests the schedule names:
//   1. write_kv: the admitted requests' prompt K/V rows, and one new K/V row per decoding request,
//      copied from the trace's source rows into the KV pool (where a real model's K/V projection
//      would write them); the decoding tokens' queries gathered into a [batch][heads][128] block;
//   2. attention: kernels/decode_attention.cuh (ch16's paged decode, ch18's split-KV), one query
//      per (request, head) over the request's prompt + t + 1 keys, through its block table;
//   3. the MLP: h = relu(attn W_up^T), y = h W_down^T, two cuBLAS BF16 GEMMs (FP32 accumulate) over
//      the step's batch: the layer's weights (2 x D x F BF16: 64 MiB at D 1024, F 16384, more than
//      the 50 MB L2, so they stream from HBM every step, as a real model's do) are read once per
//      step whatever the batch, which is what batching more requests into a step amortises;
//   4. scatter: each token's y row to its place in the output, by (request, token): the output is
//      the same whatever the schedule, so one reference checks every policy.
// The whole replay (every step of the schedule) is captured once into a CUDA graph in untimed
// setup; the timed call is one launch of it: one replay of the trace.
//
// KV pool: blocks of `block_rows` positions, laid out [block][head][block_rows][128] (a head's rows
// of a block contiguous), and a block table [request][max_blocks]. A reserved max-length region is
// the same thing with one block of max_length rows per request, so both sides of paged_kv_cache
// run the same kernel instantiation: what differs is how many requests the same pool holds.
//
// Outputs: y [token][D] BF16 (the decode step's output for every token of the trace) and context
// [token] int32 (the keys the token attended over, prompt + t + 1, written when it was served): a
// token served never, or at the wrong length, fails the exact check. Metrics (from %globaltimer
// stamps the replay writes after each step, last timed replay): tokens_per_s, request latency
// p50/p99 (every request arrives at time 0: latency is its completion time), steps, the largest
// batch, the mean batch, the KV budget and the peak KV held (MiB).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cmath>
#include <cstdint>
#include <kernels/cublas_check.hpp>
#include <kernels/cuda_graph.hpp>
#include <kernels/decode_attention.cuh>
#include <kernels/reference_attention.cuh>
#include <kernels/reference_gemm.cuh>
#include <span>
#include <utility>
#include <vector>

#include "serving_schedule.hpp"

namespace ch15 {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
constexpr int kPieces = kHeadDim / 8;  // 16-byte pieces of a 128-dimension BF16 row
constexpr int kThreads = 256;
constexpr int64_t kChunkKeys = 256;  // keys per attention split (a multiple of the 64-key CTA step)

template <class T>
bench::DeviceBuffer<T> upload(const std::vector<T>& host) {
  bench::DeviceBuffer<T> d(std::max<int64_t>(1, int64_t(host.size())));
  if (!host.empty())
    BENCH_CUDA_CHECK(
        cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// What the server is sized for: the pool (KV budget, in positions of every head), the batch cap,
// the model's context limit. Part of the workload, so both sides of an example get the same.
struct ServerLimits {
  int64_t budget_rows;
  int max_batch, max_length;
};

struct Serving {
  int64_t heads, dim, ffn;
  Trace trace;
  ServerLimits limits;
  bench::DeviceBuffer<int> prompts, outputs;
  bench::DeviceBuffer<int64_t> kv_start, token_start;
  bench::DeviceSpan<const bf16> q, k_src, v_src, w_up, w_down;  // q [request][head][t][128]; k, v
                                                                // [request][head][position][128]
  bench::DeviceSpan<bf16> y;                                    // [token][dim]
  bench::DeviceSpan<int> context;                               // [token]
  Serving(bench::Setup& s, ServerLimits timing, ServerLimits verifying)
      : Serving(s, serving_trace(s.verifying()), s.verifying() ? verifying : timing) {}
  // Any trace (prefill_decode_interference's arriving one), the limits for this size.
  Serving(bench::Setup& s, Trace trace_, ServerLimits limits_)
      : heads(s.size("heads", 8, 2)),
        dim(heads * kHeadDim),
        ffn(s.size("ffn", 16384, 96)),
        trace(std::move(trace_)),
        limits(limits_),
        prompts(upload(lengths(&Request::prompt))),
        outputs(upload(lengths(&Request::output))),
        kv_start(upload(trace.kv_start)),
        token_start(upload(trace.token_start)),
        // q ~ N(0, 4): a peaked softmax, as ch16's
        q(s.input<bf16>("q", trace.tokens * dim, bench::normal(0, 4))),
        k_src(s.input<bf16>("k_src", trace.kv_rows * dim, bench::uniform(-1, 1))),
        v_src(s.input<bf16>("v_src", trace.kv_rows * dim, bench::uniform(-1, 1))),
        w_up(s.input<bf16>("w_up", ffn * dim, bench::uniform(-0.05, 0.05))),
        w_down(s.input<bf16>("w_down", dim * ffn, bench::uniform(-0.05, 0.05))),
        y(s.output<bf16>("y", trace.tokens * dim)),
        context(s.output<int>("context", trace.tokens)) {
    s.param("requests", int64_t(trace.requests.size()));
    s.param("trace_seed", int64_t(kTraceSeed));
    s.param("kv_budget_rows", limits.budget_rows);
    s.param("max_batch", limits.max_batch);
    s.param("max_length", limits.max_length);
    s.bytes(decode_bytes());
    s.flops(decode_flops(), bench::ceiling::bf16);
  }

  // The decode side's cost: attention reads K and V of every key it sees (token t of a request
  // sees prompt + t + 1); the cache is written once from the sources (read once); q in, y and
  // context out; the weights at least once.
  double decode_keys() const {
    double keys = 0;
    for (const Request& r : trace.requests)
      keys += double(r.output) * r.prompt + 0.5 * r.output * (r.output + 1.0);
    return keys;
  }
  double row_bytes() const { return double(dim) * sizeof(bf16); }  // a position's K over every head
  double decode_bytes() const {
    return 2 * decode_keys() * row_bytes() + 4 * trace.kv_rows * row_bytes() +
           2 * trace.tokens * row_bytes() + 4.0 * trace.tokens + 2.0 * dim * ffn * sizeof(bf16);
  }
  double decode_flops() const { return 4 * decode_keys() * dim + 4.0 * trace.tokens * dim * ffn; }

 private:
  std::vector<int> lengths(int Request::*field) const {
    std::vector<int> v;
    for (const Request& r : trace.requests) v.push_back(r.*field);
    return v;
  }
};

// The attention's view of the pool: batch entry bh / heads of this step is (request, t), whose key
// j lies in block block_table[request][j / block_rows], row j % block_rows: one table read per warp
// step of 8 keys (L1 and L2 hits: the table is 256 KB with 16-row blocks, 2 KB with max_length
// regions). The same code for both.
struct StepKv {
  const bf16* k;  // pool [block][heads][block_rows][128]
  const bf16* v;
  const DecodeEntry* entries;  // this step's
  const int* prompts;
  const int* block_table;  // [request][max_blocks]
  int heads, max_blocks, block_rows;
  struct BlockRow {
    const int* blocks;  // the request's row of the table
    int64_t block_stride, head_row;
    int block_rows;
    __device__ int64_t operator()(int64_t first) const {
      const int j = int(first);
      return __ldg(blocks + j / block_rows) * block_stride + head_row + j % block_rows;
    }
  };
  __device__ decode::PairKeys<BlockRow> pair(int64_t bh) const {
    const DecodeEntry e = entries[bh / heads];
    return {__ldg(prompts + e.request) + e.t + 1,
            {block_table + int64_t{e.request} * max_blocks, int64_t{heads} * block_rows,
             bh % heads * int64_t{block_rows}, block_rows}};
  }
};

// Step part 2: the decode attention of a step's entries (their host copy decides the split count:
// the step's longest context in kChunkKeys splits). q and out [entry][heads][128]; part_ml and
// part_o hold max_splits splits of every (entry, head).
inline void step_attention(const Serving& w, std::span<const DecodeEntry> entries, const StepKv& kv,
                           const bf16* q, bf16* out, float* part_ml, float* part_o,
                           cudaStream_t s) {
  int longest = 0;
  for (const DecodeEntry& e : entries)
    longest = std::max(longest, w.trace.requests[size_t(e.request)].prompt + e.t + 1);
  const int splits = int((longest + kChunkKeys - 1) / kChunkKeys);
  const decode::Args args{q,
                          out,
                          part_ml,
                          part_o,
                          1,
                          0,
                          splits == 1 ? decode::chunk_for(longest, 1, 1) : kChunkKeys,
                          splits};
  decode::launch<1>(args, kv, int64_t(entries.size()) * w.heads, s);
}

// What every step's kernels share: the trace's arrays, the pool and the step buffers.
struct EngineArgs {
  const int *prompts, *outputs;
  const int64_t *kv_start, *token_start;
  const uint4 *q, *k_src, *v_src;  // 16-byte pieces
  uint4 *k_pool, *v_pool, *step_q, *step_y, *y;
  int* context;
  const int* block_table;
  int heads, max_blocks, block_rows, dim_pieces;
};

inline EngineArgs engine_args(const Serving& w, bf16* k_pool, bf16* v_pool, bf16* step_q,
                              bf16* step_y, const int* block_table, int max_blocks,
                              int block_rows) {
  return {w.prompts.data(),
          w.outputs.data(),
          w.kv_start.data(),
          w.token_start.data(),
          reinterpret_cast<const uint4*>(w.q.data()),
          reinterpret_cast<const uint4*>(w.k_src.data()),
          reinterpret_cast<const uint4*>(w.v_src.data()),
          reinterpret_cast<uint4*>(k_pool),
          reinterpret_cast<uint4*>(v_pool),
          reinterpret_cast<uint4*>(step_q),
          reinterpret_cast<uint4*>(step_y),
          reinterpret_cast<uint4*>(w.y.data()),
          w.context.data(),
          block_table,
          int(w.heads),
          max_blocks,
          block_rows,
          int(w.dim / 8)};
}

// Step part 1 (header): CTA (item, head). Items [0, n_chunks) are prompt rows to write (a chunk's
// rows first .. first + count - 1), the rest decoding tokens (row P + t, and the token's query
// into step_q).
static __global__ void __launch_bounds__(kThreads)
    write_kv(EngineArgs a, const PrefillChunk* chunks, int n_chunks, const DecodeEntry* entries) {
  const int item = blockIdx.x, head = blockIdx.y;
  int r, first, count;
  if (item < n_chunks) {
    r = chunks[item].request, first = chunks[item].first, count = chunks[item].count;
  } else {
    const DecodeEntry e = entries[item - n_chunks];
    r = e.request, first = a.prompts[r] + e.t, count = 1;
    const int64_t entry = item - n_chunks;
    if (threadIdx.x < kPieces) {
      const int64_t q_row = a.token_start[r] * a.heads + int64_t{head} * a.outputs[r] + e.t;
      a.step_q[(entry * a.heads + head) * kPieces + threadIdx.x] =
          a.q[q_row * kPieces + threadIdx.x];
    }
    if (head == 0 && threadIdx.x == 0) a.context[a.token_start[r] + e.t] = first + 1;
  }
  const int64_t length = a.prompts[r] + a.outputs[r];
  const int64_t src0 = a.kv_start[r] * a.heads + head * length;  // the source row of position 0
  const int* blocks = a.block_table + int64_t{r} * a.max_blocks;
  for (int64_t i = threadIdx.x; i < int64_t{count} * kPieces; i += kThreads) {
    const int j = first + int(i / kPieces), c = int(i % kPieces);
    const int64_t to =
        (int64_t{blocks[j / a.block_rows]} * a.heads + head) * a.block_rows + j % a.block_rows;
    a.k_pool[to * kPieces + c] = a.k_src[(src0 + j) * kPieces + c];
    a.v_pool[to * kPieces + c] = a.v_src[(src0 + j) * kPieces + c];
  }
}

static __global__ void relu_bf16(bf16* h, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = __hmax(h[i], __float2bfloat16(0.0f));
}

static __device__ int64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return int64_t(t);
}

static __global__ void stamp(int64_t* at) { *at = globaltimer_ns(); }

// Step part 4: CTA i moves the step's row i of y to the token's row; CTA 0 stamps the step's end
// (every earlier kernel of the step has finished when any CTA of this one runs).
static __global__ void __launch_bounds__(128)
    scatter_y(EngineArgs a, const DecodeEntry* entries, int64_t* end_stamp) {
  const DecodeEntry e = entries[blockIdx.x];
  const int64_t token = a.token_start[e.request] + e.t;
  for (int c = threadIdx.x; c < a.dim_pieces; c += blockDim.x)
    a.y[token * a.dim_pieces + c] = a.step_y[int64_t{blockIdx.x} * a.dim_pieces + c];
  if (blockIdx.x == 0 && threadIdx.x == 0) *end_stamp = globaltimer_ns();
}

// The MLP's GEMMs of a replay: its own cuBLAS handle and workspace (a captured graph keeps the
// workspace's address, so it lives as long as the replay).
class StepGemm {
 public:
  StepGemm() : workspace_(kWorkspaceBytes) {
    kernels::check_cublas(cublasCreate(&handle_), "cublasCreate");
    kernels::check_cublas(cublasSetWorkspace(handle_, workspace_.data(), kWorkspaceBytes),
                          "cublasSetWorkspace");
  }
  ~StepGemm() { cublasDestroy(handle_); }
  StepGemm(const StepGemm&) = delete;
  StepGemm& operator=(const StepGemm&) = delete;
  void set_stream(cudaStream_t s) const {
    kernels::check_cublas(cublasSetStream(handle_, s), "cublasSetStream");
  }
  // out [rows][n] = in [rows][k] weight [n][k]^T (column-major: out^T = weight^T(T) in^T(N)).
  void linear(const bf16* in, const bf16* weight, bf16* out, int rows, int n, int k) const {
    const float one = 1.0f, zero = 0.0f;
    kernels::check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, weight,
                                       CUDA_R_16BF, k, in, CUDA_R_16BF, k, &zero, out, CUDA_R_16BF,
                                       n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmEx");
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  bench::DeviceBuffer<std::byte> workspace_;
  cublasHandle_t handle_ = nullptr;
};

// Step part 3: y = relu(attn W_up^T) W_down^T over the step's rows (h holds rows x ffn).
inline void step_mlp(const Serving& w, const StepGemm& gemm, const bf16* attn, bf16* h, bf16* y,
                     int rows, cudaStream_t s) {
  gemm.linear(attn, w.w_up.data(), h, rows, int(w.ffn), int(w.dim));
  const int64_t h_count = int64_t{rows} * w.ffn;
  relu_bf16<<<unsigned(std::min<int64_t>((h_count + kThreads - 1) / kThreads, 1024)), kThreads, 0,
              s>>>(h, h_count);
  BENCH_CHECK_LAUNCH();
  gemm.linear(h, w.w_down.data(), y, rows, int(w.dim), int(w.ffn));
}

// Untimed, once, before the replay is captured: a defined first write of the two buffers the
// step's cuBLAS GEMMs write and our kernels then read (h by relu_bf16, y by the scatter).
// compute-sanitizer's initcheck does not see cuBLAS's stores (README, "Sanitizer"), so without
// this it reports every read of them; with it, initcheck still checks every other read of the
// step. The bytes are 0xFF (a BF16 NaN), not zero: a value a GEMM failed to write then reaches
// the outputs as NaN and fails the verification outright, where a zero might pass inside the
// tolerance. Never in the captured graph: the timed replay is unchanged.
inline void poison_gemm_outputs(const bench::DeviceBuffer<bf16>& h,
                                const bench::DeviceBuffer<bf16>& y, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(h.data(), 0xFF, h.bytes(), stream));
  BENCH_CUDA_CHECK(cudaMemsetAsync(y.data(), 0xFF, y.bytes(), stream));
}

// Untimed: every step of a replay captured once into `exec` (enqueue(s) launches them on s), and
// uploaded so that the first timed launch does not pay for it.
template <class Enqueue>
void capture_replay(kernels::GraphExec& exec, const StepGemm& gemm, cudaStream_t stream,
                    Enqueue&& enqueue) {
  kernels::OwnedStream capture_stream;
  const kernels::Graph graph = kernels::capture(capture_stream.get(), enqueue);
  gemm.set_stream(nullptr);  // the capture stream goes
  exec.instantiate(graph.get());
  exec.upload(stream);
}

// A schedule replayed on the GPU: the pool, the step buffers, the graph. Policy in, launch out.
class Replay {
 public:
  Replay(const Serving& w, cudaStream_t stream, const Policy& policy)
      : tokens_(w.trace.tokens),
        mib_per_row_(double(w.dim) * 2 * sizeof(bf16) / double(1 << 20)),  // K and V of a position
        policy_(policy),
        schedule_(make_schedule(w.trace, policy)),
        admitted_(upload(whole_prompts(w.trace, schedule_.admitted))),
        entries_(upload(schedule_.entries)),
        block_table_(upload(schedule_.block_table)),
        k_pool_(policy.budget_rows * w.dim),
        v_pool_(policy.budget_rows * w.dim),
        step_q_(int64_t{policy.max_batch} * w.dim),
        step_attn_(int64_t{policy.max_batch} * w.dim),
        step_h_(int64_t{policy.max_batch} * w.ffn),
        step_y_(int64_t{policy.max_batch} * w.dim),
        max_splits_(int((policy.max_length + kChunkKeys - 1) / kChunkKeys)),
        part_ml_(int64_t{policy.max_batch} * w.heads * max_splits_ * 2),
        part_o_(int64_t{policy.max_batch} * w.heads * max_splits_ * kHeadDim),
        stamps_(schedule_.steps() + 1) {
    poison_gemm_outputs(step_h_, step_y_, stream);
    capture_replay(exec_, gemm_, stream, [&](cudaStream_t s) { enqueue(w, s); });
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  void operator()(const Serving&, cudaStream_t stream) const { exec_.launch(stream); }

  std::vector<bench::Metric> metrics() const {
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());  // the last timed replay's stamps
    std::vector<int64_t> stamps(size_t(stamps_.size()));
    BENCH_CUDA_CHECK(
        cudaMemcpy(stamps.data(), stamps_.data(), stamps_.bytes(), cudaMemcpyDeviceToHost));
    std::vector<double> latency_ms;
    for (int step : schedule_.finish_step)
      latency_ms.push_back(1e-6 * double(stamps[size_t(step) + 1] - stamps[0]));
    const double replay_s = 1e-9 * double(stamps.back() - stamps[0]);
    return {{"tokens_per_s", double(tokens_) / replay_s},
            {"latency_p50_ms", percentile(latency_ms, 0.5)},
            {"latency_p99_ms", percentile(latency_ms, 0.99)},
            {"steps", double(schedule_.steps())},
            {"largest_batch", double(schedule_.largest_batch)},
            {"mean_batch", double(tokens_) / schedule_.steps()},
            {"kv_budget_mib", double(policy_.budget_rows) * mib_per_row_},
            {"peak_kv_mib", double(schedule_.peak_rows_held) * mib_per_row_}};
  }

 private:
  static std::vector<PrefillChunk> whole_prompts(const Trace& trace,
                                                 const std::vector<int>& admitted) {
    std::vector<PrefillChunk> chunks;
    for (int r : admitted) chunks.push_back({r, 0, trace.requests[size_t(r)].prompt});
    return chunks;
  }

  void enqueue(const Serving& w, cudaStream_t s) {
    gemm_.set_stream(s);
    const EngineArgs a =
        engine_args(w, k_pool_.data(), v_pool_.data(), step_q_.data(), step_y_.data(),
                    block_table_.data(), schedule_.max_blocks, policy_.block_rows);
    stamp<<<1, 1, 0, s>>>(stamps_.data());
    BENCH_CHECK_LAUNCH();
    for (int step = 0; step < schedule_.steps(); ++step) {
      const int a0 = schedule_.admit_begin[size_t(step)], e0 = schedule_.entry_begin[size_t(step)];
      const int n_admitted = schedule_.admit_begin[size_t(step) + 1] - a0,
                batch = schedule_.batch(step);
      const DecodeEntry* entries = entries_.data() + e0;
      write_kv<<<dim3(unsigned(n_admitted + batch), unsigned(w.heads)), kThreads, 0, s>>>(
          a, admitted_.data() + a0, n_admitted, entries);
      BENCH_CHECK_LAUNCH();
      const StepKv kv{k_pool_.data(),       v_pool_.data(),      entries,
                      w.prompts.data(),     block_table_.data(), int(w.heads),
                      schedule_.max_blocks, policy_.block_rows};
      step_attention(w, {schedule_.entries.data() + e0, size_t(batch)}, kv, step_q_.data(),
                     step_attn_.data(), part_ml_.data(), part_o_.data(), s);
      step_mlp(w, gemm_, step_attn_.data(), step_h_.data(), step_y_.data(), batch, s);
      scatter_y<<<unsigned(batch), 128, 0, s>>>(a, entries, stamps_.data() + step + 1);
      BENCH_CHECK_LAUNCH();
    }
  }
  int64_t tokens_;
  double mib_per_row_;
  Policy policy_;
  Schedule schedule_;
  bench::DeviceBuffer<PrefillChunk> admitted_;  // each admitted request's whole prompt
  bench::DeviceBuffer<DecodeEntry> entries_;
  bench::DeviceBuffer<int> block_table_;
  bench::DeviceBuffer<bf16> k_pool_, v_pool_, step_q_, step_attn_, step_h_, step_y_;
  int max_splits_;
  bench::DeviceBuffer<float> part_ml_, part_o_;
  bench::DeviceBuffer<int64_t> stamps_;
  StepGemm gemm_;
  kernels::GraphExec exec_;
};

// ---- what correct means ---------------------------------------------------------------------
struct SeesPrompt {  // query t of a request sees keys 0 .. prompt + t
  int64_t prompt;
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const { return kj <= prompt + qi; }
};

// The rest of the layer for row t of a request's attention output a_hm [head][rows][128] (double):
// a rounded to BF16 as the kernel's output is; h = relu(a W_up^T) rounded to BF16 as the step
// stores it; y = h W_down^T.
inline void reference_layer_row(const Serving& w, const bench::HostData& h,
                                const std::vector<double>& a_hm, int64_t rows, int64_t t,
                                std::span<double> y) {
  const auto w_up = h.input<bf16>("w_up"), w_down = h.input<bf16>("w_down");
  std::vector<double> a(size_t(w.dim)), hid(size_t(w.ffn));
  for (int64_t hd = 0; hd < w.heads; ++hd)
    for (int d = 0; d < kHeadDim; ++d)
      a[size_t(hd * kHeadDim + d)] =
          __bfloat162float(__float2bfloat16(float(a_hm[size_t((hd * rows + t) * kHeadDim + d)])));
  for (int64_t f = 0; f < w.ffn; ++f) {
    double sum = 0;
    for (int64_t d = 0; d < w.dim; ++d)
      sum += double(__bfloat162float(w_up[size_t(f * w.dim + d)])) * a[size_t(d)];
    hid[size_t(f)] = __bfloat162float(__float2bfloat16(float(std::max(sum, 0.0))));
  }
  for (int64_t d = 0; d < w.dim; ++d) {
    double sum = 0;
    for (int64_t f = 0; f < w.ffn; ++f)
      sum += double(__bfloat162float(w_down[size_t(d * w.ffn + f)])) * hid[size_t(f)];
    y[size_t(d)] = sum;
  }
}

// The CPU reference in double, from the sources (no cache, no schedule): attention per request
// and head, then the layer's rest per token (reference_layer_row).
inline void reference(const Serving& w, bench::HostData& h) {
  const auto q = h.input<bf16>("q"), k = h.input<bf16>("k_src"), v = h.input<bf16>("v_src");
  const auto y = h.expected("y"), context = h.expected("context");
  std::vector<double> a_hm;
  for (size_t r = 0; r < w.trace.requests.size(); ++r) {
    const Request req = w.trace.requests[r];
    const int64_t tok0 = w.trace.token_start[r], row0 = w.trace.kv_start[r];
    a_hm.assign(size_t(w.heads * req.output * kHeadDim), 0.0);  // [head][t][128]
    kernels::reference_attention(q.subspan(size_t(tok0 * w.dim), size_t(req.output * w.dim)),
                                 k.subspan(size_t(row0 * w.dim), size_t(req.length() * w.dim)),
                                 v.subspan(size_t(row0 * w.dim), size_t(req.length() * w.dim)),
                                 std::span<double>(a_hm), w.heads, req.output, req.length(),
                                 SeesPrompt{req.prompt});
    for (int t = 0; t < req.output; ++t) {
      const int64_t token = tok0 + t;
      reference_layer_row(w, h, a_hm, req.output, t,
                          y.subspan(size_t(token * w.dim), size_t(w.dim)));
      context[size_t(token)] = req.prompt + t + 1;
    }
  }
}

// [head][t][128] per request -> [token][head x 128].
static __global__ void heads_to_rows(const bf16* hm, bf16* rows, int64_t heads, int64_t outputs) {
  const int64_t t = blockIdx.x, head = blockIdx.y;
  rows[(t * heads + head) * kHeadDim + threadIdx.x] =
      hm[(head * outputs + t) * kHeadDim + threadIdx.x];
}

// y [rows][dim] = relu(a W_up^T) W_down^T with the reference GEMMs; hid holds rows x ffn. h
// [row][ffn] = a W_up^T: TN with W_up as A (ffn x dim, row-major) and a as B (dim x rows).
inline void device_reference_mlp(const Serving& w, const bf16* a, bf16* hid, bf16* y, int64_t rows,
                                 cudaStream_t stream) {
  kernels::reference_gemm_tn(w.w_up.data(), a, hid, w.ffn, rows, w.dim, stream);
  relu_bf16<<<1024, kThreads, 0, stream>>>(hid, rows * w.ffn);
  BENCH_CHECK_LAUNCH();
  kernels::reference_gemm_tn(w.w_down.data(), hid, y, w.dim, rows, w.ffn, stream);
}

// At the timing size, the same on the GPU with plain kernels: reference attention per request
// straight from the sources, then the reference GEMMs over every token at once.
inline void device_reference(const Serving& w, cudaStream_t stream) {
  bench::DeviceBuffer<bf16> a_hm(w.trace.tokens * w.dim), a(w.trace.tokens * w.dim),
      hid(w.trace.tokens * w.ffn);
  kernels::ReferenceAttentionScratch scratch;  // the split form's partials, for every request
  for (size_t r = 0; r < w.trace.requests.size(); ++r) {
    const Request req = w.trace.requests[r];
    const int64_t tok = w.trace.token_start[r] * w.dim, row = w.trace.kv_start[r] * w.dim;
    kernels::reference_attention(w.q.data() + tok, w.k_src.data() + row, w.v_src.data() + row,
                                 a_hm.data() + tok, w.heads, req.output, req.length(),
                                 SeesPrompt{req.prompt}, stream, scratch);
    heads_to_rows<<<dim3(unsigned(req.output), unsigned(w.heads)), kHeadDim, 0, stream>>>(
        a_hm.data() + tok, a.data() + tok, w.heads, req.output);
    BENCH_CHECK_LAUNCH();
  }
  device_reference_mlp(w, a.data(), hid.data(), w.y.data(), w.trace.tokens, stream);
  std::vector<int> context;
  for (const Request& req : w.trace.requests)
    for (int t = 0; t < req.output; ++t) context.push_back(req.prompt + t + 1);
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.context.data(), context.data(), context.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch and the host vector go
}

}  // namespace ch15
