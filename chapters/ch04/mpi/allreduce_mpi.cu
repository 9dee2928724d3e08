// ch04/mpi/allreduce_mpi: the all-reduce of ch04/allreduce, one process per GPU under MPI, by NCCL
// and by ch04/allreduce_small's one-shot kernel.
//
// This is how multi-node jobs run: mpirun starts one rank per GPU (on one host or many), rank 0
// creates NCCL's unique id and MPI_Bcast hands it to every rank, each rank joins the
// communicator with ncclCommInitRankConfig on its own GPU (its rank among the ranks of its
// host), and from then on NCCL, not MPI, moves the data. NVLink multicast is forced off
// (NCCL_NVLS_ENABLE=0).
//
// The one-shot all-reduce (--algorithm one_shot; ../one_shot.cuh, the kernel allreduce_small
// times from one process): every rank exports its input and its flags (cudaIpcGetMemHandle),
// MPI_Allgather gives every rank all the handles, and each opens its peers'
// (cudaIpcOpenMemHandle, peer access enabled on first use); from then on each rank launches one
// kernel per call on its own GPU that loads all N inputs through those pointers, with the same
// flag exchanges between ranks' blocks as in one process. One process per GPU launches one
// kernel per call instead of N from one thread, so the host's jitter is not in every sample.
// --algorithm nccl|one_shot|both (default both: each size by NCCL, then up to kOneShotMaxBytes
// by the one-shot, in the same process and batches; one_shot alone runs every size asked). The
// one-shot needs 2 to 8 ranks on one host with peer access between their GPUs; without them,
// both says "one_shot not run" and one_shot SKIPs with the reason.
//
// Sizes: --bytes B (one message per rank, default 1 GiB), --sizes B1,B2,... or --sweep (4 KiB to
// 1 GiB by 4x: ch04/allreduce's busbw sweep). Rank 0 prints one line per size and algorithm and,
// with --json FILE, writes every run's figures there, each row naming its algorithm
// (scripts/ch04_busbw_table.py reads it).
// Timing, per size and algorithm: 5 warm-up calls, the output poisoned with NaN, every rank
// meeting in an MPI_Allreduce (so all start their batch together), then a batch of back-to-back
// calls between two events on each rank's stream, nothing else between them (--iters N; default
// 50 up to 16 MiB, 10 above, as the one-process sweep and scripts/peers/torch_allreduce.py): the
// mean per call of the slowest rank. Until issue 40 every
// timed call came after a cudaMemsetAsync of the whole output, in the timed region: at 1 GiB that
// is a second pass over 1 GiB of HBM per call, ~0.3 ms beside an all-reduce of ~4.5 ms on 4
// GPUs, and the reason this program read 335 GB/s busbw where PyTorch's batch read 353-358.
//
// Every rank verifies its own whole output at every size, exactly, on its GPU (the batch's last
// result; the NaN poison shows a result never written): rank r's input element i is a multiple of
// 1/1024 in [-1, 1] chosen by a hash of (r, i), so every partial sum is exact in FP32 and the sum
// in any order equals the reference. The verdicts meet in MPI_Allgather; rank 0 prints PASS or
// FAILED with the failing ranks, and every rank exits 0 (every size PASS) or 1.
// --ctas N is the number of thread blocks (channels) NCCL's kernel uses (ncclConfig_t::minCTAs =
// maxCTAs = N; 0: NCCL's own choice). Without it, as the one-process example: 32 below 16 MiB
// and 64 from there up (ch04::bandwidth_ctas), through one communicator for each count.
// --plant-wrong-rank R makes rank R corrupt one element of its result before checking, for
// either algorithm: the run must then be FAILED naming rank R (ctest ch04.mpi.*planted_wrong_rank).
// --host-only replaces the GPU by MPI_Allreduce on host memory and checks on the host: the verdict
// path, testable without a GPU (CI).
//
//   mpirun -np 4 build/chapters/ch04/ch04_mpi --sweep --json busbw.json     # one host, 4 GPUs
//   mpirun -np 4 build/chapters/ch04/ch04_mpi --algorithm one_shot --sizes 4096,262144
//   mpirun -np 16 --hostfile hosts --map-by ppr:8:node build/chapters/ch04/ch04_mpi --bytes
//   1073741824
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../nccl_ctas.hpp"
#include "../one_shot.cuh"

