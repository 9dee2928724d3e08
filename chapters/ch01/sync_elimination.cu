// ch01/sync_elimination: a step loop that stops the GPU every step → the same steps queued
// back to back, with one synchronisation at the end.
//
// Each of `steps` steps uploads its batch from the host (1 MiB), updates a 64 MiB state with it
// (x = 3/4 x + 1/4 batch) and computes a statistic of the new state (its mean square: the "loss"
// a training loop logs). The host wants every step's loss.
//   1. baseline: as first versions are written: the batch sits in ordinary (pageable) memory and
//      goes up with cudaMemcpy, and after the step the loss comes back with cudaMemcpy and a
//      cudaDeviceSynchronize so the host can log it. Every step the GPU drains and waits for the
//      host: the pageable copy stages through the driver's bounce buffer on the CPU, the read-back
//      is a round trip, and the next step's launches start only after it;
//   2. optimized: the batches sit in pinned memory (allocated and filled once, reused every
//      call), each goes up with cudaMemcpyAsync on the stream; every step writes its loss into a
//      device array, which comes back in one cudaMemcpyAsync at the end, followed by the one
//      synchronisation the host needs to read the log. Stream order alone keeps the steps in
//      sequence, so the GPU runs the whole loop without gaps.
// Same batches, same kernels, same state and losses (both checked); both variants end with every
// loss in host memory. Timed with a host clock (Mode::host): the baseline's cost is host work
// (staging copies, round trips) that device events would not see; it is host_bound, and the
// optimized side, whose time is the GPU's, scores the pair.
//
//   ./bench compare --chapter ch01 --example sync_elimination
#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_rows.cuh>
#include <vector>

