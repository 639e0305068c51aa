#pragma once
// f32 <-> f16 / bf16 conversions, bit-exact with ggml (round to nearest even).
#include <cstdint>

namespace tessera {

uint16_t fp32_to_fp16(float value) noexcept;
float fp16_to_fp32(uint16_t bits) noexcept;
uint16_t fp32_to_bf16(float value) noexcept;
inline float bf16_to_fp32(uint16_t bits) noexcept {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// Row conversions: vectorized where the CPU allows (F16C/AVX2), same bits as the scalar ones.
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) noexcept;
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept;
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) noexcept;
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept;

// The instruction set the row conversions (and quant.h's row functions) use here: "avx2+f16c" or "scalar".
const char* conversion_isa() noexcept;

// Plain scalar row conversions: the reference the vectorized ones must match bit for bit.
namespace ref {
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) noexcept;
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept;
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) noexcept;
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept;
}  // namespace ref

}  // namespace tessera
