// tools/sanitize_output.cpp on canned compute-sanitizer text: reports in the shapes the tool has
// printed them (2022 and later, and earlier), clean runs, refusals, and the verdict on one
// example under one tool. No GPU and no compute-sanitizer needed.
#include "sanitize_output.hpp"

#include <gtest/gtest.h>

namespace {

using namespace bench::tools;

// memcheck on an out-of-bounds read, as compute-sanitizer 2022+ prints it with -lineinfo and
// --show-backtrace no.
const char* kMemcheckFinding = R"(========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at peek_past_end(const float *, float *, long)+0x1b0 in /work/main/tests/gpu/sanitize_cases.cu:42
=========     by thread (159,0,0) in block (15,0,0)
=========     Address 0x7f3a5e003e80 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a5e000000 of size 16000 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at other_kernel(float *)+0x30 in /work/main/other.cu:7
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
)";

TEST(SanitizeOutput, MemcheckFindingHasKernelFileAndLine) {
  const SanitizerOutput out = parse_sanitizer_output(kMemcheckFinding);
  ASSERT_EQ(out.findings.size(), 2u);
  const SanitizerFinding& f = out.findings.front();
  EXPECT_EQ(f.what, "Invalid __global__ read of size 4 bytes");
  EXPECT_EQ(f.function, "peek_past_end(const float *, float *, long)");
  EXPECT_EQ(f.file, "/work/main/tests/gpu/sanitize_cases.cu");
  EXPECT_EQ(f.line, 42);
  ASSERT_EQ(f.details.size(), 4u);
  EXPECT_EQ(f.details[2], "Address 0x7f3a5e003e80 is out of bounds");
  EXPECT_EQ(out.error_count, 2);
  EXPECT_TRUE(out.tool_errors.empty());
  EXPECT_TRUE(out.unrecognised.empty());
  EXPECT_EQ(out.findings[1].function, "other_kernel(float *)");
  EXPECT_EQ(out.findings[1].line, 7);
}

TEST(SanitizeOutput, OlderLocationShapeAndNoLineInformation) {
  // cuda-memcheck and compute-sanitizer before 2022: "0x<offset> in <file>:<line>:<function>".
  const auto legacy = parse_sanitizer_output(
      "========= Invalid __global__ write of size 8\n"
      "=========     at 0x000000c8 in /home/u/src/helper.cuh:75:void projection<double>(double*, int)\n"
      "=========     by thread (9,0,0) in block (0,0,0)\n");
  ASSERT_EQ(legacy.findings.size(), 1u);
  EXPECT_EQ(legacy.findings[0].file, "/home/u/src/helper.cuh");
  EXPECT_EQ(legacy.findings[0].line, 75);
  EXPECT_EQ(legacy.findings[0].function, "void projection<double>(double*, int)");
  // Built without -lineinfo: the function only, in either shape.
  const auto bare = parse_sanitizer_output(
      "========= Uninitialized __global__ memory read of size 4 bytes\n"
      "=========     at scale(float *, int)+0x80\n"
      "========= Invalid __global__ read of size 4 bytes\n"
      "=========     at 0x22e20 in void probe_kernel<int>(int *)\n");
  ASSERT_EQ(bare.findings.size(), 2u);
  EXPECT_EQ(bare.findings[0].function, "scale(float *, int)");
  EXPECT_EQ(bare.findings[0].file, "");
  EXPECT_EQ(bare.findings[0].where(), "in scale(float *, int) (no line information)");
  EXPECT_EQ(bare.findings[1].function, "void probe_kernel<int>(int *)");
}

