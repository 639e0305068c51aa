// CPU reference kernels for NORM, RMS_NORM and GROUP_NORM.
#include <gtest/gtest.h>

#include <cmath>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;

TEST(CpuNorm, NormHandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 2);
  fill(a, {1, 2, 3, 4, 5, 5, 5, 5});
  Tensor* out = ops::norm(ctx, a, 0.0f);
  compute(out);
  // Row 0: mean 2.5, population variance 1.25.
  const float expected[4] = {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(get(*out, i, 0), expected[i], 1e-6f);
  // Row 1 is constant: x - mean is exactly 0, so with eps > 0 the result is exactly 0.
  Tensor* out_eps = ops::norm(ctx, a, 1e-5f);
  compute(out_eps);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(get(*out_eps, i, 1), 0.0f);
}

TEST(CpuNorm, NormRowsHaveMeanZeroVarianceOne) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 37, 3, 2, 2);
  fill(a, test::random_values(a->nelements(), 1, -3.0f, 5.0f));
  Tensor* out = ops::norm(ctx, a, 0.0f);
  compute(out);
  for (int64_t r = 0; r < 12; ++r) {
    const int64_t i1 = r % 3, i2 = (r / 3) % 2, i3 = r / 6;
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < 37; ++i) sum += get(*out, i, i1, i2, i3);
    const double mean = sum / 37;
    for (int64_t i = 0; i < 37; ++i) sum2 += std::pow(get(*out, i, i1, i2, i3) - mean, 2);
    EXPECT_NEAR(mean, 0.0, 1e-6);
    EXPECT_NEAR(sum2 / 37, 1.0, 1e-5);
  }
}

TEST(CpuNorm, RmsNormHandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  fill(a, {3, 4, 1, 1});
  Tensor* out = ops::rms_norm(ctx, a, 0.0f);
  compute(out);
  EXPECT_NEAR(get(*out, 0, 0), 0.8485281f, 1e-6f);  // 3 / sqrt(12.5)
  EXPECT_NEAR(get(*out, 1, 0), 1.1313708f, 1e-6f);  // 4 / sqrt(12.5)
  // eps enters under the root: [1, 1] with eps 1 -> 1 / sqrt(2).
  Tensor* out_eps = ops::rms_norm(ctx, a, 1.0f);
  compute(out_eps);
  EXPECT_NEAR(get(*out_eps, 0, 1), 0.70710678f, 1e-6f);
  EXPECT_NEAR(get(*out_eps, 1, 1), 0.70710678f, 1e-6f);
}

TEST(CpuNorm, RmsNormRowsHaveRmsOne) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4096, 3);
  fill(a, test::random_values(a->nelements(), 2, -10.0f, 10.0f));
  Tensor* out = ops::rms_norm(ctx, a, 0.0f);
  compute(out);
  for (int64_t r = 0; r < 3; ++r) {
    double sum2 = 0;
    for (int64_t i = 0; i < 4096; ++i) sum2 += std::pow(get(*out, i, r), 2);
    EXPECT_NEAR(std::sqrt(sum2 / 4096), 1.0, 1e-6);
  }
}

TEST(CpuNorm, GroupNormHandComputed) {
  Context ctx(true);
  // 3 channels of 2 values, 2 groups of ceil(3/2) = 2 channels: {c0, c1} and {c2}.
  Tensor* a = ctx.new_tensor(DType::F32, 2, 1, 3);
  fill(a, {1, 2, 3, 4, 5, 9});
  Tensor* out = ops::group_norm(ctx, a, 2, 0.0f);
  compute(out);
  const float expected[6] = {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f, -1.0f, 1.0f};
  const auto got = test::values(*out);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[static_cast<size_t>(i)], expected[i], 1e-6f) << i;
}

// Double-precision group norm of the logical values of a (any strides).
std::vector<double> group_norm_expected(const Tensor& a, int n_groups, double eps) {
  const auto x = test::values(a);
  std::vector<double> y(x.size());
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const int64_t per = (ne2 + n_groups - 1) / n_groups;
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t c0 = 0; c0 < ne2; c0 += per) {
      const int64_t c1 = std::min(ne2, c0 + per);
      const size_t first = static_cast<size_t>(((i3 * ne2 + c0) * ne1) * ne0);
      const size_t count = static_cast<size_t>((c1 - c0) * ne1 * ne0);
      double mean = 0, var = 0;
      for (size_t k = 0; k < count; ++k) mean += x[first + k];
      mean /= static_cast<double>(count);
      for (size_t k = 0; k < count; ++k) var += (x[first + k] - mean) * (x[first + k] - mean);
      var /= static_cast<double>(count);
      for (size_t k = 0; k < count; ++k) y[first + k] = (x[first + k] - mean) / std::sqrt(var + eps);
    }
  return y;
}

