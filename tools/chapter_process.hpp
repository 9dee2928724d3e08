// tools/chapter_process.hpp: finding chapter binaries and running them as child processes, so
// that a crash in one example cannot take the others (or the driver) down with it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "results.hpp"

namespace bench::tools {

struct ProcessResult {
  int exit_code = 0;     // valid when !signaled
  int signal = 0;        // valid when signaled
  bool signaled = false;
  bool started = true;   // false: the program could not be executed at all
  bool timed_out = false;  // killed, with its process group, when the time limit ran out
  std::string out, err;  // captured standard output and error (empty when inherited)
  std::string describe() const;  // "exit code 3", "killed by signal 6 (Aborted)"
  bool ok() const { return started && !signaled && exit_code == 0; }
};

// Runs argv[0] with the arguments; `capture` redirects stdout/stderr to buffers, otherwise the
// child shares this process's terminal. With `timeout_s` > 0 the child runs in a process group of
// its own, and when the time runs out the whole group (a tool and the program it runs) gets
// SIGTERM, then SIGKILL 5 s later; an interrupt of this process kills the group too, then ends
// this process as the signal would have, unless an InterruptScope is alive, which keeps it.
// Without a time limit, inside an InterruptScope, an interrupt is passed on to the child
// (SIGTERM) and the call returns when the child has ended.
ProcessResult run_process(const std::vector<std::string>& argv, bool capture, double timeout_s = 0);

// While one is alive, SIGINT and SIGTERM do not end this process: the first is remembered
// (signal() says which), the running child is asked to end, and the caller finishes what it can
// (bench compare scores what finished before the interruption) before ending with 128 + signal.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  static int signal();  // 0 while none has arrived
};

// The last `lines` lines of `text`, joined with " | " so they fit a table's reason column.
std::string tail_lines(const std::string& text, int lines);

// <build>/tools/bench -> <build>, from /proc/self/exe.
std::filesystem::path default_build_dir();
std::filesystem::path chapter_binary(const std::filesystem::path& build_dir, const std::string& chapter);
// Chapters that have a built binary, sorted ("ch07", "ch08", ...).
std::vector<std::string> built_chapters(const std::filesystem::path& build_dir);
// Case names a chapter binary registers (--benchmark_list_tests works without a GPU).
// `extra_args` (--bench_sweep, --bench_axis=...) choose which axis points are listed.
std::vector<std::string> list_cases(const std::filesystem::path& binary, std::string* error,
                                    const std::vector<std::string>& extra_args = {});
// Each case's variant's own name (--bench_list_variants, no GPU needed): the rung a case named by
// its role runs ("ch15/moe_dispatch/optimized" -> "cluster_permute"). Empty if the binary cannot
// say; the same `extra_args` as list_cases.
std::map<std::string, std::string> own_variant_names(
    const std::filesystem::path& binary, const std::vector<std::string>& extra_args = {});
// The same listing in the binary's order, (case, own name) a case, with `error` set when the binary
// cannot list: one process gives `bench list` both the cases and their rungs.
std::vector<std::pair<std::string, std::string>> listed_variants(
    const std::filesystem::path& binary, std::string* error,
    const std::vector<std::string>& extra_args = {});
// The rung case `name` runs: its own name in `own` (own_variant_names), else the variant its name
// carries (a step's or vendor's case, or a binary that could not say).
std::string rung_of(const std::map<std::string, std::string>& own, const std::string& name);

// Runs one example in its own process and merges what it produced into `into`; a crash, a
// missing case or a no-GPU exit becomes a Crash record with the stderr tail.
// Its harness keeps a progress file (--bench_progress), so a run that was stopped still says
// which case it was in.
struct ExampleRunSummary {
  ProcessResult process;
  int cases_reported = 0;
  int cases_ended = 0;       // cases the process finished (passed or not), from its progress file
  std::string running_case;  // the case it had started and not finished when it ended, if any
  double seconds = 0;
};
ExampleRunSummary run_example(const std::filesystem::path& binary, const std::string& example,
                              const std::vector<std::string>& expected_cases,
                              const std::vector<std::string>& extra_args, ResultsFile& into);

}  // namespace bench::tools
