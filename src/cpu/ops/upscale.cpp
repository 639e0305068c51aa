// UPSCALE reference kernel: nearest (mode 0) and bilinear (mode 1, optional align-corners flag).
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {
namespace {

float load(const Tensor& a, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return load_f32(
      a.type, static_cast<const char*>(a.data) + i0 * a.nb[0] + i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3]);
}

// Bilinear source coordinate along one dim: the two neighbours (clamped) and the weight of the upper.
struct Lerp {
  int64_t lo, hi;
  float w;
};

Lerp bilinear_coord(int64_t i, int64_t ne_in, int64_t ne_out, bool align_corners) {
  float x;
  if (align_corners) {
    // Corners map onto corners; a single-element side has only one place to sample.
    if (ne_in == 1 || ne_out == 1) {
      x = 0.0f;
    } else {
      const float sf = static_cast<float>(ne_out - 1) / static_cast<float>(ne_in - 1);
      x = static_cast<float>(i) / sf;
    }
  } else {
    const float sf = static_cast<float>(ne_out) / static_cast<float>(ne_in);
    x = (static_cast<float>(i) + 0.5f) / sf - 0.5f;
  }
  const int64_t x0 = static_cast<int64_t>(std::floor(x));
  const int64_t lo = std::clamp<int64_t>(x0, 0, ne_in - 1);
  const int64_t hi = std::clamp<int64_t>(x0 + 1, 0, ne_in - 1);
  const float w = std::clamp(x - static_cast<float>(lo), 0.0f, 1.0f);
  return {lo, hi, w};
}

}  // namespace

void run_upscale(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  if (a.nelements() == 0) raise(ErrorCode::InvalidArgument, "UPSCALE: empty source {}", a.describe());
  const UpscaleParams params = upscale_params(dst);
  const bool align_corners = params.align_corners;

  // Nearest scale factors, in f32 as ggml computes them (the index rounding depends on it).
  float sf[4];
  for (int d = 0; d < 4; ++d) sf[d] = static_cast<float>(dst.ne[d]) / static_cast<float>(a.ne[d]);
  auto nearest = [&](int d, int64_t i) {
    return std::min<int64_t>(static_cast<int64_t>(static_cast<float>(i) / sf[d]), a.ne[d] - 1);
  };

  const int64_t ne0 = dst.ne[0], ne1 = dst.ne[1], ne2 = dst.ne[2];
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      float* out = reinterpret_cast<float*>(dst.at(0, i1, i2, i3));
      const int64_t j2 = nearest(2, i2), j3 = nearest(3, i3);
      if (params.mode == UpscaleMode::Nearest) {
        const int64_t j1 = nearest(1, i1);
        for (int64_t i0 = 0; i0 < ne0; ++i0) out[i0] = load(a, nearest(0, i0), j1, j2, j3);
        continue;
      }
      // Bilinear interpolates dims 0 and 1; dims 2 and 3 stay nearest.
      const Lerp y = bilinear_coord(i1, a.ne[1], ne1, align_corners);
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        const Lerp x = bilinear_coord(i0, a.ne[0], ne0, align_corners);
        const float v00 = load(a, x.lo, y.lo, j2, j3), v10 = load(a, x.hi, y.lo, j2, j3);
        const float v01 = load(a, x.lo, y.hi, j2, j3), v11 = load(a, x.hi, y.hi, j2, j3);
        out[i0] =
            v00 * (1 - x.w) * (1 - y.w) + v10 * x.w * (1 - y.w) + v01 * (1 - x.w) * y.w + v11 * x.w * y.w;
      }
    }
  });
}

}  // namespace tessera::cpu
