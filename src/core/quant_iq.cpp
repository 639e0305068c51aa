// IQ4_NL and IQ4_XS rows: 4-bit indices into the non-linear grid kIq4Values (scalar reference).
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {

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
