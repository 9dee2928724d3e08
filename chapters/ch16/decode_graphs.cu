// ch16/decode_graphs: one decode step of a decoder layer, launched kernel by kernel (eager) → one
// CUDA graph per batch-size bucket, captured once and replayed every step.
//
// ch12/cuda_graphs teaches the mechanism on a chain of 256 identical toy kernels. This is the
// form an inference server ships: a real layer's mix of cuBLAS GEMMs and its own kernels, one
// graph per batch bucket (a graph is shape-specialised: the server pads a step's batch up to the
// next captured bucket), and a KV length that changes every step although the graph never does.
// The layer (TinyLlama-1.1B's sizes: hidden 2048 = 16 heads of 128, SwiGLU MLP 5632, no GQA), 9
// launches per step (cuBLAS may add a split-K reduction kernel to a GEMM: the same on both sides):
//   rmsnorm → QKV GEMM → decode attention over the KV cache + the new token → O GEMM →
//   residual add + rmsnorm → gate|up GEMM → silu(gate)·up → down GEMM → residual add.
// Its weights are 103 MB (read once per step from HBM: ~35 µs at 3 TB/s), and at batch 1 most
// kernels run for a few µs, about what the host needs to launch one (cuBLAS's host path more):
// eager, the GPU waits on the host between kernels; a graph is one submission, and its kernels
// follow one another at the graph-node gap (~1 µs) instead. The bigger the batch, the longer
// attention and the GEMMs run, and the less there is to gain: the axis `batch` (the bucket: 1, 8
// and 32 by default, 2, 4 and 16 too with --sweep) shows the trend.
//
// What changes from baseline to optimized (the same kernels, the same cuBLAS calls, the same
// cuBLAS workspace, in the same order):
//   1. baseline: 9 launches from the host per step (host-bound: scored by the graph's time,
//      docs/expectations.md);
//   2. optimized: those 9 launches captured once per bucket in untimed setup from a private
//      stream, instantiated and uploaded; a step is one cudaGraphLaunch. The KV lengths live in
//      device memory and the kernels read them, so a step with other lengths (every sample here:
//      the harness refills them) replays the same graph with no update. (Passing lengths as
//      kernel arguments would need cudaGraphExecKernelNodeSetParams each step: ch12/graph_update.)
// Metrics: per_token_us (one step's time, the latency this layer adds to every sequence's next
// token, over 200 back-to-back steps) and tokens_per_s (batch / step time).
// Not modelled: rotary embeddings, writing the new K and V into the cache (ch13/kv_cache_growth),
// sampling. Timed hot (back-to-back steps), as ch12: cold sampling would hide the host's share.
//
// Verification (batch 3, 2 heads (hidden 256), MLP 704, KV up to 97 cached tokens): the
// attention output and the layer's output against an FP64 CPU layer, relative L2 1e-2: each
// output passes through a few BF16 roundings (2^-9 relative each) on the way, ~3e-3 in all.
// Timed samples (at the timing size the CPU layer would take seconds a check): against a device
// reference, the same layer in FP32 with plain kernels of its own, kernels/reference_rows.cuh's row
// norm and kernels/reference_gemm.cuh's GEMM, held to the CPU layer at the verification size.
//
//   ./bench compare --chapter ch16 --example decode_graphs           # batch 1, 8, 32
//   ./bench compare --chapter ch16 --example decode_graphs --sweep   # every bucket, the curve
#include <bench/bench.hpp>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <kernels/cublas_check.hpp>
#include <kernels/cuda_graph.hpp>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_gemm.cuh>
#include <kernels/reference_rows.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
constexpr int kHeadDim = 128, kThreads = 256, kWarps = kThreads / 32;
constexpr float kEps = 1e-5f;

