// ch12/work_queue: items of very uneven cost processed by persistent blocks (one 1024-thread
// block per SM), first with a static partition, then by pulling items from an atomic queue.
//
// Item i is 1024 elements, each run through a chain of len[i] * ramp(i) * 8 dependent FMAs:
// len[i] is a random integer in [1, 64] and ramp(i) grows from 1 to 8 along the items, as in
// work sorted by size (rows of a triangular matrix, requests ordered by length).
//   1. baseline: block b takes the contiguous items [b N / G, (b+1) N / G). The last blocks
//      hold ~8x the work of the first, so the run lasts as long as the heaviest block while
//      most SMs sit idle at the end (about 1.8x the balanced time);
//   2. optimized: the same persistent grid; each block takes its next item from a global
//      counter (one atomicAdd per item, broadcast through shared memory), so blocks that drew
//      cheap items simply take more. Items are handed out from the costly end, so the last
//      ones taken (the tail) are the cheapest. The counter is reset by a 4-byte memset on the
//      case's stream before the kernel.
// Same items, same per-item code, same results; only who processes which item changes.
//
//   ./bench compare --chapter ch12 --example work_queue
#include <bench/bench.hpp>
#include <kernels/dependent_fma.cuh>
#include <kernels/occupancy.cuh>

namespace {

constexpr int kItem = 1024;  // elements per item = threads per block
constexpr int kUnit = 8;     // FMAs per unit of cost
constexpr int kRamp = 8;     // cost multiplier 1 + kRamp i / N: from 1 (first item) to 8 (last)

// What the kernels see: plain pointers, passed by value.
struct ItemsView {
  int64_t items;
  const int32_t* len;
  const float* in;
  float* out;
  unsigned* next;
};

struct Items {
  int64_t items;
  int blocks;  // persistent grid: one block per SM
  bench::DeviceSpan<const int32_t> len;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  bench::DeviceBuffer<unsigned> next{1};  // the queue's head
  explicit Items(bench::Setup& s)
      : items(s.size("items", 4096, 301)),
        blocks(kernels::sm_count()),
        len(s.input<int32_t>("len", items, bench::integers(1, 64))),
        in(s.input<float>("in", items * kItem, bench::uniform(-1, 1))),
        out(s.output<float>("out", items * kItem)) {
    s.param("unit", kUnit);
    s.param("ramp", kRamp);
  }
  ItemsView view() const { return {items, len.data(), in.data(), out.data(), next.data()}; }
};

__host__ __device__ inline int item_iters(int len, int64_t item, int64_t items) {
  return static_cast<int>(len * (1 + kRamp * item / items) * kUnit);
}

__device__ void process(const ItemsView& w, int64_t item) {
  const int64_t i = item * kItem + threadIdx.x;
  w.out[i] = kernels::dependent_fma_chain(w.in[i], item_iters(w.len[item], item, w.items));
}

__global__ void __launch_bounds__(kItem) static_partition(ItemsView w) {
  const int64_t first = blockIdx.x * w.items / gridDim.x;
  const int64_t last = (blockIdx.x + 1) * w.items / gridDim.x;
  for (int64_t item = first; item < last; ++item) process(w, item);
}

__global__ void __launch_bounds__(kItem) work_queue(ItemsView w) {
  __shared__ unsigned item;
  while (true) {
    if (threadIdx.x == 0) item = atomicAdd(w.next, 1u);
    __syncthreads();
    const unsigned mine = item;
    __syncthreads();  // everyone has read `item` before thread 0 overwrites it
    if (mine >= w.items) return;
    process(w, w.items - 1 - mine);  // costliest items first: the tail is made of cheap ones
  }
}

void launch_static(const Items& w, cudaStream_t s) {
  static_partition<<<w.blocks, kItem, 0, s>>>(w.view());
  BENCH_CHECK_LAUNCH();
}

void launch_queue(const Items& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(cudaMemsetAsync(w.next.data(), 0, sizeof(unsigned), s));
  work_queue<<<w.blocks, kItem, 0, s>>>(w.view());
  BENCH_CHECK_LAUNCH();
}

void reference(const Items& w, bench::HostData& h) {
  auto len = h.input<int32_t>("len");
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t item = 0; item < w.items; ++item)
    for (int64_t i = item * kItem; i < (item + 1) * kItem; ++i)
      out[i] = kernels::dependent_fma_chain<double>(in[i], item_iters(len[item], item, w.items));
}

// At the timing size the CPU would need ~10 s: the same chains in double, one thread each.
__global__ void reference_kernel(ItemsView w) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < w.items * kItem; i += int64_t{gridDim.x} * blockDim.x)
    w.out[i] = static_cast<float>(kernels::dependent_fma_chain<double>(w.in[i], item_iters(w.len[i / kItem], i / kItem, w.items)));
}

void device_reference(const Items& w, cudaStream_t s) {
  reference_kernel<<<2048, 256, 0, s>>>(w.view());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch12, work_queue, Items)
    .baseline("static_contiguous_partition", launch_static)
    .optimized("atomic_work_queue", launch_queue)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace
