// ch04/allreduce_small: summing small FP32 messages on every GPU (32 messages of `kib` KiB per
// GPU, each all-reduced on its own, N >= 2 GPUs), where an all-reduce costs steps and
// synchronisation, not link bandwidth. The messages are what a tensor-parallel decode step sends:
// one small all-reduce after each layer's row-parallel GEMM, back to back.
//
// Lesson: NCCL's ring takes 2(N-1) steps, each a hop to the next GPU and a wait for its data (its
// LL protocol sends a flag with every 4 bytes of data, so a step needs no separate handshake, at
// the price of half the link's bytes), behind a general kernel's setup. Under ~1 MiB that, not
// the links, sets the time. A one-shot all-reduce takes one step: every GPU reads all N inputs
// straight from its peers' memory through peer pointers (NVLink loads; no staging copies, no
// NCCL), sums them and writes its own output. Each GPU then pulls (N-1) x n over its links instead
// of 2(N-1)/N x n, so the one-shot loses once the message is large enough to be bandwidth-bound.
// The message size is therefore the axis `kib` (KiB per message): 16 (the one-shot pays, in the
// busbw sweep), 256 (the size this example timed before it had the axis; the
// one-shot was only just ahead there) and 1024 (where NCCL's ring was ahead); 4 and 64 for
// --sweep. The busbw sweep (metrics, 4 KiB to 1 MiB, the same at every point) shows the curve in
// between.
//
// Why 32 messages a call: one all-reduce of 256 KiB takes a few microseconds, and a timed call
// also forks every GPU's stream, joins them and checks the peers' results (its time on 4 GPUs:
// ch04's README, 'The one-shot rung').
// With one message that fixed part was most of the time and the score was noise (13-37%); with
// 32 the all-reduces are most of it. Every message is its own call on its own slice of the
// buffers, so no variant can merge them into one large (bandwidth-bound) all-reduce unseen.
//
// Why a launching thread per GPU (ch04::LaunchThreads), for every variant alike: a call is N x 32
// launches, and from one host thread they took longer than the GPUs' work (the README's 4-GPU
// figures), so the host's launch rate set the time and its scheduling jitter spread the samples
// past what an expectation may record. With one thread per GPU, as one process per GPU has
// (ch04_mpi), each thread launches 32 and the GPUs' work sets the time: the comparison is then
// between the kernels, not between how many host calls each side makes.
//
// What changes from baseline to optimized:
//   1. baseline (ncclAllReduce): one ncclAllReduce per GPU and message, from that GPU's thread
//      on its own communicator, on 32 blocks (ch04::kBandwidthCtas, as ch04/allreduce's optimized);
//   2. step (ncclAllReduce_own_ctas): the same with NCCL's own block count (PyTorch's default);
//   3. step (one_shot_peer): the one-shot at every size, one kernel per GPU and message: a flag
//      exchange with every peer, then each thread sums 16 bytes of all N inputs in GPU order
//      (every GPU gets the same bits) and writes them, then a second flag exchange. At the 1 MiB
//      point it is the lesson's other half: slower than the ring;
//   4. optimized (size_dispatch): what serving stacks do with both (vLLM's custom all-reduce, for
//      one, is used only below a maximum size, NCCL above it): the one-shot for messages of
//      at most one_shot_max_bytes(N), NCCL on 32 blocks (the baseline's call) above. The
//      threshold depends on the GPU count because the one-shot's extra bytes do: it pulls N/2
//      times the ring's, so at N = 2 it moves exactly what the ring moves and only its single
//      step differs. The thresholds are not a model but the largest sweep size at which the
//      one-shot was ahead of NCCL on 32 blocks:
//        - N >= 3: 256 KiB, from a 4-GPU sweep (the README's figures): the one-shot led at
//          256 KiB and lost at 1 MiB, so the crossover lies between them there, not measured
//          finer, and N = 3 was never measured. The one-shot at 16 and 256 KiB, the baseline
//          itself at 1024 KiB (an honest 1.00x there);
//        - N = 2: the sweep's largest, 1 MiB, from a 2-GPU sweep: the one-shot led at every
//          point, while the 4-GPU threshold had this side call NCCL at 1 MiB and score no
//          speedup beside the faster one-shot step (the README's table).
//      It is per machine (NCCL's latency depends on N and the topology): on another machine read
//      the busbw metrics of one_shot_peer and ncclAllReduce and move it.
// The kernel and its protocol are in one_shot.cuh (ch04_mpi runs the same kernel, one process per
// GPU): two flag exchanges per call between block b of every GPU (st.release.sys stores,
// ld.acquire.sys waits, an epoch per block kept on the GPU), so no GPU reads a peer's input before
// the peer's kernel has started or lets its own be overwritten while a peer still reads it; grids
// of at most one block per SM, so every block is resident; a wait over 5 s traps. Out of place
// only. PeerAllReduce below gives it peer pointers (peer access between every pair).
// Declared bytes: busbw's, 2(N-1)/N x 4n for all messages together, against the `p2p` ceiling, as
// ch04/allreduce. Hot mode: back-to-back calls keep the GPUs fed while the threads launch the
// next. Every GPU is checked, every message.
//
//   ./bench compare --chapter ch04 --example allreduce_small            # kib 16, 256, 1024
//   ./bench compare --chapter ch04 --example allreduce_small --sweep    # and 4, 64
#include <cstdio>

