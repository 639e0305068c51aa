// GLU (SWIGLU_OAI, split or fused) on OpenCL (kernels/glu.cl): f32, any strides.
#include "opencl/oplib.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool supports_glu(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  return a != nullptr && a->type == DType::F32 && (b == nullptr || b->type == DType::F32) &&
         node.type == DType::F32 && glu_params(node).op == GluOp::SwigluOai;
}

void run_glu(const device::OpContext& ctx, Tensor& node) {
  if (node.nelements() == 0) return;
  const GluParams p = glu_params(node);
  const Tensor& a = *node.src[0];
  TensorArg g = tensor_arg(ctx, a);
  TensorArg u = node.src[1] != nullptr ? tensor_arg(ctx, *node.src[1]) : g;
  if (node.src[1] == nullptr) {  // fused: a row holds gate then up (swapped: up then gate)
    const cl_ulong half = static_cast<cl_ulong>(node.ne[0]) * a.nb[0];
    (p.swapped ? g : u).offset += half;
  }
  const TensorArg d = tensor_arg(ctx, node);
  const cl_float alpha = p.alpha, limit = p.limit;
  cl_kernel k = kernel_of(ctx, "glu", "swiglu_oai");
  set_args(ctx, k, g.mem, g.offset, g.nb, u.mem, u.offset, u.nb, d.mem, d.offset, d.ne, d.nb, alpha, limit);
  launch(ctx, k,
         {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.ne[1]),
          static_cast<size_t>(node.ne[2] * node.ne[3])});
}

}  // namespace

void register_glu(device::OpLibrary& lib) { lib.set(Op::Glu, {&supports_glu, &run_glu}); }

}  // namespace tessera::opencl
