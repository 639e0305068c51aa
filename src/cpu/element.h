#pragma once
// Scalar element access for the reference kernels: load/store one element of a non-quantized
// type as f32, and fetch a (possibly strided) row of any type as f32.
#include <cstring>

#include "tessera/convert.h"
#include "tessera/quant.h"
#include "tessera/tensor.h"

namespace tessera::cpu {

inline float load_f32(DType type, const char* p) noexcept {
  switch (type) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return fp16_to_fp32(v);
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_fp32(v);
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    default:
      return 0.0f;  // quantized types are read by rows (load_row_f32)
  }
}

inline void store_f32(DType type, char* p, float value) noexcept {
  switch (type) {
    case DType::F32:
      std::memcpy(p, &value, 4);
      break;
    case DType::F16: {
      const uint16_t v = fp32_to_fp16(value);
      std::memcpy(p, &v, 2);
      break;
    }
    case DType::BF16: {
      const uint16_t v = fp32_to_bf16(value);
      std::memcpy(p, &v, 2);
      break;
    }
    case DType::I32: {
      const int32_t v = static_cast<int32_t>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    default:
      break;
  }
}

// Row (i1, i2, i3) of t as ne[0] floats in out; handles strided nb[0] for scalar types.
inline void load_row_f32(const Tensor& t, int64_t i1, int64_t i2, int64_t i3, float* out) noexcept {
  const char* row = t.at(0, i1, i2, i3);
  if (t.rows_contiguous()) {
    to_f32_row(t.type, row, out, t.ne[0]);
    return;
  }
  for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) out[i0] = load_f32(t.type, row + i0 * t.nb[0]);
}

}  // namespace tessera::cpu
