// IM2COL on the CPU reference kernels: 1-D and 2-D, F32/F16 inputs and results.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

using test::compute;
using test::expect_error;
using test::fill;
using test::get;
using test::set;

// Values k/8, k in [-16, 16]: exact in f16, so every type combination must match exactly.
void fill_eighths(Tensor* t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-16, 16);
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          set(*t, static_cast<float>(dist(rng)) / 8.0f, i0, i1, i2, i3);
}

struct Conv {
  int s0, s1, p0, p1, d0, d1;
};

// The OPS.md 2-D formula, element by element; `in` is read through its logical index.
void expect_2d(const Tensor* out, const Tensor* in, int64_t kw, int64_t kh, const Conv& c) {
  const int64_t iw = in->ne[0], ih = in->ne[1], ic = in->ne[2], n = in->ne[3];
  const int64_t ow = (iw + 2 * c.p0 - c.d0 * (kw - 1) - 1) / c.s0 + 1;
  const int64_t oh = (ih + 2 * c.p1 - c.d1 * (kh - 1) - 1) / c.s1 + 1;
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{ic * kh * kw, ow, oh, n}));
  for (int64_t in_ = 0; in_ < n; ++in_)
    for (int64_t ioh = 0; ioh < oh; ++ioh)
      for (int64_t iow = 0; iow < ow; ++iow)
        for (int64_t ch = 0; ch < ic; ++ch)
          for (int64_t ikh = 0; ikh < kh; ++ikh)
            for (int64_t ikw = 0; ikw < kw; ++ikw) {
              const int64_t x = iow * c.s0 + ikw * c.d0 - c.p0, y = ioh * c.s1 + ikh * c.d1 - c.p1;
              const float v = (x >= 0 && x < iw && y >= 0 && y < ih) ? get(*in, x, y, ch, in_) : 0.0f;
              ASSERT_EQ(get(*out, (ch * kh + ikh) * kw + ikw, iow, ioh, in_), v)
                  << "ow " << iow << " oh " << ioh << " n " << in_ << " c " << ch << " kh " << ikh << " kw "
                  << ikw;
            }
}

}  // namespace

TEST(CpuIm2Col, Input3x3Kernel2x2ByHand) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 3, 3, 1, 1);  // rows {1,2,3}, {4,5,6}, {7,8,9}
  fill(in, test::iota(9, 1));
  Tensor* k = ctx.new_tensor(DType::F32, 2, 2, 1, 1);
  Tensor* out = ops::im2col(ctx, k, in, 1, 1, 0, 0, 1, 1, true, DType::F32);
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{4, 2, 2, 1}));
  compute(out);
  // Row (ow, oh) holds the patch [top-left, top-right, bottom-left, bottom-right].
  const float expected[2][2][4] = {{{1, 2, 4, 5}, {2, 3, 5, 6}}, {{4, 5, 7, 8}, {5, 6, 8, 9}}};
  for (int oh = 0; oh < 2; ++oh)
    for (int ow = 0; ow < 2; ++ow)
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(get(*out, e, ow, oh), expected[oh][ow][e]) << ow << "," << oh << "," << e;
}

TEST(CpuIm2Col, StrideAndPaddingByHand) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 3, 3, 1, 1);
  fill(in, test::iota(9, 1));
  Tensor* k = ctx.new_tensor(DType::F32, 2, 2, 1, 1);
  Tensor* out = ops::im2col(ctx, k, in, 2, 2, 1, 1, 1, 1, true, DType::F32);
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{4, 2, 2, 1}));
  compute(out);
  const float expected[2][2][4] = {{{0, 0, 0, 1}, {0, 0, 2, 3}}, {{0, 4, 0, 7}, {5, 6, 8, 9}}};
  for (int oh = 0; oh < 2; ++oh)
    for (int ow = 0; ow < 2; ++ow)
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(get(*out, e, ow, oh), expected[oh][ow][e]) << ow << "," << oh << "," << e;
}

TEST(CpuIm2Col, DilationByHand) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 3, 3, 1, 1);
  fill(in, test::iota(9, 1));
  Tensor* k = ctx.new_tensor(DType::F32, 2, 2, 1, 1);
  // Dilation 2 spans the corners of the 3x3 input: one output position.
  Tensor* out = ops::im2col(ctx, k, in, 1, 1, 0, 0, 2, 2, true, DType::F32);
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{4, 1, 1, 1}));
  compute(out);
  const float expected[4] = {1, 3, 7, 9};
  for (int e = 0; e < 4; ++e) EXPECT_EQ(get(*out, e), expected[e]);
}

TEST(CpuIm2Col, TwoDimMatchesFormulaForAllTypes) {
  const Conv convs[] = {{1, 1, 0, 0, 1, 1}, {2, 1, 1, 2, 2, 1}, {1, 3, 2, 0, 1, 2}, {3, 2, 1, 1, 1, 1}};
  for (DType in_type : {DType::F32, DType::F16})
    for (DType out_type : {DType::F32, DType::F16})
      for (const Conv& c : convs) {
        Context ctx(true);
        Tensor* in = ctx.new_tensor(in_type, 5, 4, 2, 2);
        fill_eighths(in, 17);
        Tensor* k = ctx.new_tensor(DType::F16, 3, 2, 2, 3);
        Tensor* out = ops::im2col(ctx, k, in, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, true, out_type);
        ASSERT_EQ(out->type, out_type);
        compute(out);
        SCOPED_TRACE(testing::Message() << "in " << static_cast<int>(in_type) << " out "
                                        << static_cast<int>(out_type) << " s " << c.s0 << "," << c.s1);
        expect_2d(out, in, 3, 2, c);
      }
}

