// ch04/mpi/allreduce_mpi: the all-reduce of ch04/allreduce, one process per GPU under MPI.
//
// This is how multi-node jobs run: mpirun starts one rank per GPU (on one host or many), rank 0
// creates NCCL's unique id and MPI_Bcast hands it to every rank, each rank joins the
// communicator with ncclCommInitRankConfig on its own GPU (its rank among the ranks of its
// host), and from then on NCCL, not MPI, moves the data. NVLink multicast is forced off
// (NCCL_NVLS_ENABLE=0).
//
// Sizes: --bytes B (one message per rank, default 1 GiB), --sizes B1,B2,... or --sweep (4 KiB to
// 1 GiB by 4x: ch04/allreduce's busbw sweep). Rank 0 prints one line per size and, with
// --json FILE, writes every size's figures there (scripts/ch04_busbw_table.py reads it).
// Timing, per size: 5 warm-up calls, the output poisoned with NaN, an MPI_Barrier, then a batch
// of back-to-back ncclAllReduce calls between two events on each rank's stream, nothing else
// between them (--iters N; default 50 up to 16 MiB, 10 above, as the one-process sweep and
// scripts/peers/torch_allreduce.py): the mean per call of the slowest rank. Until issue 40 every
// timed call came after a cudaMemsetAsync of the whole output, in the timed region: at 1 GiB that
// is a second pass over 1 GiB of HBM per call, ~0.3 ms beside an all-reduce of ~4.5 ms on 4
// GPUs, and the reason this program read 335 GB/s busbw where PyTorch's batch read 353-358.
//
// Every rank verifies its own whole output at every size, exactly, on its GPU (the batch's last
// result; the NaN poison shows a result never written): rank r's input element i is a multiple of
// 1/1024 in [-1, 1] chosen by a hash of (r, i), so every partial sum is exact in FP32 and the sum
// in any order equals the reference. The verdicts meet in MPI_Allgather; rank 0 prints PASS or
// FAILED with the failing ranks, and every rank exits 0 (every size PASS) or 1.
// --ctas N (default 32, as the one-process example; 0: NCCL's own choice) is the number of thread
// blocks (channels) NCCL's kernel uses (ncclConfig_t::minCTAs = maxCTAs = N).
// --plant-wrong-rank R makes rank R corrupt one element of its result before checking: the run
// must then be FAILED naming rank R (ctest ch04.mpi.planted_wrong_rank). --host-only replaces
// NCCL by MPI_Allreduce on host memory and checks on the host: the verdict path, testable without
// a GPU (CI).
//
//   mpirun -np 4 build/chapters/ch04/ch04_mpi --sweep --json busbw.json     # one host, 4 GPUs
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
#include <vector>

#include "../nccl_ctas.hpp"

