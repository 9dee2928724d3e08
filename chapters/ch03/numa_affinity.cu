// ch03/numa_affinity: on a machine of two or more NUMA nodes, the thread that feeds the GPU and
// the pinned buffers it fills belong on the node the GPU hangs off.
//
// A PCIe GPU is attached to one CPU socket. Host memory on another socket's node reaches it only
// across the inter-socket link, and a feeding thread there writes its batches into far memory,
// or reads its data from it. An unpinned thread and its first-touched buffers land on whichever
// node the scheduler picked: on a two-socket machine, the wrong one about half the time.
//   1. baseline: the feeding thread, its dataset and its pinned batch buffer all on a node other
//      than the GPU's (what an unpinned loader gets when it lands on the wrong socket);
//   2. optimized: all three on the GPU's node: the thread's CPU affinity set to that node's CPUs,
//      the memory bound to the node (mbind, before anything touches it) and then pinned for DMA
//      (cudaHostRegister).
// The work is the same on both sides: the feeding thread converts the dataset's bytes to floats
// in [-1, 1] into the pinned buffer, a 16 MiB chunk at a time, and queues each chunk's upload to
// the device buffer as soon as it is written. The GPU's node comes from sysfs
// (/sys/bus/pci/devices/<bus id>/numa_node); binding uses the kernel's interfaces directly
// (sched_setaffinity, mbind), so no library is needed. A machine with one NUMA node, or a GPU
// that reports none (-1, as in most VMs), is SKIPPED with the reason. Timed with a host clock
// (Mode::host); both sides' time is the host's memory system and link: host_bound.
//
//   ./bench compare --chapter ch03 --example numa_affinity
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cctype>
#include <cstdint>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <kernels/index_reference.cuh>

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The NUMA nodes that have CPUs ("0-1,4" → {0, 1, 4}): /sys/devices/system/node/has_cpu.
std::vector<int> parse_list(const std::string& list) {
  std::vector<int> out;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    const auto dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash)),
              last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int i = first; i <= last; ++i) out.push_back(i);
  }
  return out;
}

int gpu_numa_node() {
  int device = 0;
  char bus_id[32] = {};
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
  std::string id(bus_id);
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string node = read_line("/sys/bus/pci/devices/" + id + "/numa_node");
  return node.empty() ? -1 : std::stoi(node);
}

// Why the lesson cannot be shown here, or "".
std::string single_node_reason() {
  const auto nodes = parse_list(read_line("/sys/devices/system/node/has_cpu"));
  if (nodes.size() < 2)
    return "this machine has " + std::to_string(nodes.size()) +
           " NUMA node with CPUs: nothing to place (lscpu)";
  if (gpu_numa_node() < 0)
    return "the GPU reports no NUMA node (sysfs numa_node is -1, as in most VMs)";
  return "";
}

struct Upload {
  int64_t n;
  bench::DeviceSpan<float> dst;
  explicit Upload(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 26, 1'000'003)), dst(s.output<float>("dst", n)) {
    s.bytes(double(n) * sizeof(float), bench::ceiling::h2d_pinned);
  }
};

__host__ __device__ uint8_t dataset_byte(int64_t i) {
  return static_cast<uint8_t>((static_cast<uint64_t>(i) * 2654435761u) >> 15);
}
__host__ __device__ float as_input(uint8_t byte) { return (static_cast<float>(byte) - 127.5f) * (1.0f / 127.5f); }
// What element i of the uploaded batch holds: both references compute it from the index.
__host__ __device__ float uploaded_value(int64_t i) { return as_input(dataset_byte(i)); }

