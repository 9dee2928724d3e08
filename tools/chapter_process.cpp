// Child processes for chapter binaries: fork/exec with output captured to temporary files
// (pipes could deadlock on a chatty child unless drained concurrently).
#include "chapter_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace bench::tools {
namespace {

namespace fs = std::filesystem;

fs::path make_temp_dir(const char* prefix) {
  std::string pattern = (fs::temp_directory_path() / (std::string(prefix) + "XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary directory");
  return pattern;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// InterruptScope's: the first SIGINT or SIGTERM while a scope is alive, and the scope count.
std::atomic<int> scope_signal{0};
int scopes = 0;
struct sigaction scope_old_int = {}, scope_old_term = {};
extern "C" void remember_scope_signal(int signal) {
  int none = 0;
  scope_signal.compare_exchange_strong(none, signal);
}

// A blocking wait for `pid` that an InterruptScope's signal interrupts (no SA_RESTART): the child
// is then asked to end, once, and waited for again.
pid_t wait_passing_on_interrupts(pid_t pid, int* status) {
  bool asked = false;
  for (;;) {
    const pid_t done = ::waitpid(pid, status, 0);
    if (done >= 0 || errno != EINTR) return done;
    if (scope_signal != 0 && !asked) {
      ::kill(pid, SIGTERM);
      asked = true;
    }
  }
}

// Waits for `pid`, the leader of its own process group, for at most `timeout_s`; then, or on an
// interrupt, terminates the group. An interrupt is held in an InterruptScope while the group is
// put down (the group runs apart from the terminal, so its Ctrl-C never reaches it); then, unless
// an outer scope (bench compare's) takes it, this process ends as the signal would have. Returns
// waitpid's status.
int wait_with_timeout(pid_t pid, double timeout_s, bool* timed_out) {
  int status = 0, signal = 0;
  pid_t done = 0;
  {
    const InterruptScope interrupts;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && InterruptScope::signal() == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done == 0) {  // still running: the time ran out, or we were interrupted
      *timed_out = InterruptScope::signal() == 0;
      ::kill(-pid, SIGTERM);
      const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < grace)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ::kill(-pid, SIGKILL);  // whatever of the group is left, the leader included
      if (done == 0) done = wait_passing_on_interrupts(pid, &status);
    }
    signal = InterruptScope::signal();
  }
  if (signal != 0 && scopes == 0) ::raise(signal);  // no outer scope: end as the signal would have
  return done < 0 ? -1 : status;
}

}  // namespace

std::string ProcessResult::describe() const {
  if (timed_out) return "did not finish in time (killed)";
  if (!started) return "could not be started: " + err;
  if (signaled) return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  return "exit code " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, bool capture, double timeout_s) {
  ProcessResult result;
  fs::path dir;
  if (capture) dir = make_temp_dir("bench-proc-");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (timeout_s > 0) ::setpgid(0, 0);  // a group of its own, so a kill reaches its children too
    if (capture) {
      const int out = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err = ::open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
    }
    ::execv(args[0], args.data());
    std::fprintf(stderr, "%s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0 && timeout_s > 0) {
    ::setpgid(pid, pid);  // also here, so the group exists before any kill (whichever runs first)
    status = wait_with_timeout(pid, timeout_s, &result.timed_out);
  } else if (pid > 0 && wait_passing_on_interrupts(pid, &status) < 0) {
    status = -1;
  }
  if (pid < 0 || status < 0) {
    result.started = false;
    result.err = std::strerror(errno);
    return result;
  }
  result.signaled = WIFSIGNALED(status);
  result.signal = result.signaled ? WTERMSIG(status) : 0;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (capture) {
    result.out = slurp(dir / "out");
    result.err = slurp(dir / "err");
    fs::remove_all(dir);
    if (result.exit_code == 127 && result.err.find(argv[0] + ": ") == 0) result.started = false;
  }
  return result;
}

InterruptScope::InterruptScope() {
  if (scopes++ > 0) return;
  scope_signal = 0;
  struct sigaction remember {};
  remember.sa_handler = remember_scope_signal;
  ::sigemptyset(&remember.sa_mask);
  remember.sa_flags = 0;  // no SA_RESTART: a blocking waitpid returns EINTR and passes it on
  ::sigaction(SIGINT, &remember, &scope_old_int);
  ::sigaction(SIGTERM, &remember, &scope_old_term);
}

InterruptScope::~InterruptScope() {
  if (--scopes > 0) return;
  ::sigaction(SIGINT, &scope_old_int, nullptr);
  ::sigaction(SIGTERM, &scope_old_term, nullptr);
}

int InterruptScope::signal() { return scope_signal; }

