// The K-quant rows (Q2_K ... Q6_K) and Q8_K, their activation type: 256-element super-blocks of
// 16 or 32-element groups with scales of their own (scalar reference).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant_search.h"
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {

// The searches below are ggml's (make_qkx2_quants, make_q3_quants, make_qx_quants), operation for
// operation in float: a reordered sum or a fused multiply-add would move a tie and change a byte.

// Asymmetric groups (Q2_K, Q4_K, Q5_K): x ~ scale * L - min with L in [0, nmax] and min >= 0,
// minimising the weighted error (absolute when use_mad) over nstep + 1 candidate inverse scales
// (rmin + rdelta * k + nmax) / (max - min), each refitted by weighted least squares.
float fit_scale_and_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float& the_min,
                        float rmin, float rdelta, int nstep, bool use_mad) noexcept {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    the_min = -lo;
    return 0.0f;
  }
  auto error_of = [&](float scale, float min, const uint8_t* q) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * q[i] + min - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      e += w[i] * diff;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i)
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
  float best_error = error_of(scale, lo, L);
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float e = error_of(this_scale, this_min, trial);
      if (e < best_error) {
        std::memcpy(L, trial, static_cast<size_t>(n));
        best_error = e;
        scale = this_scale;
        lo = this_min;
      }
    }
  }
  the_min = -lo;
  return scale;
}

namespace {

// The element of largest magnitude, with its sign; the first one wins ties.
float signed_max(int n, const float* x, float& amax) noexcept {
  float max = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Symmetric groups of Q3_K: L in [-nmax, nmax - 1] under weights x^2, then up to five passes that
// move single elements while that raises the weighted fit (sum w x L)^2 / sum w L^2. L comes back
// offset by nmax.
float fit_q3_scale(int n, int nmax, const float* x, int8_t* L) noexcept {
  float amax;
  const float max = signed_max(n, x, amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

// Symmetric groups of Q6_K: L in [-nmax, nmax - 1] (offset by nmax on return) under weights x^2,
// the best of 19 inverse scales -(nmax + k / 10) / max by the weighted fit.
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) noexcept {
  float amax;
  const float max = signed_max(n, x, amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto store = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  store(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q4_K / Q5_K: eight groups of 32 weighted by rms + |x|, scales and mins to 6 bits, then every
// element requantized against the rounded scales. Returns the levels in L.
template <typename Block>
void quantize_k_groups_of_32(const float* x, Block& y, uint8_t L[256], int nmax, float rmin, float rdelta,
                             int nstep) noexcept {
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xg = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xg[l]);
    scales[j] = fit_scale_and_min(32, nmax, xg, weights, L + 32 * j, mins[j], rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y.scales, 0, sizeof y.scales);
  for (int j = 0; j < 8; ++j) {
    // Through uint8_t as ggml does (a negative fit wraps before the clamp).
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      y.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      y.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  y.d = fp32_to_fp16(max_scale / 63.f);
  y.dmin = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k_scale_min(j, y.scales, sc, m);
    const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
  }
}

// Q2_K / Q3_K: four two-bit levels per byte, elements l, l+32, l+64, l+96 of each half.
void pack_two_bit(const uint8_t* L, uint8_t qs[64]) noexcept {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* l = L + 128 * half;
    for (int i = 0; i < 32; ++i)
      qs[32 * half + i] = static_cast<uint8_t>(l[i] | (l[i + 32] << 2) | (l[i + 64] << 4) | (l[i + 96] << 6));
  }
}

}  // namespace

void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d), dmin = fp16_to_fp32(src[b].dmin);
    // Each half of 128 elements reads 32 bytes four times, two bits deeper each time; every pass
    // covers two groups of 16.
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = src[b].qs + 32 * half;
      for (int pass = 0; pass < 4; ++pass) {
        for (int k = 0; k < 2; ++k, dst += 16) {
          const uint8_t sc = src[b].scales[8 * half + 2 * pass + k];
          const float dl = d * static_cast<float>(sc & 0x0f), ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            dst[l] = dl * static_cast<float>((q[16 * k + l] >> (2 * pass)) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    int8_t scales[16];
    q3_k_scales(src[b].scales, scales);
    // As Q2_K for the two low bits; the high bit of pass p of half h is bit 4h+p of hmask.
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = src[b].qs + 32 * half;
      for (int pass = 0; pass < 4; ++pass) {
        const uint8_t mask = static_cast<uint8_t>(1u << (4 * half + pass));
        for (int k = 0; k < 2; ++k, dst += 16) {
          const float dl = d * static_cast<float>(scales[8 * half + 2 * pass + k]);
          for (int l = 0; l < 16; ++l) {
            const int lo = (q[16 * k + l] >> (2 * pass)) & 3;
            const int hi = (src[b].hmask[16 * k + l] & mask) ? 0 : 4;
            dst[l] = dl * static_cast<float>(lo - hi);
          }
        }
      }
    }
  }
}

void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d), dmin = fp16_to_fp32(src[b].dmin);
    // Groups 2i and 2i+1 share 32 bytes: low nibbles, then high nibbles.
    for (int i = 0; i < 4; ++i) {
      const uint8_t* q = src[b].qs + 32 * i;
      for (int k = 0; k < 2; ++k, dst += 32) {
        uint8_t sc, m;
        k_scale_min(2 * i + k, src[b].scales, sc, m);
        const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) dst[l] = dl * static_cast<float>((q[l] >> (4 * k)) & 0x0f) - ml;
      }
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d), dmin = fp16_to_fp32(src[b].dmin);
    // As Q4_K; the fifth bit of group g is bit g of qh[l].
    for (int i = 0; i < 4; ++i) {
      const uint8_t* q = src[b].qs + 32 * i;
      for (int k = 0; k < 2; ++k, dst += 32) {
        const int g = 2 * i + k;
        uint8_t sc, m;
        k_scale_min(g, src[b].scales, sc, m);
        const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> (4 * k)) & 0x0f) | (((src[b].qh[l] >> g) & 1) << 4);
          dst[l] = dl * static_cast<float>(v) - ml;
        }
      }
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    // Each half of 128: element l + 32k takes nibble (k / 2) of ql[l + 32 (k % 2)] and bits 2k..2k+1
    // of qh[l]; its scale is that of its group of 16.
    for (int half = 0; half < 2; ++half, dst += 128) {
      const uint8_t* ql = src[b].ql + 64 * half;
      const uint8_t* qh = src[b].qh + 32 * half;
      const int8_t* sc = src[b].scales + 8 * half;
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
          const int hi = (qh[l] >> (2 * k)) & 3;
          dst[32 * k + l] =
              d * static_cast<float>(sc[2 * k + l / 16]) * static_cast<float>((lo | (hi << 4)) - 32);
        }
      }
    }
  }
}

