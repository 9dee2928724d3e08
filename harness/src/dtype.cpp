#include "bench/dtype.hpp"

namespace bench {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u64: return "u64";
    case DType::u32: return "u32";
    case DType::u8: return "u8";
  }
  return "unknown";
}

int size_of(DType dtype) {
  switch (dtype) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::fp8_e4m3: case DType::fp8_e5m2: case DType::i8: case DType::u8: return 1;
  }
  return 0;
}

bool is_floating(DType dtype) {
  switch (dtype) {
    case DType::f64: case DType::f32: case DType::f16: case DType::bf16:
    case DType::fp8_e4m3: case DType::fp8_e5m2: return true;
    default: return false;
  }
}

}  // namespace bench
