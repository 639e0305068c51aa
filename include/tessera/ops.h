#pragma once
// Op builders: each validates types and shapes (throwing tessera::Error that names the op and
// its operands) and returns a new node whose semantics are those of ../shared/OPS.md (ggml's).
#include <array>
#include <cstdint>

#include "tessera/context.h"
#include "tessera/op_params.h"
#include "tessera/tensor.h"

namespace tessera::ops {

// The parameter structs live in tessera/op_params.h; the alias keeps ops::rope(..., ops::RopeParams).
using RopeParams = tessera::RopeParams;

// ---- views (metadata only) ----
Tensor* reshape(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
// Byte-strided view: nb[0] is implied by the type; nb1..nb3 given.
Tensor* view(Context& ctx, Tensor* a, const std::array<int64_t, 4>& ne, size_t nb1, size_t nb2, size_t nb3,
             size_t offset);
// Source dim i goes to result dim axis_i (ggml_permute).
Tensor* permute(Context& ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3);
Tensor* transpose(Context& ctx, Tensor* a);  // swaps dims 0 and 1

// ---- copying and shape ----
Tensor* dup(Context& ctx, Tensor* a);
Tensor* cont(Context& ctx, Tensor* a);
Tensor* cpy(Context& ctx, Tensor* a, Tensor* b);  // result is a view of b
Tensor* repeat(Context& ctx, Tensor* a, Tensor* shape_like);
Tensor* get_rows(Context& ctx, Tensor* a, Tensor* indices);
Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim);

// ---- elementwise ----
Tensor* add(Context& ctx, Tensor* a, Tensor* b);
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);
Tensor* div(Context& ctx, Tensor* a, Tensor* b);
// dst = a; dst bytes at offset + 4*i0 + i1*nb1 + i2*nb2 + i3*nb3 += b[i].
Tensor* acc(Context& ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
// ggml_add_id: a F32 [ne0, ne1, ne2, 1] plus rows of b F32 [ne0, n_rows] chosen by ids I32 [ne1, ne2]
// (each in [0, n_rows)): dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]] (the experts' biases).
Tensor* add_id(Context& ctx, Tensor* a, Tensor* b, Tensor* ids);
Tensor* unary(Context& ctx, Tensor* a, UnaryOp op);
inline Tensor* gelu(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::Gelu); }
inline Tensor* gelu_quick(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::GeluQuick); }
inline Tensor* silu(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::Silu); }
inline Tensor* tanh(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::Tanh); }
inline Tensor* relu(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::Relu); }
inline Tensor* hardsigmoid(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::HardSigmoid); }
inline Tensor* hardswish(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::HardSwish); }
Tensor* leaky_relu(Context& ctx, Tensor* a, float slope);
Tensor* scale(Context& ctx, Tensor* a, float s, float bias = 0.0f);
Tensor* sqr(Context& ctx, Tensor* a);
Tensor* clamp(Context& ctx, Tensor* a, float min, float max);
// GLU (tessera/op_params.h, GluParams): gate a and up b F32 of one shape, result a's shape; or b null
// and a's rows [gate, up] (ne0 even), result ne0 / 2. Rows of a and b must be contiguous.
Tensor* glu(Context& ctx, Tensor* a, Tensor* b, const GluParams& p);
// gpt-oss's clamped SwiGLU (ggml_swiglu_oai).
inline Tensor* swiglu_oai(Context& ctx, Tensor* gate, Tensor* up, float alpha, float limit) {
  return glu(ctx, gate, up, GluParams{GluOp::SwigluOai, false, alpha, limit});
}

// ---- norms ----
Tensor* norm(Context& ctx, Tensor* a, float eps);
Tensor* rms_norm(Context& ctx, Tensor* a, float eps);
Tensor* group_norm(Context& ctx, Tensor* a, int n_groups, float eps);