std::string tail_lines(const std::string& text, int lines) {
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > std::size_t(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += (out.empty() ? "" : " | ") + all[i];
  return out;
}

fs::path default_build_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path().parent_path();
}

fs::path chapter_binary(const fs::path& build_dir, const std::string& chapter) {
  return build_dir / "chapters" / chapter / chapter;
}

std::vector<std::string> built_chapters(const fs::path& build_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(build_dir / "chapters", ec)) {
    const std::string name = entry.path().filename().string();
    if (fs::is_regular_file(chapter_binary(build_dir, name))) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What a chapter binary prints for one of its listing flags (no GPU needed), or nullopt with
// `error` (if given) naming the binary, the flag and how the process ended.
static std::optional<std::string> listing(const fs::path& binary, const std::string& flag,
                                          const std::string& flag_value, std::string* error,
                                          const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {binary.string(), flag + flag_value};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const ProcessResult p = run_process(argv, true);
  if (p.ok()) return p.out;
  if (error)
    *error = binary.string() + " " + flag + ": " + p.describe() + ": " + tail_lines(p.err, 3);
  return std::nullopt;
}

std::vector<std::string> list_cases(const fs::path& binary, std::string* error,
                                    const std::vector<std::string>& extra_args) {
  std::vector<std::string> out;
  const auto text = listing(binary, "--benchmark_list_tests", "=true", error, extra_args);
  if (!text) return out;
  std::set<std::string> seen;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    const std::string name = strip_gb_suffixes(line);
    if (!name.empty() && seen.insert(name).second) out.push_back(name);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> listed_variants(
    const fs::path& binary, std::string* error, const std::vector<std::string>& extra_args) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto text = listing(binary, "--bench_list_variants", "", error, extra_args);
  if (!text) return out;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {  // "<case> <role> <own name>"
    std::istringstream fields(line);
    std::string name, role, impl;
    if (fields >> name >> role >> impl) out.emplace_back(name, impl);
  }
  return out;
}

std::map<std::string, std::string> own_variant_names(const fs::path& binary,
                                                     const std::vector<std::string>& extra_args) {
  const auto listed = listed_variants(binary, nullptr, extra_args);
  return {listed.begin(), listed.end()};
}

std::string rung_of(const std::map<std::string, std::string>& own, const std::string& name) {
  const auto it = own.find(name);
  return it == own.end() ? variant_of(name) : it->second;
}

ExampleRunSummary run_example(const fs::path& binary, const std::string& example,
                              const std::vector<std::string>& expected_cases,
                              const std::vector<std::string>& extra_args, ResultsFile& into) {
  const fs::path dir = make_temp_dir("bench-example-");
  const fs::path out_file = dir / "out.json";
  const fs::path progress_file = dir / "progress";
  std::vector<std::string> argv = {binary.string(),
                                   "--benchmark_filter=^" + example + "/",
                                   "--benchmark_out=" + out_file.string(),
                                   "--benchmark_out_format=json",
                                   "--bench_samples_out=" + (dir / "samples").string(),
                                   "--bench_progress=" + progress_file.string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const auto start = std::chrono::steady_clock::now();
  ExampleRunSummary summary;
  summary.process = run_process(argv, true);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::size_t before = into.benchmarks.size();
  try {
    merge_run(into, json::parse(null_non_finite(slurp(out_file))), dir / "samples");
  } catch (const json::exception&) {
    // A process that died mid-run leaves no or half a JSON file: its cases become a Crash.
  }
  {  // "start <case>" and "end <case>" lines: the last case started and not ended was running
    std::istringstream progress(slurp(progress_file));
    for (std::string what, name; progress >> what && std::getline(progress >> std::ws, name);) {
      if (what == "start") summary.running_case = name;
      if (what == "end" && name == summary.running_case) {
        summary.running_case.clear();
        ++summary.cases_ended;
      }
    }
  }
  std::set<std::string> reported;
  for (std::size_t i = before; i < into.benchmarks.size(); ++i)
    reported.insert(strip_gb_suffixes(into.benchmarks[i].value("name", std::string())));
  summary.cases_reported = static_cast<int>(reported.size());
  constexpr int kNoDeviceExitCode = 77;  // the harness's "SKIPPED: no CUDA device" exit
  Crash crash{example, summary.process.describe(), tail_lines(summary.process.err, 3), {},
              summary.process.started && !summary.process.signaled &&
                  summary.process.exit_code == kNoDeviceExitCode};
  for (const auto& name : expected_cases)
    if (!reported.count(name)) crash.cases.push_back(name);
  if (!summary.process.ok() || !crash.cases.empty()) {
    if (crash.cases.empty() && reported.empty()) crash.cases = expected_cases;
    into.crashes.push_back(std::move(crash));
  }
  fs::remove_all(dir);
  return summary;
}

}  // namespace bench::tools
