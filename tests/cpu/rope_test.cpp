// CPU reference kernel for ROPE (NORMAL, NEOX, YaRN, frequency factors, F16).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;

Tensor* positions(Context& ctx, const std::vector<int32_t>& p) {
  Tensor* t = ctx.new_tensor(DType::I32, static_cast<int64_t>(p.size()));
  test::fill_i32(t, p);
  return t;
}

// Independent double-precision RoPE of the logical values of a, straight from the formulas of OPS.md.
std::vector<double> rope_expected(const Tensor& a, const std::vector<int32_t>& pos,
                                  const std::vector<double>& ff, const ops::RopeParams& p) {
  const auto x = test::values(a);
  std::vector<double> y(x.begin(), x.end());
  const int64_t d = a.ne[0], half = p.n_dims / 2;
  const double base = p.freq_base, fs = p.freq_scale;
  auto corr = [&](double r) {
    return p.n_dims * std::log(p.n_ctx_orig / (2 * std::numbers::pi * r)) / (2 * std::log(base));
  };
  const double lo = std::max(0.0, std::floor(corr(p.beta_fast)));
  const double hi = std::min(p.n_dims - 1.0, std::ceil(corr(p.beta_slow)));
  double mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1 + 0.1 * std::log(1 / fs);
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
        const size_t row = static_cast<size_t>(((i3 * a.ne[2] + i2) * a.ne[1] + i1) * d);
        for (int64_t i = 0; i < half; ++i) {
          const double theta_e = pos[static_cast<size_t>(i2)] * std::pow(base, -2.0 * i / p.n_dims) /
                                 (ff.empty() ? 1.0 : ff[static_cast<size_t>(i)]);
          const double theta_i = fs * theta_e;
          double theta = theta_i;
          if (p.ext_factor != 0.0f) {
            const double mix = p.ext_factor * (1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0));
            theta = theta_i * (1 - mix) + theta_e * mix;
          }
          const int64_t j0 = p.mode == RopeMode::Neox ? i : 2 * i;
          const int64_t j1 = p.mode == RopeMode::Neox ? i + half : 2 * i + 1;
          const double x0 = x[row + static_cast<size_t>(j0)], x1 = x[row + static_cast<size_t>(j1)];
          y[row + static_cast<size_t>(j0)] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
          y[row + static_cast<size_t>(j1)] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
        }
      }
  return y;
}

void expect_near_all(const Tensor& out, const std::vector<double>& expected, double tol) {
  const auto got = test::values(out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], tol) << "element " << k;
}

TEST(CpuRope, NormalAndNeoxHandComputed) {
  // D = n_dims = 4, base 10000, position 1: theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01.
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 1, 1);
  fill(a, {1, 2, 3, 4});
  Tensor* pos = positions(ctx, {1});
  ops::RopeParams p;
  p.n_dims = 4;
  Tensor* normal = ops::rope(ctx, a, pos, nullptr, p);
  p.mode = RopeMode::Neox;
  Tensor* neox = ops::rope(ctx, a, pos, nullptr, p);
  compute(normal);
  compute(neox);
  // NORMAL: (x0, x1) = (1, 2) by 1 rad, (x2, x3) = (3, 4) by 0.01 rad.
  const float want_normal[4] = {-1.14263966f, 1.92207560f, 2.95985067f, 4.02979950f};
  // NEOX: (x0, x2) = (1, 3) by 1 rad, (x1, x3) = (2, 4) by 0.01 rad.
  const float want_neox[4] = {-1.98411065f, 1.95990067f, 2.46237790f, 4.01979967f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(get(*normal, i), want_normal[i], 2e-6f) << i;
    EXPECT_NEAR(get(*neox, i), want_neox[i], 2e-6f) << i;
  }
}

