// harness/src/registry.cpp: the points an example's axes give a run (defaults, --bench_sweep,
// --bench_axis), their case names, and the declarations refused.
#include "registry.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

using bench::detail::AxisDef;
using bench::detail::ExampleDef;
using bench::detail::PointSelection;
using bench::detail::select_points;
using Points = std::vector<std::string>;

ExampleDef attention() {
  ExampleDef e;
  e.chapter = "ch16";
  e.name = "flash_attention";
  e.axes = {{AxisDef::Kind::integer, "b", {"1", "4"}, {"4"}},
            {AxisDef::Kind::integer, "s", {"4096", "8192"}, {}},
            {AxisDef::Kind::boolean, "causal", {"0", "1"}, {"1"}}};
  return e;
}

TEST(Points, AnExampleWithoutAxesHasOneEmptyPoint) {
  ExampleDef e;
  EXPECT_EQ(select_points(e, {}), Points{""});
  EXPECT_EQ(select_points(e, {true, {}}), Points{""});
}

TEST(Points, DefaultsAreTheProductOfEachAxissDefaultsFirstAxisOutermost) {
  EXPECT_EQ(select_points(attention(), {}), (Points{"b:4/s:4096/causal:1", "b:4/s:8192/causal:1"}));
}

TEST(Points, SweepTakesEveryPoint) {
  const Points all = select_points(attention(), {true, {}});
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(all.front(), "b:1/s:4096/causal:0");
  EXPECT_EQ(all.back(), "b:4/s:8192/causal:1");
}

TEST(Points, DeclaredDefaultPointsReplaceTheProductAndAreWrittenInAxisOrder) {
  ExampleDef e = attention();
  e.default_points = {"causal:0/b:1/s:8192", "b:4/s:4096/causal:1"};
  EXPECT_EQ(select_points(e, {}), (Points{"b:1/s:8192/causal:0", "b:4/s:4096/causal:1"}));
  EXPECT_EQ(select_points(e, {true, {}}).size(), 8u);  // a sweep still takes every point
}

TEST(Points, AxisFiltersKeepMatchingPointsAndDropExamplesWithoutTheAxis) {
  PointSelection s{true, {{"b", {"1"}}, {"causal", {"0", "1"}}}};
  EXPECT_EQ(select_points(attention(), s), (Points{"b:1/s:4096/causal:0", "b:1/s:4096/causal:1",
                                                   "b:1/s:8192/causal:0", "b:1/s:8192/causal:1"}));
  EXPECT_EQ(select_points(attention(), {false, {{"s", {"8192"}}}}), Points{"b:4/s:8192/causal:1"});
  EXPECT_TRUE(select_points(attention(), {false, {{"batch", {"1"}}}}).empty());
  EXPECT_TRUE(select_points(ExampleDef{}, {false, {{"b", {"1"}}}}).empty());
  EXPECT_TRUE(select_points(attention(), {false, {{"b", {"2"}}}}).empty());  // not one of b's
  EXPECT_TRUE(select_points(attention(), {false, {{"b", {"1"}}, {"b", {"4"}}}}).empty());
}

// Without --bench_sweep a filter asking for a value no default point has takes it, the other
// axes at their defaults: `--axis batch=32` runs batch 32 where the defaults are 1 and 8.
TEST(Points, AFilterValueOutsideTheDefaultsIsTakenWithTheOtherAxesAtTheirDefaults) {
  ExampleDef decode;
  decode.chapter = "ch20";
  decode.name = "transformer_decode";
  decode.axes = {{AxisDef::Kind::integer, "batch", {"1", "2", "4", "8", "16", "32"}, {"1", "8"}}};
  EXPECT_EQ(select_points(decode, {false, {{"batch", {"32"}}}}), Points{"batch:32"});
  EXPECT_EQ(select_points(decode, {false, {{"batch", {"32", "1"}}}}),
            (Points{"batch:1", "batch:32"}));
  EXPECT_EQ(select_points(attention(), {false, {{"b", {"1"}}}}),
            (Points{"b:1/s:4096/causal:1", "b:1/s:8192/causal:1"}));
  // Declared default points: those holding the filters' values where there are some (b 1 at
  // s8192), else the filters' values with the other axes at the values the defaults give them.
  ExampleDef e = attention();
  e.default_points = {"b:1/s:8192/causal:0", "b:4/s:4096/causal:1"};
  EXPECT_EQ(select_points(e, {false, {{"b", {"4"}}}}), Points{"b:4/s:4096/causal:1"});
  EXPECT_EQ(select_points(e, {false, {{"b", {"1"}}, {"s", {"4096", "8192"}}}}),
            (Points{"b:1/s:4096/causal:0", "b:1/s:4096/causal:1", "b:1/s:8192/causal:0"}));
}

