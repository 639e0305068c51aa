// IM2COL (1-D and 2-D; f32 or f16 input and result) and POOL_2D (max or average, padding) on OpenCL
// (kernels/conv.cl). Any input strides.
#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool float_type(DType t) { return t == DType::F32 || t == DType::F16; }

bool supports_im2col(const Tensor& node) {
  const Tensor* kernel = node.src[0];
  const Tensor* in = node.src[1];
  if (kernel == nullptr || in == nullptr || !float_type(in->type) || !float_type(node.type) ||
      in->nelements() == 0)
    return false;
  return true;
}

void run_im2col(const device::OpContext& ctx, Tensor& node) {
  const Tensor& kernel = *node.src[0];
  const Tensor& in = *node.src[1];
  const Im2ColParams params = im2col_params(node);
  const bool is_2d = params.is_2d;
  const TensorArg ti = tensor_arg(ctx, in);
  const TensorArg td = tensor_arg(ctx, node);
  // Roles: input strides (w, h, c, n) and the result as [IC*KH*KW, OW, OH, N] (1-D: OH = 1).
  const cl_ulong4 inb = is_2d ? ti.nb : cl_ulong4{{ti.nb.s[0], 0, ti.nb.s[1], ti.nb.s[2]}};
  const cl_long iw = in.ne[0], ih = is_2d ? in.ne[1] : 1;
  const cl_long4 dne = is_2d ? td.ne : cl_long4{{td.ne.s[0], td.ne.s[1], 1, td.ne.s[2]}};
  const cl_ulong4 dnb = is_2d ? td.nb : cl_ulong4{{td.nb.s[0], td.nb.s[1], 0, td.nb.s[2]}};
  const cl_long kw = kernel.ne[0], kh = is_2d ? kernel.ne[1] : 1;
  const cl_int s0 = params.s0, p0 = params.p0, d0 = params.d0;
  const cl_int s1 = is_2d ? params.s1 : 1, p1 = is_2d ? params.p1 : 0, d1 = is_2d ? params.d1 : 1;
  const cl_long n = node.nelements();
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "im2col_op");
  set_args(ctx, k, ti.mem, ti.offset, ti.type, inb, iw, ih, td.mem, td.offset, td.type, dne, dnb, kw, kh, s0,
           s1, p0, p1, d0, d1, n);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

bool supports_pool_2d(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && float_type(a->type) && node.type == DType::F32 && a->nelements() > 0;
}

void run_pool_2d(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  const Pool2DParams params = pool_2d_params(node);
  const cl_int op = static_cast<cl_int>(params.op), k0 = params.k0, k1 = params.k1, s0 = params.s0,
               s1 = params.s1, p0 = params.p0, p1 = params.p1;
  const cl_long n = node.nelements();
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "pool_2d_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.type, ta.ne, ta.nb, td.mem, td.offset, td.ne, td.nb, op, k0, k1, s0,
           s1, p0, p1, n);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

}  // namespace

void register_conv(device::OpLibrary& lib) {
  lib.set(Op::Im2Col, {&supports_im2col, &run_im2col});
  lib.set(Op::Pool2D, {&supports_pool_2d, &run_pool_2d});
}

}  // namespace tessera::opencl
