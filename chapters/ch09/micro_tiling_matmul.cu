// ch09/micro_tiling_matmul: FP32 SIMT matmul, shared-memory tiles → register-blocked micro-tiles.
//
// D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major), 4096^3 FP32: the TN
// layout, both operands k-contiguous, as the rest of the chapter. Roofline: 2mnk flops over
// 4(mk + nk + mn) bytes = 683 flop/byte at 4096^3: far right of the ridge; the limit is how many
// FFMA the SMs issue per byte they read from *shared memory*, not HBM.
//
// What changes from baseline to optimized:
//   1. baseline: 32 x 32 tiles in shared memory, one output per thread: every FFMA needs two
//      shared-memory loads (one broadcast, one per-lane), so the LSU pipe, at half the FMA rate,
//      caps the kernel near a quarter of FP32 peak;
//   2. optimized: a 128 x 128 block tile, k-steps of 8, 256 threads each holding an 8 x 8
//      micro-tile of D in 64 registers: per k a thread loads 8 A and 8 B values as four 16-byte
//      shared loads (LDS.128) and does 64 FFMA: 16x more math per shared byte;
//   3. A and B tiles are stored k-major in shared memory (transposed on the way in), so a
//      thread's 4 consecutive rows or columns are one float4; the micro-tile is split 2 x 2 in
//      4 x 4 pieces 64 apart, so a warp's float4 loads are broadcasts or conflict-free;
//   4. the next k-step's tile is fetched into registers while this one is computed (two shared
//      buffers, one barrier per step).
// Both accumulate along k in order in FP32; checked against a double CPU reference at an odd
// 100 x 131 x 77 (edges zero-filled) and against kernels/reference_gemm.cuh at 4096^3.
//
//   ./bench compare --chapter ch09 --example micro_tiling_matmul
#include <bench/bench.hpp>
#include <kernels/reference_gemm.cuh>

#include "simt_gemm.cuh"  // the two kernels, shared with tensor_core_gemm

namespace {

struct Matmul {
  int64_t m, n, k;
  bench::DeviceSpan<const float> a, b;  // a: m x k row-major; b: k x n column-major
  bench::DeviceSpan<float> d;           // m x n column-major
  explicit Matmul(bench::Setup& s)
      : m(s.size("m", 4096, 100)),
        n(s.size("n", 4096, 131)),
        k(s.size("k", 4096, 77)),
        a(s.input<float>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<float>("b", n * k, bench::uniform(-1, 1))),
        d(s.output<float>("d", m * n)) {
    s.flops(2.0 * m * n * k, bench::ceiling::fp32);
    s.bytes(double(a.bytes() + b.bytes() + d.bytes()));  // fewest bytes: A, B read; D written
  }
};

void launch_tiled(const Matmul& w, cudaStream_t stream) {
  ch09::launch_tiled_gemm(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

void launch_micro_tiled(const Matmul& w, cudaStream_t stream) {
  ch09::launch_micro_tiled_gemm(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

void device_reference(const Matmul& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

void reference(const Matmul& w, bench::HostData& h) {
  kernels::reference_gemm_tn(h.input<float>("a"), h.input<float>("b"), h.expected("d"), w.m, w.n, w.k);
}

BENCH_EXAMPLE(ch09, micro_tiling_matmul, Matmul)
    .baseline("smem_tiled_32", launch_tiled)
    .optimized("register_micro_tile_8x8", launch_micro_tiled)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(1e-5));  // FP32 products and sums, order differs from the reference's

}  // namespace
