// Tests kernels::reference_gemm_tn (kernels/reference_gemm.cuh), the device reference that every
// GEMM example's timed samples are checked against. Its two forms (64 x 64 and 128 x 128 tiles)
// and the form the wrapper picks must give the same bits as the one-output-per-thread form they
// replaced (kept below as the oracle): for each input type the callers use (float, BF16, FP16,
// FP8 E4M3), for shapes that are not multiples of any tile, for k that is not a multiple of the
// k-slice, and for operands the 128 x 128 form cannot read 16 bytes at a time. The oracle must
// also agree with the CPU double reference. The forms' times are a printout, in a DISABLED_ test.
// The grouped form (reference_gemm_tn_grouped: one launch over many products that share m and k,
// ch15/moe_dispatch's device reference) must give, in each of its tile forms, the bits of
// reference_gemm_tn called on each group alone (the per-expert loop it replaced, kept below as the
// oracle), and write no column outside its groups: ragged groups (empty ones, counts not multiples
// of either tile), BF16 and FP8 E4M3 inputs, operands it cannot read 16 bytes at a time, and
// ch15's timing shape with its real routings. Its time against the per-group loop at that shape
// is a printout, in a DISABLED_ test.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <ch15/moe_dispatch_plan.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <kernels/reference_gemm.cuh>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
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

// The CPU form splits the output's columns over the host's cores above ~10^8 multiply-adds: each
// element is still one thread's sum in k order, so the bits must equal a one-thread loop's, at a
// size past the split (a host-only check; it lives here beside the device forms it anchors).
TEST(ReferenceGemm, TheHostFormGivesOneThreadsBitsOnEveryCoreCount) {
  const int64_t m = 640, n = 520, k = 384;  // 1.28e8 multiply-adds: split; n not a multiple of 8
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> a(std::size_t(m * k)), b(std::size_t(n * k));
  for (auto& x : a) x = uniform(rng);
  for (auto& x : b) x = uniform(rng);
  std::vector<double> split(std::size_t(m * n)), one(split.size());
  kernels::reference_gemm_tn(std::span<const float>(a), std::span<const float>(b),
                             std::span<double>(split), m, n, k);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += double(a[i * k + p]) * double(b[j * k + p]);
      one[j * m + i] = sum;
    }
  EXPECT_EQ(std::memcmp(split.data(), one.data(), split.size() * sizeof(double)), 0);
}

TEST(ReferenceGemm, DISABLED_TimesOfTheTiledForms) {
  for (int size : {4096, 8192}) {
    print_times<__nv_bfloat16, __nv_bfloat16>(size, "BF16 in, BF16 out");
    print_times<float, float>(size, "FP32 in, FP32 out");
    print_times<__nv_fp8_e4m3, __nv_bfloat16>(size, "FP8 E4M3 in, BF16 out");
  }
}

