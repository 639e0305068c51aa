#pragma once
// Typed op parameters: one struct per op that has parameters. The op builders (tessera/ops.h)
// validate and store them; backends read them back with the accessor of the node's op
// (rope_params(node), soft_max_params(node), ...). Only core knows how they are packed into
// Tensor::params (16 x int32, the layout of ../shared/OPS.md). Reading the parameters of a node
// whose op is another one raises Error(InvalidArgument).
#include <array>
#include <cstddef>
#include <cstdint>

#include "tessera/tensor.h"

namespace tessera {

// PERMUTE: source dim d goes to result dim axes[d].
struct PermuteAxes {
  std::array<int, 4> axes{0, 1, 2, 3};
};

// CONCAT: the dim along which b follows a.
struct ConcatParams {
  int dim = 0;
};

// ACC: dst = a; dst bytes at offset + 4*i0 + i1*nb1 + i2*nb2 + i3*nb3 += b[i].
struct AccParams {
  size_t nb1 = 0, nb2 = 0, nb3 = 0;
  size_t offset = 0;
};

struct LeakyReluParams {
  float slope = 0.0f;
};

// SCALE: y = x * scale + bias.
struct ScaleParams {
  float scale = 1.0f;
  float bias = 0.0f;
};

// CLAMP: y = max(min(x, max), min).
struct ClampParams {
  float min = 0.0f;
  float max = 0.0f;
};

// GLU (ggml's gated linear units, split form: gate a, up b): SWIGLU_OAI is
// y = min(a, limit) * sigmoid(alpha * min(a, limit)) * (clamp(b, -limit, limit) + 1).
// Fused form (b absent): a's row holds gate then up halves (swapped: up then gate).
struct GluParams {
  GluOp op = GluOp::SwigluOai;
  bool swapped = false;
  float alpha = 1.702f;
  float limit = 7.0f;
};

// NORM and RMS_NORM.
struct NormParams {
  float eps = 0.0f;
};

struct GroupNormParams {
  int n_groups = 1;
  float eps = 0.0f;
};

enum class UpscaleMode : int32_t { Nearest = 0, Bilinear = 1 };
struct UpscaleParams {
  UpscaleMode mode = UpscaleMode::Nearest;
  bool align_corners = false;  // bilinear only: corner samples land on corner pixels
};

// PAD: left/right padding per dim; circular wraps instead of filling zeros.
struct PadParams {
  std::array<int32_t, 4> left{};
  std::array<int32_t, 4> right{};
  bool circular = false;
};

struct ArangeParams {
  float start = 0.0f, stop = 0.0f, step = 1.0f;
};

struct TimestepEmbeddingParams {
  int dim = 0;
  int max_period = 10000;
};

struct DiagMaskInfParams {
  int n_past = 0;
};

// SOFT_MAX: w = x * scale + slope(head) * mask; ALiBi slopes when max_bias > 0.
struct SoftMaxParams {
  float scale = 1.0f;
  float max_bias = 0.0f;
};

// FLASH_ATTN_EXT (ops.h): the scale of K^T q, ALiBi's max_bias, the logit soft-cap (0: none);
// online_softmax asks the CPU for its fused online-softmax kernel whatever the shapes (a kernel
// choice, not a semantic: see ops.h).
struct FlashAttnParams {
  float scale = 1.0f;
  float max_bias = 0.0f;
  float softcap = 0.0f;
  bool online_softmax = false;
};

struct RopeParams {
  int n_dims = 0;
  RopeMode mode = RopeMode::Normal;
  int n_ctx_orig = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;  // != 0 enables YaRN
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

// IM2COL: strides, paddings and dilations in (width, height); 1-D uses only the first of each.
struct Im2ColParams {
  int s0 = 1, s1 = 1, p0 = 0, p1 = 0, d0 = 1, d1 = 1;
  bool is_2d = false;
};

struct Pool2DParams {
  PoolOp op = PoolOp::Max;
  int k0 = 1, k1 = 1, s0 = 1, s1 = 1, p0 = 0, p1 = 0;
};

// ---- accessors (each checks the node's op) ----
PermuteAxes permute_axes(const Tensor& node);
ConcatParams concat_params(const Tensor& node);
AccParams acc_params(const Tensor& node);
UnaryOp unary_op(const Tensor& node);
LeakyReluParams leaky_relu_params(const Tensor& node);
ScaleParams scale_params(const Tensor& node);
ClampParams clamp_params(const Tensor& node);
GluParams glu_params(const Tensor& node);
NormParams norm_params(const Tensor& node);  // NORM or RMS_NORM
GroupNormParams group_norm_params(const Tensor& node);
UpscaleParams upscale_params(const Tensor& node);
PadParams pad_params(const Tensor& node);
ArangeParams arange_params(const Tensor& node);
TimestepEmbeddingParams timestep_embedding_params(const Tensor& node);
DiagMaskInfParams diag_mask_inf_params(const Tensor& node);
SoftMaxParams soft_max_params(const Tensor& node);
RopeParams rope_params(const Tensor& node);
FlashAttnParams flash_attn_params(const Tensor& node);
Im2ColParams im2col_params(const Tensor& node);
Pool2DParams pool_2d_params(const Tensor& node);
SortOrder argsort_order(const Tensor& node);

}  // namespace tessera
