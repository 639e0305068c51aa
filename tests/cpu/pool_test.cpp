// POOL_2D on the CPU reference kernels: max and average with padding.
#include <gtest/gtest.h>

#include <cfloat>
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

// The 3x3 input {1..9} (negated when `negate`).
Tensor* input_3x3(Context& ctx, bool negate) {
  Tensor* a = ctx.new_tensor(DType::F32, 3, 3);
  for (int i = 0; i < 9; ++i)
    static_cast<float*>(a->data)[i] = (negate ? -1.0f : 1.0f) * static_cast<float>(i + 1);
  return a;
}

// The OPS.md definition in double, reading `a` through its logical index.
void expect_pool(const Tensor* out, const Tensor* a, PoolOp op, int k0, int k1, int s0, int s1, int p0,
                 int p1) {
  const int64_t ow = (a->ne[0] + 2 * p0 - k0) / s0 + 1, oh = (a->ne[1] + 2 * p1 - k1) / s1 + 1;
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{ow, oh, a->ne[2], a->ne[3]}));
  for (int64_t n = 0; n < a->ne[3]; ++n)
    for (int64_t c = 0; c < a->ne[2]; ++c)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = 0.0, max = -DBL_MAX;
          for (int64_t ky = 0; ky < k1; ++ky)
            for (int64_t kx = 0; kx < k0; ++kx) {
              const int64_t x = ox * s0 + kx - p0, y = oy * s1 + ky - p1;
              if (x < 0 || x >= a->ne[0] || y < 0 || y >= a->ne[1]) continue;
              const double v = get(*a, x, y, c, n);
              sum += v;
              max = std::max(max, v);
            }
          if (op == PoolOp::Max)
            EXPECT_EQ(get(*out, ox, oy, c, n), static_cast<float>(max))
                << ox << "," << oy << "," << c << "," << n;
          else
            EXPECT_NEAR(get(*out, ox, oy, c, n), sum / (k0 * k1), 1e-6)
                << ox << "," << oy << "," << c << "," << n;
        }
}

}  // namespace

TEST(CpuPool, NoPaddingByHand) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 4);
  fill(a, test::iota(16));
  Tensor* mx = ops::pool_2d(ctx, a, PoolOp::Max, 2, 2, 2, 2, 0, 0);
  Tensor* avg = ops::pool_2d(ctx, a, PoolOp::Avg, 2, 2, 2, 2, 0, 0);
  compute(mx);
  compute(avg);
  // Windows {0,1,4,5}, {2,3,6,7}, {8,9,12,13}, {10,11,14,15}.
  EXPECT_EQ(get(*mx, 0, 0), 5.0f);
  EXPECT_EQ(get(*mx, 1, 0), 7.0f);
  EXPECT_EQ(get(*mx, 0, 1), 13.0f);
  EXPECT_EQ(get(*mx, 1, 1), 15.0f);
  EXPECT_EQ(get(*avg, 0, 0), 2.5f);
  EXPECT_EQ(get(*avg, 1, 0), 4.5f);
  EXPECT_EQ(get(*avg, 0, 1), 10.5f);
  EXPECT_EQ(get(*avg, 1, 1), 12.5f);
}

TEST(CpuPool, PaddingByHand) {
  Context ctx(true);
  Tensor* a = input_3x3(ctx, false);
  Tensor* mx = ops::pool_2d(ctx, a, PoolOp::Max, 2, 2, 2, 2, 1, 1);
  Tensor* avg = ops::pool_2d(ctx, a, PoolOp::Avg, 2, 2, 2, 2, 1, 1);
  ASSERT_EQ(mx->ne, (std::array<int64_t, 4>{2, 2, 1, 1}));
  compute(mx);
  compute(avg);
  // In-bounds parts of the windows: {1}, {2,3}, {4,7}, {5,6,8,9}; avg divides by 4 regardless.
  EXPECT_EQ(get(*mx, 0, 0), 1.0f);
  EXPECT_EQ(get(*mx, 1, 0), 3.0f);
  EXPECT_EQ(get(*mx, 0, 1), 7.0f);
  EXPECT_EQ(get(*mx, 1, 1), 9.0f);
  EXPECT_EQ(get(*avg, 0, 0), 0.25f);
  EXPECT_EQ(get(*avg, 1, 0), 1.25f);
  EXPECT_EQ(get(*avg, 0, 1), 2.75f);
  EXPECT_EQ(get(*avg, 1, 1), 7.0f);
}