// The device reference's own buffers (device_reference below), FP32, allocated untimed with the
// workload; the variants never touch them. `weight` holds one weight matrix at a time, widened.
struct ReferenceScratch {
  bench::DeviceBuffer<float> weight, xn, qkv, scores, attn, o, resid, hn, gate_up, act, down;
  ReferenceScratch(int64_t batch, int64_t heads, int64_t hidden, int64_t ffn, int64_t max_kv)
      : weight(std::max(3 * hidden * hidden, 2 * ffn * hidden)),  // the largest: w_qkv or w_gate_up
        xn(batch * hidden),
        qkv(batch * 3 * hidden),
        scores(batch * heads * max_kv),
        attn(batch * hidden),
        o(batch * hidden),
        resid(batch * hidden),
        hn(batch * hidden),
        gate_up(batch * 2 * ffn),
        act(batch * ffn),
        down(batch * hidden) {}
};

struct DecodeStep {
  int64_t batch, heads, hidden, ffn, max_kv;
  bench::DeviceSpan<const bf16> x, norm1, norm2, w_qkv, w_o, w_gate_up, w_down, k_cache, v_cache;
  bench::DeviceSpan<const int32_t> kv_len;  // cached tokens per sequence, in device memory
  bench::DeviceSpan<bf16> attn, y;          // outputs: attention (before O) and the layer's
  bench::DeviceBuffer<bf16> xn, qkv, h, hn, gate_up, act, o, down;  // intermediates
  ReferenceScratch ref;
  // Weights uniform(-a, a), a = √(3 / fan-in): unit-scale outputs for unit-scale inputs.
  int64_t min_kv_len() const { return std::max<int64_t>(1, max_kv / 8); }  // timing: 128..1023 cached
  static bench::Fill fan_in(int64_t k) { return bench::uniform(-std::sqrt(3.0 / k), std::sqrt(3.0 / k)); }
  explicit DecodeStep(bench::Setup& s)
      : batch(s.size("batch", s.axis("batch"), 3)), heads(s.size("heads", 16, 2)), hidden(heads * kHeadDim),
        ffn(s.size("ffn", 5632, 704)), max_kv(s.size("max_kv", 1024, 97)),
        x(s.input<bf16>("x", batch * hidden, bench::normal(0, 1))),
        norm1(s.input<bf16>("norm1", hidden, bench::uniform(0.5, 1.5))),
        norm2(s.input<bf16>("norm2", hidden, bench::uniform(0.5, 1.5))),
        w_qkv(s.input<bf16>("w_qkv", 3 * hidden * hidden, fan_in(hidden))),
        w_o(s.input<bf16>("w_o", hidden * hidden, fan_in(hidden))),
        w_gate_up(s.input<bf16>("w_gate_up", 2 * ffn * hidden, fan_in(hidden))),
        w_down(s.input<bf16>("w_down", hidden * ffn, fan_in(ffn))),
        k_cache(s.input<bf16>("k_cache", batch * max_kv * hidden, bench::normal(0, 1))),
        v_cache(s.input<bf16>("v_cache", batch * max_kv * hidden, bench::normal(0, 1))),
        kv_len(s.input<int32_t>("kv_len", batch, bench::integers(min_kv_len(), max_kv - 1))),
        attn(s.output<bf16>("attn", batch * hidden)), y(s.output<bf16>("y", batch * hidden)),
        xn(batch * hidden), qkv(batch * 3 * hidden), h(batch * hidden), hn(batch * hidden),
        gate_up(batch * 2 * ffn), act(batch * ffn), o(batch * hidden), down(batch * hidden),
        ref(batch, heads, hidden, ffn, max_kv) {
    // The fewest bytes a step must move: every weight once and the cached K and V it attends over,
    // at the lengths' mean (they are uniform in [lo, hi], redrawn every sample); activations are
    // a few hundred KB. b1: 103 MB; b32: 103 + 151 MB.
    const double weights = (4.0 * hidden * hidden + 3.0 * ffn * hidden) * sizeof(bf16);
    const double mean_len = 0.5 * (min_kv_len() + (max_kv - 1));
    s.bytes(weights + 2.0 * batch * mean_len * hidden * sizeof(bf16), bench::ceiling::hbm_read);
    // initcheck does not see cuBLAS's BF16 GEMMs store on Hopper (ch13/mixed_precision has the
    // probe), so it flagged decode_attention's reads of qkv. Zeroed once, untimed: every value
    // read is still the GEMM's, and the FP64 reference checks the layer's outputs.
    for (bench::DeviceBuffer<bf16>* gemm_out : {&qkv, &o, &gate_up, &down})
      BENCH_CUDA_CHECK(cudaMemset(gemm_out->data(), 0, gemm_out->bytes()));
  }
};

