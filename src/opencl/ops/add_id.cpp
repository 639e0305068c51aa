// ADD_ID on OpenCL (kernels/add_id.cl): f32 a and b, i32 ids, any strides; gpt-oss's expert biases.
#include "opencl/oplib.h"

namespace tessera::opencl {
namespace {

bool supports_add_id(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  const Tensor* ids = node.src[2];
  return a != nullptr && b != nullptr && ids != nullptr && a->type == DType::F32 && b->type == DType::F32 &&
         ids->type == DType::I32 && node.type == DType::F32 && node.same_shape(*a);
}

void run_add_id(const device::OpContext& ctx, Tensor& node) {
  if (node.nelements() == 0) return;
  const TensorArg a = tensor_arg(ctx, *node.src[0]);
  const TensorArg b = tensor_arg(ctx, *node.src[1]);
  const TensorArg ids = tensor_arg(ctx, *node.src[2]);
  const TensorArg d = tensor_arg(ctx, node);
  const cl_long b_rows = node.src[1]->ne[1], ne0 = node.ne[0];
  cl_kernel k = kernel_of(ctx, "add_id", "add_id");
  set_args(ctx, k, a.mem, a.offset, a.nb, b.mem, b.offset, b.nb, b_rows, ids.mem, ids.offset, ids.nb, d.mem,
           d.offset, ne0, d.nb);
  launch(ctx, k,
         {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.ne[1]), static_cast<size_t>(node.ne[2])});
}

}  // namespace

void register_add_id(device::OpLibrary& lib) { lib.set(Op::AddId, {&supports_add_id, &run_add_id}); }

}  // namespace tessera::opencl
