// UPSCALE on the CPU reference kernels: nearest and bilinear (with and without align-corners).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

constexpr int32_t kBilinear = 1;
constexpr int32_t kAlignCorners = 1 << 8;

using test::compute;
using test::expect_error;
using test::fill;
using test::fill_random;
using test::get;
using test::set;

// Bilinear sample position along one dim, in double: (lo, hi, weight of hi).
struct Sample {
  int64_t lo, hi;
  double w;
};
Sample expected_sample(int64_t i, int64_t n_in, int64_t n_out, bool align) {
  double x;
  if (align)
    x = n_out > 1 ? static_cast<double>(i) * static_cast<double>(n_in - 1) / static_cast<double>(n_out - 1)
                  : 0.0;
  else
    x = (static_cast<double>(i) + 0.5) * static_cast<double>(n_in) / static_cast<double>(n_out) - 0.5;
  x = std::clamp(x, 0.0, static_cast<double>(n_in - 1));
  const auto lo = static_cast<int64_t>(std::floor(x));
  return {lo, std::min(lo + 1, n_in - 1), x - static_cast<double>(lo)};
}

}  // namespace

TEST(CpuUpscale, Nearest2x2To4x4) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  fill(a, {1, 2, 3, 4});
  Tensor* out = ops::upscale(ctx, a, 4, 4, 1, 1);
  compute(out);
  const float expected[4][4] = {{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 4, 4}, {3, 3, 4, 4}};
  for (int i1 = 0; i1 < 4; ++i1)
    for (int i0 = 0; i0 < 4; ++i0) EXPECT_EQ(get(*out, i0, i1), expected[i1][i0]) << i0 << "," << i1;
}

TEST(CpuUpscale, NearestNonIntegerFactorsAndOuterDims) {
  Context ctx(true);
  // [3, 1, 2, 1] -> [5, 2, 4, 3]: dim 0 by 5/3 (sources 0,0,1,1,2), dims 1-3 repeat.
  Tensor* a = ctx.new_tensor(DType::F32, 3, 1, 2, 1);
  fill(a, {10, 20, 30, 40, 50, 60});
  Tensor* out = ops::upscale(ctx, a, 5, 2, 4, 3);
  compute(out);
  const int src0[5] = {0, 0, 1, 1, 2};
  const int src2[4] = {0, 0, 1, 1};
  for (int i3 = 0; i3 < 3; ++i3)
    for (int i2 = 0; i2 < 4; ++i2)
      for (int i1 = 0; i1 < 2; ++i1)
        for (int i0 = 0; i0 < 5; ++i0)
          EXPECT_EQ(get(*out, i0, i1, i2, i3), 10.0f * static_cast<float>(src0[i0] + 1 + 3 * src2[i2]));
}

TEST(CpuUpscale, NearestDownscale) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);
  fill(a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor* out = ops::upscale(ctx, a, 2, 1, 1, 1);
  compute(out);
  EXPECT_EQ(get(*out, 0), 0.0f);
  EXPECT_EQ(get(*out, 1), 2.0f);
}

TEST(CpuUpscale, BilinearHalfPixel2x2To4x4) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  fill(a, {1, 3, 5, 7});
  Tensor* out = ops::upscale(ctx, a, 4, 4, 1, 1, kBilinear);
  compute(out);
  // Sample positions -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) in both dims.
  const float expected[4][4] = {{1, 1.5, 2.5, 3}, {2, 2.5, 3.5, 4}, {4, 4.5, 5.5, 6}, {5, 5.5, 6.5, 7}};
  for (int i1 = 0; i1 < 4; ++i1)
    for (int i0 = 0; i0 < 4; ++i0) EXPECT_FLOAT_EQ(get(*out, i0, i1), expected[i1][i0]) << i0 << "," << i1;
}

TEST(CpuUpscale, BilinearAlignCorners2x2To3x3) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  fill(a, {1, 3, 5, 7});
  Tensor* out = ops::upscale(ctx, a, 3, 3, 1, 1, kBilinear | kAlignCorners);
  compute(out);
  const float expected[3][3] = {{1, 2, 3}, {3, 4, 5}, {5, 6, 7}};
  for (int i1 = 0; i1 < 3; ++i1)
    for (int i0 = 0; i0 < 3; ++i0) EXPECT_FLOAT_EQ(get(*out, i0, i1), expected[i1][i0]) << i0 << "," << i1;
}

