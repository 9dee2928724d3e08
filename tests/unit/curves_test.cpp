// tools/curves.cpp: an example's pairs lined up along each axis, in the axis's order, and the
// crossover where the optimization stops paying; the Markdown and HTML reports that show them.
#include "curves.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "case_result_fixture.hpp"
#include "html_report.hpp"
#include "report.hpp"

namespace {

using bench::tools::CaseResult;
using bench::tools::testing::normal_samples;
using bench::tools::testing::verified_case;

// A pair at `point` whose optimized side takes `optimized_us` against a 1000 us baseline.
void add_pair(std::vector<CaseResult>& cases, const std::string& example, double optimized_us,
              unsigned seed) {
  for (const auto& [role, us] :
       {std::pair<std::string, double>{"baseline", 1000}, {"optimized", optimized_us}}) {
    CaseResult c = verified_case(example, role, role, us);
    c.samples = normal_samples(us, 0.005, 40, seed++);
    c.noise = 0.005;
    c.bytes = 1e9;
    c.gbps = c.bytes / (us * 1e-6) / 1e9;  // as the harness's counter
    cases.push_back(c);
  }
}

bench::tools::Scorecard decoding() {
  std::vector<CaseResult> cases;
  // Declared (and run) out of numeric order: the curve sorts them.
  add_pair(cases, "ch18/flash_decoding/batch:2", 550, 10);
  add_pair(cases, "ch18/flash_decoding/batch:1", 300, 20);
  add_pair(cases, "ch18/flash_decoding/batch:16", 1000, 30);
  add_pair(cases, "ch18/flash_decoding/batch:4", 870, 40);
  add_pair(cases, "ch18/flash_decoding/batch:8", 1010, 50);
  add_pair(cases, "ch07/plain", 500, 60);  // no axes: no curve
  return bench::tools::score(cases, std::nullopt, "h100_80gb_hbm3");
}

TEST(Curves, OnePerAxisInNumericOrderWithTheCrossoverNamed) {
  const auto card = decoding();
  const auto all = bench::tools::curves(card);
  ASSERT_EQ(all.size(), 1u);
  const auto& c = all[0];
  EXPECT_EQ(c.title(), "ch18/flash_decoding against batch");
  std::vector<std::string> values;
  for (const auto& p : c.points) values.push_back(p.value);
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", "4", "8", "16"}));
  EXPECT_EQ(c.crossover, "stops paying between batch:4 (1.15x) and batch:8 (0.99x)");
  EXPECT_EQ(c.points[0].rate(), "3333 GB/s");
}

TEST(Curves, EachAxisWithTheOthersHeld) {
  std::vector<CaseResult> cases;
  unsigned seed = 1;
  for (const char* b : {"1", "4"})
    for (const char* s : {"4096", "8192"})
      add_pair(cases, std::string("ch16/fa/b:") + b + "/s:" + s, 400, seed += 2);
  add_pair(cases, "ch16/fa/b:16/s:4096", 400, 99);  // alone at b:16: no curve along s there
  const auto all = bench::tools::curves(bench::tools::score(cases, std::nullopt, "h100_80gb_hbm3"));
  std::vector<std::string> titles;
  for (const auto& c : all) titles.push_back(c.title());
  EXPECT_EQ(titles,
            (std::vector<std::string>{"ch16/fa against b at s:4096", "ch16/fa against b at s:8192",
                                      "ch16/fa against s at b:1", "ch16/fa against s at b:4"}));
  EXPECT_EQ(all[0].points.size(), 3u);
  EXPECT_TRUE(all[0].crossover.empty());
}

TEST(Curves, TheReportsGroupThePointsAndNameTheCrossover) {
  const auto card = decoding();
  const std::string markdown = bench::tools::format_markdown(card);
  EXPECT_NE(markdown.find("## Curves"), std::string::npos);
  EXPECT_NE(markdown.find("### ch18/flash_decoding against batch"), std::string::npos);
  EXPECT_NE(markdown.find("| 8 | 0.99x ["), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("Crossover: the optimization stops paying between batch:4"),
            std::string::npos);
  EXPECT_NE(bench::tools::format_table(card).find(
                "crossovers:\n  ch18/flash_decoding against batch: stops paying"),
            std::string::npos);
  const std::string html = bench::tools::html_report({{"run.json", {}, card, std::nullopt}});
  EXPECT_NE(html.find("<h4 class=\"curve\">ch18/flash_decoding against batch</h4>"),
            std::string::npos);
  std::size_t dots = 0;
  for (auto at = html.find("class=\"curve-point\""); at != std::string::npos;
       at = html.find("class=\"curve-point\"", at + 1))
    ++dots;
  EXPECT_EQ(dots, 5u);  // the speedup panel; no ceilings, so no percent-of-ceiling dots
  EXPECT_NE(html.find("<b>Crossover</b>: the optimization stops paying"), std::string::npos);
}

}  // namespace
