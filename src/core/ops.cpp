// Op builders: shape and type rules of ../shared/OPS.md. Every violation raises an Error that
// names the op and its operands.
#include "tessera/ops.h"

#include <cmath>
#include <initializer_list>

#include "core/check.h"
#include "core/op_params_store.h"
#include "tessera/op_types.h"
#include "tessera/quant.h"

namespace tessera::ops {
namespace {

std::string operands(std::initializer_list<const Tensor*> ts) {
  std::string s;
  for (const Tensor* t : ts) {
    if (t == nullptr) continue;
    if (!s.empty()) s += ", ";
    s += t->describe();
  }
  return s;
}

// Throws "OP: why (operands)" unless cond holds.
template <typename... Args>
void require(bool cond, Op op, std::initializer_list<const Tensor*> ts, fmt::format_string<Args...> why,
             Args&&... args) {
  if (cond) return;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("{}: {} (operands: {})", op_name(op), fmt::format(why, std::forward<Args>(args)...),
                          operands(ts)));
}

void require_not_null(Op op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t == nullptr)
      throw Error(ErrorCode::InvalidArgument, fmt::format("{}: operand is null", op_name(op)));
}

// UPSCALE's mode argument: mode in the low byte, align-corners in bit 8 (ops.h).
constexpr int32_t kAlignCorners = 1 << 8;

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Every builder's last check: the op x type table (op_types.h) defines these types. The builders'
// own checks give the precise messages; this one catches what the table leaves out on purpose,
// such as a weight type whose kernels are not written yet.
void require_in_table(Op op, DType result, std::initializer_list<Tensor*> srcs) {
  OpTypes types;
  types.result = result;
  size_t i = 0;
  for (const Tensor* s : srcs) types.src[i++] = s != nullptr ? std::optional<DType>(s->type) : std::nullopt;
  if (!op_types_defined(op, types))
    throw Error(ErrorCode::Unsupported,
                fmt::format("{}: the types {} are not supported", op_name(op), describe(types)));
}

Tensor* make_node(Context& ctx, Op op, DType type, const std::array<int64_t, 4>& ne,
                  std::initializer_list<Tensor*> srcs) {
  require_in_table(op, type, srcs);
  Tensor* t = ctx.new_tensor(type, std::span<const int64_t>(ne.data(), 4));
  t->op = op;
  size_t i = 0;
  for (Tensor* s : srcs) t->src[i++] = s;
  return t;
}

Tensor* make_view(Context& ctx, Op op, Tensor* a, const std::array<int64_t, 4>& ne,
                  const std::array<size_t, 4>& nb, size_t offset) {
  Tensor* t = ctx.new_view(a, a->type, ne, nb, offset);
  t->op = op;
  t->src[0] = a;
  if (!a->name.empty()) t->name = a->name + " (view)";
  return t;
}

Tensor* same_as(Context& ctx, Op op, Tensor* a, std::initializer_list<Tensor*> srcs) {
  return make_node(ctx, op, a->type, a->ne, srcs);
}

}  // namespace

// ---------------------------------------------------------------- views

Tensor* reshape(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  require_not_null(Op::Reshape, {a});
  require(a->is_contiguous(), Op::Reshape, {a}, "source must be contiguous");
  require(ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0, Op::Reshape, {a}, "negative dimension");
  require(ne0 * ne1 * ne2 * ne3 == a->nelements(), Op::Reshape, {a},
          "[{}, {}, {}, {}] has a different element count", ne0, ne1, ne2, ne3);
  require(ne0 % traits(a->type).block_size == 0, Op::Reshape, {a},
          "ne0 {} is not a multiple of the block size", ne0);
  const std::array<int64_t, 4> ne{ne0, ne1, ne2, ne3};
  return make_view(ctx, Op::Reshape, a, ne, contiguous_strides(a->type, ne), 0);
}

Tensor* view(Context& ctx, Tensor* a, const std::array<int64_t, 4>& ne, size_t nb1, size_t nb2, size_t nb3,
             size_t offset) {
  require_not_null(Op::View, {a});
  for (int d = 0; d < 4; ++d) require(ne[d] >= 1, Op::View, {a}, "ne[{}] = {} must be >= 1", d, ne[d]);
  require(ne[0] % traits(a->type).block_size == 0, Op::View, {a},
          "ne0 {} is not a multiple of the block size", ne[0]);
  const std::array<size_t, 4> nb{traits(a->type).block_bytes, nb1, nb2, nb3};
  Tensor probe;
  probe.type = a->type;
  probe.ne = ne;
  probe.nb = nb;
  require(offset + probe.nbytes() <= a->nbytes(), Op::View, {a},
          "view of {} bytes at offset {} exceeds the source's {} bytes", probe.nbytes(), offset, a->nbytes());
  return make_view(ctx, Op::View, a, ne, nb, offset);
}

