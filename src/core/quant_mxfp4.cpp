// MXFP4 rows: 32 E2M1 codes sharing one E8M0 exponent (scalar reference, ggml's rounding).
#include <cmath>
#include <cstdint>

#include "tessera/quant.h"

namespace tessera::ref {
namespace {

// The code whose value (times d) is nearest to x; the lowest code wins ties, so +0 (code 0) beats -0.
uint8_t nearest_code(float x, float d) noexcept {
  uint8_t best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (uint8_t i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, src += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j)
      if (amax < std::fabs(src[j])) amax = std::fabs(src[j]);
    // The largest code (6, stored doubled as 12) covers amax: 2^floor(log2 amax) <= amax < 12 d with
    // d = 2^(floor(log2 amax) - 3). ggml converts the float exponent through an integer (wrapping
    // below 2^-125, where amax is a denormal; weights never are).
    const uint8_t e =
        amax > 0.0f ? static_cast<uint8_t>(static_cast<int>(std::floor(std::log2(amax)) - 2.0f + 127.0f)) : 0;
    const float d = e8m0_half(e);
    dst[b].e = e;
    for (int j = 0; j < 16; ++j)
      dst[b].qs[j] = static_cast<uint8_t>(nearest_code(src[j], d) | (nearest_code(src[j + 16], d) << 4));
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, dst += kQuantBlock) {
    const float d = e8m0_half(src[b].e);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(kMxfp4Values[src[b].qs[j] & 0x0f]) * d;
      dst[j + 16] = static_cast<float>(kMxfp4Values[src[b].qs[j] >> 4]) * d;
    }
  }
}

}  // namespace tessera::ref
