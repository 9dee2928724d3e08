// Tests tools/lookup.cpp: which examples `--example a,b` selects, and the names it refuses.
#include "lookup.hpp"

#include <gtest/gtest.h>

namespace {

using bench::tools::example_selected;
using bench::tools::no_such_examples;
using bench::tools::unmatched_names;

TEST(ExampleSelected, EachNameIsBareOrFull) {
  EXPECT_TRUE(example_selected("ch07/copy", {}));  // no --example: every example
  EXPECT_TRUE(example_selected("ch07/copy", {"copy"}));
  EXPECT_TRUE(example_selected("ch07/copy", {"ch07/copy"}));
  EXPECT_FALSE(example_selected("ch07/copy", {"ch08/copy"}));
  EXPECT_FALSE(example_selected("ch07/copy_coalescing", {"copy"}));  // whole names, not prefixes
  EXPECT_FALSE(example_selected("ch07/copy", {"cop"}));
}

TEST(ExampleSelected, AListSelectsTheUnionOfItsNames) {
  const std::vector<std::string> names = {"flash_attention_b4_s4096_d64",
                                          "ch16/flash_attention_b4_s4096_d64_causal"};
  EXPECT_TRUE(example_selected("ch16/flash_attention_b4_s4096_d64", names));
  EXPECT_TRUE(example_selected("ch16/flash_attention_b4_s4096_d64_causal", names));
  EXPECT_FALSE(example_selected("ch16/flash_attention_b4_s1024_d64", names));
}

TEST(UnmatchedNames, NamesThatSelectNothingInTheOrderGiven) {
  const std::vector<std::string> examples = {"ch07/copy", "ch07/transpose", "ch08/copy"};
  EXPECT_TRUE(unmatched_names(examples, {}).empty());
  EXPECT_TRUE(unmatched_names(examples, {"copy", "ch07/transpose"}).empty());
  EXPECT_EQ(unmatched_names(examples, {"tranpose", "copy", "ch09/copy"}),
            (std::vector<std::string>{"tranpose", "ch09/copy"}));
  EXPECT_EQ(unmatched_names({}, {"copy"}), std::vector<std::string>{"copy"});
}

TEST(UnmatchedNames, TheErrorNamesEveryOne) {
  EXPECT_EQ(no_such_examples({"tranpose"}, {"ch07"}),
            "--example tranpose matches no example of ch07 (`bench list` names them)");
  EXPECT_EQ(no_such_examples({"a", "b"}, {"ch07", "ch08"}),
            "--example a, b match no example of ch07, ch08 (`bench list` names them)");
  // Under --axis the example may exist with no point the axes select.
  EXPECT_EQ(no_such_examples({"transformer_decode"}, {"ch20"}, {"batch=33"}, false),
            "--example transformer_decode matches no example of ch20 at the points "
            "--axis batch=33 select (`bench list --sweep` names every point)");
}

TEST(ExampleSelected, APointOfAnExampleIsSelectedByTheExamplesName) {
  EXPECT_TRUE(bench::tools::example_selected("ch16/fa/b:4/s:4096", {"fa"}));
  EXPECT_TRUE(bench::tools::example_selected("ch16/fa/b:4/s:4096", {"ch16/fa"}));
  EXPECT_FALSE(bench::tools::example_selected("ch16/fa/b:4/s:4096", {"b:4"}));
}

TEST(PointSelected, EveryAxisMustHaveOneOfItsValues) {
  using bench::tools::point_selected;
  EXPECT_TRUE(point_selected("ch16/fa/b:4/s:4096", {}));
  EXPECT_TRUE(point_selected("ch16/fa/b:4/s:4096", {"b=1,4", "s=4096"}));
  EXPECT_FALSE(point_selected("ch16/fa/b:4/s:4096", {"b=1"}));
  EXPECT_FALSE(point_selected("ch16/fa/b:4/s:4096", {"d=64"}));  // no such axis: left out
  EXPECT_FALSE(point_selected("ch07/copy", {"b=1"}));
  EXPECT_EQ(bench::tools::point_args({"b=1,4"}, true),
            (std::vector<std::string>{"--bench_sweep", "--bench_axis=b=1,4"}));
}

}  // namespace