Tensor* permute(Context& ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3) {
  require_not_null(Op::Permute, {a});
  const int axes[4] = {axis0, axis1, axis2, axis3};
  bool seen[4] = {false, false, false, false};
  for (int ax : axes) {
    require(ax >= 0 && ax < 4, Op::Permute, {a}, "axis {} out of range", ax);
    require(!seen[ax], Op::Permute, {a}, "axis {} repeated", ax);
    seen[ax] = true;
  }
  std::array<int64_t, 4> ne{};
  std::array<size_t, 4> nb{};
  for (int d = 0; d < 4; ++d) {
    ne[axes[d]] = a->ne[d];
    nb[axes[d]] = a->nb[d];
  }
  Tensor* t = make_view(ctx, Op::Permute, a, ne, nb, 0);
  detail::store_params(*t, PermuteAxes{{axis0, axis1, axis2, axis3}});
  return t;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  require_not_null(Op::Transpose, {a});
  std::array<int64_t, 4> ne = a->ne;
  std::array<size_t, 4> nb = a->nb;
  std::swap(ne[0], ne[1]);
  std::swap(nb[0], nb[1]);
  return make_view(ctx, Op::Transpose, a, ne, nb, 0);
}

// ---------------------------------------------------------------- copying and shape

Tensor* dup(Context& ctx, Tensor* a) {
  require_not_null(Op::Dup, {a});
  require(!is_quantized(a->type) || a->rows_contiguous(), Op::Dup, {a},
          "quantized source must have whole rows");
  return same_as(ctx, Op::Dup, a, {a});
}

Tensor* cont(Context& ctx, Tensor* a) {
  require_not_null(Op::Cont, {a});
  require(!is_quantized(a->type) || a->rows_contiguous(), Op::Cont, {a},
          "quantized source must have whole rows");
  return same_as(ctx, Op::Cont, a, {a});
}

Tensor* cpy(Context& ctx, Tensor* a, Tensor* b) {
  require_not_null(Op::Cpy, {a, b});
  require(a->nelements() == b->nelements(), Op::Cpy, {a, b}, "element counts differ ({} vs {})",
          a->nelements(), b->nelements());
  require(a->type != DType::I32 || b->type == DType::I32 || b->type == DType::F32, Op::Cpy, {a, b},
          "i32 copies only to i32 or f32");
  if (is_quantized(b->type)) {
    require(b->is_contiguous(), Op::Cpy, {a, b}, "a quantized destination must be contiguous");
    require(a->ne[0] % traits(b->type).block_size == 0, Op::Cpy, {a, b},
            "quantizing to {} needs ne0 % {} == 0 in the source", name(b->type), traits(b->type).block_size);
    require(a->ne[0] == b->ne[0] || a->is_contiguous(), Op::Cpy, {a, b},
            "quantizing needs source rows that match destination rows");
  }
  if (is_quantized(a->type))
    require(a->rows_contiguous(), Op::Cpy, {a, b}, "a quantized source must have whole rows");
  require_in_table(Op::Cpy, b->type, {a, b});
  Tensor* t = make_view(ctx, Op::Cpy, b, b->ne, b->nb, 0);
  t->src[0] = a;
  t->src[1] = b;
  t->name =
      b->name.empty() ? std::string() : b->name + " (copy of " + (a->name.empty() ? "tensor" : a->name) + ")";
  return t;
}

Tensor* repeat(Context& ctx, Tensor* a, Tensor* shape_like) {
  require_not_null(Op::Repeat, {a, shape_like});
  require(!is_quantized(a->type), Op::Repeat, {a, shape_like}, "quantized types are not supported");
  for (int d = 0; d < 4; ++d)
    require(a->ne[d] > 0 && shape_like->ne[d] % a->ne[d] == 0, Op::Repeat, {a, shape_like},
            "target ne[{}] = {} is not a multiple of {}", d, shape_like->ne[d], a->ne[d]);
  return make_node(ctx, Op::Repeat, a->type, shape_like->ne, {a});
}