TEST(CpuPool, MaxIgnoresPaddingForNegativeInput) {
  Context ctx(true);
  Tensor* a = input_3x3(ctx, true);
  Tensor* mx = ops::pool_2d(ctx, a, PoolOp::Max, 2, 2, 2, 2, 1, 1);
  compute(mx);
  // Zero padding would win here if it took part.
  EXPECT_EQ(get(*mx, 0, 0), -1.0f);
  EXPECT_EQ(get(*mx, 1, 0), -2.0f);
  EXPECT_EQ(get(*mx, 0, 1), -4.0f);
  EXPECT_EQ(get(*mx, 1, 1), -5.0f);
}

TEST(CpuPool, AsymmetricWindowsMatchFormula) {
  for (DType type : {DType::F32, DType::F16})
    for (PoolOp op : {PoolOp::Max, PoolOp::Avg}) {
      Context ctx(true);
      Tensor* a = ctx.new_tensor(type, 7, 6, 3, 2);
      fill_random(a, 41);
      Tensor* out = ops::pool_2d(ctx, a, op, 3, 2, 2, 1, 1, 1);
      compute(out);
      SCOPED_TRACE(testing::Message() << "type " << static_cast<int>(type) << " op " << static_cast<int>(op));
      expect_pool(out, a, op, 3, 2, 2, 1, 1, 1);
    }
}

TEST(CpuPool, NonContiguousInput) {
  for (PoolOp op : {PoolOp::Max, PoolOp::Avg}) {
    Context ctx(true);
    Tensor* base = ctx.new_tensor(DType::F32, 6, 5, 2, 2);
    fill_random(base, 43);
    Tensor* a = ops::permute(ctx, base, 1, 0, 3, 2);  // [5, 6, 2, 2]
    ASSERT_FALSE(a->is_contiguous());
    Tensor* out = ops::pool_2d(ctx, a, op, 2, 3, 1, 2, 1, 0);
    compute(out);
    expect_pool(out, a, op, 2, 3, 1, 2, 1, 0);
  }
}

TEST(CpuPool, ThreadCountDoesNotChangeResult) {
  for (PoolOp op : {PoolOp::Max, PoolOp::Avg}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(DType::F32, 11, 9, 4, 3);
    fill_random(a, 47);
    Tensor* one = ops::pool_2d(ctx, a, op, 3, 3, 2, 2, 1, 1);
    Tensor* two = ops::pool_2d(ctx, a, op, 3, 3, 2, 2, 1, 1);
    compute(one, 1);
    compute(two, 2);
    EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
  }
}

TEST(CpuPool, BuilderRejectsBadInput) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 3);
  Tensor* q = ctx.new_tensor(DType::I32, 3, 3);
  expect_error([&] { ops::pool_2d(ctx, a, PoolOp::Max, 0, 2, 1, 1, 0, 0); }, "POOL_2D");
  expect_error([&] { ops::pool_2d(ctx, a, PoolOp::Max, 2, 2, 0, 1, 0, 0); }, "POOL_2D");
  expect_error([&] { ops::pool_2d(ctx, a, PoolOp::Avg, 4, 2, 1, 1, 0, 0); },
               "POOL_2D");  // larger than the input
  expect_error([&] { ops::pool_2d(ctx, a, static_cast<PoolOp>(5), 2, 2, 1, 1, 0, 0); }, "POOL_2D");
  expect_error([&] { ops::pool_2d(ctx, q, PoolOp::Max, 2, 2, 1, 1, 0, 0); }, "POOL_2D");
}