// ---- the layer's own kernels ---------------------------------------------------------------
// normed = rmsnorm(a + b) * gain, one block per row; b may be null, and `sum` (if not null) keeps
// a + b (the residual stream).
__global__ void __launch_bounds__(kThreads) add_rmsnorm(const bf16* a, const bf16* b, const bf16* gain, bf16* sum,
                                                        bf16* normed, int hidden) {
  const int64_t row = int64_t{blockIdx.x} * hidden;
  float sq = 0;
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = __bfloat162float(a[row + i]) + (b ? __bfloat162float(b[row + i]) : 0.0f);
    if (sum) sum[row + i] = __float2bfloat16(v);
    sq += v * v;
  }
  const float inv_rms = rsqrtf(kernels::group_reduce<kThreads>(sq, kernels::Sum{}) / hidden + kEps);
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = __bfloat162float(a[row + i]) + (b ? __bfloat162float(b[row + i]) : 0.0f);
    normed[row + i] = __float2bfloat16(v * inv_rms * __bfloat162float(gain[i]));
  }
}

// Four BF16 values (8 bytes) → floats.
__device__ __forceinline__ void load4(const bf16* p, float (&out)[4]) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  out[0] = __uint_as_float(v.x << 16), out[1] = __uint_as_float(v.x & 0xffff0000u);
  out[2] = __uint_as_float(v.y << 16), out[3] = __uint_as_float(v.y & 0xffff0000u);
}

// One block per (head, sequence): softmax(q·Kᵀ/√d)·V over the kv_len[b] cached tokens and the
// new token (its k and v are in qkv). Each warp takes 4 positions at a time (their loads in
// flight together), lane l holding dims 4l..4l+3, with its own running max, sum and 4 outputs
// (online softmax); the 8 warps' partials are merged at the end.
constexpr int kPerWarp = 4;
__global__ void __launch_bounds__(kThreads) decode_attention(const bf16* qkv, const bf16* k_cache, const bf16* v_cache,
                                                             const int32_t* kv_len, bf16* out, int heads, int max_kv) {
  const int head = blockIdx.x, b = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hidden = heads * kHeadDim, cached = kv_len[b], n = cached + 1;
  const bf16* token = qkv + int64_t{b} * 3 * hidden + head * kHeadDim + 4 * lane;  // q; + hidden: k, + 2 hidden: v
  const int64_t row0 = (int64_t{b} * max_kv * heads + head) * kHeadDim + 4 * lane;  // position j: + j * hidden
  float q[4];
  load4(token, q);
  const float scale = 1.4426950408889634f / sqrtf(float(kHeadDim));  // log2(e) / √d: exp2 below
  for (float& v : q) v *= scale;
  float m = -INFINITY, l = 0, acc[4] = {0, 0, 0, 0};
  for (int j0 = warp * kPerWarp; j0 < n; j0 += kWarps * kPerWarp) {
    float k[kPerWarp][4], v[kPerWarp][4], s[kPerWarp];
#pragma unroll
    for (int p = 0; p < kPerWarp; ++p) {
      const int j = min(j0 + p, n - 1);  // past the end: a valid row, masked below
      load4(j < cached ? k_cache + row0 + int64_t{j} * hidden : token + hidden, k[p]);
      load4(j < cached ? v_cache + row0 + int64_t{j} * hidden : token + 2 * hidden, v[p]);
    }
    float chunk_max = -INFINITY;
#pragma unroll
    for (int p = 0; p < kPerWarp; ++p) {
      const float dot = kernels::warp_reduce(q[0] * k[p][0] + q[1] * k[p][1] + q[2] * k[p][2] + q[3] * k[p][3],
                                             kernels::Sum{});
      s[p] = j0 + p < n ? dot : -INFINITY;
      chunk_max = fmaxf(chunk_max, s[p]);
    }
    const float m_new = fmaxf(m, chunk_max), rescale = exp2f(m - m_new);  // exp2f(-inf) = 0
    l *= rescale;
    for (float& a : acc) a *= rescale;
#pragma unroll
    for (int p = 0; p < kPerWarp; ++p) {
      const float w = exp2f(s[p] - m_new);
      l += w;
#pragma unroll
      for (int d = 0; d < 4; ++d) acc[d] += w * v[p][d];
    }
    m = m_new;
  }
  __shared__ float warp_m[kWarps], warp_l[kWarps], warp_acc[kWarps][kHeadDim];
  if (lane == 0) warp_m[warp] = m, warp_l[warp] = l;
  for (int d = 0; d < 4; ++d) warp_acc[warp][4 * lane + d] = acc[d];
  __syncthreads();
  if (threadIdx.x < kHeadDim) {  // warp 0 always saw position 0, so the max is finite
    float m_all = -INFINITY, l_all = 0, o = 0;
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(warp_m[w] - m_all);  // 0 for a warp that saw no position
      l_all += warp_l[w] * f;
      o += warp_acc[w][threadIdx.x] * f;
    }
    out[int64_t{b} * hidden + head * kHeadDim + threadIdx.x] = __float2bfloat16(o / l_all);
  }
}

