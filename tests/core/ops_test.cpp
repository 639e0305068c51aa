// Op builders: shapes of results, and every builder rejecting bad input with an Error naming the op.
#include "tessera/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tessera/error.h"

using namespace tessera;

namespace {

void expect_error_naming(const std::string& op, const std::function<void()>& f) {
  try {
    f();
    ADD_FAILURE() << op << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Ops, ResultShapes) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q4_0, 64, 10, 2, 1);
  Tensor* x = ctx.new_tensor(DType::F32, 64, 7, 6, 3);
  Tensor* y = ops::mul_mat(ctx, w, x);
  EXPECT_EQ(y->ne, (std::array<int64_t, 4>{10, 7, 6, 3}));
  EXPECT_EQ(y->type, DType::F32);
  Tensor* p = ops::permute(ctx, x, 0, 2, 1, 3);
  EXPECT_EQ(p->ne, (std::array<int64_t, 4>{64, 6, 7, 3}));
  EXPECT_EQ(p->nb[1], x->nb[2]);
  EXPECT_FALSE(p->is_contiguous());
  EXPECT_EQ(p->view_src, x);
  Tensor* t = ops::transpose(ctx, ops::reshape(ctx, x, 64 * 7, 18));
  EXPECT_EQ(t->ne, (std::array<int64_t, 4>{18, 64 * 7, 1, 1}));
  EXPECT_EQ(t->view_src, x);  // views of views point at the memory's owner
  Tensor* idx = ctx.new_tensor(DType::I32, 5, 2, 1);
  Tensor* rows = ops::get_rows(ctx, ctx.new_tensor(DType::Q8_0, 32, 9, 2), idx);
  EXPECT_EQ(rows->ne, (std::array<int64_t, 4>{32, 5, 2, 1}));
  EXPECT_EQ(rows->type, DType::F32);
  Tensor* im = ops::im2col(ctx, ctx.new_tensor(DType::F16, 3, 3, 4, 8),
                           ctx.new_tensor(DType::F32, 10, 9, 4, 2), 2, 1, 1, 0, 1, 2, true, DType::F16);
  // OW = (10 + 2 - 2 - 1)/2 + 1 = 5; OH = (9 + 0 - 4 - 1)/1 + 1 = 5.
  EXPECT_EQ(im->ne, (std::array<int64_t, 4>{36, 5, 5, 2}));
  Tensor* pool = ops::pool_2d(ctx, ctx.new_tensor(DType::F32, 11, 9, 3, 2), PoolOp::Avg, 3, 2, 2, 2, 1, 1);
  // (11 + 2 - 3)/2 + 1 = 6; (9 + 2 - 2)/2 + 1 = 5.
  EXPECT_EQ(pool->ne, (std::array<int64_t, 4>{6, 5, 3, 2}));
  Tensor* padded = ops::pad(ctx, x, {1, 2, 0, 3, 0, 0, 1, 0});
  EXPECT_EQ(padded->ne, (std::array<int64_t, 4>{67, 10, 6, 4}));
}

TEST(Ops, ArangeCountsInF32LikeGgml) {
  Context ctx;
  // ggml counts with ceilf on f32 arithmetic; a count made in double can differ by one.
  // 1.1f / 0.1f is 11.00000007 in double (ceil 12) but exactly 11 in f32.
  EXPECT_EQ(ops::arange(ctx, 0.0f, 1.1f, 0.1f)->ne[0], 11);
  EXPECT_EQ(ops::arange(ctx, 0.0f, 0.3f, 0.1f)->ne[0], 3);
  EXPECT_EQ(ops::arange(ctx, 0.0f, 5.0f, 1.5f)->ne[0], 4);
  EXPECT_EQ(ops::arange(ctx, 3.0f, -1.0f, -1.0f)->ne[0], 4);
}