Tensor* get_rows(Context& ctx, Tensor* a, Tensor* indices) {
  require_not_null(Op::GetRows, {a, indices});
  require(indices->type == DType::I32, Op::GetRows, {a, indices}, "indices must be i32");
  require(indices->ne[3] == 1, Op::GetRows, {a, indices}, "indices must have ne3 == 1");
  require(a->ne[2] == indices->ne[1] && a->ne[3] == indices->ne[2], Op::GetRows, {a, indices},
          "a.ne2/ne3 must equal indices.ne1/ne2");
  const DType out = a->type == DType::I32 ? DType::I32 : DType::F32;
  return make_node(ctx, Op::GetRows, out, {a->ne[0], indices->ne[0], indices->ne[1], indices->ne[2]},
                   {a, indices});
}

Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim) {
  require_not_null(Op::Concat, {a, b});
  require(dim >= 0 && dim < 4, Op::Concat, {a, b}, "dim {} out of range", dim);
  require(a->type == b->type, Op::Concat, {a, b}, "types differ");
  require(!is_quantized(a->type), Op::Concat, {a, b}, "quantized types are not supported");
  std::array<int64_t, 4> ne = a->ne;
  for (int d = 0; d < 4; ++d)
    if (d != dim) require(a->ne[d] == b->ne[d], Op::Concat, {a, b}, "ne[{}] differs", d);
  ne[dim] += b->ne[dim];
  Tensor* t = make_node(ctx, Op::Concat, a->type, ne, {a, b});
  detail::store_params(*t, ConcatParams{dim});
  return t;
}

// ---------------------------------------------------------------- elementwise

namespace {
Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  require_not_null(op, {a, b});
  const bool types_ok = (a->type == DType::F32 && b->type == DType::F32) ||
                        (a->type == DType::F16 && b->type == DType::F16) ||
                        (a->type == DType::F16 && b->type == DType::F32);
  require(types_ok, op, {a, b}, "type mix {} {} is not supported (f32 f32, f16 f16, f16 f32)", name(a->type),
          name(b->type));
  for (int d = 0; d < 4; ++d)
    require(b->ne[d] > 0 && a->ne[d] % b->ne[d] == 0, op, {a, b}, "b.ne[{}] = {} does not tile a.ne[{}] = {}",
            d, b->ne[d], d, a->ne[d]);
  return same_as(ctx, op, a, {a, b});
}

Tensor* float_unary(Context& ctx, Op op, Tensor* a) {
  require_not_null(op, {a});
  require(a->type == DType::F32 || a->type == DType::F16, op, {a}, "needs f32 or f16");
  return same_as(ctx, op, a, {a});
}
}  // namespace

Tensor* add(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Add, a, b); }
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Mul, a, b); }
Tensor* div(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Div, a, b); }

Tensor* acc(Context& ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
  require_not_null(Op::Acc, {a, b});
  require(a->type == DType::F32 && b->type == DType::F32, Op::Acc, {a, b}, "needs f32");
  require(a->is_contiguous(), Op::Acc, {a, b}, "a must be contiguous");
  require(nb1 <= INT32_MAX && nb2 <= INT32_MAX && nb3 <= INT32_MAX && offset <= INT32_MAX, Op::Acc, {a, b},
          "strides and offset must fit in int32");
  // The last element written must lie inside a.
  const size_t last = offset + 4 * static_cast<size_t>(b->ne[0] - 1) +
                      static_cast<size_t>(b->ne[1] - 1) * nb1 + static_cast<size_t>(b->ne[2] - 1) * nb2 +
                      static_cast<size_t>(b->ne[3] - 1) * nb3;
  require(b->nelements() > 0 && last + 4 <= a->nbytes() && offset % 4 == 0, Op::Acc, {a, b},
          "b at offset {} with strides {}, {}, {} writes outside a's {} bytes", offset, nb1, nb2, nb3,
          a->nbytes());
  Tensor* t = same_as(ctx, Op::Acc, a, {a, b});
  detail::store_params(*t, AccParams{nb1, nb2, nb3, offset});
  return t;
}

