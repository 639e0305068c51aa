// Q4_1, Q5_0 and Q5_1 rows: the 32-element types with a minimum or a fifth bit (scalar reference).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {
namespace {

uint32_t high_bits(const uint8_t qh[4]) noexcept {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

// Bit 4 of every element's five-bit q, packed as Q5_0/Q5_1 store it.
void store_high_bits(const uint8_t q[32], uint8_t qh[4]) noexcept {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &h, 4);
}

void min_max(const float* x, float& lo, float& hi) noexcept {
  lo = x[0];
  hi = x[0];
  for (int j = 1; j < kQuantBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

}  // namespace

void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, dst += kQuantBlock) {
    const float d = fp16_to_fp32(src[b].d), m = fp16_to_fp32(src[b].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(src[b].qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(src[b].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, dst += kQuantBlock) {
    const float d = fp16_to_fp32(src[b].d);
    const uint32_t h = high_bits(src[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (src[b].qs[j] & 0x0f) | static_cast<int>(((h >> j) & 1) << 4);
      const int q1 = (src[b].qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
      dst[j] = static_cast<float>(q0 - 16) * d;
      dst[j + 16] = static_cast<float>(q1 - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, dst += kQuantBlock) {
    const float d = fp16_to_fp32(src[b].d), m = fp16_to_fp32(src[b].m);
    const uint32_t h = high_bits(src[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (src[b].qs[j] & 0x0f) | static_cast<int>(((h >> j) & 1) << 4);
      const int q1 = (src[b].qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
      dst[j] = static_cast<float>(q0) * d + m;
      dst[j + 16] = static_cast<float>(q1) * d + m;
    }
  }
}

void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, src += kQuantBlock) {
    float lo, hi;
    min_max(src, lo, hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    dst[b].m = fp32_to_fp16(lo);
    for (int j = 0; j < 16; ++j) {
      // Truncation after +0.5, as ggml rounds (values are >= 0 here).
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - lo) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((src[j + 16] - lo) * id + 0.5f)));
      dst[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, src += kQuantBlock) {
    // The element of largest magnitude, with its sign; the first one wins ties.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    uint8_t q[32];
    for (int j = 0; j < kQuantBlock; ++j)
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f))));
    for (int j = 0; j < 16; ++j)
      dst[b].qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    store_high_bits(q, dst[b].qh);
  }
}

void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, src += kQuantBlock) {
    float lo, hi;
    min_max(src, lo, hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    dst[b].m = fp32_to_fp16(lo);
    uint8_t q[32];
    for (int j = 0; j < kQuantBlock; ++j)
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>((src[j] - lo) * id + 0.5f)));
    for (int j = 0; j < 16; ++j)
      dst[b].qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    store_high_bits(q, dst[b].qh);
  }
}

}  // namespace tessera::ref
