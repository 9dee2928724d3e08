// ch04/mpi/allreduce_mpi: the all-reduce of ch04/allreduce, one process per GPU under MPI.
//
// This is how multi-node jobs run: mpirun starts one rank per GPU (on one host or many), rank 0
// creates NCCL's unique id and MPI_Bcast hands it to every rank, each rank joins the
// communicator with ncclCommInitRankConfig on its own GPU (its rank among the ranks of its
// host), and from then on NCCL, not MPI, moves the data. NVLink multicast is forced off (NCCL_NVLS_ENABLE=0).
//
// Every rank verifies its own whole output, exactly: rank r's input element i is a multiple of
// 1/1024 in [-1, 1] chosen by a hash of (r, i), so every partial sum is exact in FP32 and the
// sum in any order equals the reference. The verdicts meet in MPI_Allreduce; rank 0 prints one
// line, PASS or FAILED with the failing ranks, and every rank exits 0 (PASS) or 1 (FAILED).
// --ctas N (default 32, as the one-process example; 0: NCCL's own choice) is the number of thread
// blocks (channels) NCCL's kernel uses (ncclConfig_t::minCTAs = maxCTAs = N).
// --plant-wrong-rank R makes rank R corrupt one element of its result before checking: the run
// must then be FAILED naming rank R (ctest ch04.mpi.planted_wrong_rank). --host-only replaces
// NCCL by MPI_Allreduce on host memory: the verdict path, testable without a GPU (CI).
//
//   mpirun -np 2 build/chapters/ch04/ch04_mpi                              # one host, 2 GPUs
//   mpirun -np 16 --hostfile hosts --map-by ppr:8:node build/chapters/ch04/ch04_mpi --bytes 1073741824
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "../nccl_ctas.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

bool ok_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}
bool ok_nccl(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) std::fprintf(stderr, "%s: %s\n", what, ncclGetErrorString(e));
  return e == ncclSuccess;
}

// Number of elements of `out` that differ from the exact sum over `ranks` ranks.
int64_t count_wrong(const std::vector<float>& out, int ranks) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    double expected = 0;
    for (int r = 0; r < ranks; ++r) expected += input_value(r, i);
    wrong += double(out[i]) != expected;
  }
  return wrong;
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
  int64_t bytes = int64_t{1} << 30, planted = -1;
  int iters = 20;
  int ctas = ch04::kBandwidthCtas.min;  // 0: NCCL's own choice
  bool host_only = false;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--bytes") && a + 1 < argc) bytes = std::atoll(argv[++a]);
    else if (!std::strcmp(argv[a], "--iters") && a + 1 < argc) iters = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--ctas") && a + 1 < argc) ctas = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--plant-wrong-rank") && a + 1 < argc) planted = std::atoll(argv[++a]);
    else if (!std::strcmp(argv[a], "--host-only")) host_only = true;
  }
  const int64_t n = bytes / int64_t(sizeof(float));
  std::vector<float> out(n);
  double seconds = 0;
  int failed_setup = 0;

  if (host_only) {  // the reduction on the host through MPI: no GPU, no NCCL
    std::vector<float> in(n);
    for (int64_t i = 0; i < n; ++i) in[i] = input_value(rank, i);
    MPI_Allreduce(in.data(), out.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
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
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    float *x = nullptr, *y = nullptr;
    cudaStream_t s = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    ncclComm_t comm = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (ctas > 0) config.minCTAs = config.maxCTAs = ctas;  // NCCL refuses a min without a max
    bool ok = ok_cuda(cudaSetDevice(local), "cudaSetDevice") &&
              ok_cuda(cudaMalloc(&x, bytes), "cudaMalloc") && ok_cuda(cudaMalloc(&y, bytes), "cudaMalloc") &&
              ok_cuda(cudaStreamCreate(&s), "cudaStreamCreate") && ok_cuda(cudaEventCreate(&start), "cudaEventCreate") &&
              ok_cuda(cudaEventCreate(&stop), "cudaEventCreate") &&
              ok_nccl(ncclCommInitRankConfig(&comm, ranks, id, rank, &config), "ncclCommInitRankConfig");
    if (ok) {
      fill_input<<<1024, 256, 0, s>>>(x, n, rank);
      ok = ok_nccl(ncclAllReduce(x, y, n, ncclFloat, ncclSum, comm, s), "ncclAllReduce (warm-up)") &&
           ok_cuda(cudaEventRecord(start, s), "cudaEventRecord");
      for (int it = 0; ok && it < iters; ++it)
        ok = ok_cuda(cudaMemsetAsync(y, 0xff, bytes, s), "cudaMemsetAsync") &&  // NaN: must be rewritten
             ok_nccl(ncclAllReduce(x, y, n, ncclFloat, ncclSum, comm, s), "ncclAllReduce");
      ok = ok && ok_cuda(cudaEventRecord(stop, s), "cudaEventRecord") && ok_cuda(cudaStreamSynchronize(s), "sync") &&
           ok_cuda(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      float ms = 0;
      if (ok) cudaEventElapsedTime(&ms, start, stop);
      seconds = ms * 1e-3 / iters;  // includes the memset: an upper bound on the all-reduce
    }
    failed_setup = !ok;
    if (comm) ncclCommDestroy(comm);
    cudaFree(x);
    cudaFree(y);
  }

  if (rank == planted && n > 0) out[n / 2] += 1.0f;  // the planted wrong rank
  const int64_t wrong = failed_setup ? n : count_wrong(out, ranks);
  std::vector<long long> all(ranks);
  long long mine = wrong;
  MPI_Allgather(&mine, 1, MPI_LONG_LONG, all.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  double slowest = 0;
  MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  bool pass = true;
  std::string failing;
  for (int r = 0; r < ranks; ++r)
    if (all[r] != 0) {
      pass = false;
      failing += " rank " + std::to_string(r) + " (" + std::to_string(all[r]) + " wrong)";
    }
  if (rank == 0) {
    const std::string nccl_label =
        "ncclAllReduce (" + (ctas > 0 ? std::to_string(ctas) : std::string("NCCL's own")) + " blocks)";
    const double algbw = slowest > 0 ? double(bytes) / slowest * 1e-9 : 0;
    std::printf("ch04_mpi allreduce: %d ranks, %lld bytes, %s, %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s: %s%s\n",
                ranks, (long long)bytes, host_only ? "host (MPI_Allreduce)" : nccl_label.c_str(), slowest * 1e3, algbw,
                algbw * 2.0 * (ranks - 1) / ranks, pass ? "PASS" : "FAILED:", failing.c_str());
  }
  MPI_Comm_free(&host);
  MPI_Finalize();
  return pass ? 0 : 1;
}
