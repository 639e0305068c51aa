// The quantizers llama-quantize runs when it has an importance matrix (ggml's quantize_row_*_impl
// with quant_weights): the legacy types, the K-quants and IQ4 search their scales under weights
// importance * sqrt(sigma^2 + x^2) (Q6_K: the importance itself) and fit the block scales of the
// K-quants by weighted searches of their own. Operation for operation ggml's, in float.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/quant_search.h"
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {

float fit_positive_levels(int n, int nmax, const float* x, const float* w, uint8_t* L) noexcept {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * L[i];
    best_mse += w[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += w[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    sumlx += w[i] * x[i] * static_cast<float>(l);
    suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * L[i];
      float sl2 = suml2 - w[i] * L[i] * L[i];
      if (slx > 0 && sl2 > 0) {
        const int l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (l != L[i]) {
          slx += w[i] * x[i] * static_cast<float>(l);
          sl2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// Symmetric levels in [-nmax, nmax - 1] (stored offset by nmax) under weights w: the levels at
// -nmax / max, then the best of 18 more inverse scales -(nmax + k / 10) / max by the weighted fit
// (ggml's make_qx_quants, rmse_type 1).
float fit_symmetric_weighted(int n, int nmax, const float* x, const float* w, int8_t* L) noexcept {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::max(-nmax, std::min(nmax - 1, nearest_int(v))); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    sumlx += w[i] * x[i] * static_cast<float>(l);
    suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      sumlx += w[i] * x[i] * static_cast<float>(l);
      suml2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale * x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float sum_squares(const float* x, int64_t n) noexcept {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// importance[i] * sqrt(sigma2 + x[i]^2) for n elements, and their sum.
float importance_weights(const float* x, const float* importance, float sigma2, int n, float* w) noexcept {
  for (int i = 0; i < n; ++i) w[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += w[i];
  return sum;
}

void pack_two_bit(const uint8_t* L, uint8_t qs[64]) noexcept {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* l = L + 128 * half;
    for (int i = 0; i < 32; ++i)
      qs[32 * half + i] = static_cast<uint8_t>(l[i] | (l[i + 32] << 2) | (l[i + 64] << 4) | (l[i + 96] << 6));
  }
}

void q2_k_block(const float* x, const float* importance, BlockQ2_K& y) noexcept {
  uint8_t L[256], Ls[16], Lm[16];
  float scales[16], mins[16], sw[16], w[16];
  const float sigma2 = sum_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    sw[j] = importance_weights(x + 16 * j, importance + 16 * j, sigma2, 16, w);
    scales[j] = fit_scale_and_min(16, 3, x + 16 * j, w, L + 16 * j, mins[j], -0.9f, 0.05f, 36, false);
  }
  y.d = fp32_to_fp16(fit_positive_levels(16, 15, scales, sw, Ls));
  y.dmin = fp32_to_fp16(fit_positive_levels(16, 15, mins, sw, Lm));
  const float dm = fp16_to_fp32(y.d), mm = fp16_to_fp32(y.dmin);
  for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  for (int j = 0; j < 16; ++j) {
    const float d = dm * static_cast<float>(y.scales[j] & 0x0f);
    if (d == 0) continue;
    const float m = mm * static_cast<float>(y.scales[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + i] + m) / d))));
  }
  pack_two_bit(L, y.qs);
}

void q3_k_block(const float* x, const float* importance, BlockQ3_K& y) noexcept {
  int8_t L[256], Ls[16];
  float scales[16], sw[16], w[16];
  const float sigma2 = 2 * sum_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    sw[j] = importance_weights(x + 16 * j, importance + 16 * j, sigma2, 16, w);
    scales[j] = fit_symmetric_weighted(16, 4, x + 16 * j, w, L + 16 * j);
  }
  std::memset(y.scales, 0, sizeof y.scales);
  const float d_block = fit_symmetric_weighted(16, 32, scales, sw, Ls);
  for (int j = 0; j < 16; ++j) {
    const int l = Ls[j];
    if (j < 8)
      y.scales[j] = static_cast<uint8_t>(l & 0x0f);
    else
      y.scales[j - 8] = static_cast<uint8_t>(y.scales[j - 8] | ((l & 0x0f) << 4));
    y.scales[j % 4 + 8] = static_cast<uint8_t>(y.scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
  }
  y.d = fp32_to_fp16(d_block);
  int8_t sc[16];
  q3_k_scales(y.scales, sc);
  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(y.d) * static_cast<float>(sc[j]);
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + i] / d))) + 4);
  }
  std::memset(y.hmask, 0, sizeof y.hmask);
  uint8_t low[256];
  for (int j = 0; j < 256; ++j) {
    int l = L[j];
    if (l > 3) {
      y.hmask[j % 32] = static_cast<uint8_t>(y.hmask[j % 32] | (1u << (j / 32)));
      l -= 4;
    }
    low[j] = static_cast<uint8_t>(l);
  }
  pack_two_bit(low, y.qs);
}

