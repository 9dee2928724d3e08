// tools/html_report.cpp: the numbers that reach the page (roofline coordinates from flops and
// bytes, the ceilings drawn, the interval ends) and well-formed markup.
#include "html_report.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "case_result_fixture.hpp"
#include "report.hpp"

namespace {

using bench::tools::CaseResult;
using bench::tools::ReportRun;

CaseResult gemm_case(const std::string& variant, double median_us, unsigned seed) {
  CaseResult c = bench::tools::testing::verified_case("ch09/gemm", variant, variant, median_us);
  c.flops = 2e12;  // 2 TFLOP of work
  c.bytes = 1e9;   // over 1 GB: intensity 2000 flop/byte
  c.samples = bench::tools::testing::normal_samples(median_us, 0.01, 40, seed);
  c.noise = 0.01;
  c.compute_ceiling = "bf16_tflops";
  return c;
}

ReportRun a_run(bool with_ceilings) {
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)};
  CaseResult copy = bench::tools::testing::verified_case("ch07/copy", "baseline", "baseline", 900);
  copy.bytes = 2e9;  // no flops: not on the roofline
  copy.samples = bench::tools::testing::normal_samples(900, 0.01, 40, 3);
  CaseResult copy_opt = copy;
  copy_opt.variant = copy_opt.role = "optimized";
  copy_opt.name = "ch07/copy/optimized";
  copy_opt.median_us = 700;
  copy_opt.samples = bench::tools::testing::normal_samples(700, 0.01, 40, 4);
  cases.push_back(copy);
  cases.push_back(copy_opt);
  bench::Expectations x;
  x.hardware_key = "test_gpu";
  if (with_ceilings) {
    x.ceilings["hbm_copy_gbps"] = {3000.0, "GB/s"};
    x.ceilings["bf16_tflops"] = {700.0, "TFLOP/s"};
  }
  x.examples["ch09/gemm"].speedup = 5.0;
  x.examples["ch09/gemm"].tolerance = 0.1;
  ReportRun run;
  run.source = "fixture";
  run.context = {{"gpu_name", "Test GPU"}, {"git_sha", "0123456789abcdef"}, {"date", "2026-11-23T00:00:00Z"},
                 {"bench_command", "bench compare --chapter ch09 --html page.html"}};
  run.expectations = x;
  run.card = bench::tools::score(cases, x, "test_gpu");
  return run;
}

// Every tag opened is closed in order (the subset of XML the report writes).
bool well_formed(const std::string& markup, std::string* why) {
  std::vector<std::string> open;
  static const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
  for (auto it = std::sregex_iterator(markup.begin(), markup.end(), tag); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    if (m[3] == "/") continue;
    if (m[1] == "") {
      open.push_back(m[2]);
    } else if (open.empty() || open.back() != m[2]) {
      *why = "unexpected </" + m[2].str() + "> after <" + (open.empty() ? "" : open.back()) + ">";
      return false;
    } else {
      open.pop_back();
    }
  }
  if (!open.empty()) *why = "<" + open.back() + "> never closed";
  return open.empty();
}

std::string body_of(const std::string& html) {
  const auto from = html.find("<body>"), to = html.find("</body>");
  return html.substr(from, to + 7 - from);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HtmlReport, RooflinePointsComeFromFlopsBytesAndTheMedian) {
  std::vector<std::string> not_placed;
  const auto points = bench::tools::roofline_points(a_run(true).card, &not_placed);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[0].intensity, 2000.0);
  EXPECT_NEAR(points[0].tflops, 2e12 / 20000e-6 / 1e12, 1e-9);  // 100 TFLOP/s
  EXPECT_NEAR(points[1].tflops, 500.0, 1e-9);
  EXPECT_EQ(not_placed, (std::vector<std::string>{"ch07/copy/baseline", "ch07/copy/optimized"}));
}

