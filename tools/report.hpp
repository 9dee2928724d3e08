// tools/report.hpp: the scorecard as a console table, Markdown and JSON.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>

#include "scoring.hpp"

namespace bench::tools {

// Fixed-width table, one row per pair/rung, then one line per reason, then a summary line.
std::string format_table(const Scorecard& card);
std::string format_markdown(const Scorecard& card);
nlohmann::json report_json(const Scorecard& card);

// The columns of the console table and compare.md, and one row's cells in them: the HTML table
// (html_report.cpp) is built from the same cells, so the three never disagree.
const std::array<const char*, 11>& table_header();
std::array<std::string, 11> table_cells(const ScoredRow& row);

// docs/validity.md row 2's bar: a variant spoiling 5% of its timed samples is caught with 99%.
// For a case whose checks fell short of it (escape_5pct over 0.01): what was checked, how, and the
// escape bound, in one sentence; empty for a case that met it or has no such counter. The table,
// the Markdown and the HTML report all say it so.
std::string checks_short_of_bar(const CaseResult& c);

// "812.3 us", "1.234 ms", "2.10 s".
std::string format_duration_us(double us);

}  // namespace bench::tools