#include "multi_gpu.cuh"
#include "one_shot.cuh"

namespace {

constexpr int kMessages = 32;                      // all-reduces in one timed call
constexpr int64_t kSweepBytes = int64_t{1} << 20;  // the sweep's largest message
// size_dispatch's threshold: the one-shot up to here, NCCL above. Measured, not derived: the
// largest sweep size at which the one-shot led, on 2 and on 4 GPUs (the README); per machine and
// GPU count (top of file).
int64_t one_shot_max_bytes(size_t gpus) { return gpus == 2 ? kSweepBytes : int64_t{256} << 10; }
static_assert(ch04::one_shot::kMaxGpus == ch04::kMaxGpus, "a one-shot kernel for every GPU count");

// Floats a message at the verification size: 313 (1252 bytes: every fourth message's slice starts
// on 16 bytes and the others do not, so the one-shot's float4 loop and its scalar loop both run),
// or just above one_shot_max_bytes at a point above it, so that size_dispatch verifies there the
// NCCL path it times.
int64_t verification_floats(int64_t timing_floats, size_t gpus) {
  constexpr int64_t kSmall = 313;
  const int64_t max_bytes = one_shot_max_bytes(gpus);
  return timing_floats * int64_t(sizeof(float)) <= max_bytes ? kSmall
                                                             : max_bytes / int64_t(sizeof(float)) + kSmall;
}

struct SmallAllReduce {
  ch04::Sharded io;
  SmallAllReduce(bench::Setup& s, const std::vector<int>& gpus)
      : io(s, gpus, kMessages * message_floats(s, gpus.size()), bench::uniform(-1, 1), "sum") {
    s.bytes(ch04::busbw_factor(gpus.size()) * double(io.n) * sizeof(float), "p2p_gbps");
    s.param("messages", kMessages);
  }
  // Message c is elements [first(c), first(c + 1)) of every GPU's buffers.
  int64_t first(int c) const { return io.n / kMessages * c; }
  explicit SmallAllReduce(bench::Setup& s) : SmallAllReduce(s, ch04::all_gpus()) {}
  static int64_t message_floats(bench::Setup& s, size_t gpus) {
    const int64_t timing = s.axis("kib") * 1024 / int64_t(sizeof(float));
    return s.size("message_floats", timing, verification_floats(timing, gpus));
  }
  void inputs_filled(cudaStream_t s) const { io.refresh(s); }
};

// The one-shot all-reduce over `gpus` (one_shot.cuh): flags on every GPU, peer access between
// every pair.
class PeerAllReduce {
 public:
  explicit PeerAllReduce(const std::vector<int>& gpus) : gpus_(gpus), signals_(gpus, 1, 0) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      int blocks = 0;
      BENCH_CUDA_CHECK(ch04::one_shot::max_blocks(gpus[i], &blocks));
      max_blocks_ = std::min(max_blocks_, blocks);
      for (size_t j = 0; j < gpus.size(); ++j)
        if (j != i) kernels::enable_peer_access(gpus[i], gpus[j]);
      ch04::OnDevice on(gpus[i]);
      BENCH_CUDA_CHECK(cudaMemset(signals_[i], 0, sizeof(ch04::one_shot::Signals)));
      BENCH_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any stream of any GPU uses them
    }
  }
  // GPU `rank`'s part of one all-reduce of `count` floats (in(j), out(j): GPU j's buffers), on
  // `stream`, a stream of that GPU, which is current. Every GPU computes the same grid and the same
  // alignment from the same pointers, so the N kernels of a call pair up block for block.
  template <class In, class Out>
  void launch(size_t rank, cudaStream_t stream, In in, Out out, int64_t count) const {
    ch04::one_shot::Args a{};
    bool aligned = true;
    for (size_t j = 0; j < gpus_.size(); ++j) {
      a.in[j] = in(j);
      a.signals[j] = signals_[j];
      aligned = aligned && reinterpret_cast<uintptr_t>(in(j)) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(out(j)) % 16 == 0;
    }
    const int blocks = ch04::one_shot::plan(a, count, aligned, max_blocks_);
    a.out = out(rank);
    a.rank = int(rank);
    const ch04::one_shot::Kernel kernel = ch04::one_shot::kernel_for(int(gpus_.size()));
    kernel<<<blocks, ch04::one_shot::kThreads, 0, stream>>>(a);
    BENCH_CHECK_LAUNCH();
  }

 private:
  std::vector<int> gpus_;
  ch04::PerGpu<ch04::one_shot::Signals> signals_;  // one Signals on every GPU, GPU 0 included
  int max_blocks_ = ch04::one_shot::kMaxBlocks;
};