Tensor* add_id(Context& ctx, Tensor* a, Tensor* b, Tensor* ids) {
  constexpr Op op = Op::AddId;
  require_not_null(op, {a, b, ids});
  const std::initializer_list<const Tensor*> all = {a, b, ids};
  require(a->type == DType::F32 && b->type == DType::F32 && ids->type == DType::I32, op, all,
          "needs f32 a and b, i32 ids");
  require(b->ne[0] == a->ne[0] && b->ne[2] == 1 && b->ne[3] == 1, op, all, "b must be [a.ne0 = {}, rows]",
          a->ne[0]);
  require(a->ne[3] == 1, op, all, "a must have at most 3 dims");
  require(ids->ne[0] == a->ne[1] && ids->ne[1] == a->ne[2] && ids->ne[2] == 1 && ids->ne[3] == 1, op, all,
          "ids must be [a.ne1 = {}, a.ne2 = {}]", a->ne[1], a->ne[2]);
  return same_as(ctx, op, a, {a, b, ids});
}

Tensor* unary(Context& ctx, Tensor* a, UnaryOp op) {
  require(static_cast<int>(op) >= 0 && static_cast<int>(op) < kUnaryOpCount, Op::Unary, {a},
          "unknown unary op {}", static_cast<int>(op));
  Tensor* t = float_unary(ctx, Op::Unary, a);
  detail::store_params(*t, op);
  return t;
}

Tensor* leaky_relu(Context& ctx, Tensor* a, float slope) {
  Tensor* t = float_unary(ctx, Op::LeakyRelu, a);
  detail::store_params(*t, LeakyReluParams{slope});
  return t;
}

Tensor* scale(Context& ctx, Tensor* a, float s, float bias) {
  Tensor* t = float_unary(ctx, Op::Scale, a);
  detail::store_params(*t, ScaleParams{s, bias});
  return t;
}

Tensor* sqr(Context& ctx, Tensor* a) { return float_unary(ctx, Op::Sqr, a); }

Tensor* clamp(Context& ctx, Tensor* a, float min, float max) {
  Tensor* t = float_unary(ctx, Op::Clamp, a);
  require(!(min > max), Op::Clamp, {a}, "min {} > max {}", min, max);
  detail::store_params(*t, ClampParams{min, max});
  return t;
}

Tensor* glu(Context& ctx, Tensor* a, Tensor* b, const GluParams& p) {
  constexpr Op op = Op::Glu;
  require_not_null(op, {a});
  require(p.op == GluOp::SwigluOai, op, {a, b}, "unknown GLU op {}", static_cast<int>(p.op));
  require(a->type == DType::F32 && (b == nullptr || b->type == DType::F32), op, {a, b}, "needs f32");
  require(a->rows_contiguous() && (b == nullptr || b->rows_contiguous()), op, {a, b},
          "rows must be contiguous");
  require(std::isfinite(p.alpha) && std::isfinite(p.limit), op, {a, b}, "alpha and limit must be finite");
  std::array<int64_t, 4> ne = a->ne;
  if (b != nullptr) {
    require(b->same_shape(*a), op, {a, b}, "gate and up must have the same shape");
    require(!p.swapped, op, {a, b}, "swapped applies to the fused form only");
  } else {
    require(a->ne[0] % 2 == 0, op, {a}, "a fused row needs an even ne0, got {}", a->ne[0]);
    ne[0] /= 2;
  }
  Tensor* t = make_node(ctx, op, DType::F32, ne, {a, b});
  detail::store_params(*t, p);
  return t;
}

// ---------------------------------------------------------------- norms

Tensor* norm(Context& ctx, Tensor* a, float eps) {
  require_not_null(Op::Norm, {a});
  require(a->type == DType::F32, Op::Norm, {a}, "needs f32");
  require(eps >= 0.0f, Op::Norm, {a}, "eps must be >= 0, got {:g}", eps);
  Tensor* t = same_as(ctx, Op::Norm, a, {a});
  detail::store_params(*t, NormParams{eps});
  return t;
}

Tensor* rms_norm(Context& ctx, Tensor* a, float eps) {
  require_not_null(Op::RmsNorm, {a});
  require(a->type == DType::F32, Op::RmsNorm, {a}, "needs f32");
  require(eps >= 0.0f, Op::RmsNorm, {a}, "eps must be >= 0, got {:g}", eps);
  Tensor* t = same_as(ctx, Op::RmsNorm, a, {a});
  detail::store_params(*t, NormParams{eps});
  return t;
}

