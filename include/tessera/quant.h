#pragma once
// Quantizing and dequantizing rows of the block types (tessera/blocks.h), and row conversions
// between any type and f32.
#include <cstdint>

#include "tessera/blocks.h"
#include "tessera/dtype.h"

namespace tessera {

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

// The other block types (n a multiple of the type's block size). Quantizers follow ggml's
// reference rounding, so a row quantized here has the bits llama.cpp's would.
void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n) noexcept;
void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n) noexcept;
void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n) noexcept;
void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n) noexcept;
// The I-quants of grid codebooks, with the bits of ggml's dequantize_row_iq*.
void dequantize_row_iq2_xxs(const BlockIQ2_XXS* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq2_xs(const BlockIQ2_XS* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq2_s(const BlockIQ2_S* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq3_xxs(const BlockIQ3_XXS* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq3_s(const BlockIQ3_S* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq1_s(const BlockIQ1_S* src, float* dst, int64_t n) noexcept;
void dequantize_row_iq1_m(const BlockIQ1_M* src, float* dst, int64_t n) noexcept;
void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n) noexcept;
void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n) noexcept;
void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n) noexcept;
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) noexcept;
// ggml's reference K-quant rows (quantize_row_q*_K_ref: per-group scale searches, no importance
// matrix), which llama-quantize writes without one.
void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n) noexcept;
void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n) noexcept;
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) noexcept;
void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n) noexcept;
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) noexcept;
// IQ4_NL as ggml's row conversion (CPY) writes it: one scale per block, the least-squares fit of
// the indices at d = max / 127.
void quantize_row_iq4_nl(const float* src, BlockIQ4_NL* dst, int64_t n) noexcept;
// IQ4_NL as llama-quantize writes it: the best of 15 trial scales per block, weighted by x^2.
void quantize_row_iq4_nl_searched(const float* src, BlockIQ4_NL* dst, int64_t n) noexcept;
// IQ4_XS (searched as IQ4_NL's file path, per group of 32, then 6-bit group scales).
void quantize_row_iq4_xs(const float* src, BlockIQ4_XS* dst, int64_t n) noexcept;
// MXFP4: e from the block's largest magnitude (floor(log2 amax) - 2 + 127), then each element's
// nearest code (the first on ties), as ggml's quantize_row_mxfp4_ref (CPY and llama-quantize alike).
void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n) noexcept;
void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n) noexcept;
}  // namespace ref

// Converts a contiguous row of n elements of `type` to f32 (I32 converts exactly).
void to_f32_row(DType type, const void* src, float* dst, int64_t n) noexcept;
// Converts n floats to `type` (f16/bf16 round to nearest even, I32 truncates, quantized per block)
// with the bits ggml's row conversion (CPY, from_float) gives, for every type but the grid I-quants
// (is_grid_iquant), which nothing converts into: for those it writes zero blocks (callers check).
void from_f32_row(DType type, const float* src, void* dst, int64_t n) noexcept;
// Test data for any quantized type: n elements (whole blocks) of valid blocks whose indices, signs
// and sub-scales are random (a seeded generator) and whose block scales are about amax / 127, so
// values stay within about +-amax. For the grid I-quants this is the only way to make blocks here.
void random_blocks(DType type, uint64_t seed, float amax, void* dst, int64_t n) noexcept;
// Converts n weights to `type` with the bits llama-quantize writes without an importance matrix
// (ggml_quantize_chunk): from_f32_row's for every type but IQ4_NL, whose file path searches scales.
void quantize_weights(DType type, const float* src, void* dst, int64_t n) noexcept;

}  // namespace tessera