TEST(SanitizeOutput, RacecheckAnalysisReport) {
  const auto out = parse_sanitizer_output(R"(========= COMPUTE-SANITIZER
========= Warning: Maximum number of hazards reached. Environment variable NV_COMPUTE_SANITIZER_MAX_RACECHECK_HAZARDS can be used to increase this count.
=========
========= Error: Race reported between Write access at neighbour_race(const float *, float *, long)+0x90 in /work/main/tests/gpu/sanitize_cases.cu:61
=========     and Read access at neighbour_race(const float *, float *, long)+0xc0 in /work/main/tests/gpu/sanitize_cases.cu:62 [7936 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
)");
  ASSERT_EQ(out.findings.size(), 1u);
  const auto& f = out.findings[0];
  EXPECT_EQ(f.what, "Error: Race reported between Write access and Read access");
  EXPECT_EQ(f.function, "neighbour_race(const float *, float *, long)");
  EXPECT_EQ(f.file, "/work/main/tests/gpu/sanitize_cases.cu");
  EXPECT_EQ(f.line, 61);
  EXPECT_EQ(out.hazard_count, 1);
  // The hazard-count warning is a note, neither a report nor a refusal.
  ASSERT_EQ(out.unrecognised.size(), 1u);
  EXPECT_EQ(refusal_reason(out), "");
}

TEST(SanitizeOutput, RacecheckOlderShapes) {
  const auto analysis = parse_sanitizer_output(
      "========= WARNING: Race reported between Read access at 0xf10 in /src/reduce.hpp:1571:reduce_kernel(double*)\n"
      "=========     and Write access at 0x8a0 in /src/reduce.hpp:557:reduce_kernel(double*) [3968 hazards]\n");
  ASSERT_EQ(analysis.findings.size(), 1u);
  EXPECT_EQ(analysis.findings[0].what, "WARNING: Race reported between Read access and Write access");
  EXPECT_EQ(analysis.findings[0].line, 1571);
  EXPECT_EQ(analysis.findings[0].function, "reduce_kernel(double*)");
  const auto hazard = parse_sanitizer_output(
      "========= ERROR: Potential WAW hazard detected at __shared__ 0x0 in block (0, 0, 0) :\n"
      "=========     Write Thread (31, 0, 0) at 0x000000d8 in /src/race.cu:18:race(int*)\n"
      "=========     Current Value : 31, Incoming Value : 0\n");
  ASSERT_EQ(hazard.findings.size(), 1u);
  EXPECT_EQ(hazard.findings[0].file, "/src/race.cu");
  EXPECT_EQ(hazard.findings[0].line, 18);
}

TEST(SanitizeOutput, SynccheckAndHostApiReports) {
  const auto out = parse_sanitizer_output(
      "========= Barrier error detected. Divergent thread(s) in block\n"
      "=========     at diverge(int *)+0x60 in /src/sync.cu:9\n"
      "=========     by thread (32,0,0) in block (0,0,0)\n"
      "=========\n"
      "========= Program hit cudaErrorInvalidValue (error 1) due to \"invalid argument\" on CUDA API call to "
      "cudaMemcpy.\n"
      "=========     Saved host backtrace up to driver entry point at error\n");
  ASSERT_EQ(out.findings.size(), 2u);
  EXPECT_EQ(out.findings[0].where(), "in diverge(int *) at /src/sync.cu:9");
  EXPECT_EQ(out.findings[1].function, "");  // "at error" is not a device location
  EXPECT_EQ(out.findings[1].where(), "");
}

TEST(SanitizeOutput, CleanRuns) {
  for (const char* text :
       {"========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n",
        "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"}) {
    const auto out = parse_sanitizer_output(text);
    EXPECT_TRUE(out.findings.empty()) << text;
    EXPECT_TRUE(out.tool_errors.empty()) << text;
    EXPECT_TRUE(out.unrecognised.empty()) << text;
  }
}

TEST(SanitizeOutput, RefusalsAreToolErrors) {
  const auto device = parse_sanitizer_output("========= COMPUTE-SANITIZER\n========= Error: Device not supported\n");
  EXPECT_TRUE(device.findings.empty());
  ASSERT_EQ(device.tool_errors.size(), 1u);
  EXPECT_EQ(refusal_reason(device), "Error: Device not supported");
  const auto internal =
      parse_sanitizer_output("========= Internal Sanitizer Error: racecheck is not supported on this device\n");
  EXPECT_EQ(refusal_reason(internal), "Internal Sanitizer Error: racecheck is not supported on this device");
  // An error that is not a refusal: the sanitizer failed.
  const auto broken =
      parse_sanitizer_output("========= Error: Target application terminated before first instrumented API call\n");
  ASSERT_EQ(broken.tool_errors.size(), 1u);
  EXPECT_EQ(refusal_reason(broken), "");
  // A warning about partial support is not a refusal.
  EXPECT_EQ(refusal_reason(parse_sanitizer_output("========= Warning: async copies are not supported by this tool\n")),
            "");
}

// racecheck, synccheck and initcheck on ch12 (built with -rdc for dynamic parallelism) on the
// H100, compute-sanitizer 2025.3.1: the logs, verbatim (ch12.cuda_graphs.<tool>.log).
const char* kCdpRacecheck = R"(========= COMPUTE-SANITIZER
========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool
========= 
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
)";
const char* kCdpSynccheck = R"(========= COMPUTE-SANITIZER
========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool
========= 
========= ERROR SUMMARY: 1 error
)";
// initcheck on ch12/conditional_graph before its fix: the warning, and host API reports that
// initcheck still makes (3 of the 9 printed; 105 in all, plus the warning).
const char* kCdpInitcheckWithReports = R"(========= COMPUTE-SANITIZER
========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool
========= 
========= Host API memory access error at host access to 0x7fd18a403208 of size 4 bytes
=========     Uninitialized access to 0x7fd18a403200 on access by cudaMemcpy source
========= 
========= Host API memory access error at host access to 0x7fd18a403208 of size 4 bytes
=========     Uninitialized access to 0x7fd18a403200 on access by cudaMemcpy source
========= 
========= Host API memory access error at host access to 0x7fd18a403208 of size 4 bytes
=========     Uninitialized access to 0x7fd18a403200 on access by cudaMemcpy source
========= 
========= ERROR SUMMARY: 106 errors
========= ERROR SUMMARY: 96 errors were not printed. Use --print-limit option to adjust the number of printed errors
)";

