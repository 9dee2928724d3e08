// tools/cli.hpp: the `bench` command line. Kept apart from main() so tests can drive it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace bench::tools {

// args[0] is the program name. Returns the exit code; usage errors print to `err` and give 2.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace bench::tools