// ---- The grouped form -------------------------------------------------------------------------
// Operands filled on the device (ch15's shape is 335 M elements): element e is a hash of (seed, e)
// mapped to [-2, 2), in the input type. `offset` elements before the first misalign it.
__host__ __device__ inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <class In>
__global__ void fill_hashed(In* x, int64_t count, uint64_t seed) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count;
       e += int64_t{gridDim.x} * blockDim.x)
    x[e] =
        In(-2.0f + 4.0f * float(splitmix64(seed * 0x100000000ull + uint64_t(e)) >> 40) * 0x1p-24f);
}
template <class In>
struct DeviceOperand {
  In* base = nullptr;
  In* device = nullptr;
  DeviceOperand(int64_t count, uint64_t seed, int offset = 0) {
    EXPECT_EQ(cudaMalloc(&base, (count + offset + 1) * sizeof(In)), cudaSuccess);
    device = base + offset;
    fill_hashed<<<1024, 256>>>(device, count, seed);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceOperand() { cudaFree(base); }
  DeviceOperand(const DeviceOperand&) = delete;
  DeviceOperand& operator=(const DeviceOperand&) = delete;
};

// Groups of the given column counts laid out in order in one B and one D, `gap` unused columns
// before each: columns in no group, which both sides must leave as they were.
struct GroupLayout {
  std::vector<int32_t> first_column, columns;
  int64_t total_columns = 0;
  GroupLayout(std::vector<int32_t> counts, int gap) : columns(std::move(counts)) {
    for (int32_t n : columns) {
      total_columns += gap;
      first_column.push_back(int32_t(total_columns));
      total_columns += n;
    }
  }
  GroupLayout(std::vector<int32_t> first, std::vector<int32_t> counts, int64_t total)
      : first_column(std::move(first)), columns(std::move(counts)), total_columns(total) {}
};

// The oracle: what ch15/moe_dispatch's device reference did before the grouped form, one
// reference_gemm_tn call (the wrapper's choice of form) per group with columns.
template <class In, class Out>
void per_group_reference_gemm(const In* a, const In* b, Out* d, int64_t m, int64_t k,
                              const GroupLayout& g, cudaStream_t stream) {
  for (std::size_t e = 0; e < g.columns.size(); ++e)
    if (g.columns[e] > 0)
      kernels::reference_gemm_tn(a + int64_t(e) * m * k, b + int64_t{g.first_column[e]} * k,
                                 d + int64_t{g.first_column[e]} * m, m, int64_t{g.columns[e]}, k,
                                 stream);
}

enum class GroupedForm { tile64, tile128, chosen };
constexpr GroupedForm kGroupedForms[] = {GroupedForm::tile64, GroupedForm::tile128,
                                         GroupedForm::chosen};
const char* name(GroupedForm f) {
  return f == GroupedForm::tile64    ? "grouped 64 x 64"
         : f == GroupedForm::tile128 ? "grouped 128 x 128"
                                     : "grouped, the wrapper's choice";
}

template <class In, class Out>
void launch_grouped(GroupedForm f, const In* a, const In* b, Out* d, int64_t m, int64_t k,
                    const GroupLayout& g, cudaStream_t stream) {
  if (f == GroupedForm::chosen)
    kernels::reference_gemm_tn_grouped(a, b, d, m, k, std::span<const int32_t>(g.first_column),
                                       std::span<const int32_t>(g.columns), stream);
  else
    kernels::detail::launch_reference_gemm_tn_grouped(
        a, b, d, m, k, std::span<const int32_t>(g.first_column),
        std::span<const int32_t>(g.columns), f == GroupedForm::tile128, stream);
}

// Every grouped form against the per-group oracle, bit for bit over the whole of D (poisoned with
// NaN bytes first on both sides, so a column in no group must stay NaN and an output the grouped
// form missed shows).
template <class In, class Out>
void expect_grouped_same_bits(int64_t m, int64_t k, const GroupLayout& g, int offset = 0) {
  SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << ", " << g.columns.size()
                                  << " groups, " << g.total_columns << " columns in all, "
                                  << sizeof(In) << "-byte input, " << sizeof(Out)
                                  << "-byte output, offset " << offset);
  const int64_t groups = int64_t(g.columns.size()), count = m * g.total_columns;
  const DeviceOperand<In> a(groups * m * k, 21, offset), b(g.total_columns * k, 22, offset);
  Out* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, (count + 1) * sizeof(Out)), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0xff, count * sizeof(Out)), cudaSuccess);
  per_group_reference_gemm(a.device, b.device, d, m, k, g, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the per-group oracle";
  const std::vector<Out> want = download(d, count);
  for (GroupedForm f : kGroupedForms) {
    EXPECT_EQ(cudaMemset(d, 0xff, count * sizeof(Out)), cudaSuccess);
    launch_grouped(f, a.device, b.device, d, m, k, g, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name(f);
    const std::vector<Out> got = download(d, count);
    int64_t differ = 0;
    for (int64_t e = 0; e < count; ++e) differ += std::memcmp(&want[e], &got[e], sizeof(Out)) != 0;
    EXPECT_EQ(differ, 0) << "outputs of " << count << " differ from the per-group calls' in the "
                         << name(f) << " form";
  }
  cudaFree(d);
}

// Ragged groups: empty ones (first, inside, last), one column, counts under, at and past both
// tiles; m under one tile and ragged against both; k ragged against the 16-wide slice, the 8-wide
// chunk (k = 4100: rows not 16-byte multiples for 2-byte inputs) and short (17).
const std::vector<int32_t> kRaggedColumns = {0, 1, 130, 0, 64, 257, 127, 128, 5, 300, 0};

// The ragged layouts above with both output types, for one input type.
template <class In>
void expect_ragged_groups_same_bits() {
  expect_grouped_same_bits<In, __nv_bfloat16>(300, 1000, GroupLayout(kRaggedColumns, 3));
  expect_grouped_same_bits<In, float>(300, 1000, GroupLayout(kRaggedColumns, 0));
  expect_grouped_same_bits<In, __nv_bfloat16>(63, 17, GroupLayout({1, 0, 65, 128, 129}, 2));
  expect_grouped_same_bits<In, float>(130, 4100, GroupLayout({200, 0, 77}, 1));
}

TEST(ReferenceGemmGrouped, EveryFormGivesThePerGroupBitsForBf16Inputs) {
  expect_ragged_groups_same_bits<__nv_bfloat16>();
}

TEST(ReferenceGemmGrouped, EveryFormGivesThePerGroupBitsForFp8Inputs) {
  expect_ragged_groups_same_bits<__nv_fp8_e4m3>();
}

// Operands one element past an aligned address: the 128 x 128 form reads element by element.
TEST(ReferenceGemmGrouped, EveryFormGivesThePerGroupBitsForMisalignedOperands) {
  expect_grouped_same_bits<__nv_bfloat16, __nv_bfloat16>(300, 256, GroupLayout({129, 0, 300}, 1),
                                                         1);
  expect_grouped_same_bits<__nv_fp8_e4m3, __nv_bfloat16>(300, 256, GroupLayout({129, 0, 300}, 1),
                                                         1);
}

// No groups, or only empty ones: nothing is launched and D is left alone.
TEST(ReferenceGemmGrouped, NoColumnsWritesNothing) {
  expect_grouped_same_bits<__nv_bfloat16, __nv_bfloat16>(300, 256, GroupLayout({0, 0, 0}, 4));
  expect_grouped_same_bits<__nv_bfloat16, __nv_bfloat16>(300, 256, GroupLayout({}, 0));
}

// ch15/moe_dispatch's timing shape with its own routings (moe_dispatch_plan.hpp): 8192 tokens x
// top-8 over 128 experts, hidden 2048 -> ffn 768; expert e is group e, its columns the rows the
// host permutation gives it (uniform: ~512 each; skewed: 4 hot experts with about half).
GroupLayout moe_groups(bool skewed) {
  const auto plan = ch15::moe::plan_permutation(ch15::moe::make_routing(8192, 128, 8, skewed));
  return GroupLayout(std::vector<int32_t>(plan.offsets.begin(), plan.offsets.end() - 1),
                     plan.counts, plan.offsets.back());
}
constexpr int64_t kMoeFfn = 768, kMoeHidden = 2048;

TEST(ReferenceGemmGrouped, EveryFormGivesThePerGroupBitsAtTheMoeShape) {
  for (bool skewed : {false, true})
    expect_grouped_same_bits<__nv_bfloat16, __nv_bfloat16>(kMoeFfn, kMoeHidden, moe_groups(skewed));
}

// A printout, not a test: ch15/moe_dispatch's device-reference GEMM at its timing shape, as the
// per-expert loop it was and as the grouped form, BF16 in and out. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*Grouped*Times*'.
TEST(ReferenceGemmGrouped, DISABLED_TimesAtTheMoeShape) {
  for (bool skewed : {false, true}) {
    const GroupLayout g = moe_groups(skewed);
    const int64_t m = kMoeFfn, k = kMoeHidden, count = m * g.total_columns;
    const DeviceOperand<__nv_bfloat16> a(int64_t(g.columns.size()) * m * k, 23),
        b(g.total_columns * k, 24);
    __nv_bfloat16* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, count * sizeof(__nv_bfloat16)), cudaSuccess);
    int64_t big_tiles = 0, small_tiles = 0;
    for (int32_t n : g.columns) {
      big_tiles += kernels::detail::reference_gemm_tiles(m, n, kernels::detail::kBigTile);
      small_tiles += kernels::detail::reference_gemm_tiles(m, n, kernels::detail::kRefTile);
    }
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    const double flops = 2.0 * double(count) * double(k);
    std::printf(
        "reference GEMM at ch15/moe_dispatch's shape (%s routing, %zu experts, %lld rows, "
        "%lld x %lld; grouped tiles: %lld of 128 x 128, %lld of 64 x 64), BF16:\n",
        skewed ? "skewed" : "uniform", g.columns.size(), (long long)g.total_columns, (long long)m,
        (long long)k, (long long)big_tiles, (long long)small_tiles);
    enum class Way { per_group, grouped64, grouped128, chosen };
    for (Way way : {Way::per_group, Way::grouped64, Way::grouped128, Way::chosen}) {
      const auto run = [&] {
        if (way == Way::per_group)
          per_group_reference_gemm(a.device, b.device, d, m, k, g, nullptr);
        else
          launch_grouped(way == Way::grouped64    ? GroupedForm::tile64
                         : way == Way::grouped128 ? GroupedForm::tile128
                                                  : GroupedForm::chosen,
                         a.device, b.device, d, m, k, g, nullptr);
      };
      run();  // warm-up
      cudaEventRecord(start);
      constexpr int kRuns = 3;
      for (int r = 0; r < kRuns; ++r) run();
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      ms /= kRuns;
      std::printf("  %-40s %8.3f ms (%.1f TFLOP/s)\n",
                  way == Way::per_group    ? "per expert (reference_gemm_tn each)"
                  : way == Way::grouped64  ? "grouped, 64 x 64"
                  : way == Way::grouped128 ? "grouped, 128 x 128"
                                           : "grouped, the wrapper's choice",
                  ms, flops / ms / 1e9);
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(d);
  }
}

}  // namespace
