// tools/cli.cpp: bad usage exits 2 with a message; --help is not an error.
#include "cli.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace {

int run(std::vector<std::string> args, std::string* err_text = nullptr) {
  args.insert(args.begin(), "bench");
  std::ostringstream out, err;
  const int code = bench::tools::run_cli(args, out, err);
  if (err_text) *err_text = err.str() + out.str();
  return code;
}

TEST(Cli, BadUsageExitsTwo) {
  std::string err;
  EXPECT_EQ(run({}, &err), 2);
  EXPECT_EQ(run({"frobnicate"}, &err), 2);
  EXPECT_NE(err.find("unknown subcommand 'frobnicate' (subcommands: list run compare"), std::string::npos) << err;
  EXPECT_EQ(run({"compare", "--chapter", ".."}, &err), 2);  // the launcher refuses it too
  EXPECT_NE(err.find("expected a chapter like ch07, got .."), std::string::npos) << err;
  EXPECT_EQ(run({"compare"}, &err), 2);
  EXPECT_NE(err.find("--chapter chNN, --all or --from-results"), std::string::npos) << err;
  EXPECT_EQ(run({"compare", "--chapter", "7"}, &err), 2);
  EXPECT_NE(err.find("expected a chapter like ch07"), std::string::npos) << err;
  EXPECT_EQ(run({"compare", "--all", "--chapter", "ch07"}), 2);
  EXPECT_EQ(run({"compare", "--from-results", "x.json", "--all"}), 2);
  EXPECT_EQ(run({"compare", "--chapter", "ch02", "--repetitions", "0"}), 2);
  EXPECT_EQ(run({"compare", "--from-results", "x.json", "--repetitions", "3"}), 2);  // a saved run is not rerun
  EXPECT_EQ(run({"run"}), 2);
  EXPECT_EQ(run({"run", "--chapter", "ch07", "--variant", "optimized"}), 2);
  // An empty name used to select every example; now it is refused.
  EXPECT_EQ(run({"compare", "--chapter", "ch07", "--example", ""}, &err), 2);
  EXPECT_NE(err.find("an empty example name"), std::string::npos) << err;
  EXPECT_EQ(run({"sanitize", "--chapter", "ch07", "--example", ""}), 2);
  EXPECT_EQ(run({"expectations"}), 2);
  EXPECT_EQ(run({"expectations", "diff", "only_one.json"}), 2);
}

TEST(Cli, HelpIsNotAnError) { EXPECT_EQ(run({"--help"}), 0); }

// `expectations diff` compares two files field by field; its help says so, not "diff expectations
// files".
TEST(Cli, ExpectationsActionsSayWhatTheyDo) {
  std::string help;
  EXPECT_EQ(run({"expectations", "diff", "--help"}, &help), 0);
  EXPECT_NE(help.find("exactly two files: OLD NEW"), std::string::npos) << help;
  EXPECT_NE(help.find("`~ path: old -> new` changed"), std::string::npos) << help;
  EXPECT_EQ(run({"expectations", "validate", "--help"}, &help), 0);
  EXPECT_NE(help.find("FILE:LINE:COLUMN"), std::string::npos) << help;
  EXPECT_EQ(run({"expectations", "show", "--help"}, &help), 0);
  EXPECT_NE(help.find("each variant's median and noise"), std::string::npos) << help;
}

TEST(Cli, UnreadableResultsFileExitsTwo) {
  std::string err;
  EXPECT_EQ(run({"compare", "--from-results", "/nonexistent/results.json"}, &err), 2);
  EXPECT_NE(err.find("/nonexistent/results.json"), std::string::npos) << err;
}

TEST(Cli, MalformedExpectationsFailValidation) {
  std::string err;
  EXPECT_EQ(run({"expectations", "validate", "/nonexistent/x.json"}, &err), 2);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
}

}  // namespace