TEST(HtmlReport, TheRoofIsTheGpusMeasuredCeilings) {
  const auto roofs = bench::tools::roofs(*a_run(true).expectations);
  ASSERT_EQ(roofs.size(), 2u);
  EXPECT_EQ(roofs[0].name, "hbm_copy_gbps");
  EXPECT_TRUE(roofs[0].bandwidth);
  EXPECT_EQ(roofs[1].name, "bf16_tflops");
  EXPECT_DOUBLE_EQ(roofs[1].value, 700.0);
  const std::string svg = bench::tools::roofline_svg(a_run(true));
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why;
  EXPECT_EQ(roofs[0].label, "HBM copy");
  EXPECT_EQ(roofs[1].label, "BF16 sustained");
  EXPECT_EQ(count(svg, "<polyline class=\"roof\""), 1);  // the memory level
  EXPECT_EQ(count(svg, "<line class=\"roof\""), 1);      // the compute roof
  EXPECT_EQ(count(svg, "class=\"point\""), 2);
  EXPECT_EQ(count(svg, "class=\"rungs\""), 1);  // baseline to optimized
  EXPECT_EQ(count(svg, "class=\"key-row\""), 2);
  // Named for the reader, once each, next to the line; not as raw keys.
  EXPECT_EQ(count(svg, ">HBM copy 3000 GB/s</text>"), 1);
  EXPECT_EQ(count(svg, ">BF16 sustained 700 TFLOP/s</text>"), 1);
  EXPECT_EQ(svg.find("hbm_copy_gbps 3"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"point-label\""), 0);  // numbers and a key instead of overprinting names
}

std::vector<std::smatch> all(const std::string& text, const std::regex& re) {
  return {std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()};
}

