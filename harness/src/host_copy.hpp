// Internal: host memory for the checks' copies of timing-size buffers (a GiB each), and reading
// their elements as double in whatever dtype they hold.
//
// An output is kept on the host in its own dtype and converted element by element as it is
// compared, rather than first expanded into a second, double-width copy: a 1 GiB FP32 output
// is 1 GiB of host memory, not 1 + 2. Memory is taken without zeroing (the writer fills every
// element) and, being large, in transparent huge pages where the kernel allows them; its pages are
// first touched by parallel_chunks' threads. Page faults on one thread were most of a case's time.
#pragma once

#include <sys/mman.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "bench/dtype.hpp"

namespace bench::detail {

// `count` elements of trivial type T, uninitialised.
template <class T>
class HostArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  HostArray() = default;
  explicit HostArray(std::size_t count) : count_(count) {
    if (count == 0) return;
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes(), MADV_HUGEPAGE);  // a hint: fewer, larger page faults
    data_ = static_cast<T*>(p);
  }
  HostArray(HostArray&& other) noexcept { swap(other); }
  HostArray& operator=(HostArray&& other) noexcept {
    swap(other);
    return *this;
  }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  ~HostArray() {
    if (data_ != nullptr) munmap(data_, bytes());
  }

  T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  T& operator[](std::size_t i) const { return data_[i]; }
  operator std::span<T>() const { return {data_, count_}; }
  operator std::span<const T>() const { return {data_, count_}; }

 private:
  void swap(HostArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// A host copy of one device buffer, in the buffer's own dtype.
struct HostCopy {
  DType dtype = DType::f32;
  HostArray<std::byte> bytes;
};

// Elements of some dtype, read as double: a host copy, or the CPU reference's doubles (f64).
struct HostValues {
  const std::byte* data = nullptr;
  DType dtype = DType::f64;
  std::size_t count = 0;
  HostValues() = default;
  HostValues(const std::byte* d, DType t, std::size_t n) : data(d), dtype(t), count(n) {}
  HostValues(std::span<const double> values)  // NOLINT: doubles read as themselves
      : data(reinterpret_cast<const std::byte*>(values.data())), dtype(DType::f64), count(values.size()) {}
  HostValues(const HostCopy& c)  // NOLINT
      : data(c.bytes.data()), dtype(c.dtype), count(c.bytes.size() / static_cast<std::size_t>(size_of(c.dtype))) {}
};

inline double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}
inline double e4m3_to_double(uint8_t x) {
  const int sign = x >> 7, exp = (x >> 3) & 0xF, mant = x & 0x7;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double v = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(mant + 8, exp - 10);
  return sign ? -v : v;
}

// Element i of raw memory holding dtype D, as double.
template <DType D>
double load_as_double(const std::byte* raw, std::size_t i) {
  auto load = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, raw + i * sizeof v, sizeof v);
    return v;
  };
  if constexpr (D == DType::f64) return load(double{});
  else if constexpr (D == DType::f32) return load(float{});
  else if constexpr (D == DType::f16) return half_to_double(load(uint16_t{}));
  else if constexpr (D == DType::bf16) return std::bit_cast<float>(uint32_t{load(uint16_t{})} << 16);
  else if constexpr (D == DType::fp8_e4m3) return e4m3_to_double(load(uint8_t{}));
  else if constexpr (D == DType::fp8_e5m2) return half_to_double(uint16_t(load(uint8_t{}) << 8));
  else if constexpr (D == DType::i64) return static_cast<double>(load(int64_t{}));
  else if constexpr (D == DType::i32) return load(int32_t{});
  else if constexpr (D == DType::i8) return load(int8_t{});
  else if constexpr (D == DType::u64) return static_cast<double>(load(uint64_t{}));
  else if constexpr (D == DType::u32) return load(uint32_t{});
  else return load(uint8_t{});
}

// Calls fn(std::integral_constant<DType, d>{}): one instantiation per dtype, so the per-element
// loops inside fn know their dtype at compile time.
template <class Fn>
decltype(auto) with_dtype(DType d, Fn&& fn) {
  using enum DType;
  switch (d) {
    case f64: return fn(std::integral_constant<DType, f64>{});
    case f32: return fn(std::integral_constant<DType, f32>{});
    case f16: return fn(std::integral_constant<DType, f16>{});
    case bf16: return fn(std::integral_constant<DType, bf16>{});
    case fp8_e4m3: return fn(std::integral_constant<DType, fp8_e4m3>{});
    case fp8_e5m2: return fn(std::integral_constant<DType, fp8_e5m2>{});
    case i64: return fn(std::integral_constant<DType, i64>{});
    case i32: return fn(std::integral_constant<DType, i32>{});
    case i8: return fn(std::integral_constant<DType, i8>{});
    case u64: return fn(std::integral_constant<DType, u64>{});
    case u32: return fn(std::integral_constant<DType, u32>{});
    case u8: break;
  }
  return fn(std::integral_constant<DType, u8>{});
}

}  // namespace bench::detail