Tensor* group_norm(Context& ctx, Tensor* a, int n_groups, float eps) {
  require_not_null(Op::GroupNorm, {a});
  require(a->type == DType::F32, Op::GroupNorm, {a}, "needs f32");
  require(n_groups >= 1, Op::GroupNorm, {a}, "n_groups {} must be >= 1", n_groups);
  require(eps >= 0.0f, Op::GroupNorm, {a}, "eps must be >= 0, got {:g}", eps);
  Tensor* t = same_as(ctx, Op::GroupNorm, a, {a});
  detail::store_params(*t, GroupNormParams{n_groups, eps});
  return t;
}

// ---------------------------------------------------------------- resampling, padding, generators

Tensor* upscale(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int32_t mode) {
  require_not_null(Op::Upscale, {a});
  require(a->type == DType::F32, Op::Upscale, {a}, "needs f32");
  require(ne0 >= 1 && ne1 >= 1 && ne2 >= 1 && ne3 >= 1, Op::Upscale, {a}, "output dims must be >= 1");
  require(a->nelements() > 0, Op::Upscale, {a}, "the source is empty");
  require(((mode & 0xff) == 0 || (mode & 0xff) == 1) && (mode & ~0x1ff) == 0, Op::Upscale, {a},
          "mode {} is not nearest (0) or bilinear (1)", mode);
  Tensor* t = make_node(ctx, Op::Upscale, DType::F32, {ne0, ne1, ne2, ne3}, {a});
  detail::store_params(*t, UpscaleParams{static_cast<UpscaleMode>(mode & 0xff), (mode & kAlignCorners) != 0});
  return t;
}

Tensor* pad(Context& ctx, Tensor* a, const std::array<int32_t, 8>& pads, bool circular) {
  require_not_null(Op::Pad, {a});
  require(a->type == DType::F32, Op::Pad, {a}, "needs f32");
  std::array<int64_t, 4> ne = a->ne;
  for (int d = 0; d < 4; ++d) {
    require(pads[2 * d] >= 0 && pads[2 * d + 1] >= 0, Op::Pad, {a}, "negative padding in dim {}", d);
    if (circular)
      require(pads[2 * d] <= a->ne[d] && pads[2 * d + 1] <= a->ne[d], Op::Pad, {a},
              "circular padding in dim {} exceeds the size", d);
    ne[d] += pads[2 * d] + pads[2 * d + 1];
  }
  Tensor* t = make_node(ctx, Op::Pad, DType::F32, ne, {a});
  PadParams p;
  for (size_t d = 0; d < 4; ++d) {
    p.left[d] = pads[2 * d];
    p.right[d] = pads[2 * d + 1];
  }
  p.circular = circular;
  detail::store_params(*t, p);
  return t;
}

Tensor* arange(Context& ctx, float start, float stop, float step) {
  if (!(step != 0.0f) || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step) ||
      (stop - start) / step <= 0.0f)
    raise(ErrorCode::InvalidArgument, "ARANGE: start {}, stop {}, step {} gives no elements", start, stop,
          step);
  // Counted in f32 as ggml does (ceilf((stop - start) / step)), so shapes agree bit for bit.
  const double n = std::ceil((stop - start) / step);
  if (n > static_cast<double>(INT32_MAX))
    raise(ErrorCode::InvalidArgument, "ARANGE: {} elements is too many", n);
  Tensor* t = make_node(ctx, Op::Arange, DType::F32, {static_cast<int64_t>(n), 1, 1, 1}, {});
  detail::store_params(*t, ArangeParams{start, stop, step});
  return t;
}

Tensor* timestep_embedding(Context& ctx, Tensor* timesteps, int dim, int max_period) {
  require_not_null(Op::TimestepEmbedding, {timesteps});
  require(timesteps->type == DType::F32, Op::TimestepEmbedding, {timesteps}, "needs f32 timesteps");
  require(timesteps->n_dims() == 1, Op::TimestepEmbedding, {timesteps}, "timesteps must be 1-D");
  require(dim >= 1 && max_period >= 1, Op::TimestepEmbedding, {timesteps},
          "dim {} and max_period {} must be >= 1", dim, max_period);
  Tensor* t = make_node(ctx, Op::TimestepEmbedding, DType::F32, {dim, timesteps->ne[0], 1, 1}, {timesteps});
  detail::store_params(*t, TimestepEmbeddingParams{dim, max_period});
  return t;
}

