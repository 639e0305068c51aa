// DUP, CONT, CPY on OpenCL (kernels/copy.cl): any source strides; conversions through f32;
// dequantizing from every block type the kernels decode (Q4_0 / Q8_0 in the device layout, the
// others in ggml's blocks), quantizing into Q4_0, Q8_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (encodes_blocks), and
// same-type blocks copied exactly.
#include "core/check.h"
#include "opencl/oplib.h"
#include "tessera/quant.h"

namespace tessera::opencl {
namespace {

bool supports_copy(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a == nullptr) return false;
  if (node.op == Op::Cpy && a->type == DType::I32) return node.type == DType::I32 || node.type == DType::F32;
  if (is_quantized(a->type) && (!decodes_blocks(a->type) || !a->rows_contiguous())) return false;
  // Into a quantized type: the same type's blocks copied, or a type the kernels quantize into.
  if (is_quantized(node.type))
    return (a->type == node.type || encodes_blocks(node.type)) && node.is_contiguous() &&
           a->ne[0] % traits(node.type).block_size == 0;
  return true;
}

void run_copy(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg d = tensor_arg(ctx, node);
  if (is_quantized(node.type)) {
    if (a.type == node.type) {
      const cl_long nblocks = node.nelements() / traits(node.type).block_size;
      cl_kernel k = kernel_of(ctx, "copy", "cpy_blocks");
      set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.ne, s.nb, d.mem, d.offset, d.scale_offset, d.type,
               nblocks);
      launch(ctx, k, {static_cast<size_t>(nblocks), 1, 1});
    } else {
      const cl_long nblocks = node.nelements() / kQuantBlock;  // every encoded type has 32-element blocks
      cl_kernel k = kernel_of(ctx, "copy", "cpy_quantize");
      set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.type, s.ne, s.nb, d.mem, d.offset, d.scale_offset,
               d.type, nblocks);
      launch(ctx, k, {static_cast<size_t>(nblocks), 1, 1});
    }
    return;
  }
  if (is_quantized(a.type)) {
    const cl_long nchunks = node.nelements() / kQuantBlock;
    cl_kernel k = kernel_of(ctx, "copy", "cpy_from_blocks");
    set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.type, s.ne, s.nb, d.mem, d.offset, d.type, d.ne, d.nb,
             nchunks);
    launch(ctx, k, {static_cast<size_t>(nchunks), 1, 1});
    return;
  }
  const cl_int same_shape = a.ne == node.ne ? 1 : 0;
  const cl_int raw_bytes = a.type == node.type ? static_cast<cl_int>(traits(a.type).block_bytes) : 0;
  cl_kernel k = kernel_of(ctx, "copy", "cpy_elements");
  set_args(ctx, k, s.mem, s.offset, s.type, s.ne, s.nb, d.mem, d.offset, d.type, d.ne, d.nb, same_shape,
           raw_bytes);
  launch(ctx, k,
         {static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.ne[1]),
          static_cast<size_t>(node.ne[2] * node.ne[3])});
}

}  // namespace

void register_copy(device::OpLibrary& lib) {
  for (Op op : {Op::Dup, Op::Cont, Op::Cpy}) lib.set(op, {&supports_copy, &run_copy});
}

}  // namespace tessera::opencl