TEST(HtmlReport, EachMemoryLevelRisesToTheHighestRoofTheCasesUseAndEachRoofStartsOnTheTopSlope) {
  ReportRun run = a_run(true);
  auto& c = run.expectations->ceilings;
  c["l2_gbps"] = {10000.0, "GB/s"};
  c["smem_gbps"] = {32940.0, "GB/s"};
  c["fp32_tflops"] = {60.0, "TFLOP/s"};
  c["bf16_burst_tflops"] = {818.0, "TFLOP/s"};
  c["fp8_tflops"] = {1400.0, "TFLOP/s"};  // no case uses it: the slopes stop at BF16's 700
  const std::string svg = bench::tools::roofline_svg(run);
  std::string why;
  ASSERT_TRUE(well_formed(svg, &why)) << why;
  std::map<std::string, std::pair<double, double>> start;  // compute roof -> (x, y) of its left end
  for (const auto& m : all(svg, std::regex(R"re(<line class="roof" data-ceiling="(\w+)" x1="([\d.]+)" y1="([\d.]+)")re")))
    start[m[1]] = {std::stod(m[2]), std::stod(m[3])};
  ASSERT_EQ(start.size(), 4u);
  const auto slopes = all(svg, std::regex(R"re(<polyline class="roof" data-ceiling="(\w+)" points="[\d.]+,[\d.]+ ([\d.]+),([\d.]+)")re"));
  ASSERT_EQ(slopes.size(), 3u);
  for (const auto& m : slopes) EXPECT_EQ(std::stod(m[3]), start["bf16_tflops"].second) << m[1];  // ends at the roof
  EXPECT_EQ(std::stod(slopes[2][2]), start["bf16_tflops"].first);  // shared memory's knee starts the roof
  EXPECT_LT(start["fp32_tflops"].first, start["bf16_tflops"].first);
  EXPECT_LT(start["bf16_tflops"].first, start["bf16_burst_tflops"].first);
  // Each ceiling named once, human-readable, burst and sustained apart, each in its own style.
  for (const char* name : {">HBM copy 3000 GB/s<", ">L2 10000 GB/s<", ">Shared memory 32940 GB/s<", ">FP32 60 TFLOP/s<",
                           ">BF16 sustained 700 TFLOP/s<", ">BF16 burst 818 TFLOP/s<", ">FP8 sustained 1400 TFLOP/s<"})
    EXPECT_EQ(count(svg, name), 1) << name;
  std::set<std::string> styles;
  for (const auto& m : all(svg, std::regex(R"re(class="roof" data-ceiling="\w+" [^>]*?(stroke="[^"]*" stroke-width="[^"]*"(?: stroke-dasharray="[^"]*")?))re")))
    styles.insert(m[1]);
  EXPECT_EQ(styles.size(), 7u);
}

TEST(HtmlReport, EveryPointHasANumberThatTheKeyTableHolds) {
  const std::string svg = bench::tools::roofline_svg(a_run(true));
  const auto points = all(svg, std::regex(R"re(class="point" data-n="(\d+)" data-case="([^"]+)")re"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0][2], "ch09/gemm/baseline");  // baseline first, then the rungs in order
  for (const auto& m : points) {
    EXPECT_EQ(count(svg, "<text class=\"point-number\"") , 2);
    EXPECT_NE(svg.find("class=\"key-row\" data-n=\"" + m[1].str() + "\""), std::string::npos) << m[1];
    EXPECT_NE(svg.find("\">" + m[1].str() + "</text>"), std::string::npos) << m[1];
  }
  EXPECT_NE(svg.find("<text x=\"60\" y=\"522\">2</text><text x=\"88\" y=\"522\">ch09/gemm</text>"), std::string::npos);
  EXPECT_NE(svg.find("71.4% of BF16 sustained"), std::string::npos);  // 500 of 700 TFLOP/s
  EXPECT_EQ(count(svg, "class=\"variant-legend\""), 2);  // baseline and optimized
}

// A chapter's memory-bound examples share an intensity, so their points crowd one spot (a run
// of ch08 to ch10 puts about ten at 0.25 flop/B): more numbers than the six places round a
// point. Each still gets a place of its own (the generator's box: 6 px a digit, 9 px
// high, 2 px apart), the ones moved out joined to their point by a leader line.
// A chapter's memory-bound examples at one intensity (12 examples), and a cluster as dense as a
// page of ten chapter runs makes (80 examples at one point: the H100 page of 2026-11-27 has ~100
// GEMM and attention rungs between 500 and 4000 flop/B near 1000 TFLOP/s, and rings out to 80 px
// left 7 pairs overprinted there).
class CrowdedPoints : public ::testing::TestWithParam<int> {};

TEST_P(CrowdedPoints, StillGetANumberEachThatOverprintsNoOther) {
  std::vector<CaseResult> cases;
  bench::Expectations x;
  x.hardware_key = "test_gpu";
  x.ceilings["hbm_copy_gbps"] = {3000.0, "GB/s"};
  x.ceilings["fp32_tflops"] = {60.0, "TFLOP/s"};
  const int examples = GetParam();
  for (int e = 0; e < examples; ++e)
    for (auto [variant, us] : {std::pair{"baseline", 2000.0}, {"optimized", 1000.0}}) {
      CaseResult c = bench::tools::testing::verified_case(fmt::format("ch08/stream_{}", e), variant, variant, us);
      c.flops = 2.5e8, c.bytes = 1e9;  // 0.25 flop/B, every example alike
      c.samples = bench::tools::testing::normal_samples(us, 0.01, 40, static_cast<unsigned>(e * 2 + (us < 1500)));
      c.compute_ceiling = "fp32_tflops";
      cases.push_back(c);
    }
  ReportRun run;
  run.source = "fixture";
  run.expectations = x;
  run.card = bench::tools::score(cases, x, "test_gpu");
  const std::string svg = bench::tools::roofline_svg(run);
  struct Box {
    double x, y, w;
    std::string n;
  };
  std::vector<Box> numbers;
  for (const auto& m : all(svg, std::regex(R"re(<text class="point-number" x="(-?[\d.]+)" y="(-?[\d.]+)"[^>]*>(\d+)</text>)re")))
    numbers.push_back({std::stod(m[1]), std::stod(m[2]), 6.0 * m[3].length(), m[3]});
  ASSERT_EQ(numbers.size(), 2u * examples);
  for (std::size_t i = 0; i < numbers.size(); ++i)
    for (std::size_t j = i + 1; j < numbers.size(); ++j) {
      const Box &a = numbers[i], &b = numbers[j];
      const bool apart = a.x + a.w + 2 <= b.x || b.x + b.w + 2 <= a.x || std::abs(a.y - b.y) >= 11;
      EXPECT_TRUE(apart) << a.n << " at " << a.x << "," << a.y << " overprints " << b.n << " at " << b.x << "," << b.y;
    }
  EXPECT_GT(count(svg, "class=\"leader\""), 0);
}

INSTANTIATE_TEST_SUITE_P(HtmlReport, CrowdedPoints, ::testing::Values(12, 80));

// The key's columns are as wide as their text: a long rung name (ch10's persistent_multicast,
// ch01's bf16_cublaslt_dgelu_epilogue_bgradb) ends before the intensity beside it begins, and the
// SVG is wide enough for the last column. At 7 px a character (an upper bound at 11 px).
TEST(HtmlReport, TheKeysColumnsMakeRoomForALongRungName) {
  ReportRun run = a_run(true);
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1),
                                   gemm_case("optimized", 4000, 2)};
  CaseResult rung = gemm_case("bf16_cublaslt_dgelu_epilogue_bgradb_and_more", 9000, 3);
  rung.role = "step";
  cases.push_back(rung);
  run.card = bench::tools::score(cases, *run.expectations, "test_gpu");
  const std::string svg = bench::tools::roofline_svg(run);
  static const std::regex row(
      R"re(<g class="key-row"[^>]*>((?:<text[^>]*>[^<]*</text>){6})</g>)re");
  static const std::regex cell(R"re(<text x="(\d+)"[^>]*>([^<]*)</text>)re");
  int rows = 0;
  for (auto r = std::sregex_iterator(svg.begin(), svg.end(), row); r != std::sregex_iterator();
       ++r, ++rows) {
    const std::string cells_text = (*r)[1];
    std::vector<std::pair<int, std::string>> cells;
    for (auto c = std::sregex_iterator(cells_text.begin(), cells_text.end(), cell);
         c != std::sregex_iterator(); ++c)
      cells.emplace_back(std::stoi((*c)[1]), (*c)[2]);
    ASSERT_EQ(cells.size(), 6u);
    const auto px = [](const std::string& text) { return 7 * static_cast<int>(text.size()); };
    // variant (left-aligned) ends before the intensity (right-aligned at its x) starts
    EXPECT_LE(cells[2].first + px(cells[2].second), cells[3].first - px(cells[3].second))
        << cells[2].second;
    EXPECT_LE(cells[1].first + px(cells[1].second), cells[2].first) << cells[1].second;
    std::smatch width;
    ASSERT_TRUE(std::regex_search(svg, width, std::regex(R"re(<svg[^>]* width="(\d+)")re")));
    EXPECT_LE(cells[5].first + px(cells[5].second), std::stoi(width[1])) << cells[5].second;
  }
  EXPECT_EQ(rows, 3);
}

TEST(HtmlReport, WithoutCeilingsItSaysSoInsteadOfDrawingARoof) {
  const std::string svg = bench::tools::roofline_svg(a_run(false));
  EXPECT_EQ(count(svg, "class=\"roof\""), 0);
  EXPECT_NE(svg.find("run ./bench calibrate"), std::string::npos);
}

TEST(HtmlReport, SpeedupRowsCarryTheirIntervalEndsAndStatus) {
  const ReportRun run = a_run(true);
  const std::string html = bench::tools::html_report({run});
  std::string why;
  EXPECT_TRUE(well_formed(body_of(html), &why)) << why;
  EXPECT_EQ(count(html, "class=\"speedup-row\""), 2);
  const auto& row = run.card.rows.at(0);
  ASSERT_TRUE(row.speedup);
  EXPECT_NE(html.find(fmt::format("[{:.3g}, {:.3g}]", row.speedup->low, row.speedup->high)), std::string::npos);
  EXPECT_NE(html.find("data-status=\"PASS\""), std::string::npos);
  EXPECT_NE(html.find("data-status=\"NEW\""), std::string::npos);  // ch07/copy has no expectation
  EXPECT_NE(html.find("Test GPU"), std::string::npos);
  EXPECT_NE(html.find("<td>bench compare --chapter ch09 --html page.html</td>"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // nothing fetched
}

// A long example point's name ("ch17/moe_gating/tokens:8192/config:deepseek_v3") fits left of
// the speedup chart: its right-aligned text starts at x >= 0. At 7 px a character.
TEST(HtmlReport, ALongExampleNameIsNotCutAtTheSpeedupChartsEdge) {
  const std::string name = "ch17/moe_gating/tokens:8192/config:deepseek_v3_and_longer";
  std::vector<CaseResult> cases;
  for (auto [variant, us] : {std::pair{"baseline", 2000.0}, {"optimized", 1000.0}}) {
    CaseResult c = bench::tools::testing::verified_case(name, variant, variant, us);
    c.samples = bench::tools::testing::normal_samples(us, 0.01, 40, us < 1500 ? 1u : 2u);
    cases.push_back(c);
  }
  ReportRun run = a_run(true);
  run.card = bench::tools::score(cases, *run.expectations, "test_gpu");
  const std::string html = bench::tools::html_report({run});
  std::smatch label;
  ASSERT_TRUE(std::regex_search(
      html, label,
      std::regex(R"re(<text x="(\d+)" y="[\d.]+" text-anchor="end" dominant-baseline="middle">)re" +
                 name + "<")));
  EXPECT_GE(std::stoi(label[1]) - 7 * static_cast<int>(name.size()), 0);
}

// Issue 47: the table has compare.md's columns and the ceiling's name, sorts and filters with
// an inline script (nothing fetched), and scrolls in its own box on a narrow window.
TEST(HtmlReport, TheRowsTableHasTheMarkdownColumnsAndSortsInline) {
  const ReportRun run = a_run(true);
  const std::string html = bench::tools::html_report({run});
  for (const char* column : bench::tools::table_header())
    EXPECT_NE(html.find(std::string("<th>") + column + "</th>"), std::string::npos) << column;
  EXPECT_NE(html.find("<th>ceiling</th><th>note</th>"), std::string::npos);
  const auto& row = run.card.rows.at(0);
  const auto cells = bench::tools::table_cells(row);
  for (std::size_t i = 0; i < cells.size(); ++i)  // the status cell (6) is coloured
    if (!cells[i].empty())
      EXPECT_NE(html.find((i == 6 ? "\">" : "<td>") + cells[i] + "</td>"), std::string::npos)
          << cells[i];
  if (!row.ceiling_name.empty())
    EXPECT_NE(html.find("<td>" + row.ceiling_name + "</td>"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"table-wrap\"><table class=\"rows sortable\">"),
            std::string::npos);
  EXPECT_NE(html.find(".table-wrap{max-width:100%;overflow-x:auto}"), std::string::npos);
  EXPECT_EQ(count(html, "<script>"), 1);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
}

// A case above its ceiling (within the allowance) is flagged in the rows table, naming the
// ceiling, as compare.md notes it.
TEST(HtmlReport, ACaseAboveItsCeilingIsFlaggedInTheTableNamingIt) {
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)};
  cases[1].tflops = 730;  // 104.3% of the 700 TFLOP/s recorded: another board's ceiling
  bench::Expectations x;
  x.hardware_key = "test_gpu";
  x.ceilings["bf16_tflops"] = {700.0, "TFLOP/s"};
  ReportRun run;
  run.source = "fixture";
  run.expectations = x;
  run.card = bench::tools::score(cases, x, "test_gpu");
  ASSERT_FALSE(run.card.rows.at(0).ceiling_note.empty());
  const std::string html = bench::tools::html_report({run});
  EXPECT_NE(html.find("<td>bf16_tflops</td><td class=\"note\">104.3% of bf16_tflops: above the ceiling recorded"),
            std::string::npos);
}

TEST(HtmlReport, FailedCasesAndSeveralRunsStillRender) {
  ReportRun first = a_run(true), second = a_run(true);
  second.context["date"] = "2026-11-24T00:00:00Z";
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)};
  cases[1].outcome = bench::tools::Outcome::failed;
  cases[1].message = "verification run 1: output 'd': 3 non-finite";
  second.card = bench::tools::score(cases, second.expectations, "test_gpu");
  const std::string html = bench::tools::html_report({first, second});
  std::string why;
  EXPECT_TRUE(well_formed(body_of(html), &why)) << why;
  EXPECT_NE(html.find("data-status=\"FAILED\""), std::string::npos);
  EXPECT_NE(html.find("History (2 runs)"), std::string::npos);
}

