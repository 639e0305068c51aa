// CPU reference kernel for SUM_ROWS.
#include <gtest/gtest.h>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;

TEST(CpuSumRows, HandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 2, 1, 2);
  fill(a, {1, 2, 3, 4, -1, 0.5f, 0.25f, 0, 10, 20, 30, 40, 0, 0, 0, -7});
  Tensor* out = ops::sum_rows(ctx, a);
  compute(out);
  EXPECT_EQ(out->ne, (std::array<int64_t, 4>{1, 2, 1, 2}));
  EXPECT_EQ(get(*out, 0, 0, 0, 0), 10.0f);
  EXPECT_EQ(get(*out, 0, 1, 0, 0), -0.25f);
  EXPECT_EQ(get(*out, 0, 0, 0, 1), 100.0f);
  EXPECT_EQ(get(*out, 0, 1, 0, 1), -7.0f);
}

TEST(CpuSumRows, AccumulatesWide) {
  Context ctx(true);
  // 2^24 followed by 1000 ones: an f32 accumulator would stay at 2^24; the exact sum 16778216 is
  // representable in f32.
  Tensor* a = ctx.new_tensor(DType::F32, 1001);
  std::vector<float> x(1001, 1.0f);
  x[0] = 16777216.0f;
  fill(a, x);
  Tensor* out = ops::sum_rows(ctx, a);
  compute(out);
  EXPECT_EQ(get(*out, 0), 16778216.0f);
}

TEST(CpuSumRows, NonContiguousSources) {
  Context ctx(true);
  Tensor* b = ctx.new_tensor(DType::F32, 5, 6, 3);
  const auto x = test::random_values(b->nelements(), 31);
  fill(b, x);
  Tensor* at = ops::transpose(ctx, b);            // [6, 5, 3]
  Tensor* ap = ops::permute(ctx, b, 2, 0, 1, 3);  // [6, 3, 5]
  Tensor* st = ops::sum_rows(ctx, at);
  Tensor* sp = ops::sum_rows(ctx, ap);
  compute(st);
  compute(sp);
  // Both views sum b over its dim 1.
  for (int64_t i2 = 0; i2 < 3; ++i2)
    for (int64_t i0 = 0; i0 < 5; ++i0) {
      double sum = 0;
      for (int64_t i1 = 0; i1 < 6; ++i1) sum += x[static_cast<size_t>((i2 * 6 + i1) * 5 + i0)];
      EXPECT_NEAR(get(*st, 0, i0, i2), sum, 1e-6);
      EXPECT_NEAR(get(*sp, 0, i2, i0), sum, 1e-6);
    }
}

TEST(CpuSumRows, OneAndTwoThreadsIdentical) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 77, 9, 2, 2);
  fill(a, test::random_values(a->nelements(), 32));
  test::expect_thread_independent(ops::sum_rows(ctx, a));
}

TEST(CpuSumRows, BuildersRejectBadInput) {
  Context ctx(true);
  Tensor* h = ctx.new_tensor(DType::F16, 4, 2);
  Tensor* i = ctx.new_tensor(DType::I32, 4, 2);
  test::expect_op_error([&] { ops::sum_rows(ctx, h); }, "SUM_ROWS");
  test::expect_op_error([&] { ops::sum_rows(ctx, i); }, "SUM_ROWS");
}

}  // namespace
}  // namespace tessera