TEST(SanitizeOutput, DynamicParallelismWarningIsARefusalNotAFinding) {
  for (const char* text : {kCdpRacecheck, kCdpSynccheck}) {
    const auto out = parse_sanitizer_output(text);
    EXPECT_TRUE(out.findings.empty()) << text;
    EXPECT_TRUE(out.tool_errors.empty()) << text;
    EXPECT_TRUE(out.unrecognised.empty()) << text;
    ASSERT_EQ(out.unsupported.size(), 1u) << text;
    EXPECT_EQ(refusal_reason(out), "Warning: CUDA Dynamic Parallelism is not supported by the selected tool");
  }
  EXPECT_EQ(parse_sanitizer_output(kCdpRacecheck).hazard_count, 1);
  EXPECT_EQ(parse_sanitizer_output(kCdpSynccheck).error_count, 1);
  // The reports initcheck still makes are parsed as usual.
  const auto reports = parse_sanitizer_output(kCdpInitcheckWithReports);
  ASSERT_EQ(reports.findings.size(), 3u);
  EXPECT_EQ(reports.findings[0].what, "Host API memory access error at host access to 0x7fd18a403208 of size 4 bytes");
  EXPECT_EQ(reports.unsupported.size(), 1u);
}

TEST(SanitizeOutput, NotPrintedLineDoesNotReplaceTheCount) {
  EXPECT_EQ(parse_sanitizer_output(kCdpInitcheckWithReports).error_count, 106);
}

SanitizeEvidence ran_cleanly(std::string log) {
  SanitizeEvidence e;
  e.output = parse_sanitizer_output(log);
  e.error_exit_code = 86;
  e.how = "exit code 0";
  e.expected_cases = {"ch07/copy/baseline", "ch07/copy/optimized"};
  e.verified_cases = e.expected_cases;
  return e;
}