__global__ void silu_mul(const bf16* gate_up, bf16* act, int64_t rows, int ffn) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * ffn; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / ffn, c = i % ffn;
    const float g = __bfloat162float(gate_up[r * 2 * ffn + c]), u = __bfloat162float(gate_up[r * 2 * ffn + ffn + c]);
    act[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void add(const bf16* a, const bf16* b, bf16* sum, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    sum[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 1024)); }

// ---- the step: the same enqueue for both variants -------------------------------------------
// cuBLAS with a workspace of our own (set once), so that capture allocates nothing and both
// variants run the same GEMM kernels.
class Layer {
 public:
  Layer() : workspace_(kWorkspaceBytes) {
    kernels::check_cublas(cublasCreate(&handle_), "cublasCreate");
    kernels::check_cublas(cublasSetWorkspace(handle_, workspace_.data(), kWorkspaceBytes), "cublasSetWorkspace");
  }
  ~Layer() { cublasDestroy(handle_); }
  // After capture: the capture stream is about to go, so cuBLAS must not keep it.
  void detach_stream() const { kernels::check_cublas(cublasSetStream(handle_, nullptr), "cublasSetStream"); }
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  template <class W>
  void enqueue(const W& w, cudaStream_t s) const {
    kernels::check_cublas(cublasSetStream(handle_, s), "cublasSetStream");
    const int rows = int(w.batch), hidden = int(w.hidden), ffn = int(w.ffn);
    add_rmsnorm<<<rows, kThreads, 0, s>>>(w.x.data(), nullptr, w.norm1.data(), nullptr, w.xn.data(), hidden);
    BENCH_CHECK_LAUNCH();
    linear(w.xn.data(), w.w_qkv.data(), w.qkv.data(), rows, 3 * hidden, hidden);
    decode_attention<<<dim3(unsigned(w.heads), unsigned(rows)), kThreads, 0, s>>>(
        w.qkv.data(), w.k_cache.data(), w.v_cache.data(), w.kv_len.data(), w.attn.data(), int(w.heads), int(w.max_kv));
    BENCH_CHECK_LAUNCH();
    linear(w.attn.data(), w.w_o.data(), w.o.data(), rows, hidden, hidden);
    add_rmsnorm<<<rows, kThreads, 0, s>>>(w.x.data(), w.o.data(), w.norm2.data(), w.h.data(), w.hn.data(), hidden);
    BENCH_CHECK_LAUNCH();
    linear(w.hn.data(), w.w_gate_up.data(), w.gate_up.data(), rows, 2 * ffn, hidden);
    silu_mul<<<blocks_for(int64_t{rows} * ffn), kThreads, 0, s>>>(w.gate_up.data(), w.act.data(), rows, ffn);
    BENCH_CHECK_LAUNCH();
    linear(w.act.data(), w.w_down.data(), w.down.data(), rows, hidden, ffn);
    add<<<blocks_for(int64_t{rows} * hidden), kThreads, 0, s>>>(w.h.data(), w.down.data(), w.y.data(),
                                                                 int64_t{rows} * hidden);
    BENCH_CHECK_LAUNCH();
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  // out [rows][n] = in [rows][k] · weight [n][k]ᵀ: column-major, outᵀ = weightᵀ(T) · inᵀ(N).
  void linear(const bf16* in, const bf16* weight, bf16* out, int rows, int n, int k) const {
    const float one = 1.0f, zero = 0.0f;
    kernels::check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, weight, CUDA_R_16BF, k, in,
                                       CUDA_R_16BF, k, &zero, out, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
                          "cublasGemmEx");
  }
  bench::DeviceBuffer<std::byte> workspace_;
  cublasHandle_t handle_ = nullptr;
};