void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, dst += kSuperBlock)
    for (int j = 0; j < kSuperBlock; ++j) dst[j] = src[b].d * static_cast<float>(src[b].qs[j]);
}

void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    // The element of largest magnitude, with its sign; the first one wins ties.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kSuperBlock; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    BlockQ8_K& y = dst[b];
    if (amax == 0.0f) {
      y = BlockQ8_K{};
      continue;
    }
    // -127 / max maps max to -127, so the other side reaches at most +127 after clamping (ggml's
    // choice, kept for identical bits). Rounding is to nearest, ties to even.
    const float iscale = -127.0f / max;
    for (int j = 0; j < kSuperBlock; ++j)
      y.qs[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * src[j]))));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y.qs[16 * g + l];
      y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
  }
}

void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    BlockQ2_K& y = dst[b];
    uint8_t L[256];
    float scales[16], mins[16], weights[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = fit_scale_and_min(16, 3, src + 16 * j, weights, L + 16 * j, mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    // Scales and mins to 4 bits against their largest (no clamp: the largest lands on 15).
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = fp32_to_fp16(max_scale / 15.f);
    } else {
      std::memset(y.scales, 0, sizeof y.scales);
      y.d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j) y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y.dmin = fp32_to_fp16(max_min / 15.f);
    } else {
      y.dmin = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j] & 0x0f);
      if (d == 0) continue;
      const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((src[16 * j + l] + dm) / d), 0, 3));
    }
    pack_two_bit(L, y.qs);
  }
}

