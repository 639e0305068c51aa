#pragma once
// Constants that ROPE and SOFT_MAX derive from their parameters, computed once here (in f32, as
// ggml computes them) so that every backend's kernels see the same bits.
#include <cstdint>

#include "tessera/op_params.h"

namespace tessera {

struct RopeConstants {
  float theta_scale = 1.0f;  // base^(-2/n_dims): pair i turns by p * theta_scale^i
  float corr_lo = 0.0f;      // YaRN ramp: pair indices where interpolation starts / ends
  float corr_hi = 0.0f;      // (both 0 when ext_factor is 0)
  float mscale = 1.0f;       // attn_factor, times YaRN's magnitude correction when enabled
};

// YaRN: the pair index c(n_rot) = n_dims ln(n_ctx_orig / (2 pi n_rot)) / (2 ln base), at which pairs
// make n_rot full turns over the original context.
float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base);
RopeConstants rope_constants(const RopeParams& p);

// ALiBi slopes of SOFT_MAX for n_head heads: with n = 2^floor(log2 n_head), m0 = 2^(-max_bias/n),
// m1 = 2^(-max_bias/(2n)); head h < n gets m0^(h+1), later heads m1^(2(h-n)+1); 1 when max_bias <= 0.
struct AlibiSlopes {
  float max_bias = 0.0f;
  int64_t n_head_log2 = 1;
  float m0 = 1.0f;
  float m1 = 1.0f;
  float slope(int64_t head) const;
};
AlibiSlopes alibi_slopes(float max_bias, int64_t n_head);

}  // namespace tessera
