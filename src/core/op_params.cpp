// Typed op parameters packed into Tensor::params with the layout of ../shared/OPS.md (ggml's
// indices; floats stored bitwise). This file is the only place that knows the indices.
#include "tessera/op_params.h"

#include <cstring>
#include <initializer_list>

#include "core/check.h"
#include "core/op_params_store.h"

namespace tessera {
namespace {

int32_t get_i(const Tensor& t, int i) { return t.params[static_cast<size_t>(i)]; }
float get_f(const Tensor& t, int i) {
  float f;
  std::memcpy(&f, &t.params[static_cast<size_t>(i)], sizeof f);
  return f;
}
void set_i(Tensor& t, int i, int32_t v) { t.params[static_cast<size_t>(i)] = v; }
void set_f(Tensor& t, int i, float v) { std::memcpy(&t.params[static_cast<size_t>(i)], &v, sizeof v); }

// The accessor `what` of op `ops` was asked for a node of another op: a caller's mistake.
void expect_op(const Tensor& node, std::initializer_list<Op> ops, const char* what) {
  for (Op op : ops)
    if (node.op == op) return;
  raise(ErrorCode::InvalidArgument, "{}: node {} is a {} node, not {}", what, node.describe(),
        op_name(node.op), op_name(*ops.begin()));
}

constexpr int32_t kAlignCornersFlag = 1 << 8;  // UPSCALE mode bit (ggml's GGML_SCALE_FLAG_ALIGN_CORNERS)

}  // namespace

// ---------------------------------------------------------------- readers

PermuteAxes permute_axes(const Tensor& node) {
  expect_op(node, {Op::Permute}, "permute_axes");
  PermuteAxes p;
  for (int d = 0; d < 4; ++d) p.axes[static_cast<size_t>(d)] = get_i(node, d);
  return p;
}

ConcatParams concat_params(const Tensor& node) {
  expect_op(node, {Op::Concat}, "concat_params");
  return {get_i(node, 0)};
}

AccParams acc_params(const Tensor& node) {
  expect_op(node, {Op::Acc}, "acc_params");
  // The builder checked that each fits in int32 and is >= 0.
  auto u = [&](int i) { return static_cast<size_t>(static_cast<uint32_t>(get_i(node, i))); };
  return {u(0), u(1), u(2), u(3)};
}

UnaryOp unary_op(const Tensor& node) {
  expect_op(node, {Op::Unary}, "unary_op");
  return static_cast<UnaryOp>(get_i(node, 0));
}

LeakyReluParams leaky_relu_params(const Tensor& node) {
  expect_op(node, {Op::LeakyRelu}, "leaky_relu_params");
  return {get_f(node, 0)};
}

ScaleParams scale_params(const Tensor& node) {
  expect_op(node, {Op::Scale}, "scale_params");
  return {get_f(node, 0), get_f(node, 1)};
}

ClampParams clamp_params(const Tensor& node) {
  expect_op(node, {Op::Clamp}, "clamp_params");
  return {get_f(node, 0), get_f(node, 1)};
}

GluParams glu_params(const Tensor& node) {
  expect_op(node, {Op::Glu}, "glu_params");
  return {static_cast<GluOp>(get_i(node, 0)), get_i(node, 1) != 0, get_f(node, 2), get_f(node, 3)};
}

NormParams norm_params(const Tensor& node) {
  expect_op(node, {Op::Norm, Op::RmsNorm}, "norm_params");
  return {get_f(node, 0)};
}

GroupNormParams group_norm_params(const Tensor& node) {
  expect_op(node, {Op::GroupNorm}, "group_norm_params");
  return {get_i(node, 0), get_f(node, 1)};
}

UpscaleParams upscale_params(const Tensor& node) {
  expect_op(node, {Op::Upscale}, "upscale_params");
  const int32_t mode = get_i(node, 0);
  return {static_cast<UpscaleMode>(mode & 0xff), (mode & kAlignCornersFlag) != 0};
}

PadParams pad_params(const Tensor& node) {
  expect_op(node, {Op::Pad}, "pad_params");
  PadParams p;
  for (size_t d = 0; d < 4; ++d) {
    p.left[d] = get_i(node, static_cast<int>(2 * d));
    p.right[d] = get_i(node, static_cast<int>(2 * d + 1));
  }
  p.circular = get_i(node, 8) != 0;
  return p;
}

ArangeParams arange_params(const Tensor& node) {
  expect_op(node, {Op::Arange}, "arange_params");
  return {get_f(node, 0), get_f(node, 1), get_f(node, 2)};
}

TimestepEmbeddingParams timestep_embedding_params(const Tensor& node) {
  expect_op(node, {Op::TimestepEmbedding}, "timestep_embedding_params");
  return {get_i(node, 0), get_i(node, 1)};
}

DiagMaskInfParams diag_mask_inf_params(const Tensor& node) {
  expect_op(node, {Op::DiagMaskInf}, "diag_mask_inf_params");
  return {get_i(node, 0)};
}

SoftMaxParams soft_max_params(const Tensor& node) {
  expect_op(node, {Op::SoftMax}, "soft_max_params");
  return {get_f(node, 0), get_f(node, 1)};
}

RopeParams rope_params(const Tensor& node) {
  expect_op(node, {Op::Rope}, "rope_params");
  RopeParams p;
  p.n_dims = get_i(node, 1);
  p.mode = static_cast<RopeMode>(get_i(node, 2));
  p.n_ctx_orig = get_i(node, 4);
  p.freq_base = get_f(node, 5);
  p.freq_scale = get_f(node, 6);
  p.ext_factor = get_f(node, 7);
  p.attn_factor = get_f(node, 8);
  p.beta_fast = get_f(node, 9);
  p.beta_slow = get_f(node, 10);
  return p;
}

FlashAttnParams flash_attn_params(const Tensor& node) {
  expect_op(node, {Op::FlashAttnExt}, "flash_attn_params");
  return {get_f(node, 0), get_f(node, 1), get_f(node, 2), get_i(node, 4) != 0};
}

Im2ColParams im2col_params(const Tensor& node) {
  expect_op(node, {Op::Im2Col}, "im2col_params");
  return {get_i(node, 0), get_i(node, 1), get_i(node, 2),     get_i(node, 3),
          get_i(node, 4), get_i(node, 5), get_i(node, 6) != 0};
}

Pool2DParams pool_2d_params(const Tensor& node) {
  expect_op(node, {Op::Pool2D}, "pool_2d_params");
  return {static_cast<PoolOp>(get_i(node, 0)),
          get_i(node, 1),
          get_i(node, 2),
          get_i(node, 3),
          get_i(node, 4),
          get_i(node, 5),
          get_i(node, 6)};
}

SortOrder argsort_order(const Tensor& node) {
  expect_op(node, {Op::Argsort}, "argsort_order");
  return static_cast<SortOrder>(get_i(node, 0));
}

// ---------------------------------------------------------------- writers (the builders only)

namespace detail {

void store_params(Tensor& node, const PermuteAxes& p) {
  expect_op(node, {Op::Permute}, "store_params");
  for (int d = 0; d < 4; ++d) set_i(node, d, p.axes[static_cast<size_t>(d)]);
}

void store_params(Tensor& node, const ConcatParams& p) {
  expect_op(node, {Op::Concat}, "store_params");
  set_i(node, 0, p.dim);
}

void store_params(Tensor& node, const AccParams& p) {
  expect_op(node, {Op::Acc}, "store_params");
  set_i(node, 0, static_cast<int32_t>(p.nb1));
  set_i(node, 1, static_cast<int32_t>(p.nb2));
  set_i(node, 2, static_cast<int32_t>(p.nb3));
  set_i(node, 3, static_cast<int32_t>(p.offset));
  set_i(node, 4, 0);  // not in place
}

void store_params(Tensor& node, UnaryOp op) {
  expect_op(node, {Op::Unary}, "store_params");
  set_i(node, 0, static_cast<int32_t>(op));
}

void store_params(Tensor& node, const LeakyReluParams& p) {
  expect_op(node, {Op::LeakyRelu}, "store_params");
  set_f(node, 0, p.slope);
}

void store_params(Tensor& node, const ScaleParams& p) {
  expect_op(node, {Op::Scale}, "store_params");
  set_f(node, 0, p.scale);
  set_f(node, 1, p.bias);
}

void store_params(Tensor& node, const ClampParams& p) {
  expect_op(node, {Op::Clamp}, "store_params");
  set_f(node, 0, p.min);
  set_f(node, 1, p.max);
}

void store_params(Tensor& node, const GluParams& p) {
  expect_op(node, {Op::Glu}, "store_params");
  set_i(node, 0, static_cast<int32_t>(p.op));
  set_i(node, 1, p.swapped ? 1 : 0);
  set_f(node, 2, p.alpha);
  set_f(node, 3, p.limit);
}

void store_params(Tensor& node, const NormParams& p) {
  expect_op(node, {Op::Norm, Op::RmsNorm}, "store_params");
  set_f(node, 0, p.eps);
}

void store_params(Tensor& node, const GroupNormParams& p) {
  expect_op(node, {Op::GroupNorm}, "store_params");
  set_i(node, 0, p.n_groups);
  set_f(node, 1, p.eps);
}

void store_params(Tensor& node, const UpscaleParams& p) {
  expect_op(node, {Op::Upscale}, "store_params");
  set_i(node, 0, static_cast<int32_t>(p.mode) | (p.align_corners ? kAlignCornersFlag : 0));
}

void store_params(Tensor& node, const PadParams& p) {
  expect_op(node, {Op::Pad}, "store_params");
  for (size_t d = 0; d < 4; ++d) {
    set_i(node, static_cast<int>(2 * d), p.left[d]);
    set_i(node, static_cast<int>(2 * d + 1), p.right[d]);
  }
  set_i(node, 8, p.circular ? 1 : 0);
}

void store_params(Tensor& node, const ArangeParams& p) {
  expect_op(node, {Op::Arange}, "store_params");
  set_f(node, 0, p.start);
  set_f(node, 1, p.stop);
  set_f(node, 2, p.step);
}

void store_params(Tensor& node, const TimestepEmbeddingParams& p) {
  expect_op(node, {Op::TimestepEmbedding}, "store_params");
  set_i(node, 0, p.dim);
  set_i(node, 1, p.max_period);
}

void store_params(Tensor& node, const DiagMaskInfParams& p) {
  expect_op(node, {Op::DiagMaskInf}, "store_params");
  set_i(node, 0, p.n_past);
}

void store_params(Tensor& node, const SoftMaxParams& p) {
  expect_op(node, {Op::SoftMax}, "store_params");
  set_f(node, 0, p.scale);
  set_f(node, 1, p.max_bias);
}

void store_params(Tensor& node, const RopeParams& p) {
  expect_op(node, {Op::Rope}, "store_params");
  set_i(node, 1, p.n_dims);
  set_i(node, 2, static_cast<int32_t>(p.mode));
  set_i(node, 4, p.n_ctx_orig);
  set_f(node, 5, p.freq_base);
  set_f(node, 6, p.freq_scale);
  set_f(node, 7, p.ext_factor);
  set_f(node, 8, p.attn_factor);
  set_f(node, 9, p.beta_fast);
  set_f(node, 10, p.beta_slow);
}

void store_params(Tensor& node, const FlashAttnParams& p) {
  expect_op(node, {Op::FlashAttnExt}, "store_params");
  set_f(node, 0, p.scale);
  set_f(node, 1, p.max_bias);
  set_f(node, 2, p.softcap);
  set_i(node, 3, 0);                         // ggml's precision slot: the default (we always compute in f32)
  set_i(node, 4, p.online_softmax ? 1 : 0);  // ours: a kernel choice, past ggml's slots
}

void store_params(Tensor& node, const Im2ColParams& p) {
  expect_op(node, {Op::Im2Col}, "store_params");
  const int32_t v[7] = {p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, p.is_2d ? 1 : 0};
  for (int i = 0; i < 7; ++i) set_i(node, i, v[i]);
}

void store_params(Tensor& node, const Pool2DParams& p) {
  expect_op(node, {Op::Pool2D}, "store_params");
  const int32_t v[7] = {static_cast<int32_t>(p.op), p.k0, p.k1, p.s0, p.s1, p.p0, p.p1};
  for (int i = 0; i < 7; ++i) set_i(node, i, v[i]);
}

void store_params(Tensor& node, SortOrder order) {
  expect_op(node, {Op::Argsort}, "store_params");
  set_i(node, 0, static_cast<int32_t>(order));
}

}  // namespace detail
}  // namespace tessera
