// ch04/nccl_ctas.hpp: how many thread blocks ch04's NCCL kernels use, in one place for the
// one-process examples (multi_gpu.cuh) and the MPI program (mpi/allreduce_mpi.cu), which
// includes no harness code.
#pragma once

#include <cstdint>

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
// choice on 2x H200 (NVLink, NVLS off) is 24 channels; 32 gave more busbw at 1 GiB (the
// NCCL_MIN_NCHANNELS sweep in this chapter's README).
inline constexpr CtaRange kBandwidthCtas{.min = 32, .max = 32};
// From 16 MiB a message up, 64 blocks. On 4 GPUs with NV18 between every pair, 64 blocks gave
// more busbw than 32 from 64 MiB to 1 GiB, in one process and under MPI, were level at 16 MiB, and
// gave less at 1 and 4 MiB: a wider ring splits a small message into shares too small to pay
// for each block's handshakes (the sweep in this chapter's README). A communicator's block count
// is fixed when it is created, so a program that sends both sizes holds one communicator of each
// and picks per call; PyTorch users get one count for every size (NCCL_MIN/MAX_CTAS).
inline constexpr CtaRange kLargeMessageCtas{.min = 64, .max = 64};
inline constexpr int64_t kLargeMessageBytes = int64_t{16} << 20;
inline constexpr CtaRange bandwidth_ctas(int64_t bytes) {
  return bytes >= kLargeMessageBytes ? kLargeMessageCtas : kBandwidthCtas;
}

}  // namespace ch04