TEST(SanitizeJudge, CleanFoundRefused) {
  const SanitizeResult clean = judge(ran_cleanly("========= ERROR SUMMARY: 0 errors\n"));
  EXPECT_EQ(clean.verdict, SanitizeVerdict::clean);
  EXPECT_EQ(describe(clean), "clean");

  SanitizeEvidence found = ran_cleanly(kMemcheckFinding);
  found.exit_code = 86, found.how = "exit code 86";
  found.verified_cases = {"ch07/copy/baseline"};  // the finding destroyed the context: a case failed
  found.failed_cases = {{"ch07/copy/optimized", "CUDA context lost"}};
  const SanitizeResult r = judge(found);
  EXPECT_EQ(r.verdict, SanitizeVerdict::found);
  EXPECT_EQ(r.errors, 2);
  EXPECT_EQ(describe(r),
            "FOUND Invalid __global__ read of size 4 bytes in peek_past_end(const float *, float *, long) at "
            "/work/main/tests/gpu/sanitize_cases.cu:42 (2 errors)");

  SanitizeEvidence refused = ran_cleanly("========= Error: Device not supported\n");
  refused.exit_code = 1, refused.how = "exit code 1", refused.verified_cases.clear();
  EXPECT_EQ(judge(refused).verdict, SanitizeVerdict::refused);
  EXPECT_EQ(describe(judge(refused)), "refused: Error: Device not supported");
}

TEST(SanitizeJudge, DynamicParallelismIsRefusedNotFound) {
  // The warning counts as an error: the exit code is --error-exitcode's, the cases verified.
  for (const char* text : {kCdpRacecheck, kCdpSynccheck}) {
    SanitizeEvidence e = ran_cleanly(text);
    e.exit_code = 86, e.how = "exit code 86";
    const SanitizeResult r = judge(e);
    EXPECT_EQ(r.verdict, SanitizeVerdict::refused) << text;
    EXPECT_EQ(describe(r), "refused: Warning: CUDA Dynamic Parallelism is not supported by the selected tool");
    e.exit_code = 0, e.how = "exit code 0";
    EXPECT_EQ(judge(e).verdict, SanitizeVerdict::refused) << text;
  }
  // What the tool did report besides is still found, counted without the warning.
  SanitizeEvidence reported = ran_cleanly(kCdpInitcheckWithReports);
  reported.exit_code = 86, reported.how = "exit code 86";
  const SanitizeResult r = judge(reported);
  EXPECT_EQ(r.verdict, SanitizeVerdict::found);
  EXPECT_EQ(r.errors, 105);
  EXPECT_EQ(r.reason,
            "device code not checked: Warning: CUDA Dynamic Parallelism is not supported by the selected tool");
  EXPECT_EQ(describe(r),
            "FOUND Host API memory access error at host access to 0x7fd18a403208 of size 4 bytes (105 errors)");
  // Counted beyond the warning, in a shape the parser does not know: found.
  SanitizeEvidence unknown = ran_cleanly(
      "========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool\n"
      "========= Some report in a new shape\n"
      "========= ERROR SUMMARY: 2 errors\n");
  unknown.exit_code = 86;
  EXPECT_EQ(judge(unknown).verdict, SanitizeVerdict::found);
  EXPECT_EQ(judge(unknown).finding->what, "Some report in a new shape");
  EXPECT_EQ(judge(unknown).errors, 1);
}

// racecheck on ch10/persistent_gemm (H200, compute-sanitizer 2025.3.1), cut to two reports: races
// inside cuBLASLt's kernels (the vendor variant), which carry no line information.
const char* kLibraryRaces = R"(========= COMPUTE-SANITIZER
========= Error: Race reported between Read access at nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN+0x980
=========     and Write access at nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN+0x37c0 [704 hazards]
=========
========= Error: Race reported between Read access at nvjet_sm90_tst_320x64_64x4_1x2_h_bz_TNT+0xa40
=========     and Write access at nvjet_sm90_tst_320x64_64x4_1x2_h_bz_TNT+0x4dd0 [480 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
)";

