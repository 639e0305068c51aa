#pragma once
// Pieces shared by the quantizers that search for their scales (K-quants, IQ4): ggml's rounding and
// its threshold for an all-zero group, so that searches reach ggml's choices bit for bit.
#include <cstdint>
#include <cstring>

#include "tessera/blocks.h"

namespace tessera::ref {

// Below this largest magnitude a group counts as all zero (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, by adding 1.5 * 2^23 and reading the mantissa: ggml's
// nearest_int, exact for |x| < 2^22, and (unlike a cast) defined for every input.
inline int nearest_int(float x) noexcept {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// ggml's make_qp_quants: a scale for non-negative x with levels L in [0, nmax], the best of nine
// trial scales by the error under weights w, then up to five passes moving single levels while
// the weighted fit improves. Levels are bytes as in ggml (a negative level of a negative x wraps,
// and the passes read it back so): the quirk is part of the bits.
float fit_positive_levels(int n, int nmax, const float* x, const float* w, uint8_t* L) noexcept;

// ggml's make_qkx2_quants (and, with squared error, make_qkx3_quants): asymmetric levels L in
// [0, nmax] with a minimum, under weights w, the best of nstep + 1 inverse scales; returns the scale,
// the_min receives -min (quant_k.cpp).
float fit_scale_and_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float& the_min,
                        float rmin, float rdelta, int nstep, bool use_mad) noexcept;

// Q6_K's block from its 16 groups' fitted scales and levels (L is overwritten with the final
// levels): ggml's int8 scale rounding and requantization, then the packing (quant_k.cpp).
void q6_k_from_group_scales(const float* x, const float* scales, int8_t* L, BlockQ6_K& y) noexcept;

}  // namespace tessera::ref
