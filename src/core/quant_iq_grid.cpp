// The I-quants of grid codebooks (IQ2_XXS ... IQ1_M) to f32: each block decoded to integers
// (iq_grids.h), then x = (d * sc) * v, which rounds as ggml's dequantize_row_iq* (same bits).
#include "core/iq_grids.h"
#include "tessera/quant.h"

namespace tessera::ref {
namespace {

template <class Block>
void dequantize_grid_row(const Block* src, float* dst, int64_t n) noexcept {
  iq::Unpacked u;
  for (int64_t b = 0; b < n / kSuperBlock; ++b, dst += kSuperBlock) {
    iq::unpack(src[b], u);
    for (int g = 0; g < 16; ++g) {
      const float dl = u.d * static_cast<float>(u.sc[g]);
      for (int i = 0; i < 16; ++i) dst[16 * g + i] = dl * static_cast<float>(u.v[16 * g + i]);
    }
  }
}

}  // namespace

void dequantize_row_iq2_xxs(const BlockIQ2_XXS* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq2_xs(const BlockIQ2_XS* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq2_s(const BlockIQ2_S* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq3_xxs(const BlockIQ3_XXS* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq3_s(const BlockIQ3_S* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq1_s(const BlockIQ1_S* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}
void dequantize_row_iq1_m(const BlockIQ1_M* src, float* dst, int64_t n) noexcept {
  dequantize_grid_row(src, dst, n);
}

}  // namespace tessera::ref
