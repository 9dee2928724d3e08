// calibrate/ceilings.hpp: the ceilings `bench calibrate` measures, one case each in the
// `calibrate` binary (case calibrate/<name>/baseline). Shared by the binary and by
// tools/calibrate_command.cpp, so the list, the units and the methods are written once.
// Plain C++: no CUDA, no harness internals.
#pragma once

#include <array>
#include <string_view>

namespace bench::calibration {

// graph_node_us replays a graph of this many chained kernel nodes; the case's time is divided
// by it to give the time per node.
inline constexpr int kGraphNodes = 64;

// Which figure of the case's Google Benchmark row is the ceiling.
enum class Counter { gbps, tflops, time_us };

struct CeilingSpec {
  std::string_view name;    // the key in expectations/<hardware_key>.json `ceilings`
  Counter counter;
  std::string_view unit;    // "GB/s", "TFLOP/s", "us"
  double per;               // time_us only: the case's median is divided by this
  std::string_view method;  // stored with the figure
  // GPUs the measurement needs. A ceiling of one GPU (1) is stored in the one-GPU file even when
  // measured on a machine of several, one of the links between GPUs (2) in that machine's file
  // (tools/calibrate_command.hpp, ceiling_files).
  int gpus = 1;
};

inline constexpr std::array kCeilings = {
    CeilingSpec{"hbm_copy_gbps", Counter::gbps, "GB/s", 1,
                "16-byte vectorised copy kernel, 2 GiB to 2 GiB, read + write counted, cold L2"},
    CeilingSpec{"hbm_read_gbps", Counter::gbps, "GB/s", 1,
                "16-byte loads of 2 GiB reduced to per-block int64 sums, cold L2"},
    CeilingSpec{"hbm_read_chunked_gbps", Counter::gbps, "GB/s", 1,
                "16-byte streaming loads of 2 GiB, one block per contiguous 64 KiB, 4 in flight per thread, "
                "reduced to per-block int64 sums, cold L2 (hbm_read_gbps keeps the faster read form)"},
    CeilingSpec{"hbm_write_gbps", Counter::gbps, "GB/s", 1,
                "16-byte stores filling 2 GiB with a computed pattern, cold L2"},
    CeilingSpec{"memcpy_d2d_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyAsync device-to-device 2 GiB, read + write counted, cold L2"},
    CeilingSpec{"l2_gbps", Counter::gbps, "GB/s", 1,
                "16 MiB re-read 16 times per launch with ld.global.cg (L1 bypassed), hot"},
    CeilingSpec{"smem_gbps", Counter::gbps, "GB/s", 1,
                "conflict-free 16-byte ld.volatile.shared of a 16 KiB tile per block, 8 blocks per SM"},
    CeilingSpec{"fp32_tflops", Counter::tflops, "TFLOP/s", 1,
                "8 independent register FFMA chains per thread, 2048 threads per SM"},
    CeilingSpec{"tf32_tflops", Counter::tflops, "TFLOP/s", 1,
                "cuBLASLt FP32 in/out, COMPUTE_32F_FAST_TF32, 8192^3 TN, random data, fastest of 8 heuristics, sustained at the power limit"},
    CeilingSpec{"bf16_tflops", Counter::tflops, "TFLOP/s", 1,
                "cuBLASLt BF16 in/out, FP32 accumulate, 8192^3 TN, random data, fastest of 8 heuristics, sustained at the power limit"},
    CeilingSpec{"fp16_tflops", Counter::tflops, "TFLOP/s", 1,
                "cuBLASLt FP16 in/out, FP32 accumulate, 8192^3 TN, random data, fastest of 8 heuristics, sustained at the power limit"},
    CeilingSpec{"fp8_tflops", Counter::tflops, "TFLOP/s", 1,
                "cuBLASLt FP8 E4M3 in, BF16 out, FP32 accumulate, unit scales, 8192^3 TN, random data, fastest of 8 heuristics, sustained at the power limit"},
    CeilingSpec{"fp8_persistent_tflops", Counter::tflops, "TFLOP/s", 1,
                "the suite's persistent E4M3 kernel (kernels/fp8_gemm.cuh, ch19 fp8_gemm's optimized "
                "side), unit scales, BF16 out, FP32 accumulate, 8192^3 TN, random data, sustained at "
                "the power limit (fp8_tflops keeps the faster of it and cuBLASLt)"},
    // The burst figures: the same GEMMs timed cold (L2 flushed, a gap before each launch), which
    // is how a short or single GEMM runs before the power limiter acts. Cases in cold, hot and
    // host mode are scored against these; cases in sustained mode against the figures above
    // (bench::ceiling_for_mode).
    CeilingSpec{"tf32_burst_tflops", Counter::tflops, "TFLOP/s", 1,
                "as tf32_tflops, timed cold: the burst before the power limit"},
    CeilingSpec{"bf16_burst_tflops", Counter::tflops, "TFLOP/s", 1,
                "as bf16_tflops, timed cold: the burst before the power limit"},
    CeilingSpec{"fp16_burst_tflops", Counter::tflops, "TFLOP/s", 1,
                "as fp16_tflops, timed cold: the burst before the power limit"},
    CeilingSpec{"fp8_burst_tflops", Counter::tflops, "TFLOP/s", 1,
                "as fp8_tflops, timed cold: the burst before the power limit"},
    CeilingSpec{"fp8_persistent_burst_tflops", Counter::tflops, "TFLOP/s", 1,
                "as fp8_persistent_tflops, timed cold: the burst before the power limit "
                "(fp8_burst_tflops keeps the faster)"},
    CeilingSpec{"h2d_pinned_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyAsync 512 MiB pinned host to device, cold"},
    CeilingSpec{"d2h_pinned_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyAsync 512 MiB device to pinned host, cold"},
    CeilingSpec{"h2d_pageable_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyAsync 512 MiB pageable host to device, host clock"},
    CeilingSpec{"d2h_pageable_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyAsync 512 MiB device to pageable host, host clock"},
    CeilingSpec{"p2p_gbps", Counter::gbps, "GB/s", 1,
                "cudaMemcpyPeerAsync 1 GiB GPU 0 to GPU 1, peer access on, cold", 2},
    CeilingSpec{"launch_us", Counter::time_us, "us", 1,
                "back-to-back launches of a 1-thread kernel, hot, events, per launch"},
    CeilingSpec{"launch_sync_us", Counter::time_us, "us", 1,
                "1-thread kernel launch + cudaStreamSynchronize, host clock"},
    CeilingSpec{"graph_node_us", Counter::time_us, "us", kGraphNodes,
                "graph of 64 chained 1-thread kernel nodes replayed, hot, per node"},
    CeilingSpec{"event_pair_us", Counter::time_us, "us", 1,
                "two cudaEventRecord back to back, nothing between, hot, device time per pair"},
};

// Ceilings measured two ways: `name` is stored as the faster of its own case and `other`'s (both
// run whenever `name` is selected), and its stored method names both figures. The slower form
// would make examples that match the faster one look impossible: the copy kernel or the copy
// engine, whichever copies faster on this card; the two read forms; and for FP8, cuBLASLt or the
// suite's persistent E4M3 kernel, which beats cuBLASLt's FP8 at 8192^3 (ch19 fp8_gemm's README),
// so that against cuBLASLt alone ch19's optimized side scored above 100% of its ceiling.
struct FasterOf {
  std::string_view name, other;       // ceiling names, in kCeilings
  std::string_view what, other_what;  // what measured each, for the message and the method
};
inline constexpr std::array kFasterOf = {
    FasterOf{"hbm_copy_gbps", "memcpy_d2d_gbps", "the copy kernel", "cudaMemcpyAsync"},
    FasterOf{"hbm_read_gbps", "hbm_read_chunked_gbps", "the grid-strided read", "the chunked read"},
    FasterOf{"fp8_tflops", "fp8_persistent_tflops", "cuBLASLt",
             "the suite's persistent E4M3 kernel"},
    FasterOf{"fp8_burst_tflops", "fp8_persistent_burst_tflops", "cuBLASLt",
             "the suite's persistent E4M3 kernel"},
};

}  // namespace bench::calibration