TEST(SanitizeJudge, ErrorsAllShownAndAllInLibraryCodeAreNotTheExamples) {
  SanitizeEvidence e = ran_cleanly(kLibraryRaces);
  e.exit_code = 86;
  ASSERT_EQ(e.output.findings.size(), 2u);
  EXPECT_TRUE(e.output.findings[0].in_library_code());
  EXPECT_EQ(e.output.findings[0].function, "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN");
  const SanitizeResult r = judge(e);
  EXPECT_EQ(r.verdict, SanitizeVerdict::library);
  EXPECT_EQ(describe(r),
            "in library code only: Error: Race reported between Read access and Write access in "
            "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN (no line information) (2 errors)");

  // The run it was cut from: 10 displayed of 79 (--print-limit 10). The 69 not shown may be in
  // the example's own kernels: still found, and the reason says how to see them.
  std::string cut_off = kLibraryRaces;
  cut_off.replace(cut_off.find("2 hazards displayed (2 errors"), 29, "10 hazards displayed (79 errors");
  SanitizeEvidence more = ran_cleanly(cut_off);
  more.exit_code = 86;
  EXPECT_EQ(more.output.hazard_count, 79);
  const SanitizeResult m = judge(more);
  EXPECT_EQ(m.verdict, SanitizeVerdict::found);
  EXPECT_EQ(m.errors, 79);
  EXPECT_EQ(m.reason,
            "the 2 shown are in library code (no line information); 77 more were not printed "
            "(`bench sanitize --print-limit 1000` prints them)");

  // Library-only reports do not excuse the rest: a timeout or a failed case still fails the run.
  SanitizeEvidence hung = ran_cleanly(kLibraryRaces);
  hung.signaled = true, hung.timed_out = true, hung.timeout_s = 240, hung.verified_cases.clear();
  EXPECT_EQ(judge(hung).verdict, SanitizeVerdict::failed);
  SanitizeEvidence failed_case = ran_cleanly(kLibraryRaces);
  failed_case.exit_code = 86;
  failed_case.verified_cases = {"ch07/copy/baseline"};
  failed_case.failed_cases = {{"ch07/copy/optimized", "verification run 1: 3 of 100 elements differ"}};
  EXPECT_EQ(judge(failed_case).verdict, SanitizeVerdict::failed);
  SanitizeEvidence other_exit = ran_cleanly(kLibraryRaces);
  other_exit.exit_code = 3, other_exit.how = "exit code 3";
  EXPECT_EQ(judge(other_exit).verdict, SanitizeVerdict::failed);

  // One report with line information among them: a finding like any other.
  SanitizeEvidence mixed = ran_cleanly(std::string(kMemcheckFinding) + kLibraryRaces);
  mixed.exit_code = 86;
  EXPECT_EQ(judge(mixed).verdict, SanitizeVerdict::found);
  EXPECT_EQ(judge(mixed).reason, "");
}

// initcheck past its error buffer, in the shape ch15's moe_dispatch printed it on an H100
// (2026-11-27; the log's own totals, two of its reports): the summary counts 1,028 (1,024 reports
// and one overflow warning per launch that overflowed), and 615,424 more were found but dropped.
const char* kOverflowedInitcheck = R"(========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 16 bytes
=========     at kernels::load_stream(const float4 *)+0x620 in /work/main/kernels/include/kernels/vector_access.cuh:17
=========     by thread (0,0,0) in block (37,0,0)
=========     Address 0x7fee38f2e800
=========
========= Uninitialized __global__ memory read of size 16 bytes
=========     at kernels::load_stream(const float4 *)+0x620 in /work/main/kernels/include/kernels/vector_access.cuh:17
=========     by thread (1,0,0) in block (37,0,0)
=========     Address 0x7fee38f2e810
=========
========= Warning: Error buffer overflow has been detected. Some records have been dropped
========= 615424 errors were skipped (error buffer overflow).
========= ERROR SUMMARY: 1028 errors
========= ERROR SUMMARY: 924 errors were not printed. Use --print-limit option to adjust the number of printed errors
)";