namespace {

constexpr int kSkip = 77;  // ctest's SKIP_RETURN_CODE for the suite

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

struct Size {
  int64_t bytes = 0;
  int calls = 0;       // timed calls in the batch
  double seconds = 0;  // this rank's mean per call (0: not timed)
  int64_t wrong = 0;   // this rank's wrong elements
};

// NCCL on this rank's GPU: times and checks every size (see the header). False on a CUDA or NCCL
// error, after which the remaining sizes count as all wrong.
bool run_nccl(std::vector<Size>& sizes, int rank, int ranks, int local, int ctas, int64_t planted,
              int iters) {
  int64_t most = 0;
  for (const auto& z : sizes) most = std::max(most, z.bytes);
  float *x = nullptr, *y = nullptr;
  unsigned long long* wrong = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ncclComm_t comm = nullptr;
  bool ok = ok_cuda(cudaSetDevice(local), "cudaSetDevice") &&
            ok_cuda(cudaMalloc(&x, most), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&y, most), "cudaMalloc") &&
            ok_cuda(cudaMalloc(&wrong, sizeof *wrong), "cudaMalloc") &&
            ok_cuda(cudaStreamCreate(&s), "cudaStreamCreate") &&
            ok_cuda(cudaEventCreate(&start), "cudaEventCreate") &&
            ok_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (ctas > 0) config.minCTAs = config.maxCTAs = ctas;  // NCCL refuses a min without a max
  ok = all_ok(ok) &&
       ok_nccl(ncclCommInitRankConfig(&comm, ranks, id, rank, &config), "ncclCommInitRankConfig");
  ok = all_ok(ok);  // every rank has its communicator, or none goes on to call NCCL
  if (ok) {
    fill_input<<<1024, 256, 0, s>>>(x, most / int64_t(sizeof(float)), rank);
    ok = ok_cuda(cudaGetLastError(), "fill_input");
  }
  for (auto& z : sizes) {
    const int64_t n = z.bytes / int64_t(sizeof(float));
    z.calls = iters > 0 ? iters : z.bytes <= (int64_t{16} << 20) ? 50 : 10;
    z.wrong = n;
    if (!ok) continue;
    for (int w = 0; ok && w < 5; ++w)
      ok = ok_nccl(ncclAllReduce(x, y, n, ncclFloat, ncclSum, comm, s), "ncclAllReduce (warm-up)");
    ok = ok &&
         ok_cuda(cudaMemsetAsync(y, 0xff, z.bytes, s),
                 "cudaMemsetAsync") &&  // NaN: must be rewritten
         ok_cuda(cudaMemsetAsync(wrong, 0, sizeof *wrong, s), "cudaMemsetAsync") &&
         ok_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    MPI_Barrier(MPI_COMM_WORLD);  // every rank starts its batch together; outside the timed region
    ok = ok && ok_cuda(cudaEventRecord(start, s), "cudaEventRecord");
    for (int c = 0; ok && c < z.calls; ++c)
      ok = ok_nccl(ncclAllReduce(x, y, n, ncclFloat, ncclSum, comm, s), "ncclAllReduce");
    ok = ok && ok_cuda(cudaEventRecord(stop, s), "cudaEventRecord") &&
         ok_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    float ms = 0;
    ok = ok && ok_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (ok && rank == planted && n > 0) plant_error<<<1, 1, 0, s>>>(y, n / 2);
    if (ok) count_wrong_on_device<<<1024, 256, 0, s>>>(y, n, ranks, wrong);
    unsigned long long found = 0;
    ok = ok &&
         ok_cuda(cudaMemcpyAsync(&found, wrong, sizeof found, cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync") &&
         ok_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (ok) z.seconds = ms * 1e-3 / z.calls, z.wrong = int64_t(found);
  }
  if (comm) ncclCommDestroy(comm);
  cudaFree(x);
  cudaFree(y);
  cudaFree(wrong);
  return ok;
}

// The line rank 0 prints for one size, and its entry in --json.
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
  char row[256];
  std::snprintf(row, sizeof row,
                "%s\n  {\"bytes\": %lld, \"size\": \"%s\", \"calls\": %d, \"us\": %.6g, "
                "\"algbw_gbps\": %.6g, "
                "\"busbw_gbps\": %.6g, \"pass\": %s}",
                json->empty() ? "" : ",", (long long)z.bytes, size_label(z.bytes).c_str(), z.calls,
                slowest * 1e6, algbw, busbw, failing.empty() ? "true" : "false");
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
  std::vector<Size> sizes;
  int64_t planted = -1;
  int iters = 0;                        // 0: 50 up to 16 MiB, 10 above
  int ctas = ch04::kBandwidthCtas.min;  // 0: NCCL's own choice
  bool host_only = false;
  const char* json_file = nullptr;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--bytes") && a + 1 < argc)
      sizes = {Size{std::atoll(argv[++a])}};
    else if (!std::strcmp(argv[a], "--sizes") && a + 1 < argc) {
      sizes.clear();
      for (char* item = std::strtok(argv[++a], ","); item; item = std::strtok(nullptr, ","))
        sizes.push_back(Size{std::atoll(item)});
    } else if (!std::strcmp(argv[a], "--sweep")) {
      sizes.clear();
      for (int64_t b = 4096; b <= (int64_t{1} << 30); b *= 4) sizes.push_back(Size{b});
    } else if (!std::strcmp(argv[a], "--iters") && a + 1 < argc)
      iters = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--ctas") && a + 1 < argc) ctas = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--plant-wrong-rank") && a + 1 < argc) planted = std::atoll(argv[++a]);
    else if (!std::strcmp(argv[a], "--host-only")) host_only = true;
    else if (!std::strcmp(argv[a], "--json") && a + 1 < argc)
      json_file = argv[++a];
  }
  if (sizes.empty()) sizes = {Size{int64_t{1} << 30}};

  if (host_only) {  // the reduction on the host through MPI: no GPU, no NCCL
    for (auto& z : sizes) {
      const int64_t n = z.bytes / int64_t(sizeof(float));
      std::vector<float> in(n), out(n);
      for (int64_t i = 0; i < n; ++i) in[i] = input_value(rank, i);
      MPI_Allreduce(in.data(), out.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (rank == planted && n > 0) out[n / 2] += 1.0f;  // the planted wrong rank
      z.wrong = count_wrong(out, ranks);
    }
  } else {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) devices = 0;
    // NCCL refuses two ranks of one communicator on one GPU ("invalid usage"): every host needs a
    // GPU per rank it runs, so a one-GPU machine SKIPs with the reason instead of failing.
    const int spare = devices - ranks_on_host;
    int fewest_spare = spare;
    MPI_Allreduce(&spare, &fewest_spare, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (fewest_spare < 0) {
      if (rank == 0)
        std::printf("ch04_mpi allreduce: SKIPPED: needs one GPU per rank (%d ranks on a host with %d GPU%s)\n",
                    ranks_on_host, devices, devices == 1 ? "" : "s");
      MPI_Comm_free(&host);
      MPI_Finalize();
      return kSkip;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    run_nccl(sizes, rank, ranks, local, ctas, planted, iters);
  }

  const std::string how =
      host_only ? "host (MPI_Allreduce)"
                : "ncclAllReduce (" +
                      (ctas > 0 ? std::to_string(ctas) : std::string("NCCL's own")) + " blocks)";
  bool pass = true;
  std::string rows;
  for (const auto& z : sizes) report(z, rank, ranks, how, &pass, &rows);
  if (rank == 0 && json_file) {
    if (std::FILE* f = std::fopen(json_file, "w")) {
      std::fprintf(
          f, "{\"program\": \"ch04_mpi\", \"ranks\": %d, \"method\": \"%s\", \"rows\": [%s\n]}\n",
          ranks, how.c_str(), rows.c_str());
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
