// kernels/prefix_search.hpp: which group a flat work-item number falls in, given the groups'
// prefix of item counts (prefix[0] = 0, prefix[groups] = total; a group with no items has equal
// neighbours and is never returned). A binary search, so a persistent CTA or a grouped GEMM's
// block finds its group in log2(groups) steps with no per-item table. Host and device: ch15's
// MoE tile schedule is checked on the host in unit tests and walked on the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KERNELS_HD __host__ __device__
#else
#define KERNELS_HD
#endif

namespace kernels {

// The last g in [0, groups) with prefix[g] <= item, for 0 <= item < prefix[groups].
KERNELS_HD inline int group_of_item(const int32_t* prefix, int groups, int item) {
  int lo = 0, hi = groups;  // prefix[lo] <= item < prefix[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (prefix[mid] <= item)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace kernels

#undef KERNELS_HD