// Steps timed back to back on a private stream, untimed by the harness: the metrics.
template <class Run>
std::vector<bench::Metric> step_metrics(int64_t batch, Run&& run) {
  constexpr int kSteps = 200;
  kernels::OwnedStream stream;
  cudaEvent_t start = nullptr, stop = nullptr;
  BENCH_CUDA_CHECK(cudaEventCreate(&start));
  BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  run(stream.get());  // warm
  BENCH_CUDA_CHECK(cudaEventRecord(start, stream.get()));
  for (int i = 0; i < kSteps; ++i) run(stream.get());
  BENCH_CUDA_CHECK(cudaEventRecord(stop, stream.get()));
  BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double step_us = 1e3 * ms / kSteps;
  return {{"per_token_us", step_us}, {"tokens_per_s", batch / (step_us * 1e-6)}};
}

template <class W>
class Eager {
 public:
  Eager(const W& w, cudaStream_t) : w_(w) {}
  void operator()(const W& w, cudaStream_t s) const { layer_.enqueue(w, s); }
  std::vector<bench::Metric> metrics() const {
    return step_metrics(w_.batch, [&](cudaStream_t s) { layer_.enqueue(w_, s); });
  }

 private:
  Layer layer_;
  const W& w_;
};

// This bucket's graph: captured from a private stream once, instantiated and uploaded.
template <class W>
class Graphed {
 public:
  Graphed(const W& w, cudaStream_t s) : w_(w) {
    kernels::OwnedStream capture_stream;
    const kernels::Graph graph = kernels::capture(capture_stream.get(), [&](cudaStream_t cs) { layer_.enqueue(w, cs); });
    layer_.detach_stream();
    exec_.instantiate(graph.get());
    exec_.upload(s);
  }
  void operator()(const W&, cudaStream_t s) const { exec_.launch(s); }
  std::vector<bench::Metric> metrics() const {
    return step_metrics(w_.batch, [&](cudaStream_t s) { exec_.launch(s); });
  }

 private:
  Layer layer_;
  kernels::GraphExec exec_;
  const W& w_;
};

// ---- the FP64 CPU layer ---------------------------------------------------------------------
// out [rows][n] = in [rows][k] · weight [n][k]ᵀ
std::vector<double> linear(const std::vector<double>& in, std::span<const bf16> weight, int64_t rows, int64_t n,
                           int64_t k) {
  std::vector<double> out(static_cast<size_t>(rows * n)), w_row(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {  // each weight converted once (b32: 51M of them, the CPU's bulk)
    for (int64_t p = 0; p < k; ++p) w_row[p] = static_cast<float>(weight[j * k + p]);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += in[r * k + p] * w_row[p];
      out[r * n + j] = sum;
    }
  }
  return out;
}