// ---------------------------------------------------------------- matmul, masking, softmax, rope

Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b) {
  require_not_null(Op::MulMat, {a, b});
  require(a->type != DType::I32, Op::MulMat, {a, b}, "weights cannot be i32");
  require(b->type == DType::F32 || b->type == DType::F16, Op::MulMat, {a, b}, "b must be f32 or f16");
  require(a->ne[0] == b->ne[0], Op::MulMat, {a, b}, "inner dimensions differ ({} vs {})", a->ne[0], b->ne[0]);
  require(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, Op::MulMat, {a, b},
          "b.ne2/ne3 must be multiples of a.ne2/ne3");
  require(!is_quantized(a->type) || a->rows_contiguous(), Op::MulMat, {a, b},
          "quantized weights need whole rows");
  require(b->nb[0] == traits(b->type).block_bytes || a->type == DType::F32, Op::MulMat, {a, b},
          "b must have contiguous elements in dim 0");
  return make_node(ctx, Op::MulMat, DType::F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
}

Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids) {
  constexpr Op op = Op::MulMatId;
  require_not_null(op, {as, b, ids});
  const std::initializer_list<const Tensor*> all = {as, b, ids};
  require(as->type != DType::I32, op, all, "weights cannot be i32");
  require(b->type == DType::F32 || b->type == DType::F16, op, all, "b must be f32 or f16");
  require(ids->type == DType::I32, op, all, "ids must be i32");
  require(as->ne[3] == 1, op, all, "the weights must be 3-D (one matrix per expert)");
  require(b->ne[3] == 1, op, all, "b must be 3-D");
  require(ids->ne[2] == 1 && ids->ne[3] == 1, op, all, "ids must be 2-D");
  require(ids->ne[1] == b->ne[2], op, all, "ids.ne1 {} must equal b.ne2 {} (one expert list per token)",
          ids->ne[1], b->ne[2]);
  require(as->ne[0] == b->ne[0], op, all, "inner dimensions differ ({} vs {})", as->ne[0], b->ne[0]);
  require(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0, op, all, "ids.ne0 {} must be a multiple of b.ne1 {}",
          ids->ne[0], b->ne[1]);
  require(!is_quantized(as->type) || as->rows_contiguous(), op, all, "quantized weights need whole rows");
  require(b->nb[0] == traits(b->type).block_bytes || as->type == DType::F32, op, all,
          "b must have contiguous elements in dim 0");
  return make_node(ctx, op, DType::F32, {as->ne[1], ids->ne[0], b->ne[2], 1}, {as, b, ids});
}

Tensor* diag_mask_inf(Context& ctx, Tensor* a, int n_past) {
  require_not_null(Op::DiagMaskInf, {a});
  require(a->type == DType::F32, Op::DiagMaskInf, {a}, "needs f32");
  require(n_past >= 0, Op::DiagMaskInf, {a}, "n_past {} must be >= 0", n_past);
  Tensor* t = same_as(ctx, Op::DiagMaskInf, a, {a});
  detail::store_params(*t, DiagMaskInfParams{n_past});
  return t;
}

Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask, float scale, float max_bias, Tensor* sinks) {
  require_not_null(Op::SoftMax, {a});
  require(a->type == DType::F32, Op::SoftMax, {a, mask}, "needs f32 input");
  require(max_bias >= 0.0f, Op::SoftMax, {a, mask}, "max_bias must be >= 0");
  if (mask != nullptr) {
    require(mask->type == DType::F32 || mask->type == DType::F16, Op::SoftMax, {a, mask},
            "mask must be f16 or f32");
    require(mask->ne[0] == a->ne[0], Op::SoftMax, {a, mask}, "mask.ne0 must equal a.ne0");
    require(mask->ne[1] >= a->ne[1], Op::SoftMax, {a, mask}, "mask.ne1 must be >= a.ne1");
    require(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0, Op::SoftMax, {a, mask},
            "mask.ne2/ne3 must tile a.ne2/ne3");
  }
  if (sinks != nullptr)
    require(sinks->type == DType::F32 && sinks->n_dims() == 1 && sinks->ne[0] == a->ne[2] &&
                sinks->rows_contiguous(),
            Op::SoftMax, {a, mask, sinks}, "sinks must be contiguous f32 [a.ne2 = {}]", a->ne[2]);
  Tensor* t = make_node(ctx, Op::SoftMax, DType::F32, a->ne, {a, mask, sinks});
  detail::store_params(*t, SoftMaxParams{scale, max_bias});
  return t;
}

