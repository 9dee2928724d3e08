// ch04/nccl_ctas.hpp: how many thread blocks ch04's NCCL kernels use, in one place for the
// one-process examples (multi_gpu.cuh) and the MPI program (mpi/allreduce_mpi.cu), which
// includes no harness code.
#pragma once

namespace ch04 {

// The thread blocks (NCCL channels) each NCCL kernel of a communicator may use: ncclConfig_t's
// minCTAs and maxCTAs, the per-communicator forms of NCCL_MIN_CTAS and NCCL_MAX_CTAS (which, when
// exported, override them). {0, 0} leaves both to NCCL; a max alone caps; a min needs a max too
// (NCCL 2.28 compares minCTAs with maxCTAs before filling in its default for an unset max, and
// refuses the config as an invalid argument).
struct CtaRange {
  int min = 0;
  int max = 0;
};
// For an all-reduce that has the GPUs to itself and is bound by the links: 32 blocks. NCCL's own
// choice on 2x H200 (NVLink, NVLS off) is 24 channels, 330 GB/s busbw at 1 GiB; 32 gave
// 343.5 GB/s (the NCCL_MIN_NCHANNELS sweep in this chapter's README).
inline constexpr CtaRange kBandwidthCtas{.min = 32, .max = 32};

}  // namespace ch04