TEST(CpuRope, PositionZeroIsIdentityAndPairsKeepTheirNorm) {
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 16, 3, 4);
    const auto x = test::random_values(a->nelements(), 21);
    fill(a, x);
    Tensor* pos = positions(ctx, {0, 1, 17, 300});
    ops::RopeParams p;
    p.n_dims = 16;
    p.mode = mode;
    Tensor* out = ops::rope(ctx, a, pos, nullptr, p);
    compute(out);
    const int64_t half = 8;
    for (int64_t i2 = 0; i2 < 4; ++i2)
      for (int64_t i1 = 0; i1 < 3; ++i1)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t j0 = mode == RopeMode::Neox ? i : 2 * i;
          const int64_t j1 = mode == RopeMode::Neox ? i + half : 2 * i + 1;
          const float x0 = get(*a, j0, i1, i2), x1 = get(*a, j1, i1, i2);
          const float y0 = get(*out, j0, i1, i2), y1 = get(*out, j1, i1, i2);
          if (i2 == 0) {
            EXPECT_EQ(y0, x0);
            EXPECT_EQ(y1, x1);
          }
          EXPECT_NEAR(std::hypot(y0, y1), std::hypot(x0, x1), 1e-6f);
        }
  }
}

TEST(CpuRope, ChannelsPastNDimsAreCopied) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 10, 2, 3);
  fill(a, test::random_values(a->nelements(), 22));
  const std::vector<int32_t> pv = {3, 5, 9};
  ops::RopeParams p;
  p.n_dims = 6;
  p.freq_base = 100.0f;
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    p.mode = mode;
    Tensor* out = ops::rope(ctx, a, positions(ctx, pv), nullptr, p);
    compute(out);
    for (int64_t i2 = 0; i2 < 3; ++i2)
      for (int64_t i1 = 0; i1 < 2; ++i1)
        for (int64_t i0 = 6; i0 < 10; ++i0) EXPECT_EQ(get(*out, i0, i1, i2), get(*a, i0, i1, i2));
    expect_near_all(*out, rope_expected(*a, pv, {}, p), 1e-5);
  }
}

TEST(CpuRope, FreqScaleAttnFactorAndFreqFactors) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 8, 2, 3, 2);
  fill(a, test::random_values(a->nelements(), 23));
  const std::vector<int32_t> pv = {2, 7, 13};
  const std::vector<double> ff = {1.0, 2.0, 4.0, 0.5};
  Tensor* fft = ctx.new_tensor(DType::F32, 4);
  fill(fft, {1.0f, 2.0f, 4.0f, 0.5f});
  ops::RopeParams p;
  p.n_dims = 8;
  p.freq_base = 500.0f;
  p.freq_scale = 0.25f;
  p.attn_factor = 1.5f;
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    p.mode = mode;
    Tensor* out = ops::rope(ctx, a, positions(ctx, pv), fft, p);
    compute(out);
    expect_near_all(*out, rope_expected(*a, pv, ff, p), 1e-5);
  }
}

TEST(CpuRope, YarnMatchesDoubleReference) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 64, 2, 4);
  fill(a, test::random_values(a->nelements(), 24));
  const std::vector<int32_t> pv = {0, 3, 11, 20};
  ops::RopeParams p;
  p.n_dims = 64;
  p.n_ctx_orig = 4096;
  p.freq_base = 10000.0f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.attn_factor = 1.0f;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    p.mode = mode;
    Tensor* out = ops::rope(ctx, a, positions(ctx, pv), nullptr, p);
    compute(out);
    expect_near_all(*out, rope_expected(*a, pv, {}, p), 5e-5);
  }
  // A partial ext_factor mixes only part of the way; magnitude correction grows with 1/freq_scale.
  p.ext_factor = 0.5f;
  p.freq_scale = 0.125f;
  p.attn_factor = 0.8f;
  Tensor* out = ops::rope(ctx, a, positions(ctx, pv), nullptr, p);
  compute(out);
  expect_near_all(*out, rope_expected(*a, pv, {}, p), 5e-5);
}

