#pragma once
// Vectorised math rows for the CPU kernels (SOFT_MAX, FLASH_ATTN_EXT, SILU): exp and the f16 dot
// products and accumulations of attention. Each entry has a scalar version and an AVX2 + FMA +
// F16C version compiled per function (target attributes) and chosen at run time, so the library
// still runs on x86-64 CPUs without them.
#include <cstdint>

namespace tessera::cpu::vec {

struct MathKernels {
  const char* isa = "scalar";
  // y[i] = exp(x[i]) (x and y may be the same array).
  void (*exp)(const float* x, float* y, int64_t n) = nullptr;
  // y[i] = exp(x[i] - shift); returns the sum of the y[i] (accumulated in double).
  double (*exp_sum)(const float* x, float* y, int64_t n, float shift) = nullptr;
  // One row of f16 a against n rows of b (row i at b + i * b_stride), a read once:
  // out[i] = sum_t to_f32(a[t]) * b[i * b_stride + t] for i < n <= kMaxDotRows, in f32 lanes. Each
  // out[i] comes out the same whatever n is, so results do not depend on how rows are grouped.
  void (*dot_rows_f16)(const uint16_t* a, const float* b, int64_t b_stride, int n, int64_t len,
                       float* out) = nullptr;
  // y[i] = y[i] * s + w * to_f32(a[i]) for f16 a.
  void (*scale_add_f16)(float* y, float s, float w, const uint16_t* a, int64_t n) = nullptr;
  // The same two for f32 a.
  void (*dot_rows_f32)(const float* a, const float* b, int64_t b_stride, int n, int64_t len,
                       float* out) = nullptr;
  void (*scale_add_f32)(float* y, float s, float w, const float* a, int64_t n) = nullptr;
  // y[i] = silu(x[i]) (below): the same bits in every table (x and y may be the same array).
  void (*silu)(const float* x, float* y, int64_t n) = nullptr;
  // SOFT_MAX's logits: y[i] = x[i] * scale, then + slope * mask[i] where mask is given (each product
  // rounded on its own, no FMA: the reference's bits); returns the largest y[i], NaNs left out
  // (-inf when there is none). x and y may be the same array.
  float (*scale_mask_max)(const float* x, float* y, float scale, const float* mask, float slope,
                          int64_t n) = nullptr;
  // y[i] *= s.
  void (*scale)(float* y, float s, int64_t n) = nullptr;
};

// exp(x) by the AVX2 exp's algorithm, one float at a time and operation for operation the same: the
// same bits for every x but NaN (whose NaN may differ in payload), within the bounds below. An op
// defined with it gives the same bytes on every path and every CPU.
float exp_poly(float x) noexcept;
// SILU's definition on the CPU: x / (1 + exp_poly(-x)).
inline float silu(float x) noexcept { return x / (1.0f + exp_poly(-x)); }

inline constexpr int kMaxDotRows = 8;

// std::exp and plain loops: the fallback, and what the tests hold the others against.
const MathKernels& scalar_math() noexcept;
// The AVX2 versions, or nullptr when the CPU lacks AVX2, FMA or F16C.
const MathKernels* avx2_math() noexcept;
// The best this CPU has.
const MathKernels& math() noexcept;

// The AVX2 exp's (and exp_poly's) accuracy (tests/cpu/vec_math_test.cpp checks it over the whole
// float range):
// for results of at least FLT_MIN the relative error is below kExpMaxRelError; below FLT_MIN
// (subnormal results) the absolute error is below kExpMaxSubnormalError; exp(x) = +inf for
// x > ln(FLT_MAX), 0 for x < -104 and -inf, NaN for NaN.
inline constexpr double kExpMaxRelError = 2.5e-7;         // about 2 units in the last place
inline constexpr double kExpMaxSubnormalError = 1.5e-45;  // one subnormal step (2^-149)

}  // namespace tessera::cpu::vec
