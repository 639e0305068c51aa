// CPU reference kernel for ARGSORT.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;
using test::get_i32;

TEST(CpuArgsort, HandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 2);
  fill(a, {3, 1, 2, -5, 0.5f, 9, -1, 2});
  Tensor* asc = ops::argsort(ctx, a, SortOrder::Ascending);
  Tensor* desc = ops::argsort(ctx, a, SortOrder::Descending);
  compute(asc);
  compute(desc);
  EXPECT_EQ(asc->type, DType::I32);
  const int32_t want_asc[2][4] = {{3, 1, 2, 0}, {2, 0, 3, 1}};
  const int32_t want_desc[2][4] = {{0, 2, 1, 3}, {1, 3, 0, 2}};
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(get_i32(*asc, i, r), want_asc[r][i]) << r << "," << i;
      EXPECT_EQ(get_i32(*desc, i, r), want_desc[r][i]) << r << "," << i;
    }
}

// Every row of idx must be a permutation of 0..ne0-1 that sorts the row of a.
void expect_sorts(const Tensor& a, const Tensor& idx, bool descending) {
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
        std::vector<int32_t> perm;
        for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) perm.push_back(get_i32(idx, i0, i1, i2, i3));
        std::vector<int32_t> sorted = perm;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) ASSERT_EQ(sorted[static_cast<size_t>(i0)], i0);
        for (size_t k = 1; k < perm.size(); ++k) {
          const float prev = get(a, perm[k - 1], i1, i2, i3), cur = get(a, perm[k], i1, i2, i3);
          if (descending)
            EXPECT_GT(prev, cur);
          else
            EXPECT_LT(prev, cur);
        }
      }
}

TEST(CpuArgsort, OutputSortsEachRow) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 100, 3, 2, 2);
  fill(a, test::random_values(a->nelements(), 41));
  Tensor* asc = ops::argsort(ctx, a, SortOrder::Ascending);
  Tensor* desc = ops::argsort(ctx, a, SortOrder::Descending);
  compute(asc);
  compute(desc);
  expect_sorts(*a, *asc, false);
  expect_sorts(*a, *desc, true);
}

TEST(CpuArgsort, TiesKeepIndexOrderAndNanGoesLast) {
  Context ctx(true);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor* a = ctx.new_tensor(DType::F32, 6);
  fill(a, {2, nan, 1, 2, 1, 0});
  Tensor* asc = ops::argsort(ctx, a, SortOrder::Ascending);
  Tensor* desc = ops::argsort(ctx, a, SortOrder::Descending);
  compute(asc);
  compute(desc);
  const int32_t want_asc[6] = {5, 2, 4, 0, 3, 1};
  const int32_t want_desc[6] = {0, 3, 2, 4, 5, 1};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(get_i32(*asc, i), want_asc[i]) << i;
    EXPECT_EQ(get_i32(*desc, i), want_desc[i]) << i;
  }
}

TEST(CpuArgsort, NonContiguousSources) {
  Context ctx(true);
  Tensor* b = ctx.new_tensor(DType::F32, 7, 9, 2);
  fill(b, test::random_values(b->nelements(), 42));
  Tensor* at = ops::transpose(ctx, b);            // [9, 7, 2]
  Tensor* ap = ops::permute(ctx, b, 1, 2, 0, 3);  // [2, 7, 9]
  Tensor* st = ops::argsort(ctx, at, SortOrder::Ascending);
  Tensor* sp = ops::argsort(ctx, ap, SortOrder::Descending);
  compute(st);
  compute(sp);
  expect_sorts(*at, *st, false);
  expect_sorts(*ap, *sp, true);
}

TEST(CpuArgsort, OneAndTwoThreadsIdentical) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 50, 11, 3);
  fill(a, test::random_values(a->nelements(), 43));
  test::expect_thread_independent(ops::argsort(ctx, a, SortOrder::Descending));
}

TEST(CpuArgsort, BuildersRejectBadInput) {
  Context ctx(true);
  Tensor* h = ctx.new_tensor(DType::F16, 4, 2);
  Tensor* f = ctx.new_tensor(DType::F32, 4, 2);
  test::expect_op_error([&] { ops::argsort(ctx, h, SortOrder::Ascending); }, "ARGSORT");
  test::expect_op_error([&] { ops::argsort(ctx, f, static_cast<SortOrder>(2)); }, "ARGSORT");
}

}  // namespace
}  // namespace tessera
