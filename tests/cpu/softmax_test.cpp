// CPU reference kernels for DIAG_MASK_INF and SOFT_MAX.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Double-precision softmax of (x * scale + slope(i2) * mask) for every row of a (logical values).
std::vector<double> softmax_expected(const Tensor& a, const Tensor* mask, double scale,
                                     const std::vector<double>& slopes) {
  std::vector<double> y(static_cast<size_t>(a.nelements()));
  size_t k = 0;
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
        std::vector<double> w(static_cast<size_t>(a.ne[0]));
        double max = -INFINITY;
        for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
          double v = get(a, i0, i1, i2, i3) * scale;
          if (mask != nullptr)
            v += slopes[static_cast<size_t>(i2)] * get(*mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
          w[static_cast<size_t>(i0)] = v;
          max = std::max(max, v);
        }
        double sum = 0;
        for (double& v : w) sum += (v = std::exp(v - max));
        for (double v : w) y[k++] = v / sum;
      }
  return y;
}

void expect_near_all(const Tensor& out, const std::vector<double>& expected, double tol) {
  const auto got = test::values(out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], tol) << "element " << k;
}

TEST(CpuSoftMax, HandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  fill(a, {1, 2, 3, 0, 0.34657359f, 0});  // row 1: [0, ln2 / 2, 0]
  Tensor* out = ops::soft_max(ctx, a, nullptr, 1.0f);
  compute(out);
  EXPECT_NEAR(get(*out, 0, 0), 0.09003057f, 1e-7f);
  EXPECT_NEAR(get(*out, 1, 0), 0.24472847f, 1e-7f);
  EXPECT_NEAR(get(*out, 2, 0), 0.66524096f, 1e-7f);
  // Scale 2: row 1 becomes [0, ln2, 0] -> exp = [1, 2, 1] -> [0.25, 0.5, 0.25].
  Tensor* scaled = ops::soft_max(ctx, a, nullptr, 2.0f);
  compute(scaled);
  EXPECT_NEAR(get(*scaled, 0, 1), 0.25f, 1e-7f);
  EXPECT_NEAR(get(*scaled, 1, 1), 0.5f, 1e-7f);
  EXPECT_NEAR(get(*scaled, 2, 1), 0.25f, 1e-7f);
}

TEST(CpuSoftMax, RowsSumToOne) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 1000, 3, 2);
  fill(a, test::random_values(a->nelements(), 11, -20.0f, 20.0f));
  Tensor* out = ops::soft_max(ctx, a, nullptr, 0.7f);
  compute(out);
  for (int64_t i2 = 0; i2 < 2; ++i2)
    for (int64_t i1 = 0; i1 < 3; ++i1) {
      double sum = 0;
      for (int64_t i0 = 0; i0 < 1000; ++i0) {
        const float v = get(*out, i0, i1, i2);
        EXPECT_GE(v, 0.0f);
        sum += v;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  expect_near_all(*out, softmax_expected(*a, nullptr, 0.7, {}), 1e-6);
}

TEST(CpuSoftMax, CausalMaskF32AndF16) {
  for (DType mt : {DType::F32, DType::F16}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
    fill(a, {0, 0, 0, 0, 0, 0});
    // The mask has more rows than a: only the first a.ne1 are used.
    Tensor* mask = ctx.new_tensor(mt, 3, 4);
    fill(mask, {0, -kInf, -kInf, 0, 0, -kInf, 5, 5, 5, 5, 5, 5});
    Tensor* out = ops::soft_max(ctx, a, mask, 1.0f);
    compute(out);
    const float expected[6] = {1, 0, 0, 0.5f, 0.5f, 0};
    const auto got = test::values(*out);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], expected[i]) << name(mt) << " " << i;
  }
}

