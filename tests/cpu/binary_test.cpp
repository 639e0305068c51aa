// ADD, MUL, DIV on the CPU backend: hand-computed values, every broadcasting pattern against a
// double-precision re-computation, the f16 type mixes, strided operands, thread/kernel independence.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::values;

using Builder = Tensor* (*)(Context&, Tensor*, Tensor*);

TEST(CpuBinary, HandComputedF32) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  fill(a, {1.5f, -2.0f, 6.0f, 1.0f});
  Tensor* b = ctx.new_tensor(DType::F32, 4);
  fill(b, {0.25f, 4.0f, -3.0f, 0.0f});
  Tensor* sum = ops::add(ctx, a, b);
  Tensor* prod = ops::mul(ctx, a, b);
  Tensor* quot = ops::div(ctx, a, b);
  compute(sum);
  compute(prod);
  compute(quot);
  EXPECT_EQ(values(*sum), (std::vector<float>{1.75f, 2.0f, 3.0f, 1.0f}));
  EXPECT_EQ(values(*prod), (std::vector<float>{0.375f, -8.0f, -18.0f, 0.0f}));
  EXPECT_EQ(values(*quot), (std::vector<float>{6.0f, -0.5f, -2.0f, std::numeric_limits<float>::infinity()}));
}

TEST(CpuBinary, RowAndColumnBroadcast) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  fill(a, {1, 2, 3, 4, 5, 6});
  Tensor* row = ctx.new_tensor(DType::F32, 3);
  fill(row, {10, 20, 30});
  Tensor* col = ctx.new_tensor(DType::F32, 1, 2);
  fill(col, {100, 200});
  Tensor* one = ctx.new_tensor(DType::F32, 1);
  fill(one, {2});
  Tensor* r = ops::add(ctx, a, row);
  Tensor* c = ops::mul(ctx, a, col);
  Tensor* s = ops::div(ctx, a, one);
  compute(r);
  compute(c);
  compute(s);
  EXPECT_EQ(values(*r), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(values(*c), (std::vector<float>{100, 200, 300, 800, 1000, 1200}));
  EXPECT_EQ(values(*s), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
}

// b tiles a: b[i mod b.ne]. f32 +, *, / are correctly rounded, and so is the double result rounded
// to f32, so the expectation is exact.
TEST(CpuBinary, TilingPatternsMatchDoubleRecomputation) {
  const std::array<int64_t, 4> ne_a{6, 4, 3, 2};
  const std::array<std::array<int64_t, 4>, 7> patterns{
      {{6, 4, 3, 2}, {1, 1, 1, 1}, {6, 1, 1, 1}, {1, 4, 1, 1}, {2, 2, 1, 2}, {3, 1, 3, 1}, {6, 4, 1, 2}}};
  const Builder builders[3] = {&ops::add, &ops::mul, &ops::div};
  for (const auto& ne_b : patterns) {
    for (int op = 0; op < 3; ++op) {
      SCOPED_TRACE(testing::Message() << "b [" << ne_b[0] << ", " << ne_b[1] << ", " << ne_b[2] << ", "
                                      << ne_b[3] << "], op " << op);
      Context ctx(true);
      Tensor* a = ctx.new_tensor(DType::F32, ne_a[0], ne_a[1], ne_a[2], ne_a[3]);
      Tensor* b = ctx.new_tensor(DType::F32, ne_b[0], ne_b[1], ne_b[2], ne_b[3]);
      fill(a, test::random_values(a->nelements(), 1, -2.0f, 2.0f));
      fill(b, test::random_values(b->nelements(), 2, 0.5f, 1.5f));
      Tensor* out = builders[op](ctx, a, b);
      test::expect_same_bytes_everywhere(out);
      test::for_each(*out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, size_t) {
        const double x = test::get(*a, i0, i1, i2, i3);
        const double y = test::get(*b, i0 % ne_b[0], i1 % ne_b[1], i2 % ne_b[2], i3 % ne_b[3]);
        const double r = op == 0 ? x + y : op == 1 ? x * y : x / y;
        ASSERT_EQ(test::get(*out, i0, i1, i2, i3), static_cast<float>(r))
            << i0 << " " << i1 << " " << i2 << " " << i3;
      });
    }
  }
}

