#pragma once
// Q4_0 / Q8_0 blocks (ggml's layout) and row conversions between any type and f32.
#include <cstdint>

#include "tessera/dtype.h"

namespace tessera {

inline constexpr int64_t kQuantBlock = 32;

struct BlockQ4_0 {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // element j: low nibble of qs[j]; element j+16: high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// n must be a multiple of 32.
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) noexcept;
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) noexcept;
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) noexcept;
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) noexcept;

// Plain scalar versions: the reference the vectorized row functions above match bit for bit.
namespace ref {
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) noexcept;
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) noexcept;
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) noexcept;
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) noexcept;
}  // namespace ref

// Converts a contiguous row of n elements of `type` to f32 (I32 converts exactly).
void to_f32_row(DType type, const void* src, float* dst, int64_t n) noexcept;
// Converts n floats to `type` (f16/bf16 round to nearest even, I32 truncates, quantized per block).
void from_f32_row(DType type, const float* src, void* dst, int64_t n) noexcept;

}  // namespace tessera
