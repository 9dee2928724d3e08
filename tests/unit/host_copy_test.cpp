// harness/src/host_copy.hpp and the comparison over it (verify.cpp): host copies keep an
// output's own dtype, and comparing them converts element by element exactly as a double copy did.
#include "host_copy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "verify.hpp"

namespace {

using bench::DType;
using bench::detail::HostArray;
using bench::detail::HostCopy;
using bench::detail::HostValues;
using bench::detail::load_as_double;

template <class T>
HostCopy copy_of(const std::vector<T>& values, DType dtype) {
  HostCopy c{dtype, HostArray<std::byte>(values.size() * sizeof(T))};
  std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  return c;
}

template <DType D, class T>
double read(T bits) {
  return load_as_double<D>(reinterpret_cast<const std::byte*>(&bits), 0);
}

TEST(HostCopy, EveryDtypeReadsAsItsValue) {
  EXPECT_EQ(read<DType::f64>(-2.5), -2.5);
  EXPECT_EQ(read<DType::f32>(0.1f), double(0.1f));
  EXPECT_EQ(read<DType::f16>(uint16_t{0x3C00}), 1.0);
  EXPECT_EQ(read<DType::f16>(uint16_t{0xC100}), -2.5);
  EXPECT_EQ(read<DType::f16>(uint16_t{0x0001}), std::ldexp(1.0, -24));  // subnormal
  EXPECT_TRUE(std::isnan(read<DType::f16>(uint16_t{0xFFFF})));             // the NaN poison
  EXPECT_EQ(read<DType::bf16>(uint16_t{0x3F80}), 1.0);
  EXPECT_EQ(read<DType::bf16>(uint16_t{0xC020}), -2.5);
  EXPECT_EQ(read<DType::fp8_e4m3>(uint8_t{0x38}), 1.0);
  EXPECT_EQ(read<DType::fp8_e4m3>(uint8_t{0x7E}), 448.0);  // its largest finite value
  EXPECT_TRUE(std::isnan(read<DType::fp8_e4m3>(uint8_t{0xFF})));
  EXPECT_EQ(read<DType::fp8_e5m2>(uint8_t{0x3C}), 1.0);
  EXPECT_EQ(read<DType::i64>(int64_t{-7}), -7.0);
  EXPECT_EQ(read<DType::i32>(int32_t{-7}), -7.0);
  EXPECT_EQ(read<DType::i8>(int8_t{-7}), -7.0);
  EXPECT_EQ(read<DType::u64>(uint64_t{7}), 7.0);
  EXPECT_EQ(read<DType::u32>(uint32_t{0xFFFFFFFF}), 4294967295.0);
  EXPECT_EQ(read<DType::u8>(uint8_t{255}), 255.0);
}

TEST(HostCopy, AnArrayIsWritableAndMovesItsMemory) {
  HostArray<double> a(3 << 20);  // large enough for huge pages
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = double(i);
  HostArray<double> b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.size(), std::size_t{3} << 20);
  EXPECT_EQ(b[12345], 12345.0);
  EXPECT_EQ(HostArray<double>(0).data(), nullptr);
}

// Over the parallel threshold, with one wrong element: the native comparison finds what the
// comparison of double copies finds, at the same index.
TEST(HostCopy, ANativeOutputComparesLikeItsDoubleCopy) {
  const std::size_t n = (1 << 21) + 3;
  std::vector<float> out(n);
  std::vector<double> out_doubles(n), ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(std::sin(double(i)));
    out_doubles[i] = out[i];
    ref[i] = std::sin(double(i));
  }
  out[n - 2] = 0.5f;
  out_doubles[n - 2] = 0.5;
  const HostCopy native = copy_of(out, DType::f32);
  for (auto tol : {bench::exact(), bench::allclose(1e-6, 0), bench::relative_l2(1e-5)}) {
    const auto a = bench::detail::compare(HostValues(native), HostValues(std::span<const double>(ref)), tol);
    const auto b = bench::detail::compare(out_doubles, ref, tol);
    EXPECT_EQ(a.pass, b.pass);
    EXPECT_EQ(a.mismatches, b.mismatches);
    EXPECT_EQ(a.worst_index, b.worst_index);
    EXPECT_EQ(a.max_abs_err, b.max_abs_err);
    EXPECT_DOUBLE_EQ(a.rel_l2_err, b.rel_l2_err);
  }
}

// A device reference's output is compared in the output's dtype; NaN (the poison) never passes.
TEST(HostCopy, TwoNativeCopiesOfOneDtypeCompare) {
  const std::vector<uint16_t> ref = {0x3C00, 0x4000, 0x4200};  // f16 1, 2, 3
  std::vector<uint16_t> out = ref;
  const auto same = bench::detail::compare(HostValues(copy_of(out, DType::f16)),
                                           HostValues(copy_of(ref, DType::f16)), bench::exact());
  EXPECT_TRUE(same.pass);
  out[1] = 0xFFFF;
  const auto poisoned = bench::detail::compare(HostValues(copy_of(out, DType::f16)),
                                               HostValues(copy_of(ref, DType::f16)), bench::exact());
  EXPECT_FALSE(poisoned.pass);
  EXPECT_EQ(poisoned.nan_count, 1);
  EXPECT_EQ(poisoned.worst_index, 1);
}

// The FP32 form of a device reference: a BF16 output against FP32 expected values reads as it
// would against the same values in double.
TEST(HostCopy, ANarrowOutputComparesWithFp32ExpectedValuesAsWithDoubles) {
  const HostCopy out =
      copy_of(std::vector<uint16_t>{0x3F80, 0x3F81, 0x3F80}, DType::bf16);  // 1, 1.0078125, 1
  const std::vector<float> wide = {1.00390625f, 1.00390625f, 1.01f};        // the third is 1% off
  const std::vector<double> doubles(wide.begin(), wide.end());
  const bench::Tolerance tol = bench::allclose(0, 4e-3);
  const auto f32 =
      bench::detail::compare(HostValues(out), HostValues(copy_of(wide, DType::f32)), tol);
  const auto f64 =
      bench::detail::compare(HostValues(out), HostValues(std::span<const double>(doubles)), tol);
  EXPECT_FALSE(f32.pass);
  EXPECT_EQ(f32.mismatches, 1);
  EXPECT_EQ(f32.worst_index, 2);
  EXPECT_EQ(f32.mismatches, f64.mismatches);
  EXPECT_EQ(f32.max_abs_err, f64.max_abs_err);
}

TEST(HostCopy, MismatchedDtypesOrCountsAreAnError) {
  const HostCopy f16 = copy_of(std::vector<uint16_t>{0x3C00, 0x3C00}, DType::f16);
  const HostCopy bf16 = copy_of(std::vector<uint16_t>{0x3F80, 0x3F80}, DType::bf16);
  const std::vector<double> three = {1, 1, 1};
  EXPECT_THROW(bench::detail::compare(HostValues(f16), HostValues(bf16), bench::exact()), std::logic_error);
  EXPECT_THROW(bench::detail::compare(HostValues(f16), HostValues(std::span<const double>(three)), bench::exact()),
               std::logic_error);
}

}  // namespace
