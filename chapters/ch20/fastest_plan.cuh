// ch20/fastest_plan.cuh: autotuning at setup. Several plans of one step (stateful variants of the
// ladder: a captured graph, a persistent launch), each built untimed, timed on the workload's own
// inputs, and the fastest kept; a call then launches that plan and nothing else.
//   ch20::FastestPlan<Workload> plan;                        // in a stateful variant's constructor
//   plan.consider<GraphedStep>("cuda_graph", 5, w, stream);  // built now, or left out where it
//   plan.consider<Megakernel>("megakernel", 7, w, stream);   //   throws bench::Unsupported
//   plan.keep_fastest(stream, /*time_them=*/inputs_hold_the_case);
//   plan(stream);                                            // the timed call
//
// Why a measurement and not a rule: which plan wins depends on the batch through effects no simple
// model ranks (FP32 FMAs against bytes, a prologue kernel of its own, grid barriers against
// programmatic launches: the README's ladder table has a different fastest rung at each measured
// batch). cuBLASLt's heuristic has the same problem, and kernels/cublaslt_gemm.hpp's pick_fastest
// the same answer.
//
// Why the harness may trust it (docs/validity.md, rows 2 and 18): the choice is made once, here,
// before any checked or timed call, and never changes; the call launches the one kept plan, which
// does the whole step on whatever inputs it meets, so a timed call does the same work whichever
// plan won. Every candidate is also a rung of its own, verified as such, and the kept one is
// verified again as this variant (its outputs at both sizes, its timed samples). The timing
// rounds write the step's outputs, which the harness poisons before every check.
//
// Timing: each candidate once to warm up (module loads, first touches), then kRounds rounds that
// visit the candidates in turn (so a drift of clock or temperature touches all alike), each
// kCallsPerRound back-to-back calls, as a hot sample runs them; a candidate's time is its best
// round's mean. Where the inputs do not yet hold the case's values (time_them false), timing would
// read memory nothing wrote (compute-sanitizer's initcheck reports it) and say little about the
// timed run: nothing is timed or launched, and the first candidate is kept.
#pragma once

#include <algorithm>
#include <bench/bench.hpp>
#include <chrono>
#include <functional>
#include <kernels/event_span.hpp>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ch20 {

template <class W>
class FastestPlan {
 public:
  static constexpr int kRounds = 5, kCallsPerRound = 10;

  FastestPlan() : setup_start_(std::chrono::steady_clock::now()) {}

  // Builds plan S for w (untimed), labelled and numbered as its rung of the ladder. A plan that
  // cannot run this workload (S's constructor throws bench::Unsupported) is left out, with the
  // reason kept in case none is left.
  template <class S>
  void consider(std::string label, double rung, const W& w, cudaStream_t s) {
    if (kept_) throw std::logic_error("FastestPlan: consider() after keep_fastest()");
    try {
      auto state = std::make_shared<S>(w, s);
      candidates_.push_back({std::move(label), rung,
                             [state, &w](cudaStream_t stream) { (*state)(w, stream); },
                             [state] { return own_metrics(*state); }});
    } catch (const bench::Unsupported& why) {
      left_out_ += (left_out_.empty() ? "" : "; ") + label + ": " + why.what();
    }
  }

  // Times the candidates (or not: see the header) and keeps the fastest; the others are freed.
  void keep_fastest(cudaStream_t s, bool time_them) {
    if (candidates_.empty())
      throw bench::Unsupported("no plan supports this workload (" + left_out_ + ")");
    std::size_t pick = 0;
    if (time_them) {
      for (const Candidate& c : candidates_) c.launch(s);  // warm-up, untimed
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
      kernels::EventSpan span;
      for (int round = 0; round < kRounds; ++round)
        for (Candidate& c : candidates_) {
          span.begin(s);
          for (int call = 0; call < kCallsPerRound; ++call) c.launch(s);
          span.end(s);
          c.best_us = std::min(c.best_us, span.ms() * 1e3 / kCallsPerRound);
        }
      for (std::size_t i = 1; i < candidates_.size(); ++i)
        if (candidates_[i].best_us < candidates_[pick].best_us) pick = i;
    }
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));  // nothing in flight uses a plan about to be freed
    for (const Candidate& c : candidates_) timed_.push_back({c.label, time_them ? c.best_us : 0.0});
    kept_ = std::make_unique<Candidate>(std::move(candidates_[pick]));
    candidates_.clear();
    setup_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - setup_start_)
            .count();
  }

  void operator()(cudaStream_t s) const {
    if (!kept_) throw std::logic_error("FastestPlan: called before keep_fastest()");
    kept_->launch(s);
  }

  const std::string& chosen_label() const { return kept_->label; }

  // chosen_rung (the kept plan's rung number); tuning_setup_ms (host time from construction to the
  // choice: building every candidate and timing them); where they were timed, each candidate's
  // best round as tuning_us_<label>; then the kept plan's own metrics, if it reports any (ch20's
  // graphed rungs: where their time goes, op by op).
  std::vector<bench::Metric> metrics() const {
    if (!kept_) return {};
    std::vector<bench::Metric> out{{"chosen_rung", kept_->rung}, {"tuning_setup_ms", setup_ms_}};
    for (const Timed& t : timed_)
      if (t.us > 0) out.push_back({"tuning_us_" + t.label, t.us});
    for (bench::Metric& m : kept_->metrics()) out.push_back(std::move(m));
    return out;
  }

 private:
  struct Candidate {
    std::string label;
    double rung;
    std::function<void(cudaStream_t)> launch;
    std::function<std::vector<bench::Metric>()> metrics;
    double best_us = std::numeric_limits<double>::infinity();
  };
  template <class S>
  static std::vector<bench::Metric> own_metrics(const S& plan) {
    if constexpr (requires { plan.metrics(); })
      return plan.metrics();
    else
      return {};
  }
  struct Timed {
    std::string label;
    double us;
  };
  std::chrono::steady_clock::time_point setup_start_;
  std::vector<Candidate> candidates_;
  std::unique_ptr<Candidate> kept_;
  std::vector<Timed> timed_;
  std::string left_out_;
  double setup_ms_ = 0;
};

}  // namespace ch20