TEST(SanitizeJudge, ReportsTheToolDroppedAreCountedAndSaid) {
  const SanitizerOutput o = parse_sanitizer_output(kOverflowedInitcheck);
  EXPECT_EQ(o.error_count, 1028);
  EXPECT_EQ(o.skipped_count, 615424);
  EXPECT_EQ(o.findings.size(), 2u);
  SanitizeEvidence e = ran_cleanly(kOverflowedInitcheck);
  e.exit_code = 86;
  const SanitizeResult r = judge(e);
  EXPECT_EQ(r.verdict, SanitizeVerdict::found);
  EXPECT_EQ(r.errors, 1028);
  EXPECT_EQ(r.skipped, 615424);
  EXPECT_EQ(describe(r),
            "FOUND Uninitialized __global__ memory read of size 16 bytes in "
            "kernels::load_stream(const float4 *) at "
            "/work/main/kernels/include/kernels/vector_access.cuh:17 (1028 errors) and 615424 more "
            "the tool found "
            "but dropped (its error buffer overflowed)");
  EXPECT_FALSE(parse_sanitizer_output(kMemcheckFinding).skipped_count.has_value());

  // Every shown report in library code but some dropped unseen: those may be anyone's, so not
  // "library code only".
  std::string library = kOverflowedInitcheck;
  for (std::size_t at;
       (at = library.find(" in /work/main/kernels/include/kernels/vector_access.cuh:17")) !=
       std::string::npos;)
    library.erase(
        at, std::string(" in /work/main/kernels/include/kernels/vector_access.cuh:17").size());
  library.replace(library.find("ERROR SUMMARY: 1028 errors"), 26, "ERROR SUMMARY: 2 errors");
  SanitizeEvidence lib = ran_cleanly(library);
  lib.exit_code = 86;
  ASSERT_TRUE(lib.output.findings[0].in_library_code());
  EXPECT_EQ(judge(lib).verdict, SanitizeVerdict::found);
  EXPECT_EQ(
      judge(lib).reason,
      "the 2 shown are in library code (no line information); 615424 the tool dropped unseen");
}

TEST(SanitizeJudge, FindingsTheParserCannotReadStillCount) {
  SanitizeEvidence e = ran_cleanly("========= Some report in a new shape\n=========     at k()+0x10 in k.cu:3\n");
  e.exit_code = 86;  // --error-exitcode: the sanitizer counted errors
  const SanitizeResult r = judge(e);
  EXPECT_EQ(r.verdict, SanitizeVerdict::found);
  EXPECT_EQ(r.finding->what, "Some report in a new shape");
}

// racecheck of ch15 and ch20 under a kernel-name filter (compute-sanitizer 2025.3.1, CUDA 13.0,
// H200, 2026-11-28): the tool's own failure, counted in its summary as one hazard, and no report.
// The program's first case then failed with an illegal address.
const char* kInternalSanitizerError = R"(========= COMPUTE-SANITIZER
========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception.
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
)";

