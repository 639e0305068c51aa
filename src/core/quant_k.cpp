// The K-quant rows (Q2_K ... Q6_K) and Q8_K, their activation type: 256-element super-blocks of
// 16 or 32-element groups with scales of their own (scalar reference).
#include <algorithm>
#include <cmath>

#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {

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

}  // namespace tessera::ref