// What every variant shares: the timed call (kMessages all-reduces, one per slice of the
// workload's buffers, then the check) and the busbw sweep up to 1 MiB, on buffers of its own on
// every GPU. enqueue_calls(in, out, count, s, calls) enqueues `calls` all-reduces (call c of
// count(c) floats from in(i, c) into out(i, c) on GPU i), each GPU's from a thread of its own
// (ch04::LaunchThreads, forked from `s` and joined back once): the variant's all_reduce(i, stream,
// in, out, count) is GPU i's part of one call. No joins between calls: NCCL orders its calls
// across GPUs, and the one-shot's end exchange keeps call c+1 on any GPU from overwriting what
// call c reads.
template <class Variant>
class Small {
 public:
  Small(const SmallAllReduce& w, cudaStream_t s)
      : w_(w),
        s_(s),
        launch_(w.io.gpus),
        sweep_in_(w.io.gpus, kSweepBytes / 4, 0),
        sweep_out_(w.io.gpus, kSweepBytes / 4, 0) {
    for (size_t i = 0; i < w.io.size(); ++i) {  // the sweep sums numbers, not what was there
      ch04::OnDevice on(w.io.gpus[i]);
      ch04::fill_value<<<64, 256>>>(sweep_in_[i], kSweepBytes / 4, 1.0f);
      BENCH_CHECK_LAUNCH();
      BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void operator()(const SmallAllReduce& w, cudaStream_t s) const {
    enqueue_calls([&](size_t i, int c) { return w.io.input(i) + w.first(c); },
                  [&](size_t i, int c) { return w.io.output(i) + w.first(c); },
                  [&](int c) { return w.first(c + 1) - w.first(c); }, s, kMessages);
    w.io.check(s);
  }
  std::vector<bench::Metric> metrics() const {
    return ch04::busbw_sweep(s_, w_.io.size(), kSweepBytes,
                             [&](int64_t count, cudaStream_t s, int calls) {
                               enqueue_calls([&](size_t i, int) { return sweep_in_[i]; },
                                             [&](size_t i, int) { return sweep_out_[i]; },
                                             [&](int) { return count; }, s, calls);
                             });
  }

 protected:
  // An error on one GPU's thread leaves the others' calls enqueued without it: every thread has
  // returned when launch_ throws, and the variant's abandon() stops what would otherwise wait for
  // the missing calls forever (and hang the harness's next synchronisation).
  template <class In, class Out, class Count>
  void enqueue_calls(In in, Out out, Count count, cudaStream_t s, int calls) const {
    try {
      launch_(s, [&](size_t i, cudaStream_t stream) {
        for (int c = 0; c < calls; ++c)
          variant().all_reduce(
              i, stream, [&](size_t j) { return in(j, c); }, [&](size_t j) { return out(j, c); },
              int64_t(count(c)));
      });
    } catch (...) {
      variant().abandon();
      throw;
    }
  }
  const Variant& variant() const { return static_cast<const Variant&>(*this); }
  // GPU i's sweep buffers (kSweepBytes each), also what NcclRanks connects on.
  auto sweep_input() const {
    return [this](size_t i) { return static_cast<const float*>(sweep_in_[i]); };
  }
  auto sweep_output() const {
    return [this](size_t i) { return sweep_out_[i]; };
  }
  const SmallAllReduce& w_;
  cudaStream_t s_;
  ch04::LaunchThreads launch_;
  ch04::PerGpu<float> sweep_in_, sweep_out_;
};

// NCCL's all-reduce as the variants below call it: one ncclAllReduce per GPU and call, each GPU's
// from its own thread on its own communicator: NCCL's one-thread-per-GPU pattern, so no
// ncclGroupStart/End (every rank's call is issued, by its own thread).
class NcclRanks {
 public:
  // in(i), out(i): buffers of kSweepBytes on GPU i, for the connecting calls.
  template <class In, class Out>
  NcclRanks(const std::vector<int>& gpus, ch04::CtaRange ctas, In in, Out out)
      : comms_(gpus, ctas) {
    // NCCL connects the ranks on a communicator's first calls, on the host, each rank's call
    // waiting for the others'. Done here, untimed, from one thread in a group (as main did every
    // call), so the threaded calls find the ring connected: a thread blocked there on a peer whose
    // thread had thrown would never return, and run() could not return to abort it.
    for (const int64_t count : {int64_t{1024}, kSweepBytes / 4}) {
      ch04::all_reduce_on(
          comms_, gpus.size(), [](size_t) { return cudaStream_t{}; },  // each GPU's default stream
          in, out, size_t(count), ncclFloat);
    }
    for (const int gpu : gpus) {
      ch04::OnDevice on(gpu);
      BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  template <class In, class Out>
  void launch(size_t i, cudaStream_t stream, In in, Out out, int64_t count) const {
    ch04::check_nccl(
        ncclAllReduce(in(i), out(i), size_t(count), ncclFloat, ncclSum, comms_[i], stream),
        "ncclAllReduce");
  }
  void abort() const { comms_.abort(); }

 private:
  mutable ch04::Communicators comms_;  // mutable: abort() ends it
};

class NcclAllReduce : public Small<NcclAllReduce> {
 public:
  NcclAllReduce(const SmallAllReduce& w, cudaStream_t s, ch04::CtaRange ctas = ch04::kBandwidthCtas)
      : Small(w, s), ring_(w.io.gpus, ctas, sweep_input(), sweep_output()) {}
  template <class In, class Out>
  void all_reduce(size_t i, cudaStream_t stream, In in, Out out, int64_t count) const {
    ring_.launch(i, stream, in, out, count);
  }
  void abandon() const { ring_.abort(); }

 private:
  NcclRanks ring_;
};
struct NcclOwnCtas : NcclAllReduce {
  NcclOwnCtas(const SmallAllReduce& w, cudaStream_t s) : NcclAllReduce(w, s, {}) {}
};

class OneShot : public Small<OneShot> {
 public:
  OneShot(const SmallAllReduce& w, cudaStream_t s) : Small(w, s), reduce_(w.io.gpus) {}
  template <class In, class Out>
  void all_reduce(size_t i, cudaStream_t stream, In in, Out out, int64_t count) const {
    reduce_.launch(i, stream, in, out, count);
  }
  // Nothing to stop: a kernel whose peers' kernels never came traps after 5 s (one_shot.cuh), an
  // error that ends the case (and the CUDA context) rather than a hang.
  void abandon() const {}

 private:
  PeerAllReduce reduce_;
};

// The one-shot for messages of at most one_shot_max_bytes(N), the baseline's NCCL call above: the
// choice depends on the message's size alone, the same on every GPU, so the N GPUs' parts of a
// call always pair up (all one-shot kernels, or all NCCL calls of one communicator). A point
// verifies the side of the threshold it times (verification_floats).
class SizeDispatch : public Small<SizeDispatch> {
 public:
  SizeDispatch(const SmallAllReduce& w, cudaStream_t s)
      : Small(w, s),
        one_shot_(w.io.gpus),
        ring_(w.io.gpus, ch04::kBandwidthCtas, sweep_input(), sweep_output()),
        max_bytes_(one_shot_max_bytes(w.io.gpus.size())) {}
  template <class In, class Out>
  void all_reduce(size_t i, cudaStream_t stream, In in, Out out, int64_t count) const {
    if (count * int64_t(sizeof(float)) <= max_bytes_)
      one_shot_.launch(i, stream, in, out, count);
    else
      ring_.launch(i, stream, in, out, count);
  }
  void abandon() const { ring_.abort(); }  // the one-shot's kernels trap on their own

 private:
  PeerAllReduce one_shot_;
  NcclRanks ring_;
  int64_t max_bytes_;  // one_shot_max_bytes for this call's GPU count
};

void reference(const SmallAllReduce& w, bench::HostData& h) { w.io.expect_sum(h, "sum"); }
void device_reference(const SmallAllReduce& w, cudaStream_t s) { w.io.device_expect_sum(s); }

// As ch04/allreduce: N <= 8 terms in [-1, 1] summed in FP32 in any order, and the device
// reference's rounding: |error| <= N^2 2^-24.
BENCH_EXAMPLE(ch04, allreduce_small, SmallAllReduce)
    .int_axis("kib", {4, 16, 64, 256, 1024}, /*defaults=*/{16, 256, 1024})
    .stateful<NcclAllReduce>(bench::Role::baseline, "ncclAllReduce")
    .stateful<NcclOwnCtas>(bench::Role::step, "ncclAllReduce_own_ctas")
    .stateful<OneShot>(bench::Role::step, "one_shot_peer")
    .stateful<SizeDispatch>(bench::Role::optimized, "size_dispatch")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(ch04::kAllReduceTolerance, 0))
    .mode(bench::Mode::hot)
    .min_gpus(2);

}  // namespace