// Q4_K / Q5_K: groups of 32 fitted with a minimum each, then 6-bit scales and minima fitted
// against the groups' summed weights, then every element requantized.
template <class Block>
void q45_k_block(const float* x, const float* importance, Block& y, int nmax, uint8_t L[256]) noexcept {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  uint8_t Ls[8], Lm[8];
  float scales[8], mins[8], sw[8], w[32];
  const float sigma2 = 2 * sum_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 8; ++j) {
    sw[j] = importance_weights(x + 32 * j, importance + 32 * j, sigma2, 32, w);
    scales[j] = fit_scale_and_min(32, nmax, x + 32 * j, w, L + 32 * j, mins[j], -0.9f, 0.05f, 36, false);
  }
  const float d_block = fit_positive_levels(8, 63, scales, sw, Ls);
  const float m_block = fit_positive_levels(8, 63, mins, sw, Lm);
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = Ls[j], lm = Lm[j];
    if (kQ5) {
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
    }
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      y.scales[j - 4] = static_cast<uint8_t>(y.scales[j - 4] | ((ls >> 4) << 6));
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | ((lm >> 4) << 6));
    }
  }
  y.d = fp32_to_fp16(d_block);
  y.dmin = fp32_to_fp16(m_block);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k_scale_min(j, y.scales, sc, m);
    const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] =
          static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + i] + dm) / d))));
  }
}

void q4_k_block(const float* x, const float* importance, BlockQ4_K& y) noexcept {
  uint8_t L[256];
  q45_k_block(x, importance, y, 15, L);
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l)
      y.qs[32 * i + l] = static_cast<uint8_t>(L[64 * i + l] | (L[64 * i + l + 32] << 4));
}

void q5_k_block(const float* x, const float* importance, BlockQ5_K& y) noexcept {
  uint8_t L[256];
  q45_k_block(x, importance, y, 31, L);
  std::memset(y.qh, 0, sizeof y.qh);
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 32; ++l) {
      int lo = L[64 * i + l], hi = L[64 * i + l + 32];
      if (lo > 15) {
        lo -= 16;
        y.qh[l] = static_cast<uint8_t>(y.qh[l] | (1u << (2 * i)));
      }
      if (hi > 15) {
        hi -= 16;
        y.qh[l] = static_cast<uint8_t>(y.qh[l] | (2u << (2 * i)));
      }
      y.qs[32 * i + l] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void q6_k_block(const float* x, const float* importance, BlockQ6_K& y) noexcept {
  int8_t L[256];
  float scales[16];
  // The importance alone weighs Q6_K's groups (ggml leaves sigma out here).
  for (int g = 0; g < 16; ++g)
    scales[g] = fit_symmetric_weighted(16, 32, x + 16 * g, importance + 16 * g, L + 16 * g);
  q6_k_from_group_scales(x, scales, L, y);
}

template <class Block, class Fn>
void super_block_row(const float* src, Block* dst, int64_t n, const float* importance, Fn block) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b)
    block(src + b * kSuperBlock, importance + b * kSuperBlock, dst[b]);
}