TEST(SanitizeJudge, AnInternalSanitizerErrorIsTheSanitizersFailureNotAFinding) {
  const SanitizerOutput o = parse_sanitizer_output(kInternalSanitizerError);
  EXPECT_TRUE(o.findings.empty());
  ASSERT_EQ(o.tool_errors.size(), 1u);
  EXPECT_EQ(o.hazard_count, 1);
  EXPECT_EQ(refusal_reason(o), "");
  SanitizeEvidence e = ran_cleanly(kInternalSanitizerError);
  e.exit_code = e.error_exit_code, e.how = "exit code 86";
  e.verified_cases.clear();
  e.failed_cases = {{"ch07/copy/baseline",
                     "cudaErrorIllegalAddress (an illegal memory access was "
                     "encountered) at harness/src/runner.cpp:178"}};
  const SanitizeResult r = judge(e);
  EXPECT_EQ(r.verdict, SanitizeVerdict::failed);
  EXPECT_EQ(r.reason,
            "compute-sanitizer: Internal Sanitizer Error: The Sanitizer failed to handle a "
            "hardware exception.");
  EXPECT_FALSE(r.finding.has_value());
  EXPECT_EQ(r.errors, 0);

  // The same with a race the tool displayed in one of our kernels: found, as ever.
  std::string with_race = kInternalSanitizerError;
  with_race.replace(
      with_race.find("========= RACECHECK SUMMARY: 1 hazard displayed (1 error"), 56,
      "========= Error: Race reported between Write access at neighbour_race(const float *, "
      "float *, long)+0x90 in /work/main/tests/gpu/sanitize_cases.cu:61\n"
      "=========     and Read access at neighbour_race(const float *, float *, long)+0xc0 in "
      "/work/main/tests/gpu/sanitize_cases.cu:62 [7936 hazards]\n"
      "=========\n"
      "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors");
  SanitizeEvidence raced = ran_cleanly(with_race);
  raced.exit_code = raced.error_exit_code;
  ASSERT_EQ(raced.output.findings.size(), 1u) << with_race;
  EXPECT_EQ(raced.output.hazard_count, 2);
  const SanitizeResult f = judge(raced);
  EXPECT_EQ(f.verdict, SanitizeVerdict::found);
  EXPECT_EQ(f.finding->function, "neighbour_race(const float *, float *, long)");

  // Counted beyond the tool's own error, with nothing displayed: found (the log says what).
  std::string counted_more = kInternalSanitizerError;
  counted_more.replace(counted_more.find("1 hazard displayed (1 error"), 27,
                       "2 hazards displayed (2 errors");
  SanitizeEvidence more = ran_cleanly(counted_more);
  more.exit_code = more.error_exit_code;
  EXPECT_EQ(more.output.hazard_count, 2);
  const SanitizeResult m = judge(more);
  EXPECT_EQ(m.verdict, SanitizeVerdict::found);
  EXPECT_EQ(m.finding->what, "compute-sanitizer reported errors; the log says what");
  EXPECT_EQ(m.errors, 1);

  // The internal error's line seen twice (the log and the console): forgiven once, still failed.
  SanitizeEvidence twice =
      ran_cleanly(std::string(kInternalSanitizerError) +
                  "========= Internal Sanitizer Error: The Sanitizer failed to handle a "
                  "hardware exception.\n");
  twice.exit_code = twice.error_exit_code;
  EXPECT_EQ(judge(twice).verdict, SanitizeVerdict::failed);

  // Only internal errors are forgiven: a plain "Error:" line in a shape the parser does not know
  // may be a report, and its count stands; so does every count when a line was left unread.
  SanitizeEvidence unknown_error =
      ran_cleanly("========= Error: Some new report shape\n========= ERROR SUMMARY: 1 error\n");
  unknown_error.exit_code = unknown_error.error_exit_code;
  EXPECT_EQ(judge(unknown_error).verdict, SanitizeVerdict::found);
  SanitizeEvidence unread = ran_cleanly(
      "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception.\n"
      "========= Some report in a new shape\n"
      "========= ERROR SUMMARY: 1 error\n");
  unread.exit_code = unread.error_exit_code;
  EXPECT_EQ(judge(unread).verdict, SanitizeVerdict::found);
  EXPECT_EQ(judge(unread).finding->what, "Some report in a new shape");

  // A refusal the summary counts is still a refusal.
  SanitizeEvidence refused = ran_cleanly(
      "========= Internal Sanitizer Error: racecheck is not supported on this device\n"
      "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n");
  refused.exit_code = refused.error_exit_code, refused.verified_cases.clear();
  EXPECT_EQ(describe(judge(refused)),
            "refused: Internal Sanitizer Error: racecheck is not supported on this device");
}

