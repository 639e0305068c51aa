// Typed op parameters: every builder's parameters read back through their accessor, the packing
// follows ../shared/OPS.md's int32 layout, and reading another op's parameters is an Error.
#include "tessera/op_params.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tessera/error.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

float raw_f(const Tensor& t, int i) {
  float f;
  std::memcpy(&f, &t.params[static_cast<size_t>(i)], sizeof f);
  return f;
}

}  // namespace

TEST(OpParams, RoundTripThroughTheBuilders) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 64, 4, 3, 2);

  EXPECT_EQ(permute_axes(*ops::permute(ctx, x, 2, 0, 1, 3)).axes, (std::array<int, 4>{2, 0, 1, 3}));
  EXPECT_EQ(concat_params(*ops::concat(ctx, x, x, 2)).dim, 2);

  Tensor* small = ctx.new_tensor(DType::F32, 8, 2);
  const AccParams acc = acc_params(*ops::acc(ctx, x, small, 512, 1024, 3072, 16));
  EXPECT_EQ(acc.nb1, 512u);
  EXPECT_EQ(acc.nb2, 1024u);
  EXPECT_EQ(acc.nb3, 3072u);
  EXPECT_EQ(acc.offset, 16u);

  EXPECT_EQ(unary_op(*ops::silu(ctx, x)), UnaryOp::Silu);
  EXPECT_EQ(leaky_relu_params(*ops::leaky_relu(ctx, x, 0.125f)).slope, 0.125f);
  const ScaleParams sc = scale_params(*ops::scale(ctx, x, 3.0f, -0.5f));
  EXPECT_EQ(sc.scale, 3.0f);
  EXPECT_EQ(sc.bias, -0.5f);
  const ClampParams cl = clamp_params(*ops::clamp(ctx, x, -2.0f, 7.0f));
  EXPECT_EQ(cl.min, -2.0f);
  EXPECT_EQ(cl.max, 7.0f);
  EXPECT_EQ(norm_params(*ops::norm(ctx, x, 1e-5f)).eps, 1e-5f);
  EXPECT_EQ(norm_params(*ops::rms_norm(ctx, x, 1e-6f)).eps, 1e-6f);
  const GroupNormParams gn = group_norm_params(*ops::group_norm(ctx, x, 3, 1e-4f));
  EXPECT_EQ(gn.n_groups, 3);
  EXPECT_EQ(gn.eps, 1e-4f);

  const UpscaleParams up = upscale_params(*ops::upscale(ctx, x, 128, 8, 3, 2, 1 | (1 << 8)));
  EXPECT_EQ(up.mode, UpscaleMode::Bilinear);
  EXPECT_TRUE(up.align_corners);
  EXPECT_EQ(upscale_params(*ops::upscale(ctx, x, 128, 8, 3, 2)).mode, UpscaleMode::Nearest);

  const PadParams pad = pad_params(*ops::pad(ctx, x, {1, 2, 3, 4, 0, 1, 2, 0}, true));
  EXPECT_EQ(pad.left, (std::array<int32_t, 4>{1, 3, 0, 2}));
  EXPECT_EQ(pad.right, (std::array<int32_t, 4>{2, 4, 1, 0}));
  EXPECT_TRUE(pad.circular);

  const ArangeParams ar = arange_params(*ops::arange(ctx, 1.0f, 5.0f, 0.5f));
  EXPECT_EQ(ar.start, 1.0f);
  EXPECT_EQ(ar.stop, 5.0f);
  EXPECT_EQ(ar.step, 0.5f);
  const TimestepEmbeddingParams te =
      timestep_embedding_params(*ops::timestep_embedding(ctx, ctx.new_tensor(DType::F32, 5), 16, 1000));
  EXPECT_EQ(te.dim, 16);
  EXPECT_EQ(te.max_period, 1000);

  EXPECT_EQ(diag_mask_inf_params(*ops::diag_mask_inf(ctx, x, 5)).n_past, 5);
  const SoftMaxParams sm = soft_max_params(*ops::soft_max(ctx, x, nullptr, 0.125f, 8.0f));
  EXPECT_EQ(sm.scale, 0.125f);
  EXPECT_EQ(sm.max_bias, 8.0f);

  RopeParams rp;
  rp.n_dims = 32;
  rp.mode = RopeMode::Neox;
  rp.n_ctx_orig = 4096;
  rp.freq_base = 500000.0f;
  rp.freq_scale = 0.25f;
  rp.ext_factor = 1.0f;
  rp.attn_factor = 0.75f;
  rp.beta_fast = 24.0f;
  rp.beta_slow = 2.0f;
  const RopeParams back = rope_params(*ops::rope(ctx, x, ctx.new_tensor(DType::I32, 3), nullptr, rp));
  EXPECT_EQ(back.n_dims, 32);
  EXPECT_EQ(back.mode, RopeMode::Neox);
  EXPECT_EQ(back.n_ctx_orig, 4096);
  EXPECT_EQ(back.freq_base, 500000.0f);
  EXPECT_EQ(back.freq_scale, 0.25f);
  EXPECT_EQ(back.ext_factor, 1.0f);
  EXPECT_EQ(back.attn_factor, 0.75f);
  EXPECT_EQ(back.beta_fast, 24.0f);
  EXPECT_EQ(back.beta_slow, 2.0f);

  const Im2ColParams im = im2col_params(*ops::im2col(ctx, ctx.new_tensor(DType::F16, 3, 3, 4, 8),
                                                     ctx.new_tensor(DType::F32, 10, 9, 4, 2), 2, 1, 1, 0, 1,
                                                     2, true, DType::F16));
  EXPECT_EQ((std::array<int, 6>{im.s0, im.s1, im.p0, im.p1, im.d0, im.d1}),
            (std::array<int, 6>{2, 1, 1, 0, 1, 2}));
  EXPECT_TRUE(im.is_2d);

  const Pool2DParams pool = pool_2d_params(
      *ops::pool_2d(ctx, ctx.new_tensor(DType::F32, 11, 9, 3, 2), PoolOp::Avg, 3, 2, 2, 1, 1, 0));
  EXPECT_EQ(pool.op, PoolOp::Avg);
  EXPECT_EQ((std::array<int, 6>{pool.k0, pool.k1, pool.s0, pool.s1, pool.p0, pool.p1}),
            (std::array<int, 6>{3, 2, 2, 1, 1, 0}));

  EXPECT_EQ(argsort_order(*ops::argsort(ctx, x, SortOrder::Descending)), SortOrder::Descending);
}