TEST(CpuRope, F16Data) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F16, 12, 2, 3);
  fill(a, test::random_values(a->nelements(), 25));  // stored rounded; get() reads the rounded value
  const std::vector<int32_t> pv = {1, 4, 6};
  ops::RopeParams p;
  p.n_dims = 8;
  p.mode = RopeMode::Neox;
  Tensor* out = ops::rope(ctx, a, positions(ctx, pv), nullptr, p);
  compute(out);
  EXPECT_EQ(out->type, DType::F16);
  expect_near_all(*out, rope_expected(*a, pv, {}, p), 1e-3);  // one f16 rounding of values in [-1.5, 1.5]
  for (int64_t i0 = 8; i0 < 12; ++i0) EXPECT_EQ(get(*out, i0, 1, 2), get(*a, i0, 1, 2));
}

TEST(CpuRope, NonContiguousSources) {
  Context ctx(true);
  // Permuted: memory [D, T, H] viewed as [D, H, T].
  Tensor* b = ctx.new_tensor(DType::F32, 8, 3, 2);
  fill(b, test::random_values(b->nelements(), 26));
  Tensor* ap = ops::permute(ctx, b, 0, 2, 1, 3);  // [8, 2, 3]
  // Transposed: memory [H, D, T] viewed as [D, H, T] (elements of a row are strided).
  Tensor* c = ctx.new_tensor(DType::F32, 2, 8, 3);
  fill(c, test::random_values(c->nelements(), 27));
  Tensor* at = ops::transpose(ctx, c);  // [8, 2, 3]
  const std::vector<int32_t> pv = {5, 0, 2};
  ops::RopeParams p;
  p.n_dims = 8;
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    p.mode = mode;
    Tensor* op = ops::rope(ctx, ap, positions(ctx, pv), nullptr, p);
    Tensor* ot = ops::rope(ctx, at, positions(ctx, pv), nullptr, p);
    compute(op);
    compute(ot);
    expect_near_all(*op, rope_expected(*ap, pv, {}, p), 1e-5);
    expect_near_all(*ot, rope_expected(*at, pv, {}, p), 1e-5);
  }
}

TEST(CpuRope, OneAndTwoThreadsIdentical) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 32, 5, 7);
  fill(a, test::random_values(a->nelements(), 28));
  ops::RopeParams p;
  p.n_dims = 24;
  p.n_ctx_orig = 2048;
  p.freq_scale = 0.5f;
  p.ext_factor = 1.0f;
  test::expect_thread_independent(ops::rope(ctx, a, positions(ctx, {0, 1, 2, 3, 50, 60, 70}), nullptr, p));
}

TEST(CpuRope, BuildersRejectBadInput) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 8, 2, 3);
  Tensor* ai = ctx.new_tensor(DType::I32, 8, 2, 3);
  Tensor* pos = positions(ctx, {0, 1, 2});
  Tensor* pos_short = positions(ctx, {0, 1});
  Tensor* pos_f32 = ctx.new_tensor(DType::F32, 3);
  Tensor* ff_short = ctx.new_tensor(DType::F32, 3);
  ops::RopeParams p;
  p.n_dims = 8;
  test::expect_op_error([&] { ops::rope(ctx, ai, pos, nullptr, p); }, "ROPE");
  test::expect_op_error([&] { ops::rope(ctx, a, pos_short, nullptr, p); }, "ROPE");
  test::expect_op_error([&] { ops::rope(ctx, a, pos_f32, nullptr, p); }, "ROPE");
  test::expect_op_error([&] { ops::rope(ctx, a, pos, ff_short, p); }, "ROPE");
  ops::RopeParams odd = p;
  odd.n_dims = 5;
  test::expect_op_error([&] { ops::rope(ctx, a, pos, nullptr, odd); }, "ROPE");
  ops::RopeParams wide = p;
  wide.n_dims = 10;
  test::expect_op_error([&] { ops::rope(ctx, a, pos, nullptr, wide); }, "ROPE");
  ops::RopeParams bad_mode = p;
  bad_mode.mode = static_cast<RopeMode>(1);
  test::expect_op_error([&] { ops::rope(ctx, a, pos, nullptr, bad_mode); }, "ROPE");
}

}  // namespace
}  // namespace tessera
