// ROPE reference kernel: NORMAL and NEOX pairings, YaRN (ext_factor != 0), optional frequency
// factors, F32 and F16 data. Angles and their cos/sin are computed in f32 the way ggml does
// (theta = p * theta_scale^i by repeated multiplication), so results match it closely.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_constants.h"

namespace tessera::cpu {
namespace {

// Rotation angle of pair i for extrapolated angle theta_extrap (= p * base^(-2i/n_dims) / ff_i).
float rope_angle(const RopeParams& p, const RopeConstants& k, float theta_extrap, int64_t i) {
  const float theta_interp = p.freq_scale * theta_extrap;
  if (p.ext_factor == 0.0f) return theta_interp;
  const float y = (static_cast<float>(i) - k.corr_lo) / std::max(0.001f, k.corr_hi - k.corr_lo);
  const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
  return theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
}

}  // namespace

void run_rope(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  TESSERA_ASSERT(dst.type == a.type && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32 && a.type != DType::F16)
    raise(ErrorCode::Unsupported, "CPU: ROPE needs f32 or f16 data, got {}", a.describe());

  // The builder validated the parameters; the derived constants are core's (shared with every backend).
  const RopeParams params = rope_params(dst);
  const RopeConstants k = rope_constants(params);
  const Tensor* freq_factors = dst.src[2];
  const bool neox = params.mode == RopeMode::Neox;

  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const int64_t half = params.n_dims / 2;
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    std::vector<float> y(static_cast<size_t>(ne0));
    // The rotation of each pair depends only on the position: the rows of one token's heads
    // (consecutive rows) share one table.
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    int64_t table_i2 = -1;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      if (i2 != table_i2) {
        table_i2 = i2;
        int32_t p;
        std::memcpy(&p, static_cast<const char*>(pos.data) + i2 * pos.nb[0], sizeof p);
        float theta = static_cast<float>(p);  // p * theta_scale^i
        for (int64_t i = 0; i < half; ++i, theta *= k.theta_scale) {
          const float ff = freq_factors != nullptr
                               ? load_f32(DType::F32, static_cast<const char*>(freq_factors->data) +
                                                          i * freq_factors->nb[0])
                               : 1.0f;
          const float angle = rope_angle(params, k, theta / ff, i);
          cos_t[static_cast<size_t>(i)] = std::cos(angle) * k.mscale;
          sin_t[static_cast<size_t>(i)] = std::sin(angle) * k.mscale;
        }
      }
      for (int64_t i = 0; i < half; ++i) {
        // NORMAL rotates adjacent pairs; NEOX pairs the two halves of the rotated channels.
        const int64_t j0 = neox ? i : 2 * i;
        const int64_t j1 = neox ? i + half : 2 * i + 1;
        const float x0 = x[j0], x1 = x[j1], c = cos_t[static_cast<size_t>(i)],
                    sn = sin_t[static_cast<size_t>(i)];
        y[j0] = x0 * c - x1 * sn;
        y[j1] = x0 * sn + x1 * c;
      }
      for (int64_t i = params.n_dims; i < ne0; ++i) y[i] = x[i];

      char* out = dst.at(0, i1, i2, i3);
      for (int64_t i = 0; i < ne0; ++i) store_f32(dst.type, out + i * dst.nb[0], y[i]);
    }
  });
}

}  // namespace tessera::cpu