TEST(CpuIm2Col, F16ResultRoundsToNearest) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 2, 1, 1, 1);
  // 1 + 2^-11 is halfway between f16 neighbours 1 and 1 + 2^-10: ties to even gives 1.
  // 1 + 3*2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties to even gives 1 + 2^-9.
  static_cast<float*>(in->data)[0] = 1.0f + 1.0f / 2048.0f;
  static_cast<float*>(in->data)[1] = 1.0f + 3.0f / 2048.0f;
  Tensor* k = ctx.new_tensor(DType::F32, 2, 1, 1, 1);
  Tensor* out = ops::im2col(ctx, k, in, 1, 1, 0, 0, 1, 1, true, DType::F16);
  compute(out);
  EXPECT_EQ(get(*out, 0), 1.0f);
  EXPECT_EQ(get(*out, 1), 1.0f + 1.0f / 512.0f);
}

TEST(CpuIm2Col, OneDimMatchesFormula) {
  for (DType out_type : {DType::F32, DType::F16}) {
    Context ctx(true);
    Tensor* in = ctx.new_tensor(DType::F32, 7, 2, 3);  // [IW, IC, N]
    fill_eighths(in, 23);
    Tensor* k = ctx.new_tensor(DType::F32, 3, 2, 4);  // [KW, IC, OC]
    const int s0 = 2, p0 = 2, d0 = 2;
    Tensor* out = ops::im2col(ctx, k, in, s0, 0, p0, 0, d0, 0, false, out_type);
    const int64_t ow = (7 + 2 * p0 - d0 * 2 - 1) / s0 + 1;  // 4
    ASSERT_EQ(out->ne, (std::array<int64_t, 4>{6, ow, 3, 1}));
    compute(out);
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t iow = 0; iow < ow; ++iow)
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t ikw = 0; ikw < 3; ++ikw) {
            const int64_t x = iow * s0 + ikw * d0 - p0;
            const float v = (x >= 0 && x < 7) ? get(*in, x, c, n) : 0.0f;
            EXPECT_EQ(get(*out, c * 3 + ikw, iow, n), v) << n << "," << iow << "," << c << "," << ikw;
          }
  }
}

TEST(CpuIm2Col, NonContiguousInput) {
  Context ctx(true);
  Tensor* base = ctx.new_tensor(DType::F32, 2, 4, 5, 3);
  fill_eighths(base, 29);
  Tensor* in = ops::permute(ctx, base, 2, 1, 0, 3);  // [5, 4, 2, 3], in[x,y,c,n] = base[c,y,x,n]
  ASSERT_FALSE(in->is_contiguous());
  Tensor* k = ctx.new_tensor(DType::F32, 2, 3, 2, 1);
  const Conv c{2, 1, 1, 1, 1, 2};
  Tensor* out = ops::im2col(ctx, k, in, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, true, DType::F32);
  compute(out);
  expect_2d(out, in, 2, 3, c);
}

TEST(CpuIm2Col, ThreadCountDoesNotChangeResult) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 9, 8, 3, 2);
  fill_eighths(in, 31);
  Tensor* k = ctx.new_tensor(DType::F32, 3, 3, 3, 4);
  Tensor* one = ops::im2col(ctx, k, in, 1, 2, 1, 1, 2, 1, true, DType::F32);
  Tensor* two = ops::im2col(ctx, k, in, 1, 2, 1, 1, 2, 1, true, DType::F32);
  compute(one, 1);
  compute(two, 2);
  EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
}

TEST(CpuIm2Col, BuilderRejectsBadInput) {
  Context ctx(true);
  Tensor* in = ctx.new_tensor(DType::F32, 3, 3, 2, 1);
  Tensor* k = ctx.new_tensor(DType::F32, 2, 2, 2, 1);
  Tensor* k_wrong_ic = ctx.new_tensor(DType::F32, 2, 2, 3, 1);
  Tensor* k_big = ctx.new_tensor(DType::F32, 4, 2, 2, 1);
  Tensor* in_bf16 = ctx.new_tensor(DType::BF16, 3, 3, 2, 1);
  expect_error([&] { ops::im2col(ctx, k_wrong_ic, in, 1, 1, 0, 0, 1, 1, true, DType::F32); }, "IM2COL");
  expect_error([&] { ops::im2col(ctx, k, in, 0, 1, 0, 0, 1, 1, true, DType::F32); }, "IM2COL");
  expect_error([&] { ops::im2col(ctx, k, in, 1, 1, -1, 0, 1, 1, true, DType::F32); }, "IM2COL");
  expect_error([&] { ops::im2col(ctx, k_big, in, 1, 1, 0, 0, 1, 1, true, DType::F32); }, "IM2COL");
  expect_error([&] { ops::im2col(ctx, k, in, 1, 1, 0, 0, 1, 1, true, DType::BF16); }, "IM2COL");
  expect_error([&] { ops::im2col(ctx, k, in_bf16, 1, 1, 0, 0, 1, 1, true, DType::F32); }, "IM2COL");
}
