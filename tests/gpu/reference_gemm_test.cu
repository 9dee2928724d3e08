// Tests kernels::reference_gemm_tn (kernels/reference_gemm.cuh), the device reference that every
// GEMM example's timed samples are checked against. Its two forms (64 x 64 and 128 x 128 tiles)
// and the form the wrapper picks must give the same bits as the one-output-per-thread form they
// replaced (kept below as the oracle): for each input type the callers use (float, BF16, FP16,
// FP8 E4M3), for shapes that are not multiples of any tile, for k that is not a multiple of the
// k-slice, and for operands the 128 x 128 form cannot read 16 bytes at a time. The oracle must
// also agree with the CPU double reference. The forms' times are a printout, in a DISABLED_ test.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <kernels/reference_gemm.cuh>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

namespace {

// The first form, verbatim in its arithmetic: 16 x 16 tiles, one output a thread, each output
// summed over p = 0 .. k - 1 in order with zeros past k up to a multiple of 16.
template <class In, class Out>
__global__ void one_output_reference_gemm_tn(const In* __restrict__ a, const In* __restrict__ b,
                                             Out* __restrict__ d, int m, int n, int k) {
  constexpr int t = 16;
  __shared__ float as[t][t + 1], bs[t][t + 1];
  const int i = blockIdx.x * t + threadIdx.x, j = blockIdx.y * t + threadIdx.y;
  const int64_t a_row = blockIdx.x * t + threadIdx.y, b_col = blockIdx.y * t + threadIdx.y;
  float acc = 0;
  for (int p0 = 0; p0 < k; p0 += t) {
    const int p = p0 + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = a_row < m && p < k ? static_cast<float>(a[a_row * k + p]) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = b_col < n && p < k ? static_cast<float>(b[b_col * k + p]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < t; ++q) acc += as[threadIdx.x][q] * bs[threadIdx.y][q];
    __syncthreads();
  }
  if (i < m && j < n) d[int64_t{j} * m + i] = Out(acc);
}

enum class Form { one_output, tile64, tile128, chosen };
constexpr Form kForms[] = {Form::one_output, Form::tile64, Form::tile128, Form::chosen};
const char* name(Form f) {
  return f == Form::one_output ? "one output a thread"
         : f == Form::tile64   ? "64 x 64"
         : f == Form::tile128  ? "128 x 128"
                               : "the wrapper's choice";
}

template <class In, class Out>
void launch(Form f, const In* a, const In* b, Out* d, int m, int n, int k) {
  if (f == Form::one_output)
    one_output_reference_gemm_tn<<<dim3((m + 15) / 16, (n + 15) / 16), dim3(16, 16)>>>(a, b, d, m,
                                                                                       n, k);
  else if (f == Form::tile64)
    kernels::detail::launch_reference_gemm_tn_64(a, b, d, m, n, k, nullptr);
  else if (f == Form::tile128)
    kernels::detail::launch_reference_gemm_tn_128(a, b, d, m, n, k, nullptr);
  else
    kernels::reference_gemm_tn(a, b, d, m, n, k, nullptr);
}

// Operands of the input type on the device, and the floats they hold on the host: uniform in
// (-2, 2), or every element `constant` when one is given. `offset` elements before the first
// one misalign it (an offset of 1 takes away the 128 x 128 form's 16-byte loads).
template <class In>
struct Operand {
  In* base = nullptr;
  In* device = nullptr;
  std::vector<float> values;
  Operand(int64_t count, uint32_t seed, int offset = 0, float constant = 0) : values(count) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<In> host(count + offset, In(0.0f));
    for (int64_t e = 0; e < count; ++e) {
      const In x(constant != 0 ? constant : uniform(rng));
      host[offset + e] = x;
      values[e] = static_cast<float>(x);
    }
    EXPECT_EQ(cudaMalloc(&base, host.size() * sizeof(In)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(base, host.data(), host.size() * sizeof(In), cudaMemcpyHostToDevice),
              cudaSuccess);
    device = base + offset;
  }
  ~Operand() { cudaFree(base); }
};

template <class Out>
std::vector<Out> download(const Out* d, int64_t count) {
  std::vector<Out> h(count);
  EXPECT_EQ(cudaMemcpy(h.data(), d, count * sizeof(Out), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Every form on the same operands; each must equal the one-output form bit for bit, and that
// form must be within the worst-case error of k FP32 multiply-adds of the CPU double product:
// gamma_k x sum |a_p b_p| with gamma_k = k u / (1 - k u), u = 2^-24 (any summation order), plus
// the output's own rounding (2^-8 relative for BF16, 2^-11 for FP16). Returns the oracle's outputs.
template <class In, class Out>
std::vector<Out> expect_same_bits(int m, int n, int k, int offset = 0, float a_constant = 0,
                                  float b_constant = 0) {
  SCOPED_TRACE(testing::Message() << "m " << m << " n " << n << " k " << k << ", " << sizeof(In)
                                  << "-byte input, " << sizeof(Out) << "-byte output, offset "
                                  << offset);
  const Operand<In> a(int64_t{m} * k, 7, offset, a_constant),
      b(int64_t{n} * k, 8, offset, b_constant);
  const int64_t count = int64_t{m} * n;
  std::vector<std::vector<Out>> got;
  for (Form f : kForms) {
    Out* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, count * sizeof(Out)), cudaSuccess);
    EXPECT_EQ(cudaMemset(d, 0xff, count * sizeof(Out)),
              cudaSuccess);  // NaN: an unwritten output shows
    launch(f, a.device, b.device, d, m, n, k);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name(f);
    got.push_back(download(d, count));
    cudaFree(d);
  }
  const std::vector<Out>& want = got[0];
  for (std::size_t f = 1; f < got.size(); ++f) {
    int64_t differ = 0;
    for (int64_t e = 0; e < count; ++e)
      differ += std::memcmp(&want[e], &got[f][e], sizeof(Out)) != 0;
    EXPECT_EQ(differ, 0) << "outputs of " << count << " differ from the one-output form in the "
                         << name(kForms[f]) << " form";
  }
  if (int64_t{m} * n * k <= (int64_t{1} << 27)) {
    std::vector<double> exact(count), magnitude(count);
    kernels::reference_gemm_tn(std::span<const float>(a.values), std::span<const float>(b.values),
                               std::span<double>(exact), m, n, k);
    std::vector<float> abs_a(a.values.size()), abs_b(b.values.size());
    for (std::size_t e = 0; e < abs_a.size(); ++e) abs_a[e] = std::fabs(a.values[e]);
    for (std::size_t e = 0; e < abs_b.size(); ++e) abs_b[e] = std::fabs(b.values[e]);
    kernels::reference_gemm_tn(std::span<const float>(abs_a), std::span<const float>(abs_b),
                               std::span<double>(magnitude), m, n, k);
    const double u = std::ldexp(1.0, -24), gamma = k * u / (1 - k * u);
    const double output_rounding = std::is_same_v<Out, float>           ? 0.0
                                   : std::is_same_v<Out, __nv_bfloat16> ? std::ldexp(1.0, -8)
                                                                        : std::ldexp(1.0, -11);
    double worst = 0;  // error over its bound: must stay below 1
    for (int64_t e = 0; e < count; ++e) {
      const double sum_error = gamma * magnitude[e];
      const double bound = sum_error + output_rounding * (std::fabs(exact[e]) + sum_error) + 1e-30;
      worst = std::fmax(worst, std::fabs(double(static_cast<float>(want[e])) - exact[e]) / bound);
    }
    EXPECT_LT(worst, 1.0) << "the largest error is that fraction of its worst-case bound";
  }
  return want;
}

// m x n x k: one element; under one tile; ragged against 64 and 128 in m and n and against the
// 16-wide k-slice and 8-wide chunk in k; the 128 x 128 form's partial-chunk path (k = 1000:
// whole 8-wide chunks, a half slice; k = 4100: chunks cut at 4 for FP32's 16-byte rows, and
// rows not 16-byte multiples for the narrower types); long k; 1024^3, where the wrapper picks
// the 64 x 64 form, and 2048 x 2048, where it picks 128 x 128 (on an H100's 132 SMs).
constexpr int kShapes[][3] = {
    {1, 1, 1},        {16, 16, 16},     {63, 65, 17},    {127, 129, 65},     {130, 77, 300},
    {300, 257, 1000}, {257, 383, 4100}, {64, 192, 4096}, {1024, 1024, 1024}, {2048, 2048, 64}};

TEST(ReferenceGemm, EveryFormGivesTheOneOutputFormsBitsForFloatInputs) {
  for (const auto& s : kShapes) expect_same_bits<float, float>(s[0], s[1], s[2]);
}

TEST(ReferenceGemm, EveryFormGivesTheOneOutputFormsBitsForBf16Inputs) {
  for (const auto& s : kShapes) expect_same_bits<__nv_bfloat16, float>(s[0], s[1], s[2]);
  expect_same_bits<__nv_bfloat16, __nv_bfloat16>(130, 77, 300);
  expect_same_bits<__nv_bfloat16, __nv_bfloat16>(1000, 300, 129);
  expect_same_bits<__nv_bfloat16, __nv_bfloat16>(2048, 2048, 256);
}

TEST(ReferenceGemm, EveryFormGivesTheOneOutputFormsBitsForFp16Inputs) {
  for (const auto& s : kShapes) expect_same_bits<__half, float>(s[0], s[1], s[2]);
  expect_same_bits<__half, __half>(300, 257, 1000);
}

TEST(ReferenceGemm, EveryFormGivesTheOneOutputFormsBitsForFp8Inputs) {
  for (const auto& s : kShapes) expect_same_bits<__nv_fp8_e4m3, float>(s[0], s[1], s[2]);
  expect_same_bits<__nv_fp8_e4m3, __nv_bfloat16>(300, 257, 1000);
}

// Operands one element past an aligned address: the 128 x 128 form reads element by element.
TEST(ReferenceGemm, EveryFormGivesTheOneOutputFormsBitsForMisalignedOperands) {
  expect_same_bits<float, float>(300, 257, 256, 1);
  expect_same_bits<__nv_bfloat16, float>(300, 257, 256, 1);
  expect_same_bits<__half, float>(127, 129, 1000, 1);
  expect_same_bits<__nv_fp8_e4m3, __nv_bfloat16>(300, 257, 256, 1);
}

// Products that underflow to -0 leave every sum at -0 until a padding step past k adds +0: the
// padding to a multiple of 16 is part of the arithmetic (k = 8 and 24 are padded; 16 is not).
TEST(ReferenceGemm, EveryFormPadsKTheSameWaySoSignedZerosAgree) {
  for (int k : {8, 16, 24}) {
    const auto d = expect_same_bits<float, float>(130, 129, k, 0, 1e-25f, -1e-25f);
    EXPECT_EQ(std::signbit(d[0]), k % 16 == 0) << "k " << k;
  }
}

// A printout, not a test: each form's time and rate at the timing sizes of ch09 and ch19's
// GEMMs. Run with --gtest_also_run_disabled_tests.
template <class In, class Out>
void print_times(int size, const char* types) {
  const int64_t count = int64_t{size} * size;
  const Operand<In> a(count, 9), b(count, 10);
  Out* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, count * sizeof(Out)), cudaSuccess);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::printf("reference_gemm_tn %d^3, %s:", size, types);
  for (Form f : {Form::tile64, Form::tile128}) {
    launch(f, a.device, b.device, d, size, size, size);  // warm-up
    cudaEventRecord(start);
    constexpr int kRuns = 3;
    for (int r = 0; r < kRuns; ++r) launch(f, a.device, b.device, d, size, size, size);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    ms /= kRuns;
    std::printf("  %s %.2f ms (%.1f TFLOP/s)", name(f), ms, 2.0 * count * size / ms / 1e9);
  }
  std::printf("\n");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(d);
}

TEST(ReferenceGemm, DISABLED_TimesOfTheTiledForms) {
  for (int size : {4096, 8192}) {
    print_times<__nv_bfloat16, __nv_bfloat16>(size, "BF16 in, BF16 out");
    print_times<float, float>(size, "FP32 in, FP32 out");
    print_times<__nv_fp8_e4m3, __nv_bfloat16>(size, "FP8 E4M3 in, BF16 out");
  }
}

}  // namespace
