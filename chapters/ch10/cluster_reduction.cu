// ch10/cluster_reduction: on Hopper the blocks of a thread-block cluster can read each other's
// shared memory, so a cluster combines its blocks' sums on chip and only one value per cluster
// leaves the SMs; the second kernel of a two-pass reduction goes away.
//
// The work: the sum of n FP32 values (read once) into one float. Both variants sum each 64 KB
// chunk in one block with the same code (global_sum.cuh: 16-byte streaming loads, 4 in flight per
// thread, short-lived blocks); only what happens to the block sums differs.
//
// What the hardware does (sm_90): a cluster of up to 8 blocks (16 with an opt-in) is scheduled
// as a unit onto the SMs of one GPC, all its blocks resident at once: that guarantee is what
// lets a block wait for, and read from, the others. Distributed shared memory (DSMEM) maps every
// block's shared memory into the cluster's address space; a load from another block's shared
// memory travels over the SM-to-SM network inside the GPC, never through L2 or HBM.
// cooperative_groups exposes it: this_cluster(), map_shared_rank(ptr, rank) (the address of
// `ptr` in block `rank`), cluster.sync() (a hardware cluster barrier, barrier.cluster, with
// release/acquire semantics, so shared-memory writes before it are visible to the cluster after).
//
// Why the baseline pays: the two-pass form stores every block sum to a partials array in global
// memory, then launches a second kernel (one 1024-thread block) that reads them back from L2.
// That costs the gap between two kernels, the second kernel's latency-bound run, and the
// partials' round trip through L2: a few microseconds, whatever n is. The on-chip combine is what
// makes one value per 8 blocks (8x fewer global atomics than atomic_reduction) cost nothing;
// compare the two examples' optimized times.
//
// The size, as atomic_reduction's (global_sum.cuh), is the axis `mib`: by default 16 MiB (2^22
// floats, 256 blocks = 32 clusters, cold: read from HBM), where the saved second kernel is a real
// share. --sweep goes to 1 GiB (2,048 clusters), where both sides read at the HBM ceiling
// (README): at that size the mechanism is worth ~1.6% at best, the far side of the crossover.
//
// What changes from baseline to optimized:
//   1. baseline `two_pass`: chunk_partials<<<chunks, 256>>> then sum_partials<<<1, 1024>>>;
//   2. optimized `cluster_dsmem`: one kernel with __cluster_dims__(8, 1, 1). Each block writes
//      its sum to one float of its own shared memory; cluster.sync(); the first warp of block
//      rank 0 reads the 8 sums through map_shared_rank (lane r reads block r's), adds them with
//      shuffles; a second cluster.sync() keeps every block (and its shared memory) alive until
//      those reads are done; the case reports `resident_clusters` (cudaOccupancyMaxActiveClusters);
//   3. that one value per cluster goes into an FP64 total with an atomic, and the last cluster to
//      arrive writes the float result (global_sum.cuh: add_and_finish; atomic_reduction explains
//      the pattern and why FP64).
// Needs sm_90 (clusters); elsewhere the examples are SKIPPED.
//
//   ./bench compare --chapter ch10 --example cluster_reduction          # 16 MiB
//   ./bench compare --chapter ch10 --example cluster_reduction --sweep  # 16 MiB to 1 GiB
#include <cooperative_groups.h>

#include <kernels/occupancy.cuh>

#include "global_sum.cuh"

namespace {

namespace cg = cooperative_groups;

constexpr int kCluster = 8;  // the portable maximum; 16 needs cudaFuncAttributeNonPortableClusterSizeAllowed
static_assert(kCluster <= 32, "one lane per block of the cluster");

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(ch10::kBlock)
    cluster_dsmem(const float* __restrict__ x, int64_t n, ch10::SinglePass pass) {
  __shared__ float block_sum;  // read by block rank 0 of the cluster through DSMEM
  const cg::cluster_group cluster = cg::this_cluster();
  const float mine = ch10::block_chunk_sum(x, n, blockIdx.x);
  if (threadIdx.x == 0) block_sum = mine;
  cluster.sync();  // every block's sum is written and visible to the whole cluster
  const bool leader = cluster.block_rank() == 0;
  float cluster_sum = 0.0f;
  if (leader && threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    const float v = lane < kCluster ? *cluster.map_shared_rank(&block_sum, lane) : 0.0f;  // DSMEM load
    cluster_sum = kernels::warp_reduce(v, kernels::Sum{});
  }
  cluster.sync();  // no block exits (freeing its shared memory) while the leader may still read it
  // The global atomics come after the barrier: the other 7 blocks exit without waiting for them.
  if (leader && threadIdx.x == 0) ch10::add_and_finish(cluster_sum, gridDim.x / kCluster, pass);
}

// Whole clusters: the spare blocks of the last one (verification size) sum empty chunks to 0.
// Reported next to the time: how many 8-block clusters the occupancy calculator fits on the GPU
// at once (132 SMs x 8 blocks / 8 would be 132; fewer means GPC boundaries cost residency).
// A failed query reports -1 rather than failing the case.
struct ClusterLaunch {
  unsigned blocks;
  int resident_clusters = -1;
  ClusterLaunch(const ch10::GlobalSum& w, cudaStream_t)
      : blocks((w.chunks + kCluster - 1) / kCluster * kCluster) {
    if (kernels::query_resident_clusters(resident_clusters, cluster_dsmem, blocks, ch10::kBlock) !=
        cudaSuccess) {
      resident_clusters = -1;
      (void)cudaGetLastError();  // not sticky: clear it so the next check does not see it
    }
  }
  void operator()(const ch10::GlobalSum& w, cudaStream_t stream) const {
    cluster_dsmem<<<blocks, ch10::kBlock, 0, stream>>>(w.x.data(), w.n, w.single_pass());
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"resident_clusters", static_cast<double>(resident_clusters)}}; }
};

BENCH_EXAMPLE(ch10, cluster_reduction, ch10::GlobalSum)
    .int_axis("mib", ch10::kSumMib, ch10::kSumMibDefault)
    .baseline("two_pass", ch10::launch_two_pass)
    .stateful<ClusterLaunch>(bench::Role::optimized, "cluster_dsmem")
    .reference(ch10::reference)
    .device_reference(ch10::device_reference)
    .tolerance(bench::relative_l2(1e-5))  // derived in global_sum.cuh
    .min_compute_capability(90);

}  // namespace
