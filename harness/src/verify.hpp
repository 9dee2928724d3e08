// Internal: comparing an output with the reference under a tolerance (docs/validity.md).
#pragma once

#include <span>
#include <string>

#include "bench/bench.hpp"
#include "host_copy.hpp"

namespace bench::detail {

struct Comparison {
  bool pass = false;
  double max_abs_err = 0.0;
  double rel_l2_err = 0.0;
  long long nan_count = 0;     // NaN or Inf in the output where the reference is finite
  long long mismatches = 0;    // elements outside allclose/exact
  long long worst_index = -1;
  std::string describe(const std::string& output) const;
};

// Resolves dtype_default to the bound for `dtype`.
Tolerance resolve(Tolerance tolerance, DType dtype);
// Every element of `actual` against `expected`, each read as double: the expected values are the
// CPU reference's doubles or, from a device reference, the output's own dtype.
Comparison compare(HostValues actual, HostValues expected, Tolerance resolved);
Comparison compare(std::span<const double> actual, std::span<const double> expected,
                   Tolerance resolved);
// VALIDITY row 5: true when a constant output (the reference's mean) would pass, i.e. the
// reference has too little spread for the check to mean anything.
bool constant_would_pass(std::span<const double> expected, Tolerance resolved, double* mean);

}  // namespace bench::detail