TEST(CpuSoftMax, MaskTiledOverDims2And3) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 5, 3, 4, 2);
  fill(a, test::random_values(a->nelements(), 12, -3.0f, 3.0f));
  Tensor* mask = ctx.new_tensor(DType::F16, 5, 4, 2, 1);
  fill(mask, test::random_values(mask->nelements(), 13, -4.0f, 0.0f));
  Tensor* out = ops::soft_max(ctx, a, mask, 0.5f);
  test::expect_thread_independent(out);
  expect_near_all(*out, softmax_expected(*a, mask, 0.5, {1, 1, 1, 1}), 1e-6);
}

TEST(CpuSoftMax, AlibiSlopesForThreeHeads) {
  Context ctx(true);
  // ne2 = 3 heads: n = 2^floor(log2 3) = 2; max_bias 8 -> m0 = 2^(-8/2) = 1/16, m1 = 2^(-8/4) = 1/4.
  // Slopes: h0 = m0 = 1/16, h1 = m0^2 = 1/256, h2 = m1^(2*0+1) = 1/4.
  const std::vector<double> slopes = {1.0 / 16, 1.0 / 256, 1.0 / 4};
  Tensor* a = ctx.new_tensor(DType::F32, 2, 1, 3);
  fill(a, {0, 0, 0, 0, 0, 0});
  Tensor* mask = ctx.new_tensor(DType::F32, 2, 1);
  fill(mask, {0, 4});
  Tensor* out = ops::soft_max(ctx, a, mask, 1.0f, 8.0f);
  compute(out);
  for (int64_t h = 0; h < 3; ++h) {
    // w = [0, 4 * slope]: y1 = sigmoid(4 * slope).
    const double s = 4 * slopes[static_cast<size_t>(h)];
    EXPECT_NEAR(get(*out, 1, 0, h), 1 / (1 + std::exp(-s)), 1e-7) << "head " << h;
    EXPECT_NEAR(get(*out, 0, 0, h), 1 / (1 + std::exp(s)), 1e-7) << "head " << h;
  }
  // Without a mask the slopes have nothing to scale.
  Tensor* plain = ops::soft_max(ctx, a, nullptr, 1.0f, 8.0f);
  compute(plain);
  for (int64_t h = 0; h < 3; ++h) EXPECT_EQ(get(*plain, 0, 0, h), 0.5f);
}

TEST(CpuSoftMax, AlibiMatchesDoubleReference) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 7, 2, 6);
  fill(a, test::random_values(a->nelements(), 14));
  Tensor* mask = ctx.new_tensor(DType::F32, 7, 2);
  fill(mask, test::random_values(mask->nelements(), 15, -2.0f, 2.0f));
  Tensor* out = ops::soft_max(ctx, a, mask, 1.3f, 2.0f);
  compute(out);
  // 6 heads: n = 4, m0 = 2^(-2/4), m1 = 2^(-1/4).
  std::vector<double> slopes;
  for (int h = 0; h < 6; ++h)
    slopes.push_back(h < 4 ? std::pow(std::pow(2.0, -0.5), h + 1)
                           : std::pow(std::pow(2.0, -0.25), 2 * (h - 4) + 1));
  expect_near_all(*out, softmax_expected(*a, mask, 1.3, slopes), 1e-6);
}

// The fast kernels (the vectorised exp of vec_math.h) against the double softmax, on long rows with
// a mask, ALiBi slopes and masked-off cells, as attention has them.
TEST(CpuSoftMax, FastKernelsMatchDoubleReference) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 1029, 3, 4);
  fill(a, test::random_values(a->nelements(), 21, -30.0f, 30.0f));
  Tensor* mask = ctx.new_tensor(DType::F16, 1029, 3);
  auto m = test::random_values(mask->nelements(), 22, -3.0f, 0.0f);
  for (size_t i = 0; i < m.size(); i += 7) m[i] = -kInf;
  fill(mask, m);
  Tensor* out = ops::soft_max(ctx, a, mask, 0.3f, 4.0f);
  compute(out, 2, cpu::KernelSet::Fast);
  std::vector<double> slopes;  // 4 heads, max_bias 4: m0 = 2^(-1)
  for (int h = 0; h < 4; ++h) slopes.push_back(std::pow(0.5, h + 1));
  expect_near_all(*out, softmax_expected(*a, mask, 0.3, slopes), 1e-6);
  // A fully masked row is zeros on the fast path too.
  Tensor* dead = ctx.new_tensor(DType::F32, 9, 1);
  fill(dead, std::vector<float>(9, -kInf));
  Tensor* z = ops::soft_max(ctx, ctx.new_tensor(DType::F32, 9, 1), dead);
  fill(z->src[0], std::vector<float>(9, 1.0f));
  compute(z, 1, cpu::KernelSet::Fast);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(get(*z, i, 0), 0.0f);
}

