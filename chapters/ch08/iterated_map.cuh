// ch08/iterated_map.cuh: the workload threshold and register_spills share: y[i] = f(x[i]) where
// f runs a `steps`-long chain of FMAs per element (compute-bound: 2 x 256 flops per 8 bytes at
// the timing size). Each example defines its f and its CPU reference. 2^23 elements at the
// timing size: on a full H100 (2048 threads per SM) about 31 waves for threshold's one element
// per thread, 7.8 and 1.9 for register_spills' 4 and 16; and a CPU reference (which checks the
// last timed sample) of 2^23 x 256 dependent double FMAs, 8 times fewer than at 2^26 (ch08's
// README, 'Sizes and cost model', has the seconds per check).
#pragma once

#include <bench/bench.hpp>

namespace ch08 {

struct IteratedMap {
  int64_t n;
  int steps;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit IteratedMap(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 23, 100'003)),
        steps(static_cast<int>(s.size("steps", 256, 41))),
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(2.0 * n * sizeof(float));  // x read once, y written once
    s.flops(2.0 * n * steps);          // one FMA per step of each element's chain
  }
};

}  // namespace ch08