TEST(CpuBinary, StridedOperands) {
  Context ctx(true);
  Tensor* sa = ctx.new_tensor(DType::F32, 4, 5);
  fill(sa, test::iota(20));
  Tensor* a = ops::transpose(ctx, sa);  // [5, 4]: a[i0, i1] = 4 i0 + i1
  Tensor* big = ctx.new_tensor(DType::F32, 8, 2);
  fill(big, test::iota(16, 100));
  // b = [5, 2] window of big starting at element 1: b[i0, i1] = 101 + i0 + 8 i1.
  Tensor* b = ops::view(ctx, big, {5, 2, 1, 1}, big->nb[1], big->nb[2], big->nb[3], 4);
  Tensor* out = ops::add(ctx, a, b);
  compute(out, 2);
  for (int64_t i1 = 0; i1 < 4; ++i1)
    for (int64_t i0 = 0; i0 < 5; ++i0)
      EXPECT_EQ(test::get(*out, i0, i1), static_cast<float>(4 * i0 + i1 + 101 + i0 + 8 * (i1 % 2)));
  test::expect_same_bytes_everywhere(out);
}

TEST(CpuBinary, F16Mixes) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F16, 4);
  fill(a, {1.5f, -2.0f, 1000.0f, 3.0f});
  Tensor* bh = ctx.new_tensor(DType::F16, 4);
  fill(bh, {2.25f, 0.5f, 0.125f, -3.0f});
  Tensor* bf = ctx.new_tensor(DType::F32, 2);
  fill(bf, {1.0f / 3.0f, 0.0001f});
  Tensor* add = ops::add(ctx, a, bh);
  Tensor* mul = ops::mul(ctx, a, bh);
  Tensor* div = ops::div(ctx, a, bh);
  Tensor* mixed = ops::add(ctx, a, bf);
  for (Tensor* t : {add, mul, div, mixed}) {
    compute(t);
    EXPECT_EQ(t->type, DType::F16);
  }
  // 1000.125 rounds to 1000 in f16 (spacing 0.5 there).
  EXPECT_EQ(values(*add), (std::vector<float>{3.75f, -1.5f, 1000.0f, 0.0f}));
  EXPECT_EQ(values(*mul), (std::vector<float>{3.375f, -1.0f, 125.0f, -9.0f}));
  EXPECT_EQ(values(*div), (std::vector<float>{0.66650390625f, -4.0f, 8000.0f, -1.0f}));
  // f32 sums rounded once to f16: 1.5 + 1/3 = 1.8333 -> 1.8330078125 (1877/1024); -2 + 0.0001 -> -1.9999 ->
  // -2; 1000 + 1/3 -> 1000.5 (f16 spacing 0.5 there); 3 + 0.0001 -> 3.
  EXPECT_EQ(values(*mixed), (std::vector<float>{1.8330078125f, -2.0f, 1000.5f, 3.0f}));
}

TEST(CpuBinary, BuildersRejectBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);
  test::expect_error([&] { ops::add(ctx, a, ctx.new_tensor(DType::F16, 4, 3)); }, "ADD");
  test::expect_error([&] { ops::mul(ctx, a, ctx.new_tensor(DType::F32, 3, 3)); }, "MUL");
  test::expect_error([&] { ops::div(ctx, ctx.new_tensor(DType::I32, 4), ctx.new_tensor(DType::I32, 4)); },
                     "DIV");
  test::expect_error([&] { ops::add(ctx, ctx.new_tensor(DType::BF16, 4), ctx.new_tensor(DType::BF16, 4)); },
                     "ADD");
}

}  // namespace
}  // namespace tessera
