// bench/parallel.hpp: host-side work split over the host's cores. The harness converts and
// compares timing-size buffers (hundreds of millions of elements) this way, and the CPU
// references of large verification sizes (kernels/reference_gemm.cuh's host GEMM) compute their
// output columns this way: on one core they were most of a case's wall time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace bench {

inline std::size_t parallel_parts() { return std::max(1u, std::thread::hardware_concurrency()); }

// Calls fn(part, begin, end) for `parts` contiguous chunks covering [0, n) (part < parts; at most
// parallel_parts() of them, one on the calling thread). Each chunk is one thread's, so work that
// computes each element alone gives the same bits as a single thread.
template <class Fn>
void parallel_chunks(std::size_t n, std::size_t parts, Fn fn) {
  const std::size_t threads = std::clamp<std::size_t>(parts, 1, parallel_parts());
  const std::size_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t)
    pool.emplace_back(fn, t, std::min(n, t * chunk), std::min(n, (t + 1) * chunk));
  fn(0, 0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

// For element-wise passes: below 2^20 elements one thread is faster than starting the others.
template <class Fn>
void parallel_chunks(std::size_t n, Fn fn) {
  parallel_chunks(n, n < (std::size_t{1} << 20) ? 1 : parallel_parts(), fn);
}

}  // namespace bench