TEST(HtmlReport, ThrottledDroppedAndNoisySamplesAreFlagged) {
  ReportRun run = a_run(true);
  EXPECT_NE(bench::tools::html_report({run}).find(
                "No case had throttled, dropped or noisy samples, or checks short"),
            std::string::npos);
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)};
  cases[0].sample_count = 40;
  cases[0].dropped_throttled = 3;
  cases[0].min_sm_mhz = 1410;
  cases[1].throttled_all = true;
  cases[1].min_sm_mhz = 1200;
  cases[1].noise = 0.08;
  run.card = bench::tools::score(cases, run.expectations, "test_gpu");
  const std::string html = bench::tools::html_report({run});
  std::string why;
  EXPECT_TRUE(well_formed(body_of(html), &why)) << why;
  EXPECT_EQ(count(html, "data-flag="), 2);
  EXPECT_NE(html.find("3 of 43 samples dropped, SM clock throttled (lowest 1410 MHz)"), std::string::npos);
  EXPECT_NE(html.find("every sample throttled (SM clock down to 1200 MHz), all kept; noisy (8.0%)"), std::string::npos);
  // Checks short of validity row 2's bar are flagged the same way (report.cpp's sentence).
  cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)};
  cases[1].escape_5pct = 1.0, cases[1].checked_samples = 5, cases[1].timed_samples = 1782;
  cases[1].sample_check = "cpu (no device reference)";
  run.card = bench::tools::score(cases, run.expectations, "test_gpu");
  const std::string short_checks = bench::tools::html_report({run});
  EXPECT_EQ(count(short_checks, "data-flag="), 1);
  EXPECT_NE(
      short_checks.find("checks: 5 of 1782 timed samples checked (cpu (no device reference))"),
      std::string::npos);
}