// Anonymous memory bound to one node before its first touch, so every page lands there.
class NodeMemory {
 public:
  NodeMemory(size_t bytes, int node) : bytes_((bytes + 4095) / 4096 * 4096) {
    ptr_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr_ == MAP_FAILED) throw std::bad_alloc();
    unsigned long mask[16] = {};  // up to 1024 nodes
    mask[node / 64] = 1ul << (node % 64);
    if (::syscall(SYS_mbind, ptr_, bytes_, MPOL_BIND, mask, 1024ul, 0u) != 0)
      throw bench::Unsupported("mbind to NUMA node " + std::to_string(node) + " was refused");
  }
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;
  ~NodeMemory() { ::munmap(ptr_, bytes_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  void* ptr_;
};

void bind_this_thread_to(int node) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu :
       parse_list(read_line("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist")))
    CPU_SET(cpu, &cpus);
  if (::sched_setaffinity(0, sizeof cpus, &cpus) != 0)
    throw bench::Unsupported("cannot run on NUMA node " + std::to_string(node) +
                             "'s CPUs (sched_setaffinity)");
}

// The feeding thread bound to `node`, with its dataset and pinned batch buffer there. Each call's
// work runs on a thread started for it and bound to the node (tens of microseconds, the same on
// both sides, next to milliseconds of work), so the case's own thread keeps its affinity.
template <bool GpuNode>
class NodeFeeder {
 public:
  static constexpr int64_t kChunk = int64_t{4} << 20;  // floats: 16 MiB
  NodeFeeder(const Upload& w, cudaStream_t) {
    const int gpu = gpu_numa_node();
    if (GpuNode) {
      node_ = gpu;
    } else {
      for (int n : parse_list(read_line("/sys/devices/system/node/has_cpu")))
        if (n != gpu) node_ = n;
    }
    dataset_ = std::make_unique<NodeMemory>(w.n, node_);
    batch_ = std::make_unique<NodeMemory>(w.n * sizeof(float), node_);
    on_node([&] {
      auto* bytes = static_cast<uint8_t*>(dataset_->get());
      for (int64_t i = 0; i < w.n; ++i) bytes[i] = dataset_byte(i);
      std::fill_n(static_cast<float*>(batch_->get()), w.n, 0.0f);  // first touch, on the node
    });
    BENCH_CUDA_CHECK(cudaHostRegister(batch_->get(), batch_->bytes(), cudaHostRegisterDefault));
  }
  NodeFeeder(const NodeFeeder&) = delete;
  NodeFeeder& operator=(const NodeFeeder&) = delete;
  ~NodeFeeder() {
    cudaDeviceSynchronize();
    cudaHostUnregister(batch_->get());
  }
  void operator()(const Upload& w, cudaStream_t stream) {
    on_node([&] {
      const auto* bytes = static_cast<const uint8_t*>(dataset_->get());
      auto* batch = static_cast<float*>(batch_->get());
      for (int64_t at = 0; at < w.n; at += kChunk) {
        const int64_t count = std::min(kChunk, w.n - at);
        for (int64_t i = at; i < at + count; ++i) batch[i] = as_input(bytes[i]);
        BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data() + at, batch + at, count * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
      }
    });
  }
  std::vector<bench::Metric> metrics() const { return {{"numa_node", double(node_)}}; }

 private:
  template <class F>
  void on_node(F work) {
    std::exception_ptr failed;
    std::thread feeder([&] {
      try {
        bind_this_thread_to(node_);
        work();
      } catch (...) {
        failed = std::current_exception();
      }
    });
    feeder.join();
    if (failed) std::rethrow_exception(failed);
  }
  int node_ = -1;
  std::unique_ptr<NodeMemory> dataset_, batch_;
};

void reference(const Upload& w, bench::HostData& h) {
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = uploaded_value(i);
}

constexpr bench::VariantOptions kHostSide{.blocks_host = true, .host_bound = true};

// The timing-size check: the dataset's values computed where they land (index_reference.cuh).
void device_reference(const Upload& w, cudaStream_t stream) {
  kernels::write_index_values<uploaded_value>(w.dst.data(), w.n, stream);
}

BENCH_EXAMPLE(ch03, numa_affinity, Upload)
    .requires_that([](const Upload&) { return single_node_reason(); })
    .stateful<NodeFeeder<false>>(bench::Role::baseline, "feeder_on_another_node", kHostSide)
    .stateful<NodeFeeder<true>>(bench::Role::optimized, "feeder_on_gpu_node", kHostSide)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

}  // namespace
