// tests/tools: what both tools tests need to run the real `bench` executable as a user would.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "chapter_process.hpp"

namespace bench::tools::testing {

// A fresh, empty directory under the system temp dir, unique to this process.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("bench_tools_test_" + name + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `bench <args>` (the built executable, BENCH_EXE) and captures its output.
inline ProcessResult bench(std::vector<std::string> args) {
  args.insert(args.begin(), BENCH_EXE);
  return run_process(args, true);
}

}  // namespace bench::tools::testing
