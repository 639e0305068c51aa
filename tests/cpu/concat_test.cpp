// CONCAT on the CPU backend: every dim, strided operands, other types, and thread/kernel-set
// independence.
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

TEST(CpuConcat, HandComputedDims0And1) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 2);
  fill(a, {1, 2, 3, 4});
  Tensor* b0 = ctx.new_tensor(DType::F32, 1, 2);
  fill(b0, {5, 6});
  Tensor* out0 = ops::concat(ctx, a, b0, 0);
  ASSERT_EQ(out0->ne, (std::array<int64_t, 4>{3, 2, 1, 1}));
  compute(out0);
  EXPECT_EQ(values(*out0), (std::vector<float>{1, 2, 5, 3, 4, 6}));

  Tensor* b1 = ctx.new_tensor(DType::F32, 2, 1);
  fill(b1, {5, 6});
  Tensor* out1 = ops::concat(ctx, a, b1, 1);
  compute(out1);
  EXPECT_EQ(values(*out1), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// a[i] = 1000 + linear index, b[i] = 2000 + linear index, through permuted views.
TEST(CpuConcat, EveryDimWithPermutedOperands) {
  for (int dim = 0; dim < 4; ++dim) {
    SCOPED_TRACE(dim);
    Context ctx(true);
    std::array<int64_t, 4> na{3, 2, 2, 2}, nb = na;
    nb[dim] = dim == 0 ? 2 : 3;
    // Each operand is stored with dims 0 and 1 swapped and viewed back through a transpose.
    Tensor* sa = ctx.new_tensor(DType::F32, na[1], na[0], na[2], na[3]);
    Tensor* sb = ctx.new_tensor(DType::F32, nb[1], nb[0], nb[2], nb[3]);
    Tensor* a = ops::transpose(ctx, sa);
    Tensor* b = ops::transpose(ctx, sb);
    fill(a, test::iota(a->nelements(), 1000));
    fill(b, test::iota(b->nelements(), 2000));
    Tensor* out = ops::concat(ctx, a, b, dim);
    compute(out, 2);
    test::for_each(*out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t) {
      std::array<int64_t, 4> i{i0, i1, i2, i3};
      const bool from_a = i[dim] < na[dim];
      if (!from_a) i[dim] -= na[dim];
      const auto& ne = from_a ? na : nb;
      const float want = (from_a ? 1000.0f : 2000.0f) +
                         static_cast<float>(i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3])));
      EXPECT_EQ(test::get(*out, i0, i1, i2, i3), want) << i0 << " " << i1 << " " << i2 << " " << i3;
    });
  }
}

TEST(CpuConcat, OtherTypesCopyExactly) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::I32, 2);
  test::fill_i32(a, {16777217, 1});
  Tensor* b = ctx.new_tensor(DType::I32, 1);
  test::fill_i32(b, {-16777217});
  Tensor* out = ops::concat(ctx, a, b, 0);
  compute(out);
  EXPECT_EQ(test::values_i32(*out), (std::vector<int32_t>{16777217, 1, -16777217}));
  Tensor* h = ctx.new_tensor(DType::BF16, 2, 1);
  fill(h, {1.5f, -3.0f});
  Tensor* g = ctx.new_tensor(DType::BF16, 2, 1);
  fill(g, {0.0078125f, 256.0f});
  Tensor* out2 = ops::concat(ctx, h, g, 1);
  compute(out2);
  EXPECT_EQ(values(*out2), (std::vector<float>{1.5f, -3.0f, 0.0078125f, 256.0f}));
}

TEST(CpuConcat, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 7, 5, 3, 2);
  fill(a, test::random_values(a->nelements(), 1));
  for (int dim = 0; dim < 4; ++dim) {
    std::array<int64_t, 4> ne = a->ne;
    ne[dim] = 4;
    Tensor* b = ctx.new_tensor(DType::F32, ne[0], ne[1], ne[2], ne[3]);
    fill(b, test::random_values(b->nelements(), 2 + static_cast<uint32_t>(dim)));
    test::expect_same_bytes_everywhere(ops::concat(ctx, a, b, dim));
  }
  Tensor* t = ops::transpose(ctx, ctx.new_tensor(DType::F32, 5, 7, 3, 2));
  test::expect_same_bytes_everywhere(ops::concat(ctx, a, t, 2));
}

TEST(CpuConcat, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 3);
  test::expect_error([&] { ops::concat(ctx, a, ctx.new_tensor(DType::F16, 2, 3), 0); }, "CONCAT");
  test::expect_error([&] { ops::concat(ctx, a, ctx.new_tensor(DType::F32, 3, 3), 1); }, "CONCAT");
  test::expect_error([&] { ops::concat(ctx, a, a, 4); }, "CONCAT");
}

}  // namespace
}  // namespace tessera
