// ROPE reference kernel: NORMAL and NEOX pairings, YaRN (ext_factor != 0), optional frequency
// factors, F32 and F16 data. Angles and their cos/sin are computed in f32 the way ggml does
// (theta = p * theta_scale^i by repeated multiplication), so results match it closely.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"

namespace tessera::cpu {
namespace {

// Pair index at which the rotation for `n_rot` full turns over n_ctx_orig positions happens.
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

struct RopeConfig {
  int n_dims = 0;
  bool neox = false;
  float theta_scale = 1.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float mscale = 1.0f;   // attn_factor, times YaRN's magnitude correction when enabled
  float corr_lo = 0.0f;  // YaRN ramp: pair indices where interpolation starts / ends
  float corr_hi = 0.0f;
  const Tensor* freq_factors = nullptr;
};

// Rotation angle of pair i for extrapolated angle theta_extrap (= p * base^(-2i/n_dims) / ff_i).
float rope_angle(const RopeConfig& c, float theta_extrap, int64_t i) {
  const float theta_interp = c.freq_scale * theta_extrap;
  if (c.ext_factor == 0.0f) return theta_interp;
  const float y = (static_cast<float>(i) - c.corr_lo) / std::max(0.001f, c.corr_hi - c.corr_lo);
  const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * c.ext_factor;
  return theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
}

}  // namespace

void run_rope(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  TESSERA_ASSERT(dst.type == a.type && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32 && a.type != DType::F16)
    raise(ErrorCode::Unsupported, "CPU: ROPE needs f32 or f16 data, got {}", a.describe());

  RopeConfig c;
  c.n_dims = dst.param_i(1);
  const int32_t mode = dst.param_i(2);
  const int n_ctx_orig = dst.param_i(4);
  const float base = dst.param_f(5);
  c.freq_scale = dst.param_f(6);
  c.ext_factor = dst.param_f(7);
  const float attn_factor = dst.param_f(8);
  const float beta_fast = dst.param_f(9);
  const float beta_slow = dst.param_f(10);
  c.freq_factors = dst.src[2];
  if (pos.type != DType::I32 || pos.ne[0] != a.ne[2])
    raise(ErrorCode::InvalidArgument, "ROPE: positions {} do not fit {}", pos.describe(), a.describe());
  if (c.n_dims <= 0 || c.n_dims % 2 != 0 || c.n_dims > a.ne[0])
    raise(ErrorCode::InvalidArgument, "ROPE: n_dims {} does not fit {}", c.n_dims, a.describe());
  if (mode != static_cast<int32_t>(RopeMode::Normal) && mode != static_cast<int32_t>(RopeMode::Neox))
    raise(ErrorCode::InvalidArgument, "ROPE: unknown mode {}", mode);
  if (c.freq_factors != nullptr &&
      (c.freq_factors->type != DType::F32 || c.freq_factors->ne[0] < c.n_dims / 2))
    raise(ErrorCode::InvalidArgument, "ROPE: freq factors {} need f32 with n_dims/2 entries",
          c.freq_factors->describe());
  c.neox = mode == static_cast<int32_t>(RopeMode::Neox);
  c.theta_scale = std::pow(base, -2.0f / static_cast<float>(c.n_dims));
  c.mscale = attn_factor;
  if (c.ext_factor != 0.0f) {
    c.corr_lo = std::max(0.0f, std::floor(yarn_corr_dim(c.n_dims, n_ctx_orig, beta_fast, base)));
    c.corr_hi = std::min(static_cast<float>(c.n_dims - 1),
                         std::ceil(yarn_corr_dim(c.n_dims, n_ctx_orig, beta_slow, base)));
    c.mscale *= 1.0f + 0.1f * std::log(1.0f / c.freq_scale);
  }

  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const int64_t half = c.n_dims / 2;
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    std::vector<float> y(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      int32_t p;
      std::memcpy(&p, static_cast<const char*>(pos.data) + i2 * pos.nb[0], sizeof p);

      float theta = static_cast<float>(p);  // p * theta_scale^i
      for (int64_t i = 0; i < half; ++i, theta *= c.theta_scale) {
        const float ff = c.freq_factors != nullptr
                             ? load_f32(DType::F32, static_cast<const char*>(c.freq_factors->data) +
                                                        i * c.freq_factors->nb[0])
                             : 1.0f;
        const float angle = rope_angle(c, theta / ff, i);
        const float cos_t = std::cos(angle) * c.mscale;
        const float sin_t = std::sin(angle) * c.mscale;
        // NORMAL rotates adjacent pairs; NEOX pairs the two halves of the rotated channels.
        const int64_t j0 = c.neox ? i : 2 * i;
        const int64_t j1 = c.neox ? i + half : 2 * i + 1;
        const float x0 = x[j0], x1 = x[j1];
        y[j0] = x0 * cos_t - x1 * sin_t;
        y[j1] = x0 * sin_t + x1 * cos_t;
      }
      for (int64_t i = c.n_dims; i < ne0; ++i) y[i] = x[i];

      char* out = dst.at(0, i1, i2, i3);
      for (int64_t i = 0; i < ne0; ++i) store_f32(dst.type, out + i * dst.nb[0], y[i]);
    }
  });
}

}  // namespace tessera::cpu
