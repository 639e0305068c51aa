// IQ4_NL and IQ4_XS rows: 4-bit indices into the non-linear grid kIq4Values (scalar reference).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant_search.h"
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {
namespace {

// The grid index nearest to x (ties to the upper one), by bisection as ggml's best_index_int8.
int nearest_grid_index(float x) noexcept {
  if (x <= kIq4Values[0]) return 0;
  if (x >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kIq4Values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - kIq4Values[hi - 1] < kIq4Values[hi] - x ? hi - 1 : hi;
}

// One block of 32 under weights w (x^2 when null: no importance matrix): the indices of x / d for
// d = max / 127 (of the opposite sign when ntry < 0), the least-squares scale for them, then with
// ntry > 0 the best of the 2 ntry + 1 inverse scales (k - 127) / max by the weighted fit. L
// receives the first indices; the scale is returned (0 for an all-zero block, leaving L as it was).
float fit_iq4_block(const float* x, const float* weights, uint8_t* L, int ntry) noexcept {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float v0 = kIq4Values[0];
  auto fit = [&](float id, float& sumqx, float& sumq2, uint8_t* store) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_grid_index(id * x[j]);
      if (store != nullptr) store[j] = static_cast<uint8_t>(l);
      const float q = kIq4Values[l];
      const float w = weights != nullptr ? weights[j] : x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float d = ntry > 0 ? -max / v0 : max / v0;
  float sumqx, sumq2;
  fit(1 / d, sumqx, sumq2, L);
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int k = -ntry; k <= ntry; ++k) {
    fit(static_cast<float>(k + kIq4Values[0]) / max, sumqx, sumq2, nullptr);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_nibbles(const uint8_t* L, uint8_t* qs, int groups_of_32) noexcept {
  for (int g = 0; g < groups_of_32; ++g)
    for (int j = 0; j < 16; ++j)
      qs[16 * g + j] = static_cast<uint8_t>(L[32 * g + j] | (L[32 * g + 16 + j] << 4));
}

// importance * sqrt(sigma2 + x^2) over n elements, sigma2 = 2 mean(x^2) over the n (ggml's IQ4
// weights with an importance matrix).
void iq4_weights(const float* x, const float* importance, int n, float* w) noexcept {
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / static_cast<float>(n);
  for (int j = 0; j < n; ++j) w[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// ggml's IQ4_NL block: ntry = 7 is what llama-quantize writes, ntry = -1 ggml's row conversion.
void quantize_iq4_nl_block(const float* x, const float* importance, BlockIQ4_NL& y, int ntry) noexcept {
  // An all-zero block keeps the index of 0 (ggml's row conversion would leave stale indices there;
  // they decode to 0 either way).
  uint8_t L[32];
  std::memset(L, 8, sizeof L);
  float w[32];
  if (importance != nullptr) iq4_weights(x, importance, 32, w);
  const float scale = fit_iq4_block(x, importance != nullptr ? w : nullptr, L, ntry);
  y.d = fp32_to_fp16(scale);
  if (ntry > 0) {
    const float id = scale != 0 ? 1 / scale : 0;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_grid_index(id * x[j]));
  }
  pack_nibbles(L, y.qs, 1);
}

}  // namespace

void quantize_row_iq4_nl(const float* src, BlockIQ4_NL* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b)
    quantize_iq4_nl_block(src + b * kQuantBlock, nullptr, dst[b], -1);
}

void quantize_row_iq4_nl_searched(const float* src, BlockIQ4_NL* dst, int64_t n,
                                  const float* importance) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b)
    quantize_iq4_nl_block(src + b * kQuantBlock,
                          importance != nullptr ? importance + b * kQuantBlock : nullptr, dst[b], 7);
}

void quantize_row_iq4_xs(const float* src, BlockIQ4_XS* dst, int64_t n, const float* importance) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    BlockIQ4_XS& y = dst[b];
    float scales[8];
    float amax_scale = 0, max_scale = 0;
    uint8_t L[256];
    float w[256];
    if (importance != nullptr) iq4_weights(src, importance + b * kSuperBlock, 256, w);
    for (int g = 0; g < 8; ++g) {
      scales[g] = fit_iq4_block(src + 32 * g, importance != nullptr ? w + 32 * g : nullptr, L + 32 * g, 7);
      if (std::fabs(scales[g]) > amax_scale) {
        amax_scale = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    // Signed 6-bit group scales against the largest, which lands on -32; every element is then
    // requantized against its group's rounded scale (ggml uses the unrounded super-block d here).
    const float d = -max_scale / 32;
    y.d = fp32_to_fp16(d);
    const float id = d != 0 ? 1 / d : 0.f;
    y.scales_h = 0;
    for (int g = 0; g < 8; ++g) {
      const int l = std::min(31, std::max(-32, nearest_int(id * scales[g])));
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j)
        L[32 * g + j] = static_cast<uint8_t>(nearest_grid_index(idl * src[32 * g + j]));
      const int biased = l + 32;
      if (g % 2 == 0)
        y.scales_l[g / 2] = static_cast<uint8_t>(biased & 0x0f);
      else
        y.scales_l[g / 2] |= static_cast<uint8_t>((biased & 0x0f) << 4);
      y.scales_h = static_cast<uint16_t>(y.scales_h | ((biased >> 4) << (2 * g)));
    }
    pack_nibbles(L, y.qs, 8);
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, dst += kQuantBlock) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4Values[src[b].qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kIq4Values[src[b].qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int g = 0; g < 8; ++g, dst += 32) {
      const int low = (src[b].scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
      const int high = (src[b].scales_h >> (2 * g)) & 3;
      const float dl = d * static_cast<float>((low | (high << 4)) - 32);
      const uint8_t* qs = src[b].qs + 16 * g;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0x0f]);
        dst[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace tessera::ref
