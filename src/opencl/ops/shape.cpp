// REPEAT and CONCAT on OpenCL (kernels/shape.cl): any non-quantized type (bytes copied exactly),
// any source strides.
#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool element_type(DType t) { return !is_quantized(t); }

bool supports_repeat(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a == nullptr || !element_type(a->type) || node.type != a->type) return false;
  for (int d = 0; d < kMaxDims; ++d)
    if (a->ne[d] <= 0 || node.ne[d] % a->ne[d] != 0) return false;
  return true;
}

void run_repeat(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_long n = node.nelements();
  const cl_int esize = static_cast<cl_int>(traits(a.type).block_bytes);
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "repeat_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.ne, ta.nb, td.mem, td.offset, td.ne, td.nb, n, esize);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

bool supports_concat(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  return a != nullptr && b != nullptr && element_type(a->type) && a->type == b->type && node.type == a->type;
}

void run_concat(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const cl_int dim = concat_params(node).dim;
  // An empty side is never read (and may have no device address): the other stands in for it.
  const TensorArg ta = tensor_arg(ctx, a.nelements() > 0 ? a : b);
  const TensorArg tb = tensor_arg(ctx, b.nelements() > 0 ? b : a);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_long n = node.nelements();
  const cl_long a_len = a.ne[static_cast<size_t>(dim)];
  const cl_int esize = static_cast<cl_int>(traits(a.type).block_bytes);
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "concat_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.nb, tb.mem, tb.offset, tb.nb, td.mem, td.offset, td.ne, td.nb, n,
           dim, a_len, esize);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

}  // namespace

void register_shape(device::OpLibrary& lib) {
  lib.set(Op::Repeat, {&supports_repeat, &run_repeat});
  lib.set(Op::Concat, {&supports_concat, &run_concat});
}

}  // namespace tessera::opencl
