// DUP, CONT, CPY on OpenCL (kernels/copy.cl): any source strides; conversions through f32;
// quantizing into and dequantizing from the device layout; same-type blocks copied exactly.
#include "core/check.h"
#include "device/layout.h"
#include "opencl/oplib.h"
#include "tessera/quant.h"

namespace tessera::opencl {
namespace {

bool supports_copy(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a == nullptr) return false;
  if (node.op == Op::Cpy && a->type == DType::I32) return node.type == DType::I32 || node.type == DType::F32;
  // The kernels know the Q4_0 / Q8_0 blocks (in the device layout) only.
  if ((is_quantized(a->type) && !device::has_split_layout(a->type)) ||
      (is_quantized(node.type) && !device::has_split_layout(node.type)))
    return false;
  if (is_quantized(a->type) && !a->rows_contiguous()) return false;
  if (is_quantized(node.type)) return node.is_contiguous() && a->ne[0] % kQuantBlock == 0;
  return true;
}

void run_copy(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg d = tensor_arg(ctx, node);
  if (is_quantized(node.type)) {
    const cl_long nblocks = node.nelements() / kQuantBlock;
    if (a.type == node.type) {
      cl_kernel k = kernel_of(ctx, "copy", "cpy_blocks");
      set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.ne, s.nb, d.mem, d.offset, d.scale_offset, d.type,
               nblocks);
      launch(ctx, k, {static_cast<size_t>(nblocks), 1, 1});
    } else {
      cl_kernel k = kernel_of(ctx, "copy", "cpy_quantize");
      set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.type, s.ne, s.nb, d.mem, d.offset, d.scale_offset,
               d.type, nblocks);
      launch(ctx, k, {static_cast<size_t>(nblocks), 1, 1});
    }
    return;
  }
  const cl_int same_shape = a.ne == node.ne ? 1 : 0;
  const cl_int raw_bytes = a.type == node.type ? static_cast<cl_int>(traits(a.type).block_bytes) : 0;
  cl_kernel k = kernel_of(ctx, "copy", "cpy_elements");
  set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.type, s.ne, s.nb, d.mem, d.offset, d.type, d.ne, d.nb,
           same_shape, raw_bytes);
  launch(ctx, k,
         {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.ne[1]),
          static_cast<size_t>(node.ne[2] * node.ne[3])});
}

}  // namespace

void register_copy(device::OpLibrary& lib) {
  for (Op op : {Op::Dup, Op::Cont, Op::Cpy}) lib.set(op, {&supports_copy, &run_copy});
}

}  // namespace tessera::opencl