TEST(Ops, EveryBuilderRejectsBadInputNamingTheOp) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 8, 4, 2, 1);
  Tensor* b = ctx.new_tensor(DType::F32, 3, 4, 2, 1);  // does not tile a
  Tensor* i32 = ctx.new_tensor(DType::I32, 8, 4, 2, 1);
  Tensor* q = ctx.new_tensor(DType::Q8_0, 32, 4, 1, 1);
  expect_error_naming("RESHAPE", [&] { ops::reshape(ctx, a, 7, 9); });
  expect_error_naming("VIEW", [&] { ops::view(ctx, a, {8, 9, 1, 1}, a->nb[1], a->nb[2], a->nb[3], 0); });
  expect_error_naming("PERMUTE", [&] { ops::permute(ctx, a, 0, 0, 1, 2); });
  expect_error_naming("CPY", [&] { ops::cpy(ctx, a, b); });
  expect_error_naming("REPEAT", [&] { ops::repeat(ctx, a, b); });
  expect_error_naming("GET_ROWS", [&] { ops::get_rows(ctx, a, a); });
  expect_error_naming("CONCAT", [&] { ops::concat(ctx, a, b, 1); });
  expect_error_naming("CONCAT", [&] { ops::concat(ctx, a, a, 4); });
  expect_error_naming("ADD", [&] { ops::add(ctx, a, b); });
  expect_error_naming("MUL", [&] { ops::mul(ctx, i32, i32); });
  expect_error_naming("DIV", [&] { ops::div(ctx, a, b); });
  expect_error_naming("ACC", [&] { ops::acc(ctx, a, a, a->nb[1], a->nb[2], a->nb[3], 4); });
  expect_error_naming("UNARY", [&] { ops::unary(ctx, i32, UnaryOp::Silu); });
  expect_error_naming("LEAKY_RELU", [&] { ops::leaky_relu(ctx, q, 0.1f); });
  expect_error_naming("SCALE", [&] { ops::scale(ctx, i32, 2.0f); });
  expect_error_naming("SQR", [&] { ops::sqr(ctx, q); });
  expect_error_naming("CLAMP", [&] { ops::clamp(ctx, a, 1.0f, -1.0f); });
  expect_error_naming("NORM", [&] { ops::norm(ctx, i32, 1e-5f); });
  expect_error_naming("RMS_NORM", [&] { ops::rms_norm(ctx, q, 1e-5f); });
  expect_error_naming("GROUP_NORM", [&] { ops::group_norm(ctx, a, 0, 1e-5f); });
  expect_error_naming("UPSCALE", [&] { ops::upscale(ctx, a, 0, 4, 2, 1); });
  expect_error_naming("UPSCALE", [&] { ops::upscale(ctx, ctx.new_tensor(DType::F32, 0, 2), 4, 4, 1, 1); });
  expect_error_naming("PAD", [&] { ops::pad(ctx, a, {-1, 0, 0, 0, 0, 0, 0, 0}); });
  expect_error_naming("ARANGE", [&] { ops::arange(ctx, 0.0f, 1.0f, 0.0f); });
  expect_error_naming("ARANGE", [&] { ops::arange(ctx, 2.0f, 1.0f, 1.0f); });
  expect_error_naming("TIMESTEP_EMBEDDING", [&] { ops::timestep_embedding(ctx, a, 16, 10000); });
  expect_error_naming("MUL_MAT", [&] { ops::mul_mat(ctx, a, b); });
  expect_error_naming("MUL_MAT", [&] { ops::mul_mat(ctx, q, i32); });
  expect_error_naming("DIAG_MASK_INF", [&] { ops::diag_mask_inf(ctx, a, -1); });
  expect_error_naming("SOFT_MAX", [&] { ops::soft_max(ctx, a, b); });
  expect_error_naming("ROPE", [&] {
    ops::RopeParams p;
    p.n_dims = 8;
    ops::rope(ctx, a, ctx.new_tensor(DType::I32, 3), nullptr, p);  // 3 positions, ne2 = 2
  });
  expect_error_naming("ROPE", [&] {
    ops::RopeParams p;
    p.n_dims = 7;  // odd
    ops::rope(ctx, a, ctx.new_tensor(DType::I32, 2), nullptr, p);
  });
  expect_error_naming("IM2COL", [&] {
    ops::im2col(ctx, ctx.new_tensor(DType::F16, 3, 3, 5, 1), a, 1, 1, 0, 0, 1, 1, true, DType::F32);
  });
  expect_error_naming("IM2COL", [&] {
    ops::im2col(ctx, ctx.new_tensor(DType::F16, 3, 4, 1, 1), ctx.new_tensor(DType::F32, 10, 4, 2, 3), 1, 0, 0,
                0, 1, 0, false, DType::F32);  // 1-D input with ne3 > 1
  });
  expect_error_naming("POOL_2D", [&] { ops::pool_2d(ctx, a, PoolOp::Max, 20, 2, 1, 1, 0, 0); });
  expect_error_naming("SUM_ROWS", [&] { ops::sum_rows(ctx, i32); });
  expect_error_naming("ARGSORT", [&] { ops::argsort(ctx, q, SortOrder::Ascending); });
  expect_error_naming("DUP", [&] { ops::dup(ctx, nullptr); });
}

TEST(Context, RejectsBadShapes) {
  Context ctx;
  EXPECT_THROW(ctx.new_tensor(DType::Q4_0, 33), Error);
  EXPECT_THROW(ctx.new_tensor(DType::F32, -1), Error);
  EXPECT_THROW(ctx.new_tensor(DType::F32, int64_t{1} << 40, int64_t{1} << 40), Error);
  Context alloc(true);
  Tensor* t = alloc.new_tensor(DType::F16, 3, 2);
  ASSERT_NE(t->data, nullptr);
  EXPECT_EQ(t->nbytes(), 12u);
}

// Issue 15 defect 7: "new_tensor: element count overflows" and "RMS_NORM: eps must be >= 0" said
// neither which tensor nor which value.
TEST(Context, ErrorsNameTheShapeTheOperandAndTheValue) {
  Context ctx;
  try {
    ctx.new_tensor(DType::F16, int64_t{1} << 40, int64_t{1} << 40);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f16 tensor of shape [1099511627776, 1099511627776"),
              std::string::npos)
        << e.what();
  }
  Tensor* x = ctx.new_tensor(DType::F32, 64, 3);
  x->name = "blk.0.attn_in";
  for (float eps : {-1e-5f, std::nanf("")}) {
    try {
      ops::rms_norm(ctx, x, eps);
      FAIL() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("RMS_NORM: eps must be >= 0, got " + std::string(eps < 0 ? "-1e-05" : "nan")),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("blk.0.attn_in(f32 [64, 3, 1, 1])"), std::string::npos) << what;
    }
  }
}