TEST(CpuNorm, GroupNormMatchesDoubleReferenceWithUnevenGroups) {
  Context ctx(true);
  // 5 channels, 4 groups -> 2 channels per group: {0,1}, {2,3}, {4}, and an empty fourth group.
  Tensor* a = ctx.new_tensor(DType::F32, 6, 3, 5, 2);
  fill(a, test::random_values(a->nelements(), 3));
  Tensor* out = ops::group_norm(ctx, a, 4, 1e-6f);
  test::expect_thread_independent(out);
  const auto expected = group_norm_expected(*a, 4, 1e-6);
  const auto got = test::values(*out);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 2e-5) << k;
}

TEST(CpuNorm, NonContiguousSources) {
  Context ctx(true);
  // Transposed: logical rows run across the memory rows of b.
  Tensor* b = ctx.new_tensor(DType::F32, 5, 7, 3);
  fill(b, test::random_values(b->nelements(), 4, -2.0f, 3.0f));
  Tensor* at = ops::transpose(ctx, b);  // [7, 5, 3], nb[0] = 20 bytes
  Tensor* n = ops::norm(ctx, at, 1e-5f);
  Tensor* r = ops::rms_norm(ctx, at, 1e-5f);
  // Permuted: [5, 7, 3] -> dims (0, 2, 1) gives [5, 3, 7] with strided rows.
  Tensor* ap = ops::permute(ctx, b, 0, 2, 1, 3);
  Tensor* g = ops::group_norm(ctx, ap, 3, 1e-5f);
  compute(n);
  compute(r);
  compute(g);
  for (int64_t i2 = 0; i2 < 3; ++i2)
    for (int64_t i1 = 0; i1 < 5; ++i1) {
      double mean = 0, var = 0, sq = 0;
      for (int64_t i0 = 0; i0 < 7; ++i0) mean += get(*at, i0, i1, i2);
      mean /= 7;
      for (int64_t i0 = 0; i0 < 7; ++i0) {
        var += std::pow(get(*at, i0, i1, i2) - mean, 2);
        sq += std::pow(get(*at, i0, i1, i2), 2);
      }
      var /= 7;
      sq /= 7;
      for (int64_t i0 = 0; i0 < 7; ++i0) {
        const double x = get(*at, i0, i1, i2);
        EXPECT_NEAR(get(*n, i0, i1, i2), (x - mean) / std::sqrt(var + 1e-5), 1e-5);
        EXPECT_NEAR(get(*r, i0, i1, i2), x / std::sqrt(sq + 1e-5), 1e-5);
      }
    }
  const auto expected = group_norm_expected(*ap, 3, 1e-5);
  const auto got = test::values(*g);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 2e-5) << k;
}

TEST(CpuNorm, OneAndTwoThreadsIdentical) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 33, 5, 3);
  fill(a, test::random_values(a->nelements(), 5));
  test::expect_thread_independent(ops::norm(ctx, a, 1e-5f));
  test::expect_thread_independent(ops::rms_norm(ctx, a, 1e-5f));
  test::expect_thread_independent(ops::group_norm(ctx, a, 2, 1e-5f));
}

TEST(CpuNorm, BuildersRejectBadInput) {
  Context ctx(true);
  Tensor* h = ctx.new_tensor(DType::F16, 4, 2);
  Tensor* f = ctx.new_tensor(DType::F32, 4, 2);
  test::expect_op_error([&] { ops::norm(ctx, h, 1e-5f); }, "NORM");
  test::expect_op_error([&] { ops::rms_norm(ctx, h, 1e-5f); }, "RMS_NORM");
  test::expect_op_error([&] { ops::group_norm(ctx, h, 2, 1e-5f); }, "GROUP_NORM");
  test::expect_op_error([&] { ops::group_norm(ctx, f, 0, 1e-5f); }, "GROUP_NORM");
  test::expect_op_error([&] { ops::rms_norm(ctx, f, -1.0f); }, "RMS_NORM");
}

}  // namespace
}  // namespace tessera
