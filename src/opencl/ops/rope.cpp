// ROPE on OpenCL (kernels/rope.cl): NORMAL and NEOX, YaRN, frequency factors, F32/F16 data with
// any strides. The per-op constants (theta scale, YaRN ramp, magnitude) are computed here in f32
// exactly as the CPU reference computes them.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"
#include "opencl/oplib.h"

namespace tessera::opencl {
namespace {

float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

bool supports_rope(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* pos = node.src[1];
  const Tensor* ff = node.src[2];
  if (a == nullptr || pos == nullptr || (a->type != DType::F32 && a->type != DType::F16)) return false;
  if (node.type != a->type || !node.same_shape(*a) || pos->type != DType::I32) return false;
  return ff == nullptr || ff->type == DType::F32;
}

void run_rope(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& pos = *node.src[1];
  const Tensor* ff = node.src[2];
  const int n_dims = node.param_i(1);
  const int32_t mode = node.param_i(2);
  const int n_ctx_orig = node.param_i(4);
  const float base = node.param_f(5), freq_scale = node.param_f(6), ext_factor = node.param_f(7);
  const float attn_factor = node.param_f(8), beta_fast = node.param_f(9), beta_slow = node.param_f(10);
  if (pos.ne[0] != a.ne[2])
    raise(ErrorCode::InvalidArgument, "ROPE: positions {} do not fit {}", pos.describe(), a.describe());
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a.ne[0])
    raise(ErrorCode::InvalidArgument, "ROPE: n_dims {} does not fit {}", n_dims, a.describe());
  if (mode != static_cast<int32_t>(RopeMode::Normal) && mode != static_cast<int32_t>(RopeMode::Neox))
    raise(ErrorCode::InvalidArgument, "ROPE: unknown mode {}", mode);
  if (ff != nullptr && ff->ne[0] < n_dims / 2)
    raise(ErrorCode::InvalidArgument, "ROPE: freq factors {} need n_dims/2 entries", ff->describe());
  if (node.nelements() == 0) return;

  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_dims));
  float mscale = attn_factor, corr_lo = 0.0f, corr_hi = 0.0f;
  if (ext_factor != 0.0f) {
    corr_lo = std::max(0.0f, std::floor(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base)));
    corr_hi = std::min(static_cast<float>(n_dims - 1),
                       std::ceil(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base)));
    mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  }

  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg p = tensor_arg(ctx, pos);
  const TensorArg d = tensor_arg(ctx, node);
  TensorArg f = ff != nullptr ? tensor_arg(ctx, *ff) : p;  // p stands in when there are no factors
  const cl_int has_ff = ff != nullptr ? 1 : 0;
  const cl_int neox = mode == static_cast<int32_t>(RopeMode::Neox) ? 1 : 0;
  const cl_ulong pos_nb0 = p.nb.s[0], ff_nb0 = f.nb.s[0];
  const cl_int nd = n_dims;
  cl_kernel k = kernel_of(ctx, "rope", "rope");
  set_args(ctx, k, s.mem, s.offset, s.type, s.ne, s.nb, p.mem, p.offset, pos_nb0, f.mem, f.offset, ff_nb0,
           has_ff, d.mem, d.offset, d.nb, nd, neox, theta_scale, freq_scale, ext_factor, mscale, corr_lo,
           corr_hi);
  launch(ctx, k,
         {static_cast<size_t>(n_dims / 2 + a.ne[0] - n_dims), static_cast<size_t>(a.ne[1]),
          static_cast<size_t>(a.ne[2] * a.ne[3])});
}

}  // namespace

void register_rope(device::OpLibrary& lib) { lib.set(Op::Rope, {&supports_rope, &run_rope}); }

}  // namespace tessera::opencl
