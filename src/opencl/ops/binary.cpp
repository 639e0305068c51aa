// ADD, MUL, DIV and ACC on OpenCL (kernels/binary.cl). Binary ops tile b over a with any strides;
// type mixes f32 f32, f16 f16, f16 a with f32 b. ACC copies a, then adds b into the target view:
// in parallel when b's targets are disjoint, else per target in b's logical order (as the CPU).
#include <algorithm>

#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

bool supports_binary(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (a == nullptr || b == nullptr || node.type != a->type || !a->same_shape(node)) return false;
  const bool types_ok = (a->type == DType::F32 && b->type == DType::F32) ||
                        (a->type == DType::F16 && (b->type == DType::F16 || b->type == DType::F32));
  if (!types_ok) return false;
  for (int d = 0; d < kMaxDims; ++d)
    if (b->ne[d] <= 0 || a->ne[d] % b->ne[d] != 0) return false;
  return true;
}

void run_binary(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg tb = tensor_arg(ctx, b);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_long n = node.nelements();
  const cl_int op = node.op == Op::Add ? 0 : node.op == Op::Mul ? 1 : 2;
  cl_kernel k = kernel_of(ctx, kElementwiseProgram, "binary_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.type, ta.nb, tb.mem, tb.offset, tb.type, tb.ne, tb.nb, td.mem,
           td.offset, td.type, td.ne, td.nb, n, op);
  launch(ctx, k, {static_cast<size_t>(n), 1, 1});
}

// ACC's target view: strides (4, nb1, nb2, nb3) and byte offset, from the node's params.
struct AccTarget {
  std::array<size_t, 4> stride{};
  size_t offset = 0;
};

AccTarget acc_target(const Tensor& node) {
  const AccParams p = acc_params(node);
  return {{4, p.nb1, p.nb2, p.nb3}, p.offset};
}

// True when no two elements of b land on the same f32 (strides sorted, each above the span below).
bool targets_disjoint(const Tensor& b, const std::array<size_t, 4>& stride) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int x, int y) { return stride[x] < stride[y]; });
  size_t span = 4;
  for (int d : order) {
    if (b.ne[d] <= 1) continue;
    if (stride[d] < span) return false;
    span += stride[d] * static_cast<size_t>(b.ne[d] - 1);
  }
  return true;
}

bool supports_acc(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (a == nullptr || b == nullptr || a->type != DType::F32 || b->type != DType::F32 ||
      node.type != DType::F32 || !a->is_contiguous() || !node.is_contiguous() || !a->same_shape(node) ||
      b->nelements() <= 0)
    return false;
  // Whole f32 targets only (the kernels address dst in f32 units).
  const AccTarget t = acc_target(node);
  for (size_t s : t.stride)
    if (s % 4 != 0) return false;
  if (t.offset % 4 != 0) return false;
  size_t last = t.offset;
  for (int d = 0; d < kMaxDims; ++d)
    last += t.stride[static_cast<size_t>(d)] * static_cast<size_t>(b->ne[d] - 1);
  return last + 4 <= static_cast<size_t>(node.nelements()) * 4;
}

void run_acc(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg tb = tensor_arg(ctx, b);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_long n = node.nelements();
  cl_kernel copy = kernel_of(ctx, kElementwiseProgram, "acc_copy");
  set_args(ctx, copy, ta.mem, ta.offset, td.mem, td.offset, n);
  launch(ctx, copy, {static_cast<size_t>(n), 1, 1});

  const AccTarget t = acc_target(node);
  const cl_ulong4 stride{{t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
  const cl_ulong offset = t.offset;
  if (targets_disjoint(b, t.stride)) {
    const cl_long nb = b.nelements();
    cl_kernel k = kernel_of(ctx, kElementwiseProgram, "acc_add");
    set_args(ctx, k, tb.mem, tb.offset, tb.ne, tb.nb, td.mem, td.offset, stride, offset, nb);
    launch(ctx, k, {static_cast<size_t>(nb), 1, 1});
    return;
  }
  size_t last = t.offset;
  for (int d = 0; d < kMaxDims; ++d)
    last += t.stride[static_cast<size_t>(d)] * static_cast<size_t>(b.ne[d] - 1);
  const cl_long first = static_cast<cl_long>(t.offset / 4);
  const cl_long span = static_cast<cl_long>(last / 4) + 1 - first;
  cl_kernel k = kernel_of(ctx, kElementwiseProgram, "acc_add_ordered");
  set_args(ctx, k, tb.mem, tb.offset, tb.ne, tb.nb, td.mem, td.offset, stride, offset, first, span);
  launch(ctx, k, {static_cast<size_t>(span), 1, 1});
}

}  // namespace

void register_binary(device::OpLibrary& lib) {
  for (Op op : {Op::Add, Op::Mul, Op::Div}) lib.set(op, {&supports_binary, &run_binary});
  lib.set(Op::Acc, {&supports_acc, &run_acc});
}

}  // namespace tessera::opencl
