// GET_ROWS on OpenCL (kernels/get_rows.cl): rows of any type the kernels decode (device layout
// for Q4_0 / Q8_0, ggml's blocks for the others) to f32 (i32 stays i32). Indices live on the device, so a bad
// one is found by the kernel and reported at the next synchronize, naming this node.
#include <cstring>

#include "core/check.h"
#include "opencl/oplib.h"
#include "tessera/quant.h"

namespace tessera::opencl {
namespace {

bool supports_get_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* idx = node.src[1];
  if (a == nullptr || idx == nullptr || idx->type != DType::I32) return false;
  if (is_quantized(a->type) && (!decodes_blocks(a->type) || !a->rows_contiguous())) return false;
  return node.type == (a->type == DType::I32 ? DType::I32 : DType::F32);
}

void run_get_rows(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& idx = *node.src[1];
  const TensorArg s = tensor_arg(ctx, a);
  const TensorArg i = tensor_arg(ctx, idx);
  const TensorArg d = tensor_arg(ctx, node);
  // status: {flag, first bad index}, zeroed before the kernel, checked on the host after it.
  device::Scratch status(*ctx.pool, 2 * sizeof(int32_t));
  ctx.runtime->fill_async(*ctx.stream, status.data(), 0, status.size());
  const ClAddress st = address_arg(ctx, status.data(), status.size());
  const cl_long src_ne1 = a.ne[1], ne0 = node.ne[0], n1 = node.ne[2];
  const std::array<size_t, 3> grid{static_cast<size_t>(node.ne[0]), static_cast<size_t>(node.ne[1]),
                                   static_cast<size_t>(node.ne[2] * node.ne[3])};
  if (is_quantized(a.type)) {  // 32 elements per work-item
    cl_kernel k = kernel_of(ctx, "get_rows", "get_rows_blocks");
    set_args(ctx, k, s.mem, s.offset, s.scale_offset, s.type, src_ne1, s.nb, i.mem, i.offset, i.nb, d.mem,
             d.offset, d.nb, ne0, n1, st.mem, static_cast<cl_ulong>(st.offset));
    launch(ctx, k, {grid[0] / kQuantBlock, grid[1], grid[2]});
  } else {
    cl_kernel k = kernel_of(ctx, "get_rows", "get_rows");
    set_args(ctx, k, s.mem, s.offset, s.type, src_ne1, s.nb, i.mem, i.offset, i.nb, d.mem, d.offset, d.nb,
             ne0, n1, st.mem, static_cast<cl_ulong>(st.offset));
    launch(ctx, k, grid);
  }
  const int64_t rows = a.ne[1];
  ctx.check_async(status.data(), status.size(), [rows](const void* host) {
    int32_t word[2];
    std::memcpy(word, host, sizeof word);
    if (word[0] != 0) raise(ErrorCode::InvalidArgument, "row index {} is outside [0, {})", word[1], rows);
  });
}

}  // namespace

void register_get_rows(device::OpLibrary& lib) { lib.set(Op::GetRows, {&supports_get_rows, &run_get_rows}); }

}  // namespace tessera::opencl
