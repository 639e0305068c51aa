// ROPE's and SOFT_MAX's derived constants against values worked out by hand from ../shared/OPS.md.
#include "tessera/op_constants.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera;

TEST(OpConstants, RopeThetaScaleWithoutYarn) {
  RopeParams p;
  p.n_dims = 64;
  p.freq_base = 10000.0f;
  p.attn_factor = 0.5f;
  const RopeConstants c = rope_constants(p);
  // 10000^(-2/64) = e^(-ln(10000)/32) = 0.74989420933...
  EXPECT_NEAR(c.theta_scale, 0.7498942093, 1e-6);
  EXPECT_EQ(c.corr_lo, 0.0f);  // no YaRN: no ramp, mscale is attn_factor
  EXPECT_EQ(c.corr_hi, 0.0f);
  EXPECT_EQ(c.mscale, 0.5f);

  p.n_dims = 128;
  p.freq_base = 500000.0f;  // Llama 3: 500000^(-1/64) = 0.81461723...
  EXPECT_NEAR(rope_constants(p).theta_scale, 0.8146172339, 1e-6);
}

TEST(OpConstants, RopeYarnCorrectionDimsAndMagnitude) {
  RopeParams p;
  p.n_dims = 64;
  p.n_ctx_orig = 4096;
  p.freq_base = 10000.0f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  // c(r) = 64 ln(4096 / (2 pi r)) / (2 ln 10000): c(32) = 10.4722, c(1) = 22.5134.
  EXPECT_NEAR(rope_yarn_corr_dim(64, 4096, 32.0f, 10000.0f), 10.47224081, 1e-4);
  EXPECT_NEAR(rope_yarn_corr_dim(64, 4096, 1.0f, 10000.0f), 22.51344064, 1e-4);
  const RopeConstants c = rope_constants(p);
  EXPECT_EQ(c.corr_lo, 10.0f);  // floor(10.47)
  EXPECT_EQ(c.corr_hi, 23.0f);  // ceil(22.51), under n_dims - 1
  // attn_factor (1 + 0.1 ln(1 / 0.25)) = 1 + 0.1 ln 4 = 1.13862944
  EXPECT_NEAR(c.mscale, 1.138629436, 1e-6);

  // The ramp is clamped to [0, n_dims - 1]: a tiny beta_slow pushes c(beta_slow) past 63.
  p.beta_slow = 1e-6f;
  p.beta_fast = 1e6f;  // c(1e6) < 0
  const RopeConstants clamped = rope_constants(p);
  EXPECT_EQ(clamped.corr_lo, 0.0f);
  EXPECT_EQ(clamped.corr_hi, 63.0f);
}

TEST(OpConstants, AlibiSlopes) {
  // 12 heads, max_bias 8: n = 2^floor(log2 12) = 8, m0 = 2^(-8/8) = 0.5, m1 = 2^(-8/16) = 0.70710678.
  const AlibiSlopes s = alibi_slopes(8.0f, 12);
  EXPECT_EQ(s.n_head_log2, 8);
  EXPECT_EQ(s.m0, 0.5f);
  EXPECT_NEAR(s.m1, 0.7071067812, 1e-7);
  EXPECT_EQ(s.slope(0), 0.5f);                   // m0^1
  EXPECT_EQ(s.slope(7), 0.00390625f);            // m0^8 = 2^-8
  EXPECT_NEAR(s.slope(8), 0.7071067812, 1e-7);   // m1^1
  EXPECT_NEAR(s.slope(11), 0.0883883476, 1e-7);  // m1^7 = 2^-3.5
  // A power-of-two head count uses only m0: 4 heads, max_bias 8: m0 = 2^-2, slope(3) = 2^-8.
  EXPECT_EQ(alibi_slopes(8.0f, 4).slope(3), 0.00390625f);
  // No bias: every slope is exactly 1.
  const AlibiSlopes none = alibi_slopes(0.0f, 12);
  for (int64_t h = 0; h < 12; ++h) EXPECT_EQ(none.slope(h), 1.0f);
}
