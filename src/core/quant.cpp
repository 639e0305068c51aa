#include "tessera/quant.h"

#include <cmath>
#include <cstring>

#include "tessera/convert.h"

namespace tessera {

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    // The element of largest magnitude, with its sign; the first one wins ties.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = static_cast<int8_t>(x[j] * id + 8.5f);
      const int q1 = static_cast<int8_t>(x[j + 16] * id + 8.5f);
      const uint8_t lo = static_cast<uint8_t>(q0 < 15 ? q0 : 15);
      const uint8_t hi = static_cast<uint8_t>(q1 < 15 ? q1 : 15);
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) dst[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[b * kQuantBlock + j] = static_cast<float>((src[b].qs[j] & 0x0f) - 8) * d;
      dst[b * kQuantBlock + j + 16] = static_cast<float>((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < kQuantBlock; ++j) dst[b * kQuantBlock + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

void to_f32_row(DType type, const void* src, float* dst, int64_t n) noexcept {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
      fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
      break;
    case DType::BF16:
      bf16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
      break;
    case DType::Q4_0:
      dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
      break;
    case DType::Q8_0:
      dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
      break;
    case DType::I32: {
      const auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      break;
    }
  }
}

void from_f32_row(DType type, const float* src, void* dst, int64_t n) noexcept {
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
      fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::BF16:
      fp32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::Q4_0:
      quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      break;
    case DType::Q8_0:
      quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      break;
    case DType::I32: {
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(src[i]);
      break;
    }
  }
}

}  // namespace tessera