TEST(HtmlReport, RunsOfSeveralGpusAreSetSideBySide) {
  ReportRun one = a_run(true), four = a_run(true);
  one.context["driver_release"] = "580.159.04";
  EXPECT_NE(bench::tools::html_report({one}).find("<th>driver release</th><td>580.159.04</td>"), std::string::npos);
  EXPECT_EQ(bench::tools::html_report({one}).find("GPUs side by side"), std::string::npos);
  // The four-GPU machine measured only the GEMM: the copy reads "-" in its columns.
  std::vector<CaseResult> cases = {gemm_case("baseline", 20000, 1), gemm_case("optimized", 3000, 2)};
  four.card = bench::tools::score(cases, four.expectations, "4x_test_gpu");
  const std::string html = bench::tools::html_report({one, four});
  std::string why;
  EXPECT_TRUE(well_formed(body_of(html), &why)) << why;
  ASSERT_NE(html.find("GPUs side by side"), std::string::npos);
  EXPECT_NE(html.find("<th data-gpu=\"test_gpu\">Test GPU speedup</th>"), std::string::npos);
  EXPECT_NE(html.find("<th data-gpu=\"4x_test_gpu\">4× Test GPU speedup</th>"), std::string::npos);
  const auto table = html.substr(html.find("class=\"gpus sortable\""));
  const auto gemm_row = table.substr(table.find("<td>ch09/gemm</td>"));
  EXPECT_NE(gemm_row.substr(0, gemm_row.find("</tr>")).find("6.6"), std::string::npos) << gemm_row.substr(0, 400);  // 20000 / 3000
  const auto copy_row = table.substr(table.find("<td>ch07/copy</td>"));
  EXPECT_EQ(count(copy_row.substr(0, copy_row.find("</tr>")), "<td>-</td>"), 3);
  EXPECT_NE(html.find("<h2>4× Test GPU"), std::string::npos);  // not read as the one-GPU machine
}

