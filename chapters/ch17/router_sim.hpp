// ch17/router_sim.hpp: a deterministic discrete-event simulation of requests routed over N model
// replicas (workers), for ch17's router_load_balance (issue 42). Host only; the step times come
// from a StepCost the caller provides: router_load_balance.cu measures the suite's decode and
// prefill attention and one linear layer's GEMM in every timed sample and builds a MeasuredStep
// from them (below); tests/unit/router_sim_test.cpp also uses a linear model.
//
// A worker batches continuously: whenever it is idle with work, one step admits waiting requests
// (up to max_batch running, at most max_prefill_tokens of prompt a step, at least one request),
// prefills them and decodes one token for every request already running. A request's first token
// comes at the end of its prefill step (TTFT). A worker keeps the KV of the last cached_prefixes
// shared prompts it prefilled (least recently used out), and a request whose prefix it holds
// prefills only its own tokens. Everything is integer or fixed-order arithmetic on one seed: the
// same inputs give the same result on any machine.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

namespace ch17::router {

struct Request {
  int id = 0;
  double arrival_s = 0;
  int prefix = -1;        // the shared system prompt it starts with, or -1
  int prefix_tokens = 0;  // that prompt's length (0 without one)
  int own_tokens = 0;     // the rest of its prompt
  int output_tokens = 0;  // tokens it generates (the first comes with its prefill)
};

struct TraceShape {
  int requests = 2000;
  double rate_per_s = 40;  // Poisson arrivals
  int prefixes = 8;        // shared system prompts
  double shared = 0.3;     // fraction of requests that start with one of them
  int prefix_tokens = 2048, own_min = 64, own_max = 512, out_min = 16, out_max = 256;
};

// splitmix64: the same stream on every platform (std:: distributions are not specified bit for
// bit).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t x = (state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  double unit() { return double((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
  int between(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
};

inline std::vector<Request> make_trace(const TraceShape& shape, uint64_t seed) {
  Random rng{seed};
  std::vector<Request> trace;
  double t = 0;
  for (int i = 0; i < shape.requests; ++i) {
    t += -std::log(rng.unit()) / shape.rate_per_s;
    Request r{i, t};
    if (rng.unit() <= shape.shared)
      r.prefix = rng.between(0, shape.prefixes - 1), r.prefix_tokens = shape.prefix_tokens;
    r.own_tokens = rng.between(shape.own_min, shape.own_max);
    r.output_tokens = rng.between(shape.out_min, shape.out_max);
    trace.push_back(r);
  }
  return trace;
}

// Seconds of one worker step: prefill `prefill_tokens` new prompt tokens, and decode one token for
// each of `batch` running requests whose contexts sum to `context_sum`.
using StepCost = std::function<double(int64_t prefill_tokens, int batch, int64_t context_sum)>;

// A straight line through two measured points (x0, y0) and (x1, y1), x0 < x1, used between and
// beyond them: a fixed cost plus a cost per unit (a launch plus bytes or flops). Noise can make
// the fitted slope or the fixed cost negative; both are held at zero or above, so a step never
// costs less than nothing and never less for more work.
struct Line {
  double fixed = 0, per_unit = 0;
  static Line through(double x0, double y0, double x1, double y1) {
    if (!(x1 > x0)) throw std::invalid_argument("Line::through needs x0 < x1");
    const double per_unit = std::max(0.0, (y1 - y0) / (x1 - x0));
    return {std::max(0.0, y0 - per_unit * x0), per_unit};
  }
  double operator()(double x) const { return fixed + per_unit * x; }
};

// A worker step of a transformer of `layers` layers built from measured parts of one layer:
//   decode attention: seconds against the context tokens summed over the running requests (a read
//     of their KV cache);
//   prefill attention: seconds per new prompt token (a causal prompt's attention over its length);
//   linear: seconds of one d_model x d_model GEMM against its rows, counted linear_per_layer
//     times a layer (a Llama-7B layer holds 12 d_model^2 weights: q, k, v, o and an MLP of about
//     8 d_model^2). A step runs one GEMM pass over the weights for all its rows: one per running
//     request and one per new prompt token.
struct MeasuredStep {
  Line decode_attention;
  double prefill_attention_per_token = 0;
  Line linear;
  int layers = 32, linear_per_layer = 12;
  double operator()(int64_t prefill_tokens, int batch, int64_t context_sum) const {
    double layer = linear_per_layer * linear(double(batch + prefill_tokens)) +
                   prefill_attention_per_token * double(prefill_tokens);
    if (batch > 0) layer += decode_attention(double(context_sum));
    return layers * layer;
  }
};

struct ClusterShape {
  int workers = 8, max_batch = 64, max_prefill_tokens = 8192, cached_prefixes = 2;
};

// What a router sees of a worker when a request arrives.
struct WorkerView {
  int64_t outstanding_tokens = 0;  // prompt tokens not yet prefilled + tokens not yet generated
  std::vector<int> cached;         // prefixes whose KV it holds, least recently used first
  bool holds(int prefix) const {
    return std::find(cached.begin(), cached.end(), prefix) != cached.end();
  }
};
using Router = std::function<int(const Request&, const std::vector<WorkerView>&)>;

// Baseline: request i to worker i mod N, blind to load and to what each worker holds.
inline Router round_robin() {
  return [next = 0](const Request&, const std::vector<WorkerView>& w) mutable {
    return next++ % int(w.size());
  };
}
// Optimized: a request with a shared prefix goes to the least loaded worker that holds it, unless
// that worker's load exceeds the least loaded one's by more than the prefill the hit saves;
// everything else goes to the least loaded worker (lowest index on ties).
inline Router prefix_and_load_aware() {
  return [](const Request& r, const std::vector<WorkerView>& w) {
    int least = 0, holder = -1;
    for (int i = 0; i < int(w.size()); ++i) {
      if (w[i].outstanding_tokens < w[least].outstanding_tokens) least = i;
      if (r.prefix >= 0 && w[i].holds(r.prefix) &&
          (holder < 0 || w[i].outstanding_tokens < w[holder].outstanding_tokens))
        holder = i;
    }
    if (holder >= 0 &&
        w[holder].outstanding_tokens - w[least].outstanding_tokens <= r.prefix_tokens)
      return holder;
    return least;
  };
}

struct Served {
  int worker = -1, generated = 0, times_admitted = 0;
  double first_token_s = -1, finish_s = -1;
  bool prefix_hit = false;
};
struct Outcome {
  std::vector<Served> requests;   // by request id
  std::vector<double> busy_s;     // per worker
  double start_s = 0, end_s = 0;  // first arrival, last finish
  int64_t generated_tokens() const {
    int64_t n = 0;
    for (const Served& s : requests) n += s.generated;
    return n;
  }
  double tokens_per_s() const { return double(generated_tokens()) / (end_s - start_s); }
  double utilisation() const {  // mean over workers of busy time / makespan
    double sum = 0;
    for (double b : busy_s) sum += b;
    return sum / double(busy_s.size()) / (end_s - start_s);
  }
  double ttft_quantile(const std::vector<Request>& trace, double q) const {
    std::vector<double> ttft;
    for (const Request& r : trace) ttft.push_back(requests[r.id].first_token_s - r.arrival_s);
    std::sort(ttft.begin(), ttft.end());
    return ttft[std::min(ttft.size() - 1, size_t(q * double(ttft.size())))];
  }
};

// Throws std::logic_error unless every request was admitted once, by one worker, and generated
// exactly its output tokens, its first token after its arrival and its last no earlier.
inline void check_served(const std::vector<Request>& trace, const Outcome& out) {
  for (const Request& r : trace) {
    const Served& s = out.requests.at(r.id);
    if (s.times_admitted != 1 || s.worker < 0 || s.generated != r.output_tokens ||
        !(s.first_token_s > r.arrival_s) || !(s.finish_s >= s.first_token_s))
      throw std::logic_error("request " + std::to_string(r.id) + " was not served exactly once");
  }
}

inline Outcome simulate(const std::vector<Request>& trace, const ClusterShape& shape,
                        const StepCost& cost, Router route) {
  struct Running {
    int id, context, left;
  };
  struct Worker {
    std::deque<int> waiting;
    std::vector<Running> running;
    std::vector<int> admitted;  // this step's prefills
    WorkerView view;
    bool busy = false;
  };
  std::vector<Worker> workers(shape.workers);
  std::vector<int> prompt_counted(trace.size());  // the prompt tokens its router's view was charged
  Outcome out{std::vector<Served>(trace.size()), std::vector<double>(shape.workers, 0.0)};
  out.start_s = trace.empty() ? 0 : trace.front().arrival_s;
  // Step completions, earliest first; equal times by worker index (a fixed order).
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> done;
  const auto prompt_tokens = [&](const Request& r, const WorkerView& v) {
    return r.own_tokens + (r.prefix >= 0 && v.holds(r.prefix) ? 0 : r.prefix_tokens);
  };
  const auto start_step = [&](int wi, double now) {
    Worker& w = workers[wi];
    int64_t prefill = 0, context_sum = 0;
    for (const Running& run : w.running) context_sum += run.context;
    while (!w.waiting.empty() && int(w.running.size() + w.admitted.size()) < shape.max_batch) {
      const Request& r = trace[w.waiting.front()];
      const int tokens = prompt_tokens(r, w.view);
      if (!w.admitted.empty() && prefill + tokens > shape.max_prefill_tokens) break;
      Served& s = out.requests[r.id];
      s.prefix_hit = tokens == r.own_tokens && r.prefix >= 0;
      ++s.times_admitted;
      prefill += tokens;
      w.view.outstanding_tokens -= prompt_counted[r.id];
      if (r.prefix >= 0) {  // now (or still) held, most recently used
        std::erase(w.view.cached, r.prefix);
        w.view.cached.push_back(r.prefix);
        if (int(w.view.cached.size()) > shape.cached_prefixes)
          w.view.cached.erase(w.view.cached.begin());
      }
      w.admitted.push_back(r.id);
      w.waiting.pop_front();
    }
    if (prefill == 0 && w.running.empty()) return;
    const double seconds = cost(prefill, int(w.running.size()), context_sum);
    w.busy = true;
    out.busy_s[wi] += seconds;
    done.push({now + seconds, wi});
  };
  const auto finish_step = [&](int wi, double now) {
    Worker& w = workers[wi];
    w.busy = false;
    std::vector<Running> still;
    for (Running run : w.running) {  // one decode token each
      ++out.requests[run.id].generated, --w.view.outstanding_tokens;
      if (--run.left == 0)
        out.requests[run.id].finish_s = now, out.end_s = std::max(out.end_s, now);
      else
        ++run.context, still.push_back(run);
    }
    for (int id : w.admitted) {  // the prefill's first token
      const Request& r = trace[id];
      Served& s = out.requests[id];
      s.worker = wi, s.first_token_s = now, ++s.generated, --w.view.outstanding_tokens;
      if (r.output_tokens == 1)
        s.finish_s = now, out.end_s = std::max(out.end_s, now);
      else
        still.push_back({id, r.prefix_tokens + r.own_tokens + 1, r.output_tokens - 1});
    }
    w.admitted.clear();
    w.running = std::move(still);
    start_step(wi, now);
  };
  std::vector<WorkerView> views(shape.workers);
  for (const Request& r : trace) {
    while (!done.empty() && done.top().first <= r.arrival_s) {  // steps that end first
      const auto [t, wi] = done.top();
      done.pop();
      finish_step(wi, t);
    }
    for (int i = 0; i < shape.workers; ++i) views[i] = workers[i].view;
    const int wi = route(r, views);
    Worker& w = workers.at(wi);
    w.waiting.push_back(r.id);
    prompt_counted[r.id] = prompt_tokens(r, w.view);
    w.view.outstanding_tokens += prompt_counted[r.id] + r.output_tokens;
    if (!w.busy) start_step(wi, r.arrival_s);
  }
  while (!done.empty()) {
    const auto [t, wi] = done.top();
    done.pop();
    finish_step(wi, t);
  }
  return out;
}

}  // namespace ch17::router
