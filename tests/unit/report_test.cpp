// tools/report.cpp: the variants' own metrics appear under the table and in the JSON report.
#include "report.hpp"

#include <gtest/gtest.h>

#include "case_result_fixture.hpp"
#include "scoring.hpp"

namespace {

bench::tools::CaseResult with_latency(const std::string& variant, double median_us, double latency_us) {
  bench::tools::CaseResult c = bench::tools::testing::verified_case("ch11/stream_priority", variant, variant, median_us);
  for (int i = 0; i < 30; ++i) c.samples.push_back(median_us * (1 + 0.001 * (i % 3)));
  c.metric_names = {"critical_latency_us"};
  c.metrics["critical_latency_us"] = latency_us;
  return c;
}

TEST(Report, ShowsTheVariantsOwnMetricsForBothSides) {
  const auto card = bench::tools::score({with_latency("baseline", 4474, 4474), with_latency("optimized", 3319, 1962)},
                                        std::nullopt, "h100_80gb_hbm3");
  const std::string table = bench::tools::format_table(card);
  EXPECT_NE(table.find("ch11/stream_priority optimized: critical_latency_us baseline 4474, optimized 1962"),
            std::string::npos)
      << table;
  const auto json = bench::tools::report_json(card);
  EXPECT_EQ(json["rows"][0]["subject"]["metrics"]["critical_latency_us"], 1962);
}

}  // namespace