Tensor* rope(Context& ctx, Tensor* a, Tensor* positions, Tensor* freq_factors, const RopeParams& p) {
  require_not_null(Op::Rope, {a, positions});
  require(a->type == DType::F32 || a->type == DType::F16, Op::Rope, {a, positions}, "needs f32 or f16");
  require(positions->type == DType::I32 && positions->n_dims() == 1, Op::Rope, {a, positions},
          "positions must be 1-D i32");
  require(positions->ne[0] == a->ne[2], Op::Rope, {a, positions}, "positions has {} entries, a.ne2 is {}",
          positions->ne[0], a->ne[2]);
  require(p.n_dims > 0 && p.n_dims % 2 == 0 && p.n_dims <= a->ne[0], Op::Rope, {a, positions},
          "n_dims {} must be even, positive and <= ne0", p.n_dims);
  require(p.mode == RopeMode::Normal || p.mode == RopeMode::Neox, Op::Rope, {a, positions}, "unknown mode {}",
          static_cast<int>(p.mode));
  if (freq_factors != nullptr)
    require(freq_factors->type == DType::F32 && freq_factors->ne[0] >= p.n_dims / 2, Op::Rope,
            {a, positions, freq_factors}, "freq factors must be f32 with at least n_dims/2 entries");
  Tensor* t = make_node(ctx, Op::Rope, a->type, a->ne, {a, positions, freq_factors});
  detail::store_params(*t, p);
  return t;
}

Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       float max_bias, float softcap, bool online_softmax, Tensor* sinks) {
  constexpr Op op = Op::FlashAttnExt;
  require_not_null(op, {q, k, v});
  const std::initializer_list<const Tensor*> all = {q, k, v, mask, sinks};
  require(q->type == DType::F32, op, all, "q must be f32");
  require(k->type == v->type && (k->type == DType::F32 || k->type == DType::F16), op, all,
          "k and v must both be f32 or both f16");
  require(k->ne[0] == q->ne[0], op, all, "k.ne0 {} must equal q.ne0 {} (the head size)", k->ne[0], q->ne[0]);
  require(v->ne[1] == k->ne[1], op, all, "v.ne1 {} must equal k.ne1 {} (the cells)", v->ne[1], k->ne[1]);
  require(v->ne[2] == k->ne[2] && v->ne[3] == k->ne[3], op, all,
          "k and v must have the same heads and batches");
  require(q->ne[2] % k->ne[2] == 0 && q->ne[3] % k->ne[3] == 0, op, all,
          "q.ne2/ne3 must be multiples of k.ne2/ne3 (query heads per K/V head)");
  require(std::isfinite(scale), op, all, "scale must be finite");
  require(max_bias >= 0.0f && std::isfinite(max_bias), op, all, "max_bias must be finite and >= 0");
  require(softcap >= 0.0f && std::isfinite(softcap), op, all, "softcap must be finite and >= 0");
  if (mask != nullptr) {
    require(mask->type == DType::F32 || mask->type == DType::F16, op, all, "mask must be f16 or f32");
    require(mask->ne[0] == k->ne[1], op, all, "mask.ne0 {} must equal the cells k.ne1 {}", mask->ne[0],
            k->ne[1]);
    require(mask->ne[1] >= q->ne[1], op, all, "mask.ne1 {} must be >= the queries q.ne1 {}", mask->ne[1],
            q->ne[1]);
    require(q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0, op, all,
            "mask.ne2/ne3 must tile q.ne2/ne3");
  }
  if (sinks != nullptr)
    require(sinks->type == DType::F32 && sinks->n_dims() == 1 && sinks->ne[0] == q->ne[2] &&
                sinks->rows_contiguous(),
            op, all, "sinks must be contiguous f32 [q.ne2 = {}]", q->ne[2]);
  Tensor* t =
      make_node(ctx, op, DType::F32, {v->ne[0], q->ne[2], q->ne[1], q->ne[3]}, {q, k, v, mask, sinks});
  detail::store_params(*t, FlashAttnParams{scale, max_bias, softcap, online_softmax});
  return t;
}

// ---------------------------------------------------------------- convolution, pooling, reductions, sorting