std::vector<double> rmsnorm(const std::vector<double>& in, std::span<const bf16> gain, int64_t rows, int64_t hidden) {
  std::vector<double> out(in.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < hidden; ++i) sq += in[r * hidden + i] * in[r * hidden + i];
    const double inv_rms = 1.0 / std::sqrt(sq / hidden + kEps);
    for (int64_t i = 0; i < hidden; ++i) out[r * hidden + i] = in[r * hidden + i] * inv_rms * static_cast<float>(gain[i]);
  }
  return out;
}

template <class W>
void reference(const W& w, bench::HostData& h) {
  const int64_t rows = w.batch, hidden = w.hidden, ffn = w.ffn;
  auto as_double = [](std::span<const bf16> v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    return out;
  };
  const std::vector<double> x = as_double(h.input<bf16>("x"));
  const auto k_cache = h.input<bf16>("k_cache"), v_cache = h.input<bf16>("v_cache");
  const auto kv_len = h.input<int32_t>("kv_len");
  const std::vector<double> qkv = linear(rmsnorm(x, h.input<bf16>("norm1"), rows, hidden), h.input<bf16>("w_qkv"),
                                         rows, 3 * hidden, hidden);
  std::vector<double> attn(static_cast<size_t>(rows * hidden)), scores;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t head = 0; head < w.heads; ++head) {
      const double* q = &qkv[b * 3 * hidden + head * kHeadDim];
      const int64_t cached = kv_len[b];
      auto key = [&](int64_t j, int64_t d) {  // position j < cached from the cache, then the new token
        return j < cached ? static_cast<double>(static_cast<float>(k_cache[((b * w.max_kv + j) * hidden) + head * kHeadDim + d]))
                          : q[hidden + d];
      };
      auto value = [&](int64_t j, int64_t d) {
        return j < cached ? static_cast<double>(static_cast<float>(v_cache[((b * w.max_kv + j) * hidden) + head * kHeadDim + d]))
                          : q[2 * hidden + d];
      };
      scores.assign(static_cast<size_t>(cached + 1), 0.0);
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j <= cached; ++j) {
        for (int64_t d = 0; d < kHeadDim; ++d) scores[j] += q[d] * key(j, d);
        scores[j] /= std::sqrt(double(kHeadDim));
        top = std::max(top, scores[j]);
      }
      for (double& s : scores) total += (s = std::exp(s - top));
      for (int64_t d = 0; d < kHeadDim; ++d) {
        double o = 0;
        for (int64_t j = 0; j <= cached; ++j) o += scores[j] * value(j, d);
        attn[b * hidden + head * kHeadDim + d] = o / total;
      }
    }
  std::ranges::copy(attn, h.expected("attn").begin());
  const std::vector<double> o = linear(attn, h.input<bf16>("w_o"), rows, hidden, hidden);
  std::vector<double> resid(x.size());
  for (size_t i = 0; i < x.size(); ++i) resid[i] = x[i] + o[i];
  const std::vector<double> gate_up =
      linear(rmsnorm(resid, h.input<bf16>("norm2"), rows, hidden), h.input<bf16>("w_gate_up"), rows, 2 * ffn, hidden);
  std::vector<double> act(static_cast<size_t>(rows * ffn));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ffn; ++c) {
      const double g = gate_up[r * 2 * ffn + c];
      act[r * ffn + c] = g / (1 + std::exp(-g)) * gate_up[r * 2 * ffn + ffn + c];
    }
  const std::vector<double> down = linear(act, h.input<bf16>("w_down"), rows, hidden, ffn);
  auto y = h.expected("y");
  for (size_t i = 0; i < resid.size(); ++i) y[i] = resid[i] + down[i];
}

