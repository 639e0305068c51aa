// SOFT_MAX (optional F16/F32 mask tiled over dims 2-3, scale, ALiBi, attention sinks) and DIAG_MASK_INF on
// OpenCL (kernels/softmax.cl). Any source strides; SOFT_MAX runs a work-group per row.
#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/group_launch.h"
#include "tessera/op_constants.h"

namespace tessera::opencl {
namespace {

bool supports_soft_max(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* mask = node.src[1];
  if (a == nullptr || a->type != DType::F32 || node.type != DType::F32 || !node.same_shape(*a)) return false;
  const Tensor* sinks = node.src[2];  // one per head (dim 2), contiguous f32
  if (sinks != nullptr &&
      (sinks->type != DType::F32 || sinks->ne[0] != a->ne[2] || !sinks->rows_contiguous()))
    return false;
  if (mask == nullptr) return true;
  return (mask->type == DType::F32 || mask->type == DType::F16) && mask->ne[0] == a->ne[0] &&
         mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 && a->ne[2] % mask->ne[2] == 0 &&
         a->ne[3] % mask->ne[3] == 0;
}

void run_soft_max(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor* mask = node.src[1];
  if (node.nelements() == 0) return;
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg d = tensor_arg(ctx, node);
  TensorArg m;
  cl_int mask_type = -1;
  if (mask != nullptr) {
    m = tensor_arg(ctx, *mask);
    mask_type = m.type;
  } else {
    m.mem = s.mem;  // never read; a valid buffer keeps every driver happy
    m.ne = {{1, 1, 1, 1}};
  }
  // The ALiBi bases come from core, the same bits the CPU uses.
  const SoftMaxParams params = soft_max_params(node);
  const AlibiSlopes alibi = alibi_slopes(params.max_bias, a.ne[2]);
  const float scale = params.scale, max_bias = alibi.max_bias, m0 = alibi.m0, m1 = alibi.m1;
  const cl_long ne0 = a.ne[0], mne2 = m.ne.s[2], mne3 = m.ne.s[3], nhl = alibi.n_head_log2;
  cl_kernel k = kernel_of(ctx, "softmax", "soft_max");
  TensorArg sk;
  cl_int has_sinks = 0;
  if (node.src[2] != nullptr) {
    sk = tensor_arg(ctx, *node.src[2]);
    has_sinks = 1;
  } else {
    sk.mem = s.mem;  // never read
  }
  set_args(ctx, k, s.mem, s.offset, ne0, s.nb, m.mem, m.offset, mask_type, mne2, mne3, m.nb, d.mem, d.offset,
           d.nb, scale, max_bias, m0, m1, nhl, sk.mem, sk.offset, has_sinks);
  launch_groups(ctx, k,
                {static_cast<size_t>(a.ne[1]), static_cast<size_t>(a.ne[2]), static_cast<size_t>(a.ne[3])},
                group_size(ctx, k, pow2_at_least(static_cast<size_t>(ne0))));
}

bool supports_diag_mask_inf(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::F32 && node.same_shape(*a);
}

void run_diag_mask_inf(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg d = tensor_arg(ctx, node);
  const cl_long n_past = diag_mask_inf_params(node).n_past;
  cl_kernel k = kernel_of(ctx, "softmax", "diag_mask_inf");
  set_args(ctx, k, s.mem, s.offset, s.ne, s.nb, d.mem, d.offset, d.nb, n_past);
  launch(
      ctx, k,
      {static_cast<size_t>(a.ne[0]), static_cast<size_t>(a.ne[1]), static_cast<size_t>(a.ne[2] * a.ne[3])});
}

}  // namespace

void register_softmax(device::OpLibrary& lib) {
  lib.set(Op::SoftMax, {&supports_soft_max, &run_soft_max});
  lib.set(Op::DiagMaskInf, {&supports_diag_mask_inf, &run_diag_mask_inf});
}

}  // namespace tessera::opencl
