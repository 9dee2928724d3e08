// bench/dtype.hpp: element types the harness can generate, poison, checksum and verify.
// The CUDA half/bf16/fp8 headers are not included: their types are only named here.
#pragma once

#include <cstdint>

struct __half;
struct __nv_bfloat16;
struct __nv_fp8_e4m3;
struct __nv_fp8_e5m2;

namespace bench {

enum class DType { f64, f32, f16, bf16, fp8_e4m3, fp8_e5m2, i64, i32, i8, u64, u32, u8 };

const char* to_string(DType dtype);
int size_of(DType dtype);
bool is_floating(DType dtype);

template <class T>
DType dtype_of() = delete;  // an unsupported element type is a compile error
template <> inline DType dtype_of<double>() { return DType::f64; }
template <> inline DType dtype_of<float>() { return DType::f32; }
template <> inline DType dtype_of<__half>() { return DType::f16; }
template <> inline DType dtype_of<__nv_bfloat16>() { return DType::bf16; }
template <> inline DType dtype_of<__nv_fp8_e4m3>() { return DType::fp8_e4m3; }
template <> inline DType dtype_of<__nv_fp8_e5m2>() { return DType::fp8_e5m2; }
template <> inline DType dtype_of<int64_t>() { return DType::i64; }
template <> inline DType dtype_of<int32_t>() { return DType::i32; }
template <> inline DType dtype_of<int8_t>() { return DType::i8; }
template <> inline DType dtype_of<uint64_t>() { return DType::u64; }
template <> inline DType dtype_of<uint32_t>() { return DType::u32; }
template <> inline DType dtype_of<uint8_t>() { return DType::u8; }

}  // namespace bench