namespace {

constexpr int kSkip = 77;  // ctest's SKIP_RETURN_CODE for the suite
// Beside NCCL (--algorithm both) the one-shot runs up to 4 MiB. Each GPU pulls (N-1) x n bytes
// over its links, against the ring's 2(N-1)/N x n, so its busbw can reach at most 2/N of a link
// (half on 4 GPUs), while NCCL's ring nears the whole link by 16 MiB (the README's sweep): past
// 4 MiB the one-shot cannot win, so the sweep stops it there.
constexpr int64_t kOneShotMaxBytes = int64_t{4} << 20;

__host__ __device__ inline float input_value(int rank, int64_t i) {  // k / 1024, k in [-1024, 1024]
  uint64_t h = (uint64_t(rank) << 40) ^ uint64_t(i);
  h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ull; h ^= h >> 33;
  return float(int64_t(h % 2049) - 1024) / 1024.0f;
}
__global__ void fill_input(float* x, int64_t n, int rank) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = input_value(rank, i);
}
// Adds to *wrong the elements of y[0, n) that differ from the exact sum over `ranks` ranks.
__global__ void count_wrong_on_device(const float* y, int64_t n, int ranks,
                                      unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double expected = 0;
    for (int r = 0; r < ranks; ++r) expected += input_value(r, i);
    mine += double(y[i]) != expected;  // NaN (never written) counts as wrong
  }
  for (int offset = 16; offset > 0; offset /= 2)
    mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine != 0) atomicAdd(wrong, mine);
}
__global__ void plant_error(float* y, int64_t i) { y[i] += 1.0f; }

bool ok_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}
bool ok_nccl(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) std::fprintf(stderr, "%s: %s\n", what, ncclGetErrorString(e));
  return e == ncclSuccess;
}
// True on every rank when `ok` is true on every rank.
bool all_ok(bool ok) {
  int mine = ok, every = 0;
  MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return every != 0;
}

// Number of elements of `out` that differ from the exact sum over `ranks` ranks (--host-only).
int64_t count_wrong(const std::vector<float>& out, int ranks) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    double expected = 0;
    for (int r = 0; r < ranks; ++r) expected += input_value(r, i);
    wrong += double(out[i]) != expected;
  }
  return wrong;
}

std::string size_label(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (int64_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

enum class Algorithm { nccl, one_shot, host };
const char* algorithm_name(Algorithm a) {
  return a == Algorithm::nccl ? "nccl" : a == Algorithm::one_shot ? "one_shot" : "host";
}

// One size of one algorithm, timed and checked.
struct Size {
  int64_t bytes = 0;
  Algorithm algorithm = Algorithm::nccl;
  int calls = 0;       // timed calls in the batch
  double seconds = 0;  // this rank's mean per call (0: not timed)
  int64_t wrong = 0;   // this rank's wrong elements
};

// This rank's GPU, sized for the largest run: input x (filled once), output y, the count of wrong
// elements, a stream and the timed batch's two events.
struct Gpu {
  float *x = nullptr, *y = nullptr;
  unsigned long long* wrong = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};
bool open_gpu(Gpu& g, int local, int64_t bytes, int rank) {
  bool ok = ok_cuda(cudaSetDevice(local), "cudaSetDevice") &&
            ok_cuda(cudaMalloc(&g.x, bytes), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&g.y, bytes), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&g.wrong, sizeof *g.wrong), "cudaMalloc") &&
            ok_cuda(cudaStreamCreate(&g.s), "cudaStreamCreate") &&
            ok_cuda(cudaEventCreate(&g.start), "cudaEventCreate") &&
            ok_cuda(cudaEventCreate(&g.stop), "cudaEventCreate");
  if (ok) {
    fill_input<<<1024, 256, 0, g.s>>>(g.x, bytes / int64_t(sizeof(float)), rank);
    ok = ok_cuda(cudaGetLastError(), "fill_input");
  }
  return ok;
}
void close_gpu(Gpu& g) {
  cudaFree(g.x);
  cudaFree(g.y);
  cudaFree(g.wrong);
  if (g.start) cudaEventDestroy(g.start);
  if (g.stop) cudaEventDestroy(g.stop);
  if (g.s) cudaStreamDestroy(g.s);
}

