// tools/timeline.cpp: the table of a --bench_timeline file, on planted timelines (two streams
// overlapping, gaps, calls whose sequences differ), and how kernel names are shortened.
#include "timeline.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using bench::tools::short_kernel_name;
using bench::tools::timeline_table;
using nlohmann::json;

json activity(const std::string& kind, const std::string& what, int stream, double start_ns,
              double duration_ns) {
  return {{"kind", kind},     {"what", what},         {"device", 0},
          {"stream", stream}, {"start_ns", start_ns}, {"duration_ns", duration_ns}};
}

json timeline(const json& calls) {
  return {{"case", "ch12/cuda_graphs/optimized"},
          {"gpu_name", "Test GPU"},
          {"calls", calls.size()},
          {"traced_calls", calls}};
}

// The table's line for row `index` ("   1       8  name ..."), or "" if none.
std::string row(const std::string& table, int index) {
  const std::string prefix =
      std::string(4 - std::to_string(index).size(), ' ') + std::to_string(index) + " ";
  for (std::size_t at = 0; at < table.size();) {
    const std::size_t end = table.find('\n', at);
    const std::string line = table.substr(at, end - at);
    if (line.rfind(prefix, 0) == 0) return line;
    at = end == std::string::npos ? table.size() : end + 1;
  }
  return {};
}

TEST(Timeline, SameSequenceIsMedianedWithGapsAndTheUnionOfStreams) {
  // Per call: a kernel on stream 7 (0-10 us), one on stream 8 overlapping it (4-14 us), then a gap
  // of 6 us before a kernel at 20 us (2 us), and a copy 1 us after that. The third call is slower
  // in its first kernel; medians keep the typical one.
  json calls = json::array();
  for (double first : {10000.0, 10000.0, 30000.0})
    calls.push_back({activity("kernel", "_Z10chain_stepPKfPfli", 7, 0, first),
                     activity("kernel", "_ZN4ch125stepsILi3EEEvPf", 8, 4000, 10000),
                     activity("kernel", "_Z10chain_stepPKfPfli", 7, 20000, 2000),
                     activity("copy", "copy of 4096 bytes", 7, 23000, 500)});
  const std::string table = timeline_table(timeline(calls));
  EXPECT_NE(
      table.find(
          "ch12/cuda_graphs/optimized on Test GPU: 3 traced calls, the same activities in each; "
          "medians over the calls"),
      std::string::npos)
      << table;
  EXPECT_NE(row(table, 0).find("      7  chain_step "), std::string::npos) << table;
  EXPECT_NE(row(table, 0).find("0.00       10.00      0.00"), std::string::npos) << table;
  EXPECT_NE(row(table, 1).find("      8  ch12::steps<3> "), std::string::npos) << table;
  EXPECT_NE(row(table, 1).find("4.00       10.00      0.00"), std::string::npos)
      << table;  // overlapping: no gap
  EXPECT_NE(row(table, 2).find("20.00        2.00      6.00"), std::string::npos)
      << table;  // after 14 us
  EXPECT_NE(row(table, 3).find("copy of 4096 bytes"), std::string::npos) << table;
  EXPECT_NE(row(table, 3).find("23.00        0.50      1.00"), std::string::npos) << table;
  // span 0-23.5; busy 0-14, 20-22, 23-23.5 = 16.5
  EXPECT_NE(table.find("span 23.50 us, busy 16.50 us, idle 7.00 us; 4 activities, 3 calls"),
            std::string::npos)
      << table;
}

TEST(Timeline, DifferingSequencesShowTheFirstCallAlone) {
  const json calls = {{activity("kernel", "a", 7, 0, 1000), activity("kernel", "b", 7, 3000, 1000)},
                      {activity("kernel", "a", 7, 0, 1000)}};
  const std::string table = timeline_table(timeline(calls));
  EXPECT_NE(table.find("their sequences of activities differ: the first call alone"),
            std::string::npos)
      << table;
  EXPECT_NE(row(table, 1).find("3.00        1.00      2.00"), std::string::npos) << table;
  EXPECT_NE(table.find("span 4.00 us, busy 2.00 us, idle 2.00 us; 2 activities, 2 calls"),
            std::string::npos)
      << table;
}

// A stream's later activity can start inside an earlier long one and end before it: it adds
// nothing to busy, and the next gap is measured from the long one's end.
TEST(Timeline, NestedIntervalsCountOnce) {
  const json calls = {{activity("kernel", "long", 7, 0, 10000),
                       activity("kernel", "inner", 8, 2000, 1000),
                       activity("kernel", "next", 7, 12000, 1000)}};
  const std::string table = timeline_table(timeline(calls));
  EXPECT_NE(table.find("1 traced calls, one call"), std::string::npos) << table;
  EXPECT_NE(row(table, 2).find("12.00        1.00      2.00"), std::string::npos) << table;
  EXPECT_NE(table.find("span 13.00 us, busy 11.00 us, idle 2.00 us; 3 activities, 1 calls"),
            std::string::npos)
      << table;
}

TEST(Timeline, KernelNamesAreDemangledAndCut) {
  EXPECT_EQ(short_kernel_name("_Z10chain_stepPKfPfli"), "chain_step");
  EXPECT_EQ(short_kernel_name("_ZN4ch125stepsILi3EEEvPf"), "ch12::steps<3>");
  EXPECT_EQ(short_kernel_name("not_mangled"), "not_mangled");
  // Names seen on an H200: a template kernel in an unnamed namespace (its demangled form starts
  // "void (anonymous namespace)::"), and a plain one there.
  EXPECT_EQ(short_kernel_name("_ZN54_GLOBAL__N__ad1382ac_21_transformer_decode_cu_4cf2e2a916pack_"
                              "q_append_kvILb1EEEvPK13__nv_bfloat16PS1_S4_S4_iill"),
            "pack_q_append_kv<true>");
  EXPECT_EQ(short_kernel_name("_ZN54_GLOBAL__N__ad1382ac_21_transformer_decode_cu_4cf2e2a912rmsn"
                              "orm_rowsEPK13__nv_bfloat16S2_PS0_l"),
            "rmsnorm_rows");
  const std::string long_name = "kernels::flash::attention_kernel<" + std::string(80, 'x') + ">";
  const std::string cut = short_kernel_name(long_name);
  EXPECT_EQ(cut.size(), bench::tools::kTimelineNameChars);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
}

TEST(Timeline, NotATimelineIsRefused) {
  EXPECT_THROW(timeline_table(json::object()), std::invalid_argument);
  EXPECT_THROW(timeline_table(timeline(json::array())), std::invalid_argument);
  EXPECT_THROW(timeline_table(timeline({{{{"what", "a"}}}})), std::invalid_argument);
}

}  // namespace