namespace {

constexpr int kBlock = 256;
constexpr int kLossBlocks = 1056;  // 8 blocks per SM of an H100: enough loads in flight for HBM

struct StepLoop {
  int64_t n, batch, steps;
  bench::DeviceSpan<const float> x0;
  bench::DeviceSpan<float> x, loss;
  bench::DeviceBuffer<float> batch_on_device, partials;
  bench::DeviceBuffer<double> reference_partials;  // the device reference's: steps x its blocks
  explicit StepLoop(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 24, 100'003)),
        batch(s.size("batch", int64_t{1} << 18, 4099)),
        steps(s.size("steps", 32, 5)),
        x0(s.input<float>("x0", n, bench::uniform(-1, 1))),
        x(s.output<float>("x", n)),
        loss(s.output<float>("loss", steps)),
        batch_on_device(batch),
        partials(kLossBlocks),
        reference_partials(steps * ((n + kernels::kReferenceRowBlock - 1) / kernels::kReferenceRowBlock)) {
    // Per step: the batch up, the state read and written; the first copy of x0 into x.
    s.bytes(double(steps) * (batch + 2.0 * n) * sizeof(float) + 2.0 * n * sizeof(float));
  }
};

// The host's batch for a step: small integers over 8, exact in float, different every step.
__host__ __device__ float batch_value(int64_t step, int64_t j) {
  const uint64_t h = static_cast<uint64_t>(step * 1'000'003 + j) * 2654435761u;
  return static_cast<float>(static_cast<int>((h >> 9) & 0xFF) - 128) * 0.125f;
}
void fill_batches(float* host, const StepLoop& w) {
  for (int64_t step = 0; step < w.steps; ++step)
    for (int64_t j = 0; j < w.batch; ++j) host[step * w.batch + j] = batch_value(step, j);
}

// x = 3/4 x + 1/4 batch[i mod batch]; each block also sums x^2 over its elements.
__global__ void update(float* __restrict__ x, const float* __restrict__ batch, int64_t n,
                       int64_t batch_n, float* __restrict__ partials) {
  float sum = 0;
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * kBlock) {
    const float v = fmaf(0.75f, x[i], 0.25f * batch[i % batch_n]);
    x[i] = v;
    sum = fmaf(v, v, sum);
  }
  sum = kernels::group_reduce<kBlock>(sum, kernels::Sum{});
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block folds the partial sums, each thread a fixed stride of them: the same order every run.
__global__ void finish_loss(const float* __restrict__ partials, float* __restrict__ loss,
                            int64_t n) {
  float sum = 0;
  for (int b = threadIdx.x; b < kLossBlocks; b += kBlock) sum += partials[b];
  sum = kernels::group_reduce<kBlock>(sum, kernels::Sum{});
  if (threadIdx.x == 0) *loss = sum / static_cast<float>(n);
}

// One step on `stream`, after its batch is on the device.
void run_step(const StepLoop& w, int64_t step, cudaStream_t stream) {
  update<<<kLossBlocks, kBlock, 0, stream>>>(w.x.data(), w.batch_on_device.data(), w.n, w.batch,
                                             w.partials.data());
  BENCH_CHECK_LAUNCH();
  finish_loss<<<1, kBlock, 0, stream>>>(w.partials.data(), w.loss.data() + step, w.n);
  BENCH_CHECK_LAUNCH();
}

class SyncEveryStep {
 public:
  SyncEveryStep(const StepLoop& w, cudaStream_t)
      : batches_(static_cast<size_t>(w.steps * w.batch)), log_(static_cast<size_t>(w.steps)) {
    fill_batches(batches_.data(), w);
  }
  void operator()(const StepLoop& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(
        cudaMemcpyAsync(w.x.data(), w.x0.data(), w.x.bytes(), cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    for (int64_t step = 0; step < w.steps; ++step) {
      BENCH_CUDA_CHECK(cudaMemcpy(w.batch_on_device.data(), batches_.data() + step * w.batch,
                                  w.batch_on_device.bytes(), cudaMemcpyHostToDevice));
      run_step(w, step, stream);
      BENCH_CUDA_CHECK(cudaDeviceSynchronize());
      BENCH_CUDA_CHECK(
          cudaMemcpy(&log_[step], w.loss.data() + step, sizeof(float), cudaMemcpyDeviceToHost));
    }
  }

 private:
  std::vector<float> batches_, log_;  // pageable
};

class StreamOrdered {
 public:
  StreamOrdered(const StepLoop& w, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaMallocHost(&batches_, sizeof(float) * w.steps * w.batch));
    BENCH_CUDA_CHECK(cudaMallocHost(&log_, sizeof(float) * w.steps));
    fill_batches(batches_, w);
  }
  StreamOrdered(const StreamOrdered&) = delete;
  StreamOrdered& operator=(const StreamOrdered&) = delete;
  ~StreamOrdered() {
    cudaFreeHost(batches_);
    cudaFreeHost(log_);
  }
  void operator()(const StepLoop& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(
        cudaMemcpyAsync(w.x.data(), w.x0.data(), w.x.bytes(), cudaMemcpyDeviceToDevice, stream));
    for (int64_t step = 0; step < w.steps; ++step) {
      // The copy waits, in stream order, for the previous step's update to finish reading the
      // device batch buffer: no host involvement.
      BENCH_CUDA_CHECK(cudaMemcpyAsync(w.batch_on_device.data(), batches_ + step * w.batch,
                                       w.batch_on_device.bytes(), cudaMemcpyHostToDevice, stream));
      run_step(w, step, stream);
    }
    BENCH_CUDA_CHECK(
        cudaMemcpyAsync(log_, w.loss.data(), w.loss.bytes(), cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the one sync: the host reads the log now
  }

 private:
  float* batches_ = nullptr;  // pinned
  float* log_ = nullptr;      // pinned
};

void reference(const StepLoop& w, bench::HostData& h) {
  auto x0 = h.input<float>("x0");
  auto x = h.expected("x");
  auto loss = h.expected("loss");
  std::vector<double> state(x0.begin(), x0.end());
  for (int64_t step = 0; step < w.steps; ++step) {
    double sum = 0;
    for (int64_t i = 0; i < w.n; ++i) {
      state[i] = 0.75 * state[i] + 0.25 * batch_value(step, i % w.batch);
      sum += state[i] * state[i];
    }
    loss[step] = sum / static_cast<double>(w.n);
  }
  for (int64_t i = 0; i < w.n; ++i) x[i] = state[i];
}

// The state is rounded to float once per step (~6e-8 relative each time; each step weighs what
// came before by 3/4, so the errors do not grow); each loss is a float sum, per thread then per
// block, of 2^24 terms: well inside FP32's default relative-L2 bound of 1e-5.
// The timing-size check (docs/validity.md row 2), in double, with no host batches and no copies:
// one thread per element runs its state through every step (batch_value is the batches'
// definition), each block sums its squares per step (kernels/reference_rows.cuh) into its own
// slot, then one block per step folds those slots into the step's loss.
__global__ void reference_steps(const float* x0, float* x, double* partials, int64_t n, int64_t batch, int64_t steps) {
  const int64_t i = blockIdx.x * int64_t{kernels::kReferenceRowBlock} + threadIdx.x;
  double state = i < n ? x0[i] : 0.0;
  for (int64_t step = 0; step < steps; ++step) {
    if (i < n) state = 0.75 * state + 0.25 * batch_value(step, i % batch);
    const double sum = kernels::reference_block_sum(i < n ? state * state : 0.0);  // every thread calls it
    if (threadIdx.x == 0) partials[step * gridDim.x + blockIdx.x] = sum;
  }
  if (i < n) x[i] = static_cast<float>(state);
}

__global__ void reference_losses(const double* partials, float* loss, int64_t blocks, int64_t n) {
  double sum = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += kernels::kReferenceRowBlock) sum += partials[blockIdx.x * blocks + b];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) loss[blockIdx.x] = static_cast<float>(sum / static_cast<double>(n));
}

void device_reference(const StepLoop& w, cudaStream_t stream) {
  const int64_t blocks = (w.n + kernels::kReferenceRowBlock - 1) / kernels::kReferenceRowBlock;
  reference_steps<<<static_cast<unsigned>(blocks), kernels::kReferenceRowBlock, 0, stream>>>(
      w.x0.data(), w.x.data(), w.reference_partials.data(), w.n, w.batch, w.steps);
  BENCH_CHECK_LAUNCH();
  reference_losses<<<static_cast<unsigned>(w.steps), kernels::kReferenceRowBlock, 0, stream>>>(
      w.reference_partials.data(), w.loss.data(), blocks, w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch01, sync_elimination, StepLoop)
    .stateful<SyncEveryStep>(bench::Role::baseline, "pageable_copy_device_sync_per_step",
                             {.blocks_host = true, .host_bound = true})
    .stateful<StreamOrdered>(bench::Role::optimized, "pinned_async_one_sync", {.blocks_host = true})
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace
