#include "tessera/convert.h"

#include <cstring>

namespace tessera {
namespace {

inline uint32_t float_bits(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

uint16_t fp32_to_fp16(float value) noexcept {
  uint32_t x = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u)  // NaN: quiet it and keep the top payload bits (as F16C does)
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536 (and inf): inf
  if (x >= 0x38800000u) {                                              // normal half
    // Re-bias the exponent and round to nearest even on the 13 dropped bits; a carry may
    // overflow into the exponent (up to inf), which is the correct result.
    x += 0xc8000000u + 0xfffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  // Subnormal or zero: let the FPU round by adding 0.5 (whose ulp is the half subnormal step).
  const float f = bits_float(x) + 0.5f;
  return static_cast<uint16_t>(sign | (float_bits(f) - 0x3f000000u));
}

float fp16_to_fp32(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t fp32_to_bf16(float value) noexcept {
  const uint32_t u = float_bits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

}  // namespace tessera