TEST(CpuUpscale, BilinearMatchesFormula) {
  for (bool align : {false, true}) {
    Context ctx(true);
    // Odd sizes, a downscale in dim 1, nearest in dims 2 and 3.
    Tensor* a = ctx.new_tensor(DType::F32, 3, 5, 2, 2);
    fill_random(a, 7);
    const int64_t ne[4] = {7, 4, 4, 2};
    Tensor* out = ops::upscale(ctx, a, ne[0], ne[1], ne[2], ne[3], kBilinear | (align ? kAlignCorners : 0));
    compute(out);
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
            const Sample x = expected_sample(i0, 3, ne[0], align);
            const Sample y = expected_sample(i1, 5, ne[1], align);
            const int64_t j2 = i2 / 2, j3 = i3;
            const double v = get(*a, x.lo, y.lo, j2, j3) * (1 - x.w) * (1 - y.w) +
                             get(*a, x.hi, y.lo, j2, j3) * x.w * (1 - y.w) +
                             get(*a, x.lo, y.hi, j2, j3) * (1 - x.w) * y.w +
                             get(*a, x.hi, y.hi, j2, j3) * x.w * y.w;
            EXPECT_NEAR(get(*out, i0, i1, i2, i3), v, 1e-5)
                << "align " << align << " at " << i0 << "," << i1 << "," << i2 << "," << i3;
          }
  }
}

TEST(CpuUpscale, AlignCornersSingleElementSide) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 1, 3);
  fill(a, {2, 4, 6});
  // Width 1 -> 3 (one source column), height 3 -> 1 (the first row, corners aligned).
  Tensor* out = ops::upscale(ctx, a, 3, 1, 1, 1, kBilinear | kAlignCorners);
  compute(out);
  for (int i0 = 0; i0 < 3; ++i0) EXPECT_FLOAT_EQ(get(*out, i0), 2.0f);
}

TEST(CpuUpscale, NonContiguousSource) {
  for (int32_t mode : {0, kBilinear, kBilinear | kAlignCorners}) {
    Context ctx(true);
    Tensor* base = ctx.new_tensor(DType::F32, 3, 4, 2);
    fill_random(base, 11);
    Tensor* view = ops::permute(ctx, base, 1, 0, 2, 3);  // [4, 3, 2]
    Tensor* from_view = ops::upscale(ctx, view, 9, 5, 3, 1, mode);
    Tensor* from_dense = ctx.new_tensor(DType::F32, 4, 3, 2);
    // Fill the dense copy by hand through the view's logical order.
    for (int64_t i2 = 0; i2 < 2; ++i2)
      for (int64_t i1 = 0; i1 < 3; ++i1)
        for (int64_t i0 = 0; i0 < 4; ++i0) set(*from_dense, get(*base, i1, i0, i2), i0, i1, i2, 0);
    Tensor* expected = ops::upscale(ctx, from_dense, 9, 5, 3, 1, mode);
    compute(from_view);
    compute(expected);
    for (int64_t i = 0; i < from_view->nelements(); ++i)
      EXPECT_EQ(static_cast<float*>(from_view->data)[i], static_cast<float*>(expected->data)[i]) << i;
  }
}

TEST(CpuUpscale, ThreadCountDoesNotChangeResult) {
  for (int32_t mode : {0, kBilinear, kBilinear | kAlignCorners}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 5, 6, 3, 2);
    fill_random(a, 3);
    Tensor* one = ops::upscale(ctx, a, 11, 13, 5, 3, mode);
    Tensor* two = ops::upscale(ctx, a, 11, 13, 5, 3, mode);
    compute(one, 1);
    compute(two, 2);
    EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
  }
}

TEST(CpuUpscale, BuilderRejectsBadInput) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  Tensor* h = ctx.new_tensor(DType::F16, 2, 2);
  expect_error([&] { ops::upscale(ctx, a, 0, 4, 1, 1); }, "UPSCALE");
  expect_error([&] { ops::upscale(ctx, a, 4, 4, 1, 1, 2); }, "UPSCALE");
  expect_error([&] { ops::upscale(ctx, h, 4, 4, 1, 1); }, "UPSCALE");
}
