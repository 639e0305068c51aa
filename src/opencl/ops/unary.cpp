// UNARY (GELU, GELU_QUICK, SILU, TANH, RELU, HARDSIGMOID, HARDSWISH), LEAKY_RELU, SCALE, SQR, CLAMP
// on OpenCL (kernels/unary.cl): f32 or f16, any source strides, math in f32.
#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

// Kernel op codes beyond UnaryOp's values (kernels/unary.cl).
constexpr cl_int kLeakyRelu = 7, kScale = 8, kSqr = 9, kClamp = 10;

bool supports_unary(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a == nullptr || (a->type != DType::F32 && a->type != DType::F16) || node.type != a->type ||
      !a->same_shape(node))
    return false;
  return true;
}

void run_unary(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  cl_int op = 0;
  cl_float p0 = 0.0f, p1 = 0.0f;
  switch (node.op) {
    case Op::Unary:
      op = static_cast<cl_int>(unary_op(node));
      break;
    case Op::LeakyRelu:
      op = kLeakyRelu;
      p0 = leaky_relu_params(node).slope;
      break;
    case Op::Scale:
      op = kScale;
      p0 = scale_params(node).scale;
      p1 = scale_params(node).bias;
      break;
    case Op::Sqr:
      op = kSqr;
      break;
    case Op::Clamp:
      op = kClamp;
      p0 = clamp_params(node).min;
      p1 = clamp_params(node).max;
      break;
    default:
      raise(ErrorCode::Unsupported, "OpenCL: {} is not a unary op", op_name(node.op));
  }
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_long n = node.nelements();
  cl_kernel k = kernel_of(ctx, kElementwiseProgram, "unary_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.type, ta.nb, td.mem, td.offset, td.type, td.ne, td.nb, n, op, p0,
           p1);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

}  // namespace

void register_unary(device::OpLibrary& lib) {
  for (Op op : {Op::Unary, Op::LeakyRelu, Op::Scale, Op::Sqr, Op::Clamp})
    lib.set(op, {&supports_unary, &run_unary});
}

}  // namespace tessera::opencl
