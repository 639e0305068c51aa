// PAD on the CPU reference kernels: zero padding and circular padding.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

using test::compute;
using test::expect_error;
using test::fill;
using test::fill_random;
using test::get;

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

}  // namespace

TEST(CpuPad, AsymmetricZeroPad2x3) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);  // rows {1,2,3}, {4,5,6}
  fill(a, {1, 2, 3, 4, 5, 6});
  Tensor* out = ops::pad(ctx, a, {1, 2, 0, 1, 0, 0, 0, 0});
  ASSERT_EQ(out->ne[0], 6);
  ASSERT_EQ(out->ne[1], 3);
  compute(out);
  const float expected[3][6] = {{0, 1, 2, 3, 0, 0}, {0, 4, 5, 6, 0, 0}, {0, 0, 0, 0, 0, 0}};
  for (int i1 = 0; i1 < 3; ++i1)
    for (int i0 = 0; i0 < 6; ++i0) EXPECT_EQ(get(*out, i0, i1), expected[i1][i0]) << i0 << "," << i1;
}

TEST(CpuPad, LeftPadInRowsAndOuterDims) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 1, 1, 1);
  fill(a, {7, 8});
  Tensor* out = ops::pad(ctx, a, {0, 0, 2, 0, 1, 1, 0, 2});
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{2, 3, 3, 3}));
  compute(out);
  for (int i3 = 0; i3 < 3; ++i3)
    for (int i2 = 0; i2 < 3; ++i2)
      for (int i1 = 0; i1 < 3; ++i1)
        for (int i0 = 0; i0 < 2; ++i0) {
          const bool inside = i1 == 2 && i2 == 1 && i3 == 0;
          EXPECT_EQ(get(*out, i0, i1, i2, i3), inside ? (i0 == 0 ? 7.0f : 8.0f) : 0.0f);
        }
}

TEST(CpuPad, Circular1D) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3);
  fill(a, {1, 2, 3});
  Tensor* out = ops::pad(ctx, a, {2, 3, 0, 0, 0, 0, 0, 0}, true);
  compute(out);
  const float expected[8] = {2, 3, 1, 2, 3, 1, 2, 3};
  ASSERT_EQ(out->ne[0], 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(get(*out, i), expected[i]) << i;
}

TEST(CpuPad, Circular2D) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);  // rows {1,2}, {3,4}
  fill(a, {1, 2, 3, 4});
  Tensor* out = ops::pad(ctx, a, {1, 0, 0, 1, 0, 0, 0, 0}, true);
  compute(out);
  const float expected[3][3] = {{2, 1, 2}, {4, 3, 4}, {2, 1, 2}};
  for (int i1 = 0; i1 < 3; ++i1)
    for (int i0 = 0; i0 < 3; ++i0) EXPECT_EQ(get(*out, i0, i1), expected[i1][i0]) << i0 << "," << i1;
}

TEST(CpuPad, NonContiguousSourceMatchesFormula) {
  for (bool circular : {false, true}) {
    Context ctx(true);
    Tensor* base = ctx.new_tensor(DType::F32, 4, 3, 2, 2);
    fill_random(base, 5);
    Tensor* view =
        ops::permute(ctx, base, 2, 0, 1, 3);  // [3, 2, 4, 2], view[i0,i1,i2,i3] = base[i2,i0,i1,i3]
    const std::array<int32_t, 8> pads{1, 2, 2, 1, 0, 3, 1, 1};
    Tensor* out = ops::pad(ctx, view, pads, circular);
    compute(out);
    const int64_t n[4] = {3, 2, 4, 2};
    for (int64_t i3 = 0; i3 < out->ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < out->ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < out->ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < out->ne[0]; ++i0) {
            int64_t j[4] = {i0 - pads[0], i1 - pads[2], i2 - pads[4], i3 - pads[6]};
            bool inside = true;
            for (int d = 0; d < 4; ++d) {
              if (circular) j[d] = wrap(j[d], n[d]);
              inside = inside && j[d] >= 0 && j[d] < n[d];
            }
            const float v = inside ? get(*base, j[2], j[0], j[1], j[3]) : 0.0f;
            EXPECT_EQ(get(*out, i0, i1, i2, i3), v)
                << circular << " " << i0 << "," << i1 << "," << i2 << "," << i3;
          }
  }
}

TEST(CpuPad, ThreadCountDoesNotChangeResult) {
  for (bool circular : {false, true}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 7, 5, 3, 2);
    fill_random(a, 9);
    const std::array<int32_t, 8> pads{3, 1, 0, 4, 2, 2, 1, 0};
    Tensor* one = ops::pad(ctx, a, pads, circular);
    Tensor* two = ops::pad(ctx, a, pads, circular);
    compute(one, 1);
    compute(two, 2);
    EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
  }
}

TEST(CpuPad, BuilderRejectsBadInput) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  Tensor* h = ctx.new_tensor(DType::F16, 3, 2);
  expect_error([&] { ops::pad(ctx, a, {-1, 0, 0, 0, 0, 0, 0, 0}); }, "PAD");
  expect_error([&] { ops::pad(ctx, a, {0, 0, 0, 3, 0, 0, 0, 0}, true); }, "PAD");  // wraps more than the size
  expect_error([&] { ops::pad(ctx, h, {1, 1, 0, 0, 0, 0, 0, 0}); }, "PAD");
}
