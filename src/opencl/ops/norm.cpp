// NORM, RMS_NORM and GROUP_NORM on OpenCL (kernels/norm.cl): f32 rows with any source strides, a
// work-group per row (per group) reducing in local memory.
#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/group_launch.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool supports_norm(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::F32 && node.same_shape(*a);
}

void run_norm(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  if (node.nelements() == 0) return;
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg d = tensor_arg(ctx, node);
  if (node.op == Op::GroupNorm) {
    const GroupNormParams params = group_norm_params(node);
    const int32_t n_groups = params.n_groups;
    const float eps = params.eps;
    const cl_long per_group = (a.ne[2] + n_groups - 1) / n_groups;
    cl_kernel k = kernel_of(ctx, "norm", "group_norm");
    set_args(ctx, k, s.mem, s.offset, s.ne, s.nb, d.mem, d.offset, d.nb, per_group, eps);
    const auto count = static_cast<size_t>(a.ne[0] * a.ne[1] * per_group);
    launch_groups(ctx, k, {static_cast<size_t>(n_groups), static_cast<size_t>(a.ne[3]), 1},
                  group_size(ctx, k, pow2_at_least(count)));
    return;
  }
  const cl_long ne0 = a.ne[0];
  const cl_int rms = node.op == Op::RmsNorm ? 1 : 0;
  const float eps = norm_params(node).eps;
  cl_kernel k = kernel_of(ctx, "norm", "norm_rows");
  set_args(ctx, k, s.mem, s.offset, ne0, s.nb, d.mem, d.offset, d.nb, eps, rms);
  launch_groups(ctx, k,
                {static_cast<size_t>(a.ne[1]), static_cast<size_t>(a.ne[2]), static_cast<size_t>(a.ne[3])},
                group_size(ctx, k, pow2_at_least(static_cast<size_t>(ne0))));
}

}  // namespace

void register_norm(device::OpLibrary& lib) {
  for (Op op : {Op::Norm, Op::RmsNorm, Op::GroupNorm}) lib.set(op, {&supports_norm, &run_norm});
}

}  // namespace tessera::opencl
