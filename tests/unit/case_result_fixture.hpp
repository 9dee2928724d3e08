// tests/unit: a verified case as the tools see it, and normal-distributed samples, for the
// scoring, report and expectations-update tests.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "results.hpp"

namespace bench::tools::testing {

// `n` samples (microseconds) drawn around `median_us` with relative spread `noise`.
inline std::vector<double> normal_samples(double median_us, double noise, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(median_us, median_us * noise);
  std::vector<double> out(static_cast<std::size_t>(n));
  for (double& s : out) s = dist(rng);
  return out;
}

// A measured, verified case `example/variant` with the fingerprint every test pair shares.
inline CaseResult verified_case(const std::string& example, const std::string& variant, const std::string& role,
                                double median_us) {
  CaseResult c;
  c.example = example;
  c.variant = variant;
  c.name = example + "/" + variant;
  c.role = role;
  c.verified = true;
  c.fingerprint = "00000000000000aa";
  c.median_us = median_us;
  return c;
}

}  // namespace bench::tools::testing