// ---- the device reference: the CPU layer again, in FP32 on the GPU -------------------------
// Timed samples are checked against it (docs/validity.md row 2): plain kernels of its own and the
// suite's reference row norm (kernels/reference_rows.cuh), no cuBLAS, nothing from the layer
// above. Every intermediate is FP32 in w.ref (the norms' sums of squares double), never rounded to
// BF16: like the CPU layer, only the two outputs are. The
// GEMMs are kernels/reference_gemm.cuh's, whose operands share one type: each weight is widened to
// FP32 (exactly) into w.ref.weight just before its GEMM.
constexpr int kRefThreads = 256;  // elementwise kernels: a thread an element
unsigned reference_blocks(int64_t n) {
  return static_cast<unsigned>((n + kRefThreads - 1) / kRefThreads);
}

__global__ void reference_widen(const bf16* in, float* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

// sum = a + b, rounded to Out (FP32 for the residual stream, BF16 for y).
template <class A, class Out>
__global__ void reference_add(const A* a, const float* b, Out* sum, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) sum[i] = Out(static_cast<float>(a[i]) + b[i]);
}

// The CPU's attention, a block per (head, sequence) and a thread per output dimension d: each
// score a sequential FP32 FMA chain over d, kept in `scores` (max_kv a (sequence, head)); then
// every thread takes the max and the sum of exp(score - max) over all positions in order, and its
// dimension's sum of p · v. (kernels/reference_attention.cuh wants K and V as [head][position][d]
// rows and q in BF16; here they are the cache's rows, the new token's k and v, and an FP32 q.)
__global__ void __launch_bounds__(kHeadDim)
    reference_decode_attention(const float* qkv, const bf16* k_cache, const bf16* v_cache,
                               const int32_t* kv_len, float* scores, float* attn_f32, bf16* attn,
                               int64_t heads, int64_t max_kv) {
  const int64_t head = blockIdx.x, b = blockIdx.y, hidden = heads * kHeadDim, cached = kv_len[b];
  // The sequence's q, then at + hidden the new token's k and at + 2 hidden its v (as the CPU's q).
  const float* q = qkv + b * 3 * hidden + head * kHeadDim;
  auto key = [&](int64_t j, int64_t d) {  // position j < cached from the cache, then the new token
    return j < cached ? __bfloat162float(k_cache[(b * max_kv + j) * hidden + head * kHeadDim + d])
                      : q[hidden + d];
  };
  auto value = [&](int64_t j, int64_t d) {
    return j < cached ? __bfloat162float(v_cache[(b * max_kv + j) * hidden + head * kHeadDim + d])
                      : q[2 * hidden + d];
  };
  float* s = scores + (b * heads + head) * max_kv;
  for (int64_t j = threadIdx.x; j <= cached; j += kHeadDim) {
    float dot = 0;
    for (int64_t d = 0; d < kHeadDim; ++d) dot = fmaf(q[d], key(j, d), dot);
    s[j] = dot / sqrtf(float(kHeadDim));
  }
  __syncthreads();
  float top = -INFINITY;
  for (int64_t j = 0; j <= cached; ++j) top = fmaxf(top, s[j]);
  __syncthreads();  // every thread has the max before a score becomes its exp
  for (int64_t j = threadIdx.x; j <= cached; j += kHeadDim) s[j] = expf(s[j] - top);
  __syncthreads();
  const int64_t d = threadIdx.x;
  float total = 0, o = 0;
#pragma unroll 8  // the value loads in flight together
  for (int64_t j = 0; j <= cached; ++j) {
    total += s[j];
    o = fmaf(s[j], value(j, d), o);
  }
  attn_f32[b * hidden + head * kHeadDim + d] = o / total;
  attn[b * hidden + head * kHeadDim + d] = __float2bfloat16(o / total);
}

// act [rows][ffn] = silu(gate) · up, gate_up's rows holding gate then up.
__global__ void reference_silu_mul(const float* gate_up, float* act, int64_t rows, int64_t ffn) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * ffn) return;
  const int64_t r = i / ffn, c = i % ffn;
  const float g = gate_up[r * 2 * ffn + c];
  act[i] = g / (1 + expf(-g)) * gate_up[r * 2 * ffn + ffn + c];
}

