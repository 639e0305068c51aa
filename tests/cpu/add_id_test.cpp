// CPU ADD_ID (ggml_add_id): rows of a plus the rows of b that ids pick.
#include <gtest/gtest.h>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::fill_i32;
using test::values;

TEST(CpuAddId, HandComputed) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2, 2);  // rows (i1, i2): [1,2,3] [4,5,6] [7,8,9] [10,11,12]
  Tensor* b = ctx.new_tensor(DType::F32, 3, 4);     // row r: [100 r, 100 r + 1, 100 r + 2] - 0.5
  Tensor* ids = ctx.new_tensor(DType::I32, 2, 2);   // ids[i1, i2]
  fill(a, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  std::vector<float> bv;
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 3; ++i) bv.push_back(100.0f * r + i - 0.5f);
  fill(b, bv);
  fill_i32(ids, {3, 0, 1, 3});
  Tensor* out = ops::add_id(ctx, a, b, ids);
  ASSERT_EQ(out->ne, a->ne);
  for (int threads : {1, 3}) {
    compute(out, threads);
    EXPECT_EQ(values(*out), (std::vector<float>{300.5f, 302.5f, 304.5f, 3.5f, 5.5f, 7.5f,  //
                                                106.5f, 108.5f, 110.5f, 309.5f, 311.5f, 313.5f}));
  }
}

TEST(CpuAddId, StridedAAndIdsView) {
  // a as a transposed view and ids as a view of a wider tensor give the logical result.
  Context ctx(true);
  Tensor* at = ctx.new_tensor(DType::F32, 2, 4);  // a = at^T: [4, 2], a[i0, i1] = at[i1, i0]
  fill(at, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor* a = ops::transpose(ctx, at);
  Tensor* b = ctx.new_tensor(DType::F32, 4, 2);
  fill(b, {0, 0, 0, 0, 10, 20, 30, 40});
  Tensor* wide = ctx.new_tensor(DType::I32, 3, 1);
  fill_i32(wide, {1, 0, 7});
  Tensor* ids = ops::view(ctx, wide, {2, 1, 1, 1}, wide->nb[1], wide->nb[2], wide->nb[3], 0);
  Tensor* out = ops::add_id(ctx, a, b, ids);
  compute(out);
  // column 0 of at is a's row 0: [1, 3, 5, 7] + b row 1; row 1: [2, 4, 6, 8] + b row 0.
  EXPECT_EQ(values(*out), (std::vector<float>{11, 23, 35, 47, 2, 4, 6, 8}));
}

TEST(CpuAddId, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 64, 4, 9);
  Tensor* b = ctx.new_tensor(DType::F32, 64, 8);
  Tensor* ids = ctx.new_tensor(DType::I32, 4, 9);
  test::fill_random(a, 1);
  test::fill_random(b, 2);
  std::vector<int32_t> iv;
  for (int i = 0; i < 36; ++i) iv.push_back((i * 5) % 8);
  fill_i32(ids, iv);
  test::expect_same_bytes_everywhere(ops::add_id(ctx, a, b, ids));
}

TEST(CpuAddId, BadIdsAndOperandsAreErrors) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 2);
  Tensor* b = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* ids = ctx.new_tensor(DType::I32, 2, 1);
  fill(a, std::vector<float>(8, 1.0f));
  fill(b, std::vector<float>(12, 1.0f));
  fill_i32(ids, {0, 3});  // 3 is outside b's 3 rows
  Tensor* out = ops::add_id(ctx, a, b, ids);
  EXPECT_THROW(compute(out), Error);
  fill_i32(ids, {0, -1});
  EXPECT_THROW(compute(out), Error);
  test::expect_op_error([&] { ops::add_id(ctx, a, ctx.new_tensor(DType::F32, 5, 3), ids); }, "ADD_ID");
  test::expect_op_error([&] { ops::add_id(ctx, a, b, ctx.new_tensor(DType::I32, 3, 1)); }, "ADD_ID");
  test::expect_op_error([&] { ops::add_id(ctx, a, b, ctx.new_tensor(DType::F32, 2, 1)); }, "ADD_ID");
  test::expect_op_error([&] { ops::add_id(ctx, ctx.new_tensor(DType::F16, 4, 2), b, ids); }, "ADD_ID");
}

}  // namespace
}  // namespace tessera
