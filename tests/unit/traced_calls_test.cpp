// harness/src/work_tracer.cpp's split_traced_calls: the escaped-work check of VALIDITY row 1 on
// records made up here, as CUPTI would hand them over (the GPU tests plant the real adversaries).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "work_tracer.hpp"

namespace bench::detail {
namespace {

TracedRecord marker(uint32_t correlation, uint64_t start, uint64_t end) {
  return {{"kernel", "bench_trace_marker", 0, 7, start, end}, correlation, true};
}
TracedRecord kernel(const std::string& name, uint32_t correlation, uint64_t start, uint64_t end,
                    uint32_t stream = 7) {
  return {{"kernel", name, 0, stream, start, end}, correlation, false};
}

TEST(TracedCalls, WorkThatEndsBeforeTheClosingMarkerStartsHasNotEscaped) {
  const TracedCalls t =
      split_traced_calls({marker(10, 1000, 1100), kernel("copy", 11, 1200, 5000),
                          kernel("side", 12, 1300, 4000, 9), marker(13, 5000, 5100)});
  ASSERT_EQ(t.calls.size(), 1u);
  ASSERT_EQ(t.calls[0].size(), 2u);
  EXPECT_EQ(t.escaped, "");
}

TEST(TracedCalls, WorkThatEndsAfterTheClosingMarkerStartsIsNamed) {
  const TracedCalls t =
      split_traced_calls({marker(10, 1000, 1100), kernel("copy", 11, 1200, 4000),
                          kernel("spin", 12, 1300, 9500, 13), marker(13, 5000, 5100)});
  EXPECT_EQ(t.escaped,
            "kernel 'spin' (device 0, stream 13) ended 4.5 us after the call's stop, in traced "
            "call 1 of 1");
}

TEST(TracedCalls, RecordsArePlacedByCorrelationNotByArrival) {
  // Buffers arrive in any order; the second call's escape is named as the second call's.
  const TracedCalls t = split_traced_calls(
      {kernel("late", 22, 21000, 40000), marker(23, 30000, 30100), marker(13, 5000, 5100),
       kernel("copy", 11, 1200, 4000), marker(10, 1000, 1100), marker(20, 20000, 20100)});
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].size(), 1u);
  EXPECT_EQ(t.calls[1].size(), 1u);
  EXPECT_NE(t.escaped.find("kernel 'late'"), std::string::npos) << t.escaped;
  EXPECT_NE(t.escaped.find("in traced call 2 of 2"), std::string::npos) << t.escaped;
}

TEST(TracedCalls, WorkOutsideTheMarkersBelongsToNoCall) {
  // The harness's own work before the first marker and after the last (a flush, a check) is
  // not the variant's, however long it runs.
  const TracedCalls t = split_traced_calls({kernel("flush", 5, 0, 99999), marker(10, 1000, 1100),
                                            kernel("copy", 11, 1200, 4000), marker(13, 5000, 5100),
                                            kernel("check", 14, 6000, 99999)});
  ASSERT_EQ(t.calls.size(), 1u);
  ASSERT_EQ(t.calls[0].size(), 1u);
  EXPECT_EQ(t.calls[0][0].what, "copy");
  EXPECT_EQ(t.escaped, "");
}

TEST(TracedCalls, ACallsActivitiesAreListedByStart) {
  const TracedCalls t = split_traced_calls({marker(10, 1000, 1100), kernel("b", 11, 3000, 4000),
                                            kernel("a", 12, 1200, 2000), marker(13, 5000, 5100)});
  ASSERT_EQ(t.calls.size(), 1u);
  ASSERT_EQ(t.calls[0].size(), 2u);
  EXPECT_EQ(t.calls[0][0].what, "a");
  EXPECT_EQ(t.calls[0][1].what, "b");
}

// Row 9: the runner holds the case's stream before each traced call's opening marker until the
// launch returns; a call's work that starts before that marker was queued behind nothing.
TEST(TracedCalls, WorkStartedBeforeTheOpeningMarkerIsNamed) {
  const TracedCalls t =
      split_traced_calls({marker(10, 9000, 9100), kernel("side", 11, 1200, 8000, 14),
                          kernel("touch", 12, 9200, 9300), marker(13, 9400, 9500)});
  EXPECT_EQ(t.escaped, "");
  EXPECT_EQ(t.ahead,
            "kernel 'side' (device 0, stream 14) started 7.8 us before the call's start, in "
            "traced call 1 of 1");
}

TEST(TracedCalls, WorkStartedWhileTheOpeningMarkerRunsIsNotAhead) {
  // Queued behind the marker (an event recorded after it, or the case's stream itself), work
  // starts once the marker has: never before.
  const TracedCalls t = split_traced_calls(
      {marker(10, 1000, 1100), kernel("forked", 11, 1000, 2000, 14), marker(13, 5000, 5100)});
  EXPECT_EQ(t.ahead, "");
}

TEST(TracedCalls, AnotherGpusWorkIsAheadOnlyPastTheClocksSkew) {
  TracedRecord peer = kernel("peer", 11, 8000, 9000, 20);
  peer.activity.device = 1;
  TracedRecord early_peer = kernel("early_peer", 12, 2000, 9000, 21);
  early_peer.activity.device = 1;
  EXPECT_EQ(split_traced_calls({marker(10, 9500, 9600), peer, marker(13, 9800, 9900)}).ahead, "");
  EXPECT_NE(split_traced_calls({marker(10, 9500, 9600), early_peer, marker(13, 9800, 9900)})
                .ahead.find("kernel 'early_peer' (device 1, stream 21) started 7.5 us before"),
            std::string::npos);
}

TEST(TracedCalls, AnUnpairedMarkerMakesNoCall) {
  // A lost marker shows as a short count, which the runner refuses (require_all_traced).
  const TracedCalls t = split_traced_calls({marker(10, 1000, 1100), kernel("copy", 11, 1200, 4000),
                                            marker(13, 5000, 5100), marker(20, 6000, 6100)});
  EXPECT_EQ(t.calls.size(), 1u);
}

}  // namespace
}  // namespace bench::detail