TEST(Points, BadDeclarationsAreRefusedNamingTheExample) {
  auto refused = [](ExampleDef e) {
    try {
      select_points(e, {});
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  ExampleDef e = attention();
  e.axes[0].defaults = {"2"};
  EXPECT_NE(refused(e).find("ch16/flash_attention: axis 'b': default 2"), std::string::npos)
      << refused(e);
  e = attention();
  e.axes[1].values = {"4096", "4096"};
  EXPECT_NE(refused(e).find("twice"), std::string::npos);
  e = attention();
  e.axes[1].values = {"a/b"};
  EXPECT_NE(refused(e).find("'a/b'"), std::string::npos);
  e = attention();
  e.axes[2].name = "b";
  EXPECT_NE(refused(e).find("declared twice"), std::string::npos);
  e = attention();
  e.axes[2].name = "threads";
  EXPECT_NE(refused(e).find("Google Benchmark's"), std::string::npos);
  e = attention();
  e.axes[0].values.clear();
  EXPECT_NE(refused(e).find("no values"), std::string::npos);
  e = attention();
  e.default_points = {"b:4/s:4096"};
  EXPECT_NE(refused(e).find("needs causal"), std::string::npos);
  e.default_points = {"b:4/s:4096/causal:1/d:64"};
  EXPECT_NE(refused(e).find("'d', not an axis"), std::string::npos);
  e.default_points = {"b:4/s:2048/causal:1"};
  EXPECT_NE(refused(e).find("needs s"), std::string::npos);
}

TEST(Points, CaseNamesPutThePointAfterTheVariant) {
  bench::detail::VariantDef v;
  v.name = "optimized";
  ExampleDef e = attention();
  EXPECT_EQ(bench::detail::case_name(e, v), "ch16/flash_attention/optimized");
  const auto expanded = bench::detail::expand_points({&e}, {});
  ASSERT_EQ(expanded.size(), 2u);
  EXPECT_EQ(bench::detail::case_name(*expanded[1], v),
            "ch16/flash_attention/optimized/b:4/s:8192/causal:1");
}

TEST(Points, AVariantOrAModeCanHoldAtSomePointsOnly) {
  ExampleDef e = attention();
  e.variants.resize(2);
  e.variants[1].name = "pingpong";
  e.variants[1].where = [](const bench::Point& p) {
    return p.axis("causal") == 1 && p.axis("s") == 8192;
  };
  e.modes_where.emplace_back([](const bench::Point& p) { return p.string_axis("s") == "8192"; },
                             bench::Mode::sustained);
  const auto expanded = bench::detail::expand_points({&e}, {});
  ASSERT_EQ(expanded.size(), 2u);
  EXPECT_EQ(expanded[0]->variants.size(), 1u);
  EXPECT_EQ(expanded[0]->mode, bench::Mode::cold);
  EXPECT_EQ(expanded[1]->variants.size(), 2u);
  EXPECT_EQ(expanded[1]->mode, bench::Mode::sustained);
  EXPECT_THROW(bench::Point("b:4").axis("s"), std::invalid_argument);
}

// Example::scored_by is one declaration for the example: every point is scored by it.
TEST(Points, EveryPointIsScoredByTheExamplesMetric) {
  ExampleDef e = attention();
  e.scored_metric = "p99_us";
  e.scored_better = bench::Better::higher;
  const auto expanded = bench::detail::expand_points({&e}, {true, {}});
  ASSERT_EQ(expanded.size(), 8u);
  for (const auto* point : expanded) {
    EXPECT_EQ(point->scored_metric, "p99_us") << point->point;
    EXPECT_EQ(point->scored_better, bench::Better::higher) << point->point;
  }
  EXPECT_STREQ(bench::to_string(bench::Better::higher), "higher");
  EXPECT_STREQ(bench::to_string(bench::Better::lower), "lower");
}

TEST(Points, ValuesAreWrittenAsTheyReadBack) {
  EXPECT_EQ(bench::detail::axis_text(int64_t{4096}), "4096");
  EXPECT_EQ(bench::detail::axis_text(0.5), "0.5");
  EXPECT_EQ(bench::detail::axis_text(0.1), "0.1");
  EXPECT_EQ(bench::detail::axis_text(1e-7), "1e-07");
  EXPECT_EQ(bench::powers_of_two(2, 4), (std::vector<int64_t>{4, 8, 16}));
}

TEST(Points, AMalformedPointIsRefused) {
  EXPECT_EQ(bench::detail::parse_point("b:4/s:4096").size(), 2u);
  EXPECT_THROW(bench::detail::parse_point("b4"), std::invalid_argument);
  EXPECT_THROW(bench::detail::parse_point("b:4/"), std::invalid_argument);
}

}  // namespace