// The int32 slots of ../shared/OPS.md (ggml's), so a node's params mean the same as ggml's.
TEST(OpParams, PackedWithTheDocumentedLayout) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 64, 4, 3);
  RopeParams rp;
  rp.n_dims = 32;
  rp.mode = RopeMode::Neox;
  rp.n_ctx_orig = 2048;
  rp.freq_base = 1000.0f;
  rp.freq_scale = 0.5f;
  rp.ext_factor = 0.25f;
  rp.attn_factor = 2.0f;
  rp.beta_fast = 16.0f;
  rp.beta_slow = 3.0f;
  const Tensor* r = ops::rope(ctx, x, ctx.new_tensor(DType::I32, 3), nullptr, rp);
  EXPECT_EQ(r->params[1], 32);
  EXPECT_EQ(r->params[2], 2);
  EXPECT_EQ(r->params[4], 2048);
  EXPECT_EQ(raw_f(*r, 5), 1000.0f);
  EXPECT_EQ(raw_f(*r, 6), 0.5f);
  EXPECT_EQ(raw_f(*r, 7), 0.25f);
  EXPECT_EQ(raw_f(*r, 8), 2.0f);
  EXPECT_EQ(raw_f(*r, 9), 16.0f);
  EXPECT_EQ(raw_f(*r, 10), 3.0f);

  const Tensor* g = ops::group_norm(ctx, x, 3, 0.5f);
  EXPECT_EQ(g->params[0], 3);
  EXPECT_EQ(raw_f(*g, 1), 0.5f);

  const Tensor* p = ops::pad(ctx, x, {1, 2, 3, 4, 2, 1, 0, 1}, true);
  EXPECT_EQ((std::array<int32_t, 9>{p->params[0], p->params[1], p->params[2], p->params[3], p->params[4],
                                    p->params[5], p->params[6], p->params[7], p->params[8]}),
            (std::array<int32_t, 9>{1, 2, 3, 4, 2, 1, 0, 1, 1}));

  const Tensor* s = ops::soft_max(ctx, x, nullptr, 0.25f, 4.0f);
  EXPECT_EQ(raw_f(*s, 0), 0.25f);
  EXPECT_EQ(raw_f(*s, 1), 4.0f);

  EXPECT_EQ(ops::upscale(ctx, x, 128, 8, 3, 1, 1 | (1 << 8))->params[0], 1 | (1 << 8));

  // GLU as ggml_glu_impl and ggml_swiglu_oai pack it: op (GGML_GLU_OP_SWIGLU_OAI = 3), swapped, alpha, limit.
  const Tensor* glu = ops::glu(ctx, x, nullptr, GluParams{GluOp::SwigluOai, true, 1.702f, 7.0f});
  EXPECT_EQ(glu->params[0], 3);
  EXPECT_EQ(glu->params[1], 1);
  EXPECT_EQ(raw_f(*glu, 2), 1.702f);
  EXPECT_EQ(raw_f(*glu, 3), 7.0f);
  const GluParams gp = glu_params(*ops::swiglu_oai(ctx, x, x, 1.5f, 3.0f));
  EXPECT_EQ(gp.op, GluOp::SwigluOai);
  EXPECT_FALSE(gp.swapped);
  EXPECT_EQ(gp.alpha, 1.5f);
  EXPECT_EQ(gp.limit, 3.0f);
}

TEST(OpParams, ReadingAnotherOpsParamsIsAnError) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 64, 4, 3);
  Tensor* sm = ops::soft_max(ctx, x);
  try {
    (void)rope_params(*sm);
    ADD_FAILURE() << "rope_params of a SOFT_MAX node did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("rope_params"), std::string::npos) << what;
    EXPECT_NE(what.find("SOFT_MAX"), std::string::npos) << what;
    EXPECT_NE(what.find("ROPE"), std::string::npos) << what;
  }
  EXPECT_THROW((void)soft_max_params(*ops::rms_norm(ctx, x, 1e-5f)), Error);
  EXPECT_THROW((void)norm_params(*ops::group_norm(ctx, x, 2, 1e-5f)), Error);
  EXPECT_THROW((void)unary_op(*ops::sqr(ctx, x)), Error);
  EXPECT_THROW((void)acc_params(*x), Error);  // a leaf has no parameters
}
