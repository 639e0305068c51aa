// ROPE on OpenCL (kernels/rope.cl): NORMAL and NEOX, YaRN, frequency factors, F32/F16 data with
// any strides. The per-op constants (theta scale, YaRN ramp, magnitude) come from core
// (tessera/op_constants.h), the same values the CPU reference uses.
#include "core/check.h"
#include "opencl/oplib.h"
#include "tessera/op_constants.h"

namespace tessera::opencl {
namespace {

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
  if (node.nelements() == 0) return;
  // Parameters validated by the builder; the derived constants are core's, the CPU's bits.
  const RopeParams params = rope_params(node);
  const RopeConstants c = rope_constants(params);
  const int n_dims = params.n_dims;
  const float theta_scale = c.theta_scale, freq_scale = params.freq_scale, ext_factor = params.ext_factor;
  const float mscale = c.mscale, corr_lo = c.corr_lo, corr_hi = c.corr_hi;

  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg p = tensor_arg(ctx, pos);
  const TensorArg d = tensor_arg(ctx, node);
  TensorArg f = ff != nullptr ? tensor_arg(ctx, *ff) : p;  // p stands in when there are no factors
  const cl_int has_ff = ff != nullptr ? 1 : 0;
  const cl_int neox = params.mode == RopeMode::Neox ? 1 : 0;
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