void device_reference(const DecodeStep& w, cudaStream_t s) {
  const ReferenceScratch& r = w.ref;
  const int64_t rows = w.batch, hidden = w.hidden, ffn = w.ffn;
  // out [rows][n] = in [rows][k] · weight [n][k]ᵀ, as the CPU's linear(): the widened weight is the
  // reference GEMM's row-major A (n x k), in its column-major B (k x rows), so its column-major D
  // (n x rows) is out, row-major.
  auto gemm = [&](const float* in, const bf16* weight, float* out, int64_t n, int64_t k) {
    reference_widen<<<reference_blocks(n * k), kRefThreads, 0, s>>>(weight, r.weight.data(), n * k);
    BENCH_CHECK_LAUNCH();
    kernels::reference_gemm_tn(r.weight.data(), in, out, n, rows, k, s);
  };
  // The CPU's rmsnorm: kernels/reference_rows.cuh's row norm without beta.
  kernels::reference_row_norm<<<unsigned(rows), kernels::kReferenceRowBlock, 0, s>>>(
      w.x.data(), w.norm1.data(), static_cast<const bf16*>(nullptr), r.xn.data(), hidden,
      double(kEps));
  BENCH_CHECK_LAUNCH();
  gemm(r.xn.data(), w.w_qkv.data(), r.qkv.data(), 3 * hidden, hidden);
  reference_decode_attention<<<dim3(unsigned(w.heads), unsigned(rows)), kHeadDim, 0, s>>>(
      r.qkv.data(), w.k_cache.data(), w.v_cache.data(), w.kv_len.data(), r.scores.data(),
      r.attn.data(), w.attn.data(), w.heads, w.max_kv);
  BENCH_CHECK_LAUNCH();
  gemm(r.attn.data(), w.w_o.data(), r.o.data(), hidden, hidden);
  reference_add<<<reference_blocks(rows * hidden), kRefThreads, 0, s>>>(
      w.x.data(), r.o.data(), r.resid.data(), rows * hidden);
  BENCH_CHECK_LAUNCH();
  // The CPU's rmsnorm: kernels/reference_rows.cuh's row norm without beta.
  kernels::reference_row_norm<<<unsigned(rows), kernels::kReferenceRowBlock, 0, s>>>(
      r.resid.data(), w.norm2.data(), static_cast<const bf16*>(nullptr), r.hn.data(), hidden,
      double(kEps));
  BENCH_CHECK_LAUNCH();
  gemm(r.hn.data(), w.w_gate_up.data(), r.gate_up.data(), 2 * ffn, hidden);
  reference_silu_mul<<<reference_blocks(rows * ffn), kRefThreads, 0, s>>>(r.gate_up.data(),
                                                                          r.act.data(), rows, ffn);
  BENCH_CHECK_LAUNCH();
  gemm(r.act.data(), w.w_down.data(), r.down.data(), hidden, ffn);
  reference_add<<<reference_blocks(rows * hidden), kRefThreads, 0, s>>>(
      r.resid.data(), r.down.data(), w.y.data(), rows * hidden);
  BENCH_CHECK_LAUNCH();
}

// The axis `batch` is the bucket: a graph is captured for one shape, so each bucket has its own.
BENCH_EXAMPLE(ch16, decode_graphs, DecodeStep)
    .int_axis("batch", {1, 2, 4, 8, 16, 32}, /*defaults=*/{1, 8, 32})
    .stateful<Eager<DecodeStep>>(bench::Role::baseline, "eager_9_launches", {.host_bound = true})
    .stateful<Graphed<DecodeStep>>(bench::Role::optimized, "one_graph_per_bucket")
    .reference(reference<DecodeStep>)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(1e-2))
    .mode(bench::Mode::hot);

}  // namespace
