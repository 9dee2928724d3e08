// Internal: host-side work over timing-size buffers (hundreds of millions of elements), split
// over the host's cores. On one core, converting and comparing outputs was most of a case's wall
// time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace bench::detail {

inline std::size_t parallel_parts() { return std::max(1u, std::thread::hardware_concurrency()); }

// Calls fn(part, begin, end) for contiguous chunks covering [0, n), part < parallel_parts().
template <class Fn>
void parallel_chunks(std::size_t n, Fn fn) {
  const std::size_t threads = n < (std::size_t{1} << 20) ? 1 : parallel_parts();
  const std::size_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t)
    pool.emplace_back(fn, t, std::min(n, t * chunk), std::min(n, (t + 1) * chunk));
  fn(0, 0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace bench::detail