// NCCL's communicator over every rank (rank 0's unique id through MPI_Bcast) on `ctas` blocks.
// Every rank calls it; true on every rank when every rank has its communicator.
bool open_nccl(ncclComm_t* comm, int rank, int ranks, int ctas, bool ok) {
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (ctas > 0) config.minCTAs = config.maxCTAs = ctas;  // NCCL refuses a min without a max
  ok = all_ok(ok) &&
       ok_nccl(ncclCommInitRankConfig(comm, ranks, id, rank, &config), "ncclCommInitRankConfig");
  return all_ok(ok);  // every rank has its communicator, or none goes on to call NCCL
}

// The one-shot all-reduce (../one_shot.cuh) across processes: every rank's input and flags as
// this rank reaches them, through CUDA IPC.
namespace one_shot = ch04::one_shot;
struct Peers {
  one_shot::Args args{};                 // in[r], signals[r] for every rank r; out and rank: ours
  one_shot::Signals* signals = nullptr;  // this rank's flags (cudaMalloc, zeroed once)
  int max_blocks = 0;                    // the smallest GPU's grid limit, the same on every rank
  one_shot::Kernel kernel = nullptr;
};

// Why the one-shot cannot run on these ranks, or "" when it can: 2 to 8 ranks, all on one host
// (a CUDA IPC handle opens only on the host that made it), and peer access from every rank's GPU
// to every other's. Every rank calls it and gets the same answer.
std::string one_shot_unsupported(int ranks, int ranks_on_host, int local) {
  if (ranks < 2 || ranks > one_shot::kMaxGpus)
    return "needs 2 to " + std::to_string(one_shot::kMaxGpus) + " ranks, not " +
           std::to_string(ranks);
  if (ranks_on_host != ranks)
    return "needs every rank on one host (CUDA IPC), " + std::to_string(ranks_on_host) + " of " +
           std::to_string(ranks) + " here";
  std::vector<int> gpu_of(ranks);
  MPI_Allgather(&local, 1, MPI_INT, gpu_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  bool reaches_all = cudaSetDevice(local) == cudaSuccess;  // no query below lands on GPU 0
  for (int peer : gpu_of) {
    int can = 1;
    if (peer != local && cudaDeviceCanAccessPeer(&can, local, peer) != cudaSuccess) can = 0;
    reaches_all = reaches_all && can;
  }
  return all_ok(reaches_all) ? "" : "needs peer access between every pair of GPUs";
}

// Exchanges the handles and opens the peers' memory. Each rank exports its input x and its
// flags (cudaIpcGetMemHandle), MPI_Allgather hands every rank all of them, and each opens its
// peers' (cudaIpcOpenMemHandle, peer access enabled on first use). Every rank calls it; true on
// every rank when every rank has opened every peer's memory and zeroed its own flags, so no
// kernel starts before the flags it will be sent are zero.
bool open_peers(Peers& p, const Gpu& g, int rank, int ranks, int local, bool ok) {
  int blocks = one_shot::kMaxBlocks;
  ok = ok && ok_cuda(cudaMalloc(&p.signals, sizeof(one_shot::Signals)), "cudaMalloc") &&
       ok_cuda(cudaMemset(p.signals, 0, sizeof(one_shot::Signals)), "cudaMemset") &&
       ok_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize") &&
       ok_cuda(one_shot::max_blocks(local, &blocks), "cudaDeviceGetAttribute");
  cudaIpcMemHandle_t mine[2] = {};  // input, flags
  ok = ok && ok_cuda(cudaIpcGetMemHandle(&mine[0], g.x), "cudaIpcGetMemHandle") &&
       ok_cuda(cudaIpcGetMemHandle(&mine[1], p.signals), "cudaIpcGetMemHandle");
  std::vector<cudaIpcMemHandle_t> all(2 * size_t(ranks));
  MPI_Allgather(mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  MPI_Allreduce(&blocks, &p.max_blocks, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  ok = all_ok(ok);  // every handle is valid before any rank opens one
  for (int r = 0; ok && r < ranks; ++r) {
    if (r == rank) {
      p.args.in[r] = g.x;
      p.args.signals[r] = p.signals;
      continue;
    }
    void *in = nullptr, *flags = nullptr;
    ok = ok_cuda(cudaIpcOpenMemHandle(&in, all[2 * r], cudaIpcMemLazyEnablePeerAccess),
                 "cudaIpcOpenMemHandle") &&
         ok_cuda(cudaIpcOpenMemHandle(&flags, all[2 * r + 1], cudaIpcMemLazyEnablePeerAccess),
                 "cudaIpcOpenMemHandle");
    p.args.in[r] = static_cast<const float*>(in);
    p.args.signals[r] = static_cast<one_shot::Signals*>(flags);
  }
  p.args.out = g.y;
  p.args.rank = rank;
  p.kernel = one_shot::kernel_for(ranks);
  return all_ok(ok && p.kernel);
}
// Every rank closes its peers' memory before any rank frees what it exported.
void close_peers(Peers& p, int rank, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    if (p.args.in[r]) cudaIpcCloseMemHandle(const_cast<float*>(p.args.in[r]));
    if (p.args.signals[r]) cudaIpcCloseMemHandle(p.args.signals[r]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  cudaFree(p.signals);
}

// Times one run on this rank and checks its result (see the header): call() enqueues one
// all-reduce of the run's size from g.x into g.y on g.s and says whether it could. Every rank
// calls it for every run, ok or not, so that the collectives inside meet; false on an error
// (then the run counts as all wrong).
template <class Call>
bool time_and_check(const Gpu& g, Size& z, int ranks, bool plant, bool ok, Call call) {
  const int64_t n = z.bytes / int64_t(sizeof(float));
  z.wrong = n;
  for (int w = 0; ok && w < 5; ++w) ok = call();  // warm-up
  // The output poisoned with NaN: a result never written counts as wrong.
  ok = ok && ok_cuda(cudaMemsetAsync(g.y, 0xff, z.bytes, g.s), "cudaMemsetAsync") &&
       ok_cuda(cudaMemsetAsync(g.wrong, 0, sizeof *g.wrong, g.s), "cudaMemsetAsync") &&
       ok_cuda(cudaStreamSynchronize(g.s), "cudaStreamSynchronize");
  // Every rank starts its batch together, outside the timed region, and only if every rank can:
  // a one-shot kernel would wait 5 s for a rank that never launches its own, then trap.
  if (!all_ok(ok)) return false;
  ok = ok_cuda(cudaEventRecord(g.start, g.s), "cudaEventRecord");
  for (int c = 0; ok && c < z.calls; ++c) ok = call();
  ok = ok && ok_cuda(cudaEventRecord(g.stop, g.s), "cudaEventRecord") &&
       ok_cuda(cudaStreamSynchronize(g.s), "cudaStreamSynchronize");
  float ms = 0;
  ok = ok && ok_cuda(cudaEventElapsedTime(&ms, g.start, g.stop), "cudaEventElapsedTime");
  if (ok && plant && n > 0) plant_error<<<1, 1, 0, g.s>>>(g.y, n / 2);
  if (ok) count_wrong_on_device<<<1024, 256, 0, g.s>>>(g.y, n, ranks, g.wrong);
  unsigned long long found = 0;
  ok = ok &&
       ok_cuda(cudaMemcpyAsync(&found, g.wrong, sizeof found, cudaMemcpyDeviceToHost, g.s),
               "cudaMemcpyAsync") &&
       ok_cuda(cudaStreamSynchronize(g.s), "cudaStreamSynchronize");
  if (ok) z.seconds = ms * 1e-3 / z.calls, z.wrong = int64_t(found);
  return ok;
}

// NCCL's thread blocks for a message of `bytes`: --ctas N's N (0: NCCL's own choice), or without
// it (ctas -1) ch04::bandwidth_ctas's count for that size.
int blocks_for(int ctas, int64_t bytes) { return ctas >= 0 ? ctas : ch04::bandwidth_ctas(bytes).min; }

// Every run on this rank's GPU, NCCL's and the one-shot's, in the order given. After a CUDA or
// NCCL error the remaining runs count as all wrong.
void run_on_gpu(std::vector<Size>& runs, int rank, int ranks, int local, int ctas, int64_t planted,
                int iters) {
  int64_t most = 0;
  bool nccl = false, peer = false;
  for (const auto& z : runs) {
    most = std::max(most, z.bytes);
    nccl = nccl || z.algorithm == Algorithm::nccl;
    peer = peer || z.algorithm == Algorithm::one_shot;
  }
  Gpu g;
  bool ok = open_gpu(g, local, most, rank);
  // One communicator per block count the sizes need (two at most: ch04::bandwidth_ctas).
  std::vector<std::pair<int, ncclComm_t>> comms;
  for (const auto& z : runs) {
    if (z.algorithm != Algorithm::nccl) continue;
    const int c = blocks_for(ctas, z.bytes);
    if (std::none_of(comms.begin(), comms.end(), [&](const auto& e) { return e.first == c; })) {
      comms.push_back({c, nullptr});
      ok = open_nccl(&comms.back().second, rank, ranks, c, ok);
    }
  }
  auto comm_for = [&](int64_t bytes) {
    for (const auto& [c, comm] : comms)
      if (c == blocks_for(ctas, bytes)) return comm;
    return ncclComm_t{nullptr};
  };
  Peers peers;
  if (peer) ok = open_peers(peers, g, rank, ranks, local, ok);
  for (auto& z : runs) {
    z.calls = iters > 0 ? iters : z.bytes <= (int64_t{16} << 20) ? 50 : 10;
    const int64_t n = z.bytes / int64_t(sizeof(float));
    if (z.algorithm == Algorithm::nccl) {
      ncclComm_t comm = comm_for(z.bytes);
      ok = time_and_check(g, z, ranks, rank == planted, ok, [&] {
        return ok_nccl(ncclAllReduce(g.x, g.y, n, ncclFloat, ncclSum, comm, g.s), "ncclAllReduce");
      });
    } else {
      // x and y are cudaMalloc'd (256-byte aligned) on every rank: every rank reads float4s and
      // launches the same grid, as the kernel's block pairing needs.
      one_shot::Args a = peers.args;
      const int blocks = one_shot::plan(a, n, /*aligned=*/true, peers.max_blocks);
      ok = time_and_check(g, z, ranks, rank == planted, ok, [&] {
        peers.kernel<<<blocks, one_shot::kThreads, 0, g.s>>>(a);
        return ok_cuda(cudaGetLastError(), "one_shot::sum");
      });
    }
  }
  cudaStreamSynchronize(g.s);
  if (peer) close_peers(peers, rank, ranks);
  for (const auto& [c, comm] : comms)
    if (comm) ncclCommDestroy(comm);
  close_gpu(g);
}

// The line rank 0 prints for one run, and its entry in --json.
void report(const Size& z, int rank, int ranks, const std::string& how, bool* pass,
            std::string* json) {
  std::vector<long long> all(ranks);
  long long mine = z.wrong;
  MPI_Allgather(&mine, 1, MPI_LONG_LONG, all.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  double slowest = 0;
  MPI_Reduce(&z.seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  std::string failing;
  for (int r = 0; r < ranks; ++r)
    if (all[r] != 0)
      failing += " rank " + std::to_string(r) + " (" + std::to_string(all[r]) + " wrong)";
  *pass = *pass && failing.empty();
  if (rank != 0) return;
  const double algbw = slowest > 0 ? double(z.bytes) / slowest * 1e-9 : 0,
               busbw = algbw * 2.0 * (ranks - 1) / ranks;
  std::printf(
      "ch04_mpi allreduce: %d ranks, %lld bytes, %s, %.1f us, algbw %.1f GB/s, busbw %.1f GB/s: "
      "%s%s\n",
      ranks, (long long)z.bytes, how.c_str(), slowest * 1e6, algbw, busbw,
      failing.empty() ? "PASS" : "FAILED:", failing.c_str());
  char row[512];
  std::snprintf(row, sizeof row,
                "%s\n  {\"bytes\": %lld, \"size\": \"%s\", \"algorithm\": \"%s\", \"method\": "
                "\"%s\", \"calls\": %d, \"us\": %.6g, \"algbw_gbps\": %.6g, \"busbw_gbps\": %.6g, "
                "\"pass\": %s}",
                json->empty() ? "" : ",", (long long)z.bytes, size_label(z.bytes).c_str(),
                algorithm_name(z.algorithm), how.c_str(), z.calls, slowest * 1e6, algbw, busbw,
                failing.empty() ? "true" : "false");
  *json += row;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1, local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  MPI_Comm_rank(host, &local);
  int ranks_on_host = 1;
  MPI_Comm_size(host, &ranks_on_host);
  std::vector<int64_t> sizes;
  int64_t planted = -1;
  int iters = 0;                        // 0: 50 up to 16 MiB, 10 above
  int ctas = -1;                        // -1: by size (ch04::bandwidth_ctas); 0: NCCL's own choice
  bool host_only = false, want_nccl = true, want_one_shot = true;
  const char* json_file = nullptr;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--bytes") && a + 1 < argc)
      sizes = {std::atoll(argv[++a])};
    else if (!std::strcmp(argv[a], "--sizes") && a + 1 < argc) {
      sizes.clear();
      for (char* item = std::strtok(argv[++a], ","); item; item = std::strtok(nullptr, ","))
        sizes.push_back(std::atoll(item));
    } else if (!std::strcmp(argv[a], "--sweep")) {
      sizes.clear();
      for (int64_t b = 4096; b <= (int64_t{1} << 30); b *= 4) sizes.push_back(b);
    } else if (!std::strcmp(argv[a], "--algorithm") && a + 1 < argc) {
      const std::string which = argv[++a];
      want_nccl = which == "nccl" || which == "both";
      want_one_shot = which == "one_shot" || which == "both";
      if (!want_nccl && !want_one_shot) {
        if (rank == 0) std::fprintf(stderr, "ch04_mpi: --algorithm nccl|one_shot|both\n");
        MPI_Finalize();
        return 2;
      }
    } else if (!std::strcmp(argv[a], "--iters") && a + 1 < argc)
      iters = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--ctas") && a + 1 < argc) ctas = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--plant-wrong-rank") && a + 1 < argc) planted = std::atoll(argv[++a]);
    else if (!std::strcmp(argv[a], "--host-only")) host_only = true;
    else if (!std::strcmp(argv[a], "--json") && a + 1 < argc)
      json_file = argv[++a];
  }
  if (sizes.empty()) sizes = {int64_t{1} << 30};

  std::vector<Size> runs;
  if (host_only) {  // the reduction on the host through MPI: no GPU, no NCCL
    for (int64_t bytes : sizes) {
      Size z{bytes, Algorithm::host};
      const int64_t n = z.bytes / int64_t(sizeof(float));
      std::vector<float> in(n), out(n);
      for (int64_t i = 0; i < n; ++i) in[i] = input_value(rank, i);
      MPI_Allreduce(in.data(), out.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (rank == planted && n > 0) out[n / 2] += 1.0f;  // the planted wrong rank
      z.wrong = count_wrong(out, ranks);
      runs.push_back(z);
    }
  } else {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) devices = 0;
    // NCCL refuses two ranks of one communicator on one GPU ("invalid usage"): every host needs a
    // GPU per rank it runs, so a one-GPU machine SKIPs with the reason instead of failing.
    const int spare = devices - ranks_on_host;
    int fewest_spare = spare;
    MPI_Allreduce(&spare, &fewest_spare, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    const std::string why_not =
        fewest_spare < 0 || !want_one_shot ? "" : one_shot_unsupported(ranks, ranks_on_host, local);
    if (fewest_spare < 0 || (!want_nccl && !why_not.empty())) {
      if (rank == 0 && fewest_spare < 0)
        std::printf("ch04_mpi allreduce: SKIPPED: needs one GPU per rank (%d ranks on a host with %d GPU%s)\n",
                    ranks_on_host, devices, devices == 1 ? "" : "s");
      else if (rank == 0)
        std::printf("ch04_mpi allreduce: SKIPPED: one_shot %s\n", why_not.c_str());
      MPI_Comm_free(&host);
      MPI_Finalize();
      return kSkip;
    }
    if (want_one_shot && !why_not.empty() && rank == 0)
      std::printf("ch04_mpi allreduce: one_shot not run: %s\n", why_not.c_str());
    // Beside NCCL the one-shot runs up to kOneShotMaxBytes (see the header); alone, at every size.
    for (int64_t bytes : sizes) {
      if (want_nccl) runs.push_back(Size{bytes, Algorithm::nccl});
      if (want_one_shot && why_not.empty() && (!want_nccl || bytes <= kOneShotMaxBytes))
        runs.push_back(Size{bytes, Algorithm::one_shot});
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    run_on_gpu(runs, rank, ranks, local, ctas, planted, iters);
  }

  auto how = [&](const Size& z) -> std::string {
    const int c = blocks_for(ctas, z.bytes);
    return z.algorithm == Algorithm::host       ? "host (MPI_Allreduce)"
           : z.algorithm == Algorithm::one_shot ? "one_shot (peer loads over CUDA IPC)"
                                                : "ncclAllReduce (" + (c > 0 ? std::to_string(c) : std::string("NCCL's own")) + " blocks)";
  };
  bool pass = true;
  std::string rows, methods;
  for (const auto& z : runs) {
    report(z, rank, ranks, how(z), &pass, &rows);
    if (methods.find(how(z)) == std::string::npos) methods += (methods.empty() ? "" : "; ") + how(z);
  }
  if (rank == 0 && json_file) {
    if (std::FILE* f = std::fopen(json_file, "w")) {
      std::fprintf(
          f, "{\"program\": \"ch04_mpi\", \"ranks\": %d, \"method\": \"%s\", \"rows\": [%s\n]}\n",
          ranks, methods.c_str(), rows.c_str());
      std::fclose(f);
    } else {
      std::fprintf(stderr, "ch04_mpi: cannot write %s\n", json_file);
      pass = false;
    }
  }
  MPI_Comm_free(&host);
  MPI_Finalize();
  return pass ? 0 : 1;
}