Tensor* im2col(Context& ctx, Tensor* kernel, Tensor* input, int s0, int s1, int p0, int p1, int d0, int d1,
               bool is_2d, DType dst_type) {
  require_not_null(Op::Im2Col, {kernel, input});
  require(dst_type == DType::F32 || dst_type == DType::F16, Op::Im2Col, {kernel, input},
          "result must be f16 or f32");
  require(is_float(input->type) && input->type != DType::BF16, Op::Im2Col, {kernel, input},
          "input must be f32 or f16");
  require(kernel->type == DType::F32 || kernel->type == DType::F16, Op::Im2Col, {kernel, input},
          "kernel must be f32 or f16");
  require(s0 > 0 && d0 > 0 && p0 >= 0 && (!is_2d || (s1 > 0 && d1 > 0 && p1 >= 0)), Op::Im2Col,
          {kernel, input}, "strides and dilations must be > 0, paddings >= 0");
  const int64_t ic_k = is_2d ? kernel->ne[2] : kernel->ne[1];
  const int64_t ic_in = is_2d ? input->ne[2] : input->ne[1];
  require(ic_k == ic_in, Op::Im2Col, {kernel, input}, "kernel has {} input channels, input has {}", ic_k,
          ic_in);
  const int64_t kw = kernel->ne[0], kh = is_2d ? kernel->ne[1] : 1;
  const int64_t ow = (input->ne[0] + 2 * p0 - d0 * (kw - 1) - 1) / s0 + 1;
  const int64_t oh = is_2d ? (input->ne[1] + 2 * p1 - d1 * (kh - 1) - 1) / s1 + 1 : 1;
  require(input->ne[0] + 2 * p0 - d0 * (kw - 1) - 1 >= 0 && ow > 0 && oh > 0 &&
              (!is_2d || input->ne[1] + 2 * p1 - d1 * (kh - 1) - 1 >= 0),
          Op::Im2Col, {kernel, input}, "the kernel does not fit the padded input");
  require(is_2d || input->ne[3] == 1, Op::Im2Col, {kernel, input}, "a 1-D input must have ne3 == 1");
  const std::array<int64_t, 4> ne = is_2d ? std::array<int64_t, 4>{ic_in * kh * kw, ow, oh, input->ne[3]}
                                          : std::array<int64_t, 4>{ic_in * kw, ow, input->ne[2], 1};
  Tensor* t = make_node(ctx, Op::Im2Col, dst_type, ne, {kernel, input});
  detail::store_params(*t, Im2ColParams{s0, s1, p0, p1, d0, d1, is_2d});
  return t;
}

Tensor* pool_2d(Context& ctx, Tensor* a, PoolOp op, int k0, int k1, int s0, int s1, int p0, int p1) {
  require_not_null(Op::Pool2D, {a});
  require(a->type == DType::F32 || a->type == DType::F16, Op::Pool2D, {a}, "needs f32 or f16");
  require(op == PoolOp::Max || op == PoolOp::Avg, Op::Pool2D, {a}, "unknown pool op {}",
          static_cast<int>(op));
  require(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0 && p1 >= 0, Op::Pool2D, {a},
          "kernel and stride must be > 0, padding >= 0");
  const int64_t w = (a->ne[0] + 2 * p0 - k0), h = (a->ne[1] + 2 * p1 - k1);
  require(w >= 0 && h >= 0, Op::Pool2D, {a}, "kernel {}x{} larger than the padded input", k0, k1);
  Tensor* t = make_node(ctx, Op::Pool2D, DType::F32, {w / s0 + 1, h / s1 + 1, a->ne[2], a->ne[3]}, {a});
  detail::store_params(*t, Pool2DParams{op, k0, k1, s0, s1, p0, p1});
  return t;
}

Tensor* sum_rows(Context& ctx, Tensor* a) {
  require_not_null(Op::SumRows, {a});
  require(a->type == DType::F32, Op::SumRows, {a}, "needs f32");
  return make_node(ctx, Op::SumRows, DType::F32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* argsort(Context& ctx, Tensor* a, SortOrder order) {
  require_not_null(Op::Argsort, {a});
  require(a->type == DType::F32, Op::Argsort, {a}, "needs f32");
  require(order == SortOrder::Ascending || order == SortOrder::Descending, Op::Argsort, {a},
          "unknown order {}", static_cast<int>(order));
  require(a->ne[0] <= INT32_MAX, Op::Argsort, {a}, "rows longer than INT32_MAX");
  Tensor* t = make_node(ctx, Op::Argsort, DType::I32, a->ne, {a});
  detail::store_params(*t, order);
  return t;
}

}  // namespace tessera::ops
