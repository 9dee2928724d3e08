// The `bench` program: everything lives in bench_tools_lib so the tests can drive it.
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  return bench::tools::run_cli(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}