TEST(SanitizeJudge, FailuresAndSkips) {
  // Exit 0 but a case never reported: a sanitizer that did not run the program passes nothing.
  SanitizeEvidence missing = ran_cleanly("========= ERROR SUMMARY: 0 errors\n");
  missing.verified_cases = {"ch07/copy/baseline"};
  EXPECT_EQ(judge(missing).verdict, SanitizeVerdict::failed);
  EXPECT_NE(judge(missing).reason.find("ch07/copy/optimized"), std::string::npos);

  SanitizeEvidence failed_case = ran_cleanly("========= ERROR SUMMARY: 0 errors\n");
  failed_case.verified_cases = {"ch07/copy/baseline"};
  failed_case.failed_cases = {{"ch07/copy/optimized", "verification run 1: 3 of 100 elements differ"}};
  EXPECT_EQ(describe(judge(failed_case)),
            "FAILED: ch07/copy/optimized failed: verification run 1: 3 of 100 elements differ");

  SanitizeEvidence crashed = ran_cleanly("========= ERROR SUMMARY: 0 errors\n");
  crashed.signaled = true, crashed.how = "killed by signal 6 (Aborted)", crashed.verified_cases.clear();
  EXPECT_EQ(judge(crashed).verdict, SanitizeVerdict::failed);

  SanitizeEvidence no_device = ran_cleanly("");
  no_device.exit_code = kNoDeviceExitCode, no_device.verified_cases.clear();
  EXPECT_EQ(describe(judge(no_device)), "skipped: no CUDA device");

  SanitizeEvidence not_started = ran_cleanly("");
  not_started.started = false, not_started.how = "could not be started: No such file or directory";
  EXPECT_EQ(judge(not_started).verdict, SanitizeVerdict::failed);

  SanitizeEvidence tool_error =
      ran_cleanly("========= Error: Target application terminated before first instrumented API call\n");
  tool_error.exit_code = 1;
  EXPECT_EQ(describe(judge(tool_error)),
            "FAILED: compute-sanitizer: Error: Target application terminated before first instrumented API call");

  // Killed at its time limit: failed, with the limit in the reason, even though half the log is
  // a clean start; a finding printed before the kill is still found.
  SanitizeEvidence hung = ran_cleanly("========= COMPUTE-SANITIZER\n");
  hung.signaled = true, hung.timed_out = true, hung.timeout_s = 240, hung.verified_cases.clear();
  hung.how = "did not finish in time (killed)";
  EXPECT_EQ(describe(judge(hung)),
            "FAILED: did not finish in 240 s and was killed: a hang under this tool, or a run slower than the "
            "limit (--timeout)");
  SanitizeEvidence found_then_hung = ran_cleanly(kMemcheckFinding);
  found_then_hung.signaled = true, found_then_hung.timed_out = true, found_then_hung.timeout_s = 240;
  EXPECT_EQ(judge(found_then_hung).verdict, SanitizeVerdict::found);

  // Every case verified and the exit code 0, but no log where --log-file asked (the sanitizer wrote
  // it elsewhere, or never opened it): nothing it checked was read, so not clean. The same evidence
  // with the log is the clean run of CleanFoundRefused.
  SanitizeEvidence no_log = ran_cleanly("");
  no_log.log_written = false;
  EXPECT_EQ(judge(no_log).verdict, SanitizeVerdict::failed);
  EXPECT_EQ(judge(no_log).reason, "compute-sanitizer wrote no log where --log-file asked");

  // A log cut short before the tool's closing summary: not clean either (a crash is named first).
  SanitizeEvidence no_summary = ran_cleanly("========= COMPUTE-SANITIZER\n");
  EXPECT_EQ(describe(judge(no_summary)),
            "FAILED: compute-sanitizer's log has no summary line: cut short?");
  no_summary.signaled = true, no_summary.how = "killed by signal 11 (Segmentation fault)";
  EXPECT_EQ(describe(judge(no_summary)), "FAILED: killed by signal 11 (Segmentation fault)");

  SanitizeEvidence skipped = ran_cleanly("========= ERROR SUMMARY: 0 errors\n");
  skipped.verified_cases = {"ch07/copy/baseline"};
  skipped.skipped_cases = {{"ch07/copy/optimized", "needs compute capability 10.0"}};
  EXPECT_EQ(describe(judge(skipped)), "clean (1 of 2 cases skipped: needs compute capability 10.0)");
  skipped.verified_cases.clear();
  skipped.skipped_cases.push_back({"ch07/copy/baseline", "needs compute capability 10.0"});
  EXPECT_EQ(describe(judge(skipped)), "skipped: needs compute capability 10.0");
}

}  // namespace