void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    BlockQ3_K& y = dst[b];
    int8_t L[256];
    float scales[16];
    float amax = 0, max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_q3_scale(16, 4, src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    // Signed 6-bit scales against the largest one, which lands on -32.
    std::memset(y.scales, 0, sizeof y.scales);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = std::clamp<int>(static_cast<int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
        if (j < 8)
          y.scales[j] = static_cast<uint8_t>(l & 0x0f);
        else
          y.scales[j - 8] |= static_cast<uint8_t>((l & 0x0f) << 4);
        y.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y.d = fp32_to_fp16(1 / iscale);
    } else {
      y.d = fp32_to_fp16(0.f);
    }
    int8_t sc[16];
    q3_k_scales(y.scales, sc);
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y.d) * static_cast<float>(sc[j]);
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + l] / d), -4, 3) + 4);
    }
    // Bit 2 of element j goes to bit j / 32 of hmask[j % 32]; the two low bits to qs.
    std::memset(y.hmask, 0, sizeof y.hmask);
    uint8_t low[256];
    for (int j = 0; j < 256; ++j) {
      int l = L[j];
      if (l > 3) {
        y.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    pack_two_bit(low, y.qs);
  }
}

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    uint8_t L[256];
    quantize_k_groups_of_32(src, dst[b], L, 15, -1.f, 0.1f, 20);
    // Groups 2i and 2i+1 share 32 bytes: low nibbles, then high nibbles.
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 32; ++l)
        dst[b].qs[32 * i + l] = static_cast<uint8_t>(L[64 * i + l] | (L[64 * i + l + 32] << 4));
  }
}

void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    BlockQ5_K& y = dst[b];
    uint8_t L[256];
    quantize_k_groups_of_32(src, y, L, 31, -0.5f, 0.1f, 15);
    // As Q4_K for the low nibbles; bit 4 of group g's element l is bit g of qh[l].
    std::memset(y.qh, 0, sizeof y.qh);
    for (int i = 0; i < 4; ++i) {
      for (int l = 0; l < 32; ++l) {
        int lo = L[64 * i + l], hi = L[64 * i + l + 32];
        if (lo > 15) {
          lo -= 16;
          y.qh[l] |= static_cast<uint8_t>(1u << (2 * i));
        }
        if (hi > 15) {
          hi -= 16;
          y.qh[l] |= static_cast<uint8_t>(2u << (2 * i));
        }
        y.qs[32 * i + l] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

// Q6_K's block from its groups' fitted scales: int8 scales against the largest one (which lands on
// -128), every element requantized with its group's rounded scale, L packed into ql/qh.
void q6_k_from_group_scales(const float* x, const float* scales, int8_t* L, BlockQ6_K& y) noexcept {
  float max_abs = 0, max_scale = 0;
  for (int g = 0; g < 16; ++g) {
    if (std::fabs(scales[g]) > max_abs) {
      max_abs = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  if (max_abs < kGroupMaxEps) {
    y = BlockQ6_K{};
    return;
  }
  const float iscale = -128.f / max_scale;
  y.d = fp32_to_fp16(1 / iscale);
  for (int g = 0; g < 16; ++g)
    y.scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
  for (int g = 0; g < 16; ++g) {
    const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[g]);
    if (d == 0) continue;
    for (int l = 0; l < 16; ++l)
      L[16 * g + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * g + l] / d), -32, 31) + 32);
  }
  // Each half of 128: element l + 32k's low nibble goes to nibble k / 2 of ql[l + 32 (k % 2)],
  // its top two bits to bits 2k..2k+1 of qh[l].
  for (int half = 0; half < 2; ++half) {
    const int8_t* l8 = L + 128 * half;
    uint8_t* ql = y.ql + 64 * half;
    uint8_t* qh = y.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int q0 = l8[l], q1 = l8[l + 32], q2 = l8[l + 64], q3 = l8[l + 96];
      ql[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
      ql[l + 32] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, src += kSuperBlock) {
    int8_t L[256];
    float scales[16];
    for (int g = 0; g < 16; ++g) scales[g] = fit_symmetric_scale(16, 32, src + 16 * g, L + 16 * g);
    q6_k_from_group_scales(src, scales, L, dst[b]);
  }
}

}  // namespace tessera::ref
