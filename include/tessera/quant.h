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
// IQ4_NL as llama-quantize writes it: the best of 15 trial scales per block, weighted by x^2, or
// with an importance matrix (n weights, one per element) by importance * sqrt(sigma^2 + x^2).
void quantize_row_iq4_nl_searched(const float* src, BlockIQ4_NL* dst, int64_t n,
                                  const float* importance = nullptr) noexcept;
// IQ4_XS (searched as IQ4_NL's file path, per group of 32, then 6-bit group scales).
void quantize_row_iq4_xs(const float* src, BlockIQ4_XS* dst, int64_t n,
                         const float* importance = nullptr) noexcept;
// What llama-quantize writes with an importance matrix (importance: n weights, one per element of
// the row) for Q4_0, Q4_1, Q5_0, Q5_1, the K-quants and IQ4 (ggml's quantize_row_*_impl): scale
// searches under weights importance * sqrt(sigma^2 + x^2). Returns false, writing nothing, for
// any other type.
bool quantize_row_weighted(DType type, const float* src, void* dst, int64_t n,
                           const float* importance) noexcept;
// MXFP4: e from the block's largest magnitude (floor(log2 amax) - 2 + 127), then each element's
// nearest code (the first on ties), as ggml's quantize_row_mxfp4_ref (CPY and llama-quantize alike).
void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n) noexcept;
void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n) noexcept;
// The grid I-quants as ggml's quantize_iq* write them: per group of 16 or 32 an importance-weighted
// search over trial scales, each run of 8 (IQ3: 4) elements rounded to the codebook's levels and
// moved to the best of the nearest points where those levels are no point. importance holds one
// weight per element of the row (the importance matrix of its columns) or is null: IQ2_XXS, IQ2_XS
// and IQ1_S need it (grid_iquant_needs_importance; callers check), the others then weight by
// x^2 (IQ2_S: x^2 + sigma^2 / 4), which is what ggml's row conversion (CPY) writes.
void quantize_row_iq2_xxs(const float* src, BlockIQ2_XXS* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq2_xs(const float* src, BlockIQ2_XS* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq2_s(const float* src, BlockIQ2_S* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq3_xxs(const float* src, BlockIQ3_XXS* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq3_s(const float* src, BlockIQ3_S* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq1_s(const float* src, BlockIQ1_S* dst, int64_t n, const float* importance) noexcept;
void quantize_row_iq1_m(const float* src, BlockIQ1_M* dst, int64_t n, const float* importance) noexcept;
}  // namespace ref

// Whether ggml's quantizer of `type` cannot work without an importance matrix (IQ2_XXS, IQ2_XS,
// IQ1_S: ggml_quantize_requires_imatrix).
bool grid_iquant_needs_importance(DType type) noexcept;

// Converts a contiguous row of n elements of `type` to f32 (I32 converts exactly).
void to_f32_row(DType type, const void* src, float* dst, int64_t n) noexcept;
// Converts n floats to `type` (f16/bf16 round to nearest even, I32 truncates, quantized per block)
// with the bits ggml's row conversion (CPY, from_float) gives. Of the grid I-quants ggml converts
// into IQ2_S, IQ3_XXS and IQ3_S (their searches without importance); the other four need an
// importance matrix, so nothing converts into them: for those it writes zero blocks (callers check).
void from_f32_row(DType type, const float* src, void* dst, int64_t n) noexcept;
// Test data for any quantized type: n elements (whole blocks) of valid blocks whose indices, signs
// and sub-scales are random (a seeded generator) and whose block scales are about amax / 127, so
// values stay within about +-amax (for the grid I-quants: random indices and signs, not a
// quantized row).
void random_blocks(DType type, uint64_t seed, float amax, void* dst, int64_t n) noexcept;
// Converts n weights to `type` with the bits llama-quantize writes (ggml_quantize_chunk).
// Without an importance matrix: from_f32_row's for every type but IQ4_NL, whose file path searches
// scales, and the grid I-quants' searches; those that need one (grid_iquant_needs_importance) are
// an Error. With one (importance: n weights, one per element) every type that takes weights
// (quantize_row_weighted, the grid I-quants) is searched under them; the others ignore it.
void quantize_weights(DType type, const float* src, void* dst, int64_t n, const float* importance = nullptr);

}  // namespace tessera