TEST(CpuSoftMax, FullyMaskedRowIsZeros) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  fill(a, {1, 2, 3, 1, 2, 3});
  Tensor* mask = ctx.new_tensor(DType::F32, 3, 2);
  fill(mask, {-kInf, -kInf, -kInf, 0, 0, 0});
  Tensor* out = ops::soft_max(ctx, a, mask);
  compute(out);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get(*out, i, 0), 0.0f);  // defined as zeros (ggml gives NaN)
  EXPECT_NEAR(get(*out, 2, 1), 0.66524096f, 1e-7f);
}

TEST(CpuSoftMax, NonContiguousSources) {
  Context ctx(true);
  Tensor* b = ctx.new_tensor(DType::F32, 4, 6, 3);
  fill(b, test::random_values(b->nelements(), 16, -5.0f, 5.0f));
  Tensor* at = ops::transpose(ctx, b);            // [6, 4, 3]
  Tensor* ap = ops::permute(ctx, b, 0, 2, 1, 3);  // [4, 3, 6]
  Tensor* mb = ctx.new_tensor(DType::F32, 4, 6);  // transposed mask [6, 4]
  fill(mb, test::random_values(mb->nelements(), 17, -1.0f, 0.0f));
  Tensor* mt = ops::transpose(ctx, mb);
  Tensor* out_t = ops::soft_max(ctx, at, mt, 0.9f);
  Tensor* out_p = ops::soft_max(ctx, ap, nullptr, 1.1f);
  compute(out_t);
  compute(out_p);
  expect_near_all(*out_t, softmax_expected(*at, mt, 0.9, {1, 1, 1}), 1e-6);
  expect_near_all(*out_p, softmax_expected(*ap, nullptr, 1.1, {}), 1e-6);
}

TEST(CpuSoftMax, DiagMaskInf) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 5, 3, 2);
  const auto x = test::random_values(a->nelements(), 18);
  fill(a, x);
  Tensor* out = ops::diag_mask_inf(ctx, a, 1);
  test::expect_thread_independent(out);
  for (int64_t i2 = 0; i2 < 2; ++i2)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < 5; ++i) {
        const float v = get(*out, i, j, i2);
        if (i > 1 + j)
          EXPECT_EQ(v, -kInf) << i << "," << j;
        else
          EXPECT_EQ(v, x[static_cast<size_t>((i2 * 3 + j) * 5 + i)]) << i << "," << j;
      }
  // Causal softmax: masked positions get exactly 0.
  Tensor* sm = ops::soft_max(ctx, ops::diag_mask_inf(ctx, a, 0), nullptr);
  compute(sm);
  EXPECT_EQ(get(*sm, 0, 0), 1.0f);
  EXPECT_EQ(get(*sm, 1, 0), 0.0f);
  EXPECT_EQ(get(*sm, 2, 1), 0.0f);
}

