// ROPE's and SOFT_MAX's derived constants (../shared/OPS.md), in f32 exactly as ggml computes them.
#include "tessera/op_constants.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tessera {

float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

RopeConstants rope_constants(const RopeParams& p) {
  RopeConstants c;
  c.theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  c.mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    c.corr_lo =
        std::max(0.0f, std::floor(rope_yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    c.corr_hi = std::min(static_cast<float>(p.n_dims - 1),
                         std::ceil(rope_yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base)));
    c.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  }
  return c;
}

AlibiSlopes alibi_slopes(float max_bias, int64_t n_head) {
  AlibiSlopes s;
  s.max_bias = max_bias;
  s.n_head_log2 = int64_t{1} << static_cast<int>(
                      std::floor(std::log2(static_cast<double>(std::max<int64_t>(1, n_head)))));
  s.m0 = std::pow(2.0f, -max_bias / static_cast<float>(s.n_head_log2));
  s.m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(s.n_head_log2));
  return s;
}

float AlibiSlopes::slope(int64_t head) const {
  if (max_bias <= 0.0f) return 1.0f;
  return head < n_head_log2 ? std::pow(m0, static_cast<float>(head + 1))
                            : std::pow(m1, static_cast<float>(2 * (head - n_head_log2) + 1));
}

}  // namespace tessera