// ---- resampling, padding, generators ----
// mode 0 = nearest (bilinear = 1, align-corners flag = 1 << 8).
Tensor* upscale(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                int32_t mode = 0);
// pads = {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3}
Tensor* pad(Context& ctx, Tensor* a, const std::array<int32_t, 8>& pads, bool circular = false);
Tensor* arange(Context& ctx, float start, float stop, float step);
Tensor* timestep_embedding(Context& ctx, Tensor* timesteps, int dim, int max_period);

// ---- matmul, masking, softmax, rope ----
Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b);
// Mixture-of-experts product (ggml's MUL_MAT_ID): as = expert weights [K, M, n_as]; b F32/F16
// [K, B1, T]; ids I32 [n_used, T] (any strides; n_used % B1 == 0), each in [0, n_as). Result F32
// [M, n_used, T]: dst[:, e, t] = as[:, :, ids[e, t]] b[:, e % B1, t].
Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids);
Tensor* diag_mask_inf(Context& ctx, Tensor* a, int n_past);
// sinks: optional F32 [a.ne2], one logit per head (ggml_soft_max_add_sinks) that joins each row's
// denominator, exp(sink - max) with max over the row and the sink, and attends to nothing.
Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask = nullptr, float scale = 1.0f, float max_bias = 0.0f,
                 Tensor* sinks = nullptr);

// Fused attention with ggml's FLASH_ATTN_EXT semantics: q F32 [D, n_q, H, B]; k [D, n_kv, H_kv, B_kv]
// and v [D_v, n_kv, H_kv, B_kv], both F32 or both F16, any strides (v may be a transposed view);
// optional mask F16/F32 [n_kv, >= n_q, M2, M3] tiling the heads and batches. Result F32
// [D_v, H, n_q, B] (heads before queries, as ggml's). Per query row and head h:
// s = scale * (k^T q), then s = softcap * tanh(s / softcap) when softcap > 0, then
// s += slope(h) * mask (ALiBi slopes of SOFT_MAX when max_bias > 0), out = v softmax(s).
// K/V heads are shared by groups of H / H_kv query heads. A row whose every s is -inf gives zeros.
// With F16 k/v, q and softmax(s) are rounded to f16 before they multiply k and v (the composed ops
// under MUL_MAT's rule for F16 weights, as llama.cpp computes attention without flash attention);
// online_softmax keeps them in f32 and so agrees to that rounding. How it is computed is the backend's
// choice: the CPU runs the composed ops' kernels per group of query rows where V is the KV cache's transposed
// view (over only the span of cells the group's mask rows leave visible: a cell whose s is -inf weighs
// exactly 0), else its online softmax, which online_softmax asks for always; the scheduler runs it as
// MUL_MAT, SOFT_MAX, MUL_MAT on a device that lacks it (docs/ARCHITECTURE.md, "CPU attention"). sinks:
// optional F32 [H], one logit per query head that joins every row's softmax denominator
// (ggml_flash_attn_ext_add_sinks; gpt-oss) and attends to nothing.
Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       float max_bias = 0.0f, float softcap = 0.0f, bool online_softmax = false,
                       Tensor* sinks = nullptr);

// a: [D, H, T, B] F32/F16; positions: I32 [T]; freq_factors: optional F32 [n_dims/2].
Tensor* rope(Context& ctx, Tensor* a, Tensor* positions, Tensor* freq_factors, const RopeParams& p);

// ---- convolution, pooling, reductions, sorting ----
Tensor* im2col(Context& ctx, Tensor* kernel, Tensor* input, int s0, int s1, int p0, int p1, int d0, int d1,
               bool is_2d, DType dst_type);
Tensor* pool_2d(Context& ctx, Tensor* a, PoolOp op, int k0, int k1, int s0, int s1, int p0, int p1);
Tensor* sum_rows(Context& ctx, Tensor* a);
Tensor* argsort(Context& ctx, Tensor* a, SortOrder order);

}  // namespace tessera::ops
