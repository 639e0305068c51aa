// op_batch_size: each op family's own batch dimension (tokens in a model), not a fixed ne[1].
#include "tessera/op_batch.h"

#include <gtest/gtest.h>

#include "tessera/context.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

ops::RopeParams rope_params(int n_dims) {
  ops::RopeParams p;
  p.n_dims = n_dims;
  return p;
}

}  // namespace

TEST(OpBatch, RopeCountsPositionsNotHeads) {
  Context ctx;
  // One token of a 32-head model: [head_dim, heads, tokens] = [64, 32, 1]; ne[1] is 32.
  Tensor* q1 = ctx.new_tensor(DType::F32, 64, 32, 1);
  Tensor* rope1 = ops::rope(ctx, q1, ctx.new_tensor(DType::I32, 1), nullptr, rope_params(64));
  EXPECT_EQ(rope1->ne[1], 32);
  EXPECT_EQ(op_batch_size(*rope1), 1);
  // A prompt of 40 tokens of a 4-head model.
  Tensor* q40 = ctx.new_tensor(DType::F32, 64, 4, 40);
  EXPECT_EQ(op_batch_size(*ops::rope(ctx, q40, ctx.new_tensor(DType::I32, 40), nullptr, rope_params(64))),
            40);
}

TEST(OpBatch, MulMatCountsTheColumnsOfB) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F32, 64, 256);
  EXPECT_EQ(op_batch_size(*ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 64, 1))), 1);
  EXPECT_EQ(op_batch_size(*ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 64, 48))), 48);
  // Attention scores at one token: keys [hd, n_kv, heads] x q [hd, 1 token, heads].
  Tensor* keys = ctx.new_tensor(DType::F32, 64, 100, 32);
  EXPECT_EQ(op_batch_size(*ops::mul_mat(ctx, keys, ctx.new_tensor(DType::F32, 64, 1, 32))), 1);
}

TEST(OpBatch, RowOpsCountRowsAndGathersAndViewsNothing) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 64, 7);
  EXPECT_EQ(op_batch_size(*ops::rms_norm(ctx, x, 1e-5f)), 7);
  EXPECT_EQ(op_batch_size(*ops::add(ctx, x, ctx.new_tensor(DType::F32, 64))), 7);
  // Scores [n_kv, tokens, heads]: 3 query rows of 32 heads.
  EXPECT_EQ(op_batch_size(*ops::soft_max(ctx, ctx.new_tensor(DType::F32, 100, 3, 32))), 3);
  Tensor* table = ctx.new_tensor(DType::F32, 64, 1000);
  EXPECT_EQ(op_batch_size(*ops::get_rows(ctx, table, ctx.new_tensor(DType::I32, 64))), 0);
  EXPECT_EQ(op_batch_size(*ops::reshape(ctx, x, 64 * 7)), 0);
  EXPECT_EQ(op_batch_size(*ops::transpose(ctx, x)), 0);
  EXPECT_EQ(op_batch_size(*x), 0);  // a leaf
  // Merging 32 heads of one token, [head_dim, heads, tokens]: a copy, no batch.
  Tensor* heads = ctx.new_tensor(DType::F32, 8, 1, 32);
  EXPECT_EQ(op_batch_size(*ops::cont(ctx, ops::permute(ctx, heads, 0, 2, 1, 3))), 0);
  EXPECT_EQ(op_batch_size(*ops::cpy(ctx, x, ctx.new_tensor(DType::F16, 64, 7))), 0);
}
