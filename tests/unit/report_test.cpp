// tools/report.cpp: the variants' own metrics appear under the table and in the JSON report; the
// throughput column speaks the unit of the ceiling the % column is against.
#include "report.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "case_result_fixture.hpp"
#include "html_report.hpp"
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

// A case whose sample checks fall short of docs/validity.md row 2's bar (a 5% spoiler caught with
// 99%) says so under the table, in the Markdown and in the JSON, once per case; one that meets it
// says nothing; the status stands either way.
TEST(Report, NamesTheCasesWhoseChecksFallShortOfTheBar) {
  auto baseline = with_latency("baseline", 4474, 4474),
       optimized = with_latency("optimized", 3319, 1962);
  baseline.escape_5pct = 0.0, baseline.checked_samples = 93, baseline.timed_samples = 120;
  optimized.escape_5pct = 0.97, optimized.checked_samples = 5, optimized.timed_samples = 1782;
  optimized.sample_check = "cpu (no device reference)";
  const auto card = bench::tools::score({baseline, optimized}, std::nullopt, "h100_80gb_hbm3");
  const std::string table = bench::tools::format_table(card),
                    markdown = bench::tools::format_markdown(card);
  const std::string line =
      "5 of 1782 timed samples checked (cpu (no device reference)): a variant spoiling 5% of "
      "them would escape every check with probability up to 0.97 (the bar: 0.01)";
  EXPECT_NE(table.find("ch11/stream_priority optimized: checks: " + line), std::string::npos)
      << table;
  EXPECT_NE(table.find("checks: 1 case(s) short of catching a 5% spoiler with 99%"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("baseline: checks:"), std::string::npos) << table;
  EXPECT_NE(markdown.find("- checks `ch11/stream_priority/optimized`: " + line), std::string::npos)
      << markdown;
  const auto json = bench::tools::report_json(card);
  EXPECT_EQ(json["rows"][0]["subject"]["checks"]["checked_samples"], 5);
  EXPECT_DOUBLE_EQ(json["rows"][0]["subject"]["checks"]["escape_5pct"].get<double>(), 0.97);
  // Nothing wrong was found: the status is the one the same pair gets without the counters.
  const auto plain = bench::tools::score(
      {with_latency("baseline", 4474, 4474), with_latency("optimized", 3319, 1962)}, std::nullopt,
      "h100_80gb_hbm3");
  EXPECT_EQ(card.rows[0].status, plain.rows[0].status);
}

// A decode attention declares its flops (against bf16) and its bytes (against hbm_read); it is
// held to the read ceiling, so the row must say GB/s, not 3.1 TFLOP/s beside 96.8%.
TEST(Report, ThroughputIsInTheUnitOfTheCeilingThePercentIsOf) {
  std::vector<bench::tools::CaseResult> cases = {with_latency("baseline", 1160, 1160), with_latency("optimized", 352, 352)};
  for (auto& c : cases) {
    c.bytes = 1.07e9, c.gbps = c.bytes / (c.median_us * 1e3);
    c.flops = 1.07e9, c.tflops = c.flops / (c.median_us * 1e6);
    c.bw_ceiling = "hbm_read_gbps", c.compute_ceiling = "bf16_tflops";
  }
  bench::Expectations x;
  x.ceilings["hbm_read_gbps"] = {3150.0, "GB/s", 0.005};
  x.ceilings["bf16_tflops"] = {720.0, "TFLOP/s", 0.005};
  const std::string table = bench::tools::format_table(bench::tools::score(cases, x, "h100_80gb_hbm3"));
  EXPECT_NE(table.find("3040 GB/s"), std::string::npos) << table;
  EXPECT_EQ(table.find("TFLOP/s"), std::string::npos) << table;
}

// A pair scored by a metric names it where the speedup goes, in the table, compare.md, the JSON
// report and the HTML page, and shows no percent of a ceiling (the ratio is not of time).
TEST(Report, APairScoredByAMetricNamesItInTheRow) {
  std::vector<bench::tools::CaseResult> cases = {with_latency("baseline", 1000, 0),
                                                 with_latency("optimized", 1000, 0)};
  for (auto* c : {&cases[0], &cases[1]}) {
    c->example = "ch15/interference";
    c->name = c->example + "/" + c->variant;
    c->bytes = 1e9, c->gbps = 1000, c->bw_ceiling = "hbm_copy_gbps";
    c->scored_by = bench::ScoredMetric{"p99_decode_latency_us", "lower"};
    c->metric_names = {"p99_decode_latency_us"};
    for (int i = 0; i < 30; ++i)
      c->metric_samples.push_back((c == &cases[0] ? 462 : 200) * (1 + 0.001 * (i % 3)));
    c->metrics = {{"p99_decode_latency_us", c->metric_samples[0]}};
  }
  bench::Expectations x;
  x.ceilings["hbm_copy_gbps"] = {3000.0, "GB/s", 0.005};
  const auto card = bench::tools::score(cases, x, "h100_80gb_hbm3");
  const auto cells = bench::tools::table_cells(card.rows.at(0));
  EXPECT_EQ(cells[4].rfind("p99_decode_latency_us 2.31x [", 0), 0u) << cells[4];
  EXPECT_EQ(cells[8], "");  // no % of a ceiling
  EXPECT_NE(bench::tools::format_table(card).find("p99_decode_latency_us 2.31x"),
            std::string::npos);
  EXPECT_NE(bench::tools::format_markdown(card).find("| p99_decode_latency_us 2.31x"),
            std::string::npos);
  const auto json = bench::tools::report_json(card);
  EXPECT_EQ(json["rows"][0]["scored_by"], "metric");
  EXPECT_EQ(json["rows"][0]["metric"]["name"], "p99_decode_latency_us");
  EXPECT_EQ(json["rows"][0]["metric"]["better"], "lower");
  EXPECT_FALSE(json["rows"][0].contains("pct_ceiling"));
  const std::string html =
      bench::tools::html_report({bench::tools::ReportRun{"fixture", {}, card, x}});
  EXPECT_NE(html.find("p99_decode_latency_us 2.31×"), std::string::npos);
}

// A pair's subject is named by its role; the rung it runs (the label's impl) follows in the table
// and is in the JSON, so a reader need not look up which rung "optimized" is. A step's row, already
// named by its rung, and a case without the label are shown as before.
TEST(Report, TheOptimizedRowNamesItsRung) {
  std::vector<bench::tools::CaseResult> cases = {with_latency("baseline", 4474, 4474),
                                                 with_latency("optimized", 3319, 1962),
                                                 with_latency("tiled", 3900, 3000)};
  cases[0].impl = "host_loop", cases[1].impl = "cluster_permute", cases[2].impl = "tiled";
  cases[2].role = "step";
  const auto card = bench::tools::score(cases, std::nullopt, "h100_80gb_hbm3");
  ASSERT_EQ(card.rows.size(), 2u);
  EXPECT_EQ(bench::tools::table_cells(card.rows[0])[1], "optimized (cluster_permute)");
  EXPECT_EQ(bench::tools::table_cells(card.rows[1])[1], "tiled (step)");
  EXPECT_NE(bench::tools::format_markdown(card).find("| optimized (cluster_permute) |"),
            std::string::npos);
  const auto json = bench::tools::report_json(card);
  EXPECT_EQ(json["rows"][0]["variant"], "optimized");
  EXPECT_EQ(json["rows"][0]["subject"]["impl"], "cluster_permute");
  EXPECT_EQ(json["rows"][0]["baseline"]["impl"], "host_loop");

  cases[1].impl.clear();  // results written before the label carried it
  EXPECT_EQ(bench::tools::table_cells(
                bench::tools::score(cases, std::nullopt, "h100_80gb_hbm3").rows[0])[1],
            "optimized");
}

}  // namespace