// The side-by-side columns are headed by the GPUs' names as a reader knows them, taken from each
// run's device name, not by hardware keys ("h100_80gb_hbm3 speedup").
ReportRun run_on(const std::string& hardware_key, const std::string& device_name) {
  ReportRun run = a_run(true);
  run.context["gpu_name"] = device_name;
  run.card = bench::tools::score({gemm_case("baseline", 20000, 1), gemm_case("optimized", 4000, 2)},
                                 run.expectations, hardware_key);
  return run;
}
std::vector<std::string> side_by_side_headers(const std::string& html) {
  const auto head = html.substr(html.find("class=\"gpus sortable\""));
  std::vector<std::string> out;
  static const std::regex th(R"(<th[^>]*>([^<]*)</th>)");
  const std::string row = head.substr(0, head.find("</tr>"));
  for (auto it = std::sregex_iterator(row.begin(), row.end(), th); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  return out;
}

TEST(HtmlReport, SideBySideColumnsAreNamedAsAReaderKnowsTheGpus) {
  const std::string html = bench::tools::html_report(
      {run_on("h100_80gb_hbm3", "NVIDIA H100 80GB HBM3"), run_on("h200", "NVIDIA H200"),
       run_on("4x_h100_80gb_hbm3", "NVIDIA H100 80GB HBM3")});
  EXPECT_EQ(side_by_side_headers(html),
            (std::vector<std::string>{"example", "variant", "H100 speedup", "H100 status",
                                      "H100 % ceil", "H200 speedup", "H200 status", "H200 % ceil",
                                      "4× H100 speedup", "4× H100 status", "4× H100 % ceil"}));
  // Each column still carries its hardware key, as the GPU's section does.
  EXPECT_NE(html.find("<th data-gpu=\"4x_h100_80gb_hbm3\">4× H100 status</th>"), std::string::npos);
  EXPECT_NE(html.find("<section data-gpu=\"h200\">"), std::string::npos);
}

TEST(HtmlReport, TwoBoardsOfOneChipSideBySideKeepTheirFullNames) {
  const std::string html = bench::tools::html_report(
      {run_on("h100_80gb_hbm3", "NVIDIA H100 80GB HBM3"), run_on("h100_pcie", "NVIDIA H100 PCIe"),
       run_on("a100_sxm4_80gb", "NVIDIA A100-SXM4-80GB")});
  const auto headers = side_by_side_headers(html);
  ASSERT_EQ(headers.size(), 11u);
  EXPECT_EQ(headers[2], "H100 80GB HBM3 speedup");  // "H100" twice would not tell them apart
  EXPECT_EQ(headers[5], "H100 PCIe speedup");
  EXPECT_EQ(headers[8], "A100-SXM4-80GB speedup");
  // Alone beside another chip, the A100 is its chip's name.
  EXPECT_EQ(
      side_by_side_headers(bench::tools::html_report(
          {run_on("a100_sxm4_80gb", "NVIDIA A100-SXM4-80GB"), run_on("h200", "NVIDIA H200")}))[2],
      "A100 speedup");
}

}  // namespace
