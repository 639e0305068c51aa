// REPEAT on the CPU backend: tiling in every dim, strided sources, exact bytes for every
// non-quantized type, and thread/kernel-set independence.
#include <gtest/gtest.h>

#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::values;

TEST(CpuRepeat, HandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2);
  fill(a, {1, 2});
  Tensor* out = ops::repeat(ctx, a, ctx.new_tensor(DType::F32, 6));
  compute(out);
  EXPECT_EQ(values(*out), (std::vector<float>{1, 2, 1, 2, 1, 2}));

  Tensor* col = ctx.new_tensor(DType::F32, 1, 2);
  fill(col, {1, 2});
  Tensor* out2 = ops::repeat(ctx, col, ctx.new_tensor(DType::F32, 3, 4));
  compute(out2);
  EXPECT_EQ(values(*out2), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
}

TEST(CpuRepeat, FourDimsFromTransposedSource) {
  Context ctx(true);
  Tensor* base = ctx.new_tensor(DType::F32, 3, 2, 1, 2);  // base[i0, i1, 0, i3] = i0 + 3 i1 + 6 i3
  fill(base, test::iota(12));
  Tensor* a = ops::transpose(ctx, base);  // [2, 3, 1, 2]: a[i0, i1, 0, i3] = base[i1, i0, 0, i3]
  Tensor* shape = ctx.new_tensor(DType::F32, 4, 6, 2, 4);
  Tensor* out = ops::repeat(ctx, a, shape);
  ASSERT_EQ(out->ne, shape->ne);
  compute(out, 2);
  test::for_each(*out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t) {
    const int64_t s0 = i0 % 2, s1 = i1 % 3, s3 = i3 % 2;
    EXPECT_EQ(test::get(*out, i0, i1, i2, i3), static_cast<float>(s1 + 3 * s0 + 6 * s3));
  });
}

TEST(CpuRepeat, OtherTypesCopyExactly) {
  Context ctx(true);
  Tensor* h = ctx.new_tensor(DType::F16, 2);
  fill(h, {0.333251953125f, -65504.0f});
  Tensor* out = ops::repeat(ctx, h, ctx.new_tensor(DType::F16, 4, 2));
  compute(out);
  EXPECT_EQ(out->type, DType::F16);
  EXPECT_EQ(values(*out), (std::vector<float>{0.333251953125f, -65504.0f, 0.333251953125f, -65504.0f,
                                              0.333251953125f, -65504.0f, 0.333251953125f, -65504.0f}));
  Tensor* i = ctx.new_tensor(DType::I32, 1, 2);
  test::fill_i32(i, {16777217, -3});
  Tensor* out2 = ops::repeat(ctx, i, ctx.new_tensor(DType::I32, 2, 2, 2));
  compute(out2);
  EXPECT_EQ(test::values_i32(*out2),
            (std::vector<int32_t>{16777217, 16777217, -3, -3, 16777217, 16777217, -3, -3}));
}

TEST(CpuRepeat, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 5, 3, 2);
  fill(a, test::random_values(a->nelements(), 5));
  test::expect_same_bytes_everywhere(ops::repeat(ctx, a, ctx.new_tensor(DType::F32, 20, 9, 4, 3)));
  test::expect_same_bytes_everywhere(
      ops::repeat(ctx, ops::permute(ctx, a, 2, 0, 1, 3), ctx.new_tensor(DType::F32, 6, 4, 10, 2)));
}

TEST(CpuRepeat, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 3);
  test::expect_error([&] { ops::repeat(ctx, a, ctx.new_tensor(DType::F32, 4, 4)); }, "REPEAT");
  test::expect_error(
      [&] { ops::repeat(ctx, ctx.new_tensor(DType::Q8_0, 32), ctx.new_tensor(DType::Q8_0, 64)); }, "REPEAT");
}

}  // namespace
}  // namespace tessera