// The legacy types: blocks of 32 weighted with sigma^2 over the whole row.
template <class Block, class Fn>
void legacy_row(const float* src, Block* dst, int64_t n, const float* importance, Fn block) noexcept {
  const float sigma2 = sum_squares(src, n) / static_cast<float>(n);
  float w[32];
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    importance_weights(src + b * kQuantBlock, importance + b * kQuantBlock, sigma2, 32, w);
    block(src + b * kQuantBlock, w, dst[b]);
  }
}

void pack_five_bit(const uint8_t* L, uint8_t qs[16], uint8_t qh_bytes[4]) noexcept {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0x0f) | ((L[j + 16] & 0x0f) << 4));
    qh |= ((L[j] & 0x10u) >> 4) << j;
    qh |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

}  // namespace

bool quantize_row_weighted(DType type, const float* src, void* dst, int64_t n,
                           const float* importance) noexcept {
  switch (type) {
    case DType::Q2_K:
      super_block_row(src, static_cast<BlockQ2_K*>(dst), n, importance, q2_k_block);
      return true;
    case DType::Q3_K:
      super_block_row(src, static_cast<BlockQ3_K*>(dst), n, importance, q3_k_block);
      return true;
    case DType::Q4_K:
      super_block_row(src, static_cast<BlockQ4_K*>(dst), n, importance, q4_k_block);
      return true;
    case DType::Q5_K:
      super_block_row(src, static_cast<BlockQ5_K*>(dst), n, importance, q5_k_block);
      return true;
    case DType::Q6_K:
      super_block_row(src, static_cast<BlockQ6_K*>(dst), n, importance, q6_k_block);
      return true;
    case DType::Q4_0:
      legacy_row(src, static_cast<BlockQ4_0*>(dst), n, importance,
                 [](const float* x, const float* w, BlockQ4_0& y) {
                   int8_t L[32];
                   y.d = fp32_to_fp16(fit_symmetric_weighted(32, 8, x, w, L));
                   for (int j = 0; j < 16; ++j) y.qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
                 });
      return true;
    case DType::Q5_0:
      legacy_row(src, static_cast<BlockQ5_0*>(dst), n, importance,
                 [](const float* x, const float* w, BlockQ5_0& y) {
                   int8_t L[32];
                   y.d = fp32_to_fp16(fit_symmetric_weighted(32, 16, x, w, L));
                   pack_five_bit(reinterpret_cast<const uint8_t*>(L), y.qs, y.qh);
                 });
      return true;
    case DType::Q4_1:
      legacy_row(src, static_cast<BlockQ4_1*>(dst), n, importance,
                 [](const float* x, const float* w, BlockQ4_1& y) {
                   uint8_t L[32];
                   float min;
                   y.d = fp32_to_fp16(fit_scale_and_min(32, 15, x, w, L, min, -0.9f, 0.05f, 36, false));
                   y.m = fp32_to_fp16(-min);
                   for (int j = 0; j < 16; ++j) y.qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
                 });
      return true;
    case DType::Q5_1:
      legacy_row(src, static_cast<BlockQ5_1*>(dst), n, importance,
                 [](const float* x, const float* w, BlockQ5_1& y) {
                   uint8_t L[32];
                   float min;
                   y.d = fp32_to_fp16(fit_scale_and_min(32, 31, x, w, L, min, -0.9f, 0.05f, 36, false));
                   y.m = fp32_to_fp16(-min);
                   pack_five_bit(L, y.qs, y.qh);
                 });
      return true;
    case DType::IQ4_NL:
      quantize_row_iq4_nl_searched(src, static_cast<BlockIQ4_NL*>(dst), n, importance);
      return true;
    case DType::IQ4_XS:
      quantize_row_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n, importance);
      return true;
    default:
      return false;
  }
}

}  // namespace tessera::ref
