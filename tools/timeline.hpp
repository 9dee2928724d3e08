// tools/timeline.hpp: the table `bench profile <case> --tool timeline` prints from the JSON a
// chapter binary writes with --bench_timeline (docs/profiling.md, "A kernel timeline without
// Nsight Systems"). Pure: it reads the parsed file and returns text, so it is tested on planted
// timelines without a GPU.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace bench::tools {

// A kernel name as the table shows it: demangled where it can be, the parameter list and a
// template function's return type cut off, at most kTimelineNameChars characters.
inline constexpr std::size_t kTimelineNameChars = 60;
std::string short_kernel_name(const std::string& name);

// One row per activity position: index, stream, name, start offset, duration and the gap before
// it (its start minus the latest end of every earlier row, 0 when they overlap), in microseconds.
// When every traced call ran the same sequence of activities, each figure is the median over the
// calls; otherwise the first call alone, and the table says so. Then one summary line: span (first
// start to last end), busy (the union of the rows' intervals), idle (span - busy), the number of
// activities and of calls. Throws std::invalid_argument on a file that is not such a timeline.
std::string timeline_table(const nlohmann::json& timeline);

}  // namespace bench::tools
