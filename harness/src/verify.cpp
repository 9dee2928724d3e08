// Output comparison and per-dtype default tolerances.
#include "verify.hpp"

#include "bench/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bench {

// Each bound sits a few times above the rounding of the output dtype itself, and well below
// the error of the next-lower precision (an FP32 result computed in BF16 has a relative L2 error
// near 2e-3, so FP32's 1e-5 rejects it).
Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f64: return relative_l2(1e-10);
    case DType::f32: return relative_l2(1e-5);
    case DType::f16: return relative_l2(1e-3);
    case DType::bf16: return relative_l2(8e-3);
    case DType::fp8_e4m3: return relative_l2(6e-2);
    case DType::fp8_e5m2: return relative_l2(1.2e-1);
    default: return exact();
  }
}

namespace detail {

Tolerance resolve(Tolerance tolerance, DType dtype) {
  return tolerance.kind == Tolerance::Kind::dtype_default ? default_tolerance(dtype) : tolerance;
}

namespace {

struct Partial {
  double err2 = 0, ref2 = 0, max_abs = 0, worst = -1;
  long long nan_count = 0, mismatches = 0, worst_index = -1;
};

Comparison summarise(const std::vector<Partial>& parts, Tolerance t) {
  Comparison c;
  double err2 = 0, ref2 = 0, worst = -1;
  for (const Partial& p : parts) {
    err2 += p.err2;
    ref2 += p.ref2;
    c.max_abs_err = std::max(c.max_abs_err, p.max_abs);
    c.nan_count += p.nan_count;
    c.mismatches += p.mismatches;
    if (p.worst > worst) { worst = p.worst; c.worst_index = p.worst_index; }
  }
  c.rel_l2_err = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
  c.pass = c.nan_count == 0 && c.mismatches == 0;
  if (t.kind == Tolerance::Kind::relative_l2) c.pass = c.nan_count == 0 && ref2 > 0 && c.rel_l2_err <= t.bound;
  return c;
}

// Every element of `actual` (dtype A) against `expected` (dtype E: the CPU reference's doubles,
// A itself for a device reference's output, or FP32 for the FP32 form of one), converted to
// double as they are read.
template <DType A, DType E>
Comparison compare_as(HostValues actual, HostValues expected, Tolerance t) {
  const std::size_t n = actual.count;
  std::vector<Partial> parts(parallel_parts());
  parallel_chunks(n, [&](std::size_t part, std::size_t begin, std::size_t end) {
    Partial& p = parts[part];
    for (std::size_t i = begin; i < end; ++i) {
      const double a = load_as_double<A>(actual.data, i), e = load_as_double<E>(expected.data, i);
      if (!std::isfinite(a) && std::isfinite(e)) {
        ++p.nan_count;
        if (p.worst < INFINITY) { p.worst = INFINITY; p.worst_index = static_cast<long long>(i); }
        continue;
      }
      const double d = std::abs(a - e);
      p.err2 += d * d;
      p.ref2 += e * e;
      if (d > p.max_abs) p.max_abs = d;
      bool ok = true;
      if (t.kind == Tolerance::Kind::exact) ok = (a == e) || (std::isnan(a) && std::isnan(e));
      else if (t.kind == Tolerance::Kind::allclose) ok = d <= t.atol + t.rtol * std::abs(e);
      if (!ok) ++p.mismatches;
      const double score = ok ? d * 1e-300 : d;  // worst failing element, else the largest error
      if (score > p.worst) { p.worst = score; p.worst_index = static_cast<long long>(i); }
    }
  });
  return summarise(parts, t);
}

}  // namespace

Comparison compare(HostValues actual, HostValues expected, Tolerance t) {
  if (actual.count != expected.count)
    throw std::logic_error(fmt::format("comparing {} output elements with {} expected", actual.count, expected.count));
  return with_dtype(actual.dtype, [&](auto a) {
    constexpr DType A = decltype(a)::value;
    if (expected.dtype == DType::f64) return compare_as<A, DType::f64>(actual, expected, t);
    if (expected.dtype == DType::f32) return compare_as<A, DType::f32>(actual, expected, t);
    if (expected.dtype != A)
      throw std::logic_error(fmt::format("comparing a {} output with {} expected values",
                                         to_string(A), to_string(expected.dtype)));
    return compare_as<A, A>(actual, expected, t);
  });
}

Comparison compare(std::span<const double> actual, std::span<const double> expected, Tolerance t) {
  return compare(HostValues(actual), HostValues(expected), t);
}

bool constant_would_pass(std::span<const double> expected, Tolerance t, double* mean_out) {
  double sum = 0;
  for (double e : expected) sum += e;
  const double mean = expected.empty() ? 0.0 : sum / static_cast<double>(expected.size());
  if (mean_out != nullptr) *mean_out = mean;
  std::vector<double> constant(expected.size(), mean);
  return compare(constant, expected, t).pass;
}

std::string Comparison::describe(const std::string& output) const {
  return fmt::format("output '{}': {} non-finite, {} outside tolerance, max abs err {:.3g}, "
                     "rel L2 err {:.3g}, worst at index {}",
                     output, nan_count, mismatches, max_abs_err, rel_l2_err, worst_index);
}

}  // namespace detail
}  // namespace bench