TEST(CpuSoftMax, DiagMaskInfTransposedSource) {
  Context ctx(true);
  Tensor* b = ctx.new_tensor(DType::F32, 3, 4);
  fill(b, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor* out = ops::diag_mask_inf(ctx, ops::transpose(ctx, b), 0);  // [4, 3]: row j = column j of b
  compute(out);
  const float expected[12] = {1, -kInf, -kInf, -kInf, 2, 5, -kInf, -kInf, 3, 6, 9, -kInf};
  const auto got = test::values(*out);
  for (int k = 0; k < 12; ++k) EXPECT_EQ(got[static_cast<size_t>(k)], expected[k]) << k;
}

TEST(CpuSoftMax, OneAndTwoThreadsIdentical) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 65, 7, 3);
  fill(a, test::random_values(a->nelements(), 19, -10.0f, 10.0f));
  Tensor* mask = ctx.new_tensor(DType::F16, 65, 8);
  fill(mask, test::random_values(mask->nelements(), 20, -3.0f, 0.0f));
  test::expect_thread_independent(ops::soft_max(ctx, a, mask, 0.3f, 4.0f));
}

TEST(CpuSoftMax, BuildersRejectBadInput) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3, 2);
  Tensor* h = ctx.new_tensor(DType::F16, 4, 3, 2);
  Tensor* short_mask = ctx.new_tensor(DType::F32, 4, 2);
  Tensor* wide_mask = ctx.new_tensor(DType::F32, 5, 3);
  Tensor* i32_mask = ctx.new_tensor(DType::I32, 4, 3);
  Tensor* untiling_mask = ctx.new_tensor(DType::F32, 4, 3, 3);
  test::expect_op_error([&] { ops::soft_max(ctx, h); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, short_mask); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, wide_mask); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, i32_mask); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, untiling_mask); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, nullptr, 1.0f, -1.0f); }, "SOFT_MAX");
  test::expect_op_error([&] { ops::diag_mask_inf(ctx, h, 0); }, "DIAG_MASK_INF");
  test::expect_op_error([&] { ops::diag_mask_inf(ctx, a, -1); }, "DIAG_MASK_INF");
}

TEST(CpuSoftMax, SinksJoinTheDenominator) {
  // Rows [0, ln2, 0] (exp [1, 2, 1]) in two heads. Head 0's sink 0 adds e^0 = 1: [0.2, 0.4, 0.2].
  // Head 1's sink ln 4 adds 4: [0.125, 0.25, 0.125]. A masked row of head 1 keeps only the sink's
  // share out of the row: its cells get 0 (the denominator is the sink's alone).
  for (cpu::KernelSet ks : {cpu::KernelSet::Reference, cpu::KernelSet::Fast}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 3, 2, 2);
    const float l2 = 0.69314718f;
    fill(a, {0, l2, 0, 0, l2, 0, 0, l2, 0, 0, l2, 0});
    Tensor* mask = ctx.new_tensor(DType::F32, 3, 2);
    fill(mask, {0, 0, 0, -kInf, -kInf, -kInf});  // row 1 fully masked
    Tensor* sinks = ctx.new_tensor(DType::F32, 2);
    fill(sinks, {0.0f, 1.38629436f});
    Tensor* out = ops::soft_max(ctx, a, mask, 1.0f, 0.0f, sinks);
    compute(out, 2, ks);
    const std::vector<double> want = {0.2, 0.4, 0.2, 0, 0, 0, 0.125, 0.25, 0.125, 0, 0, 0};
    expect_near_all(*out, want, 2e-7);
    // A sink far above the row takes almost all: e^-20 of the rest.
    fill(sinks, {20.0f, 20.0f});
    compute(out, 1, ks);
    EXPECT_NEAR(get(*out, 1, 0, 0), 2 * std::exp(-20.0), 1e-12);
  }
}

TEST(CpuSoftMax, SinksMustBeOnePerHead) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 2, 3);
  test::expect_op_error([&] { ops::soft_max(ctx, a, nullptr, 1.0f, 0.0f, ctx.new_tensor(DType::F32, 2)); },
                        "SOFT_MAX");
  test::expect_op_error([&] { ops::soft_max(ctx, a, nullptr, 1.0f, 0.0f, ctx.new_tensor(DType::F16, 3)); },
                        "SOFT_MAX");
  EXPECT_NO_THROW(ops::soft_max(ctx, a, nullptr, 1.0f, 0.0f, ctx.new_tensor(DType::F32, 3)));
}

}  // namespace
}  // namespace tessera
