// SUM_ROWS and ARGSORT on OpenCL (kernels/reduce.cl), one work-group per row. ARGSORT is a bitonic
// sort over the row padded to a power of two: in local memory when it fits (rows up to 4096), else
// in global scratch with one launch per stage. The order is total (ties by index, NaNs last), so
// the result is exactly the CPU's stable sort.
#include <algorithm>

#include "core/check.h"
#include "opencl/oplib.h"
#include "opencl/ops/programs.h"
#include "tessera/op_params.h"

namespace tessera::opencl {
namespace {

constexpr size_t kMaxGroup = 256;               // SUM_MAX_GROUP in reduce.cl
constexpr int64_t kLocalSortMax = 4096;         // longest padded row sorted in local memory
constexpr int64_t kSortMax = int64_t{1} << 30;  // longest row (int indices, padded to 2^k)

// The largest power of two <= min(limit, what the device allows for k).
size_t group_size(const device::OpContext& ctx, cl_kernel k, size_t limit) {
  size_t max_group = 0;
  clGetKernelWorkGroupInfo(k, runtime_of(ctx).device_id(ctx.device), CL_KERNEL_WORK_GROUP_SIZE,
                           sizeof max_group, &max_group, nullptr);
  limit = std::min(limit, std::max<size_t>(1, max_group));
  size_t g = 1;
  while (g * 2 <= limit) g *= 2;
  return g;
}

// Enqueues k as `rows` work-groups of `group` items along dim 0 (group id = row).
void launch_groups(const device::OpContext& ctx, cl_kernel k, size_t group, size_t rows) {
  if (rows == 0) return;
  OpenClRuntime& rt = runtime_of(ctx);
  const size_t global = group * rows;
  check(clEnqueueNDRangeKernel(rt.queue(*ctx.stream), k, 1, nullptr, &global, &group, 0, nullptr, nullptr),
        rt.properties(ctx.device).name, "clEnqueueNDRangeKernel");
}

bool supports_sum_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::F32 && node.ne[0] == 1 &&
         node.ne[1] == a->ne[1] && node.ne[2] == a->ne[2] && node.ne[3] == a->ne[3];
}

void run_sum_rows(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  if (a.ne[0] == 0) {  // empty rows sum to 0 (and an empty source may have no device address)
    ctx.runtime->fill_async(*ctx.stream, node.data, 0, node.nbytes());
    return;
  }
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  cl_kernel k = kernel_of(ctx, kLayoutProgram, "sum_rows_op");
  set_args(ctx, k, ta.mem, ta.offset, ta.ne, ta.nb, td.mem, td.offset, td.ne, td.nb);
  // Short rows get small groups (no idle work-items); long rows kMaxGroup.
  size_t want = 1;
  while (want < kMaxGroup && static_cast<int64_t>(want) < a.ne[0]) want *= 2;
  launch_groups(ctx, k, group_size(ctx, k, want), static_cast<size_t>(a.nrows()));
}

bool supports_argsort(const Tensor& node) {
  const Tensor* a = node.src[0];
  return a != nullptr && a->type == DType::F32 && node.type == DType::I32 && a->same_shape(node) &&
         a->ne[0] <= kSortMax;
}

void run_argsort(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  if (a.nelements() == 0) return;
  const TensorArg ta = tensor_arg(ctx, a);
  const TensorArg td = tensor_arg(ctx, node);
  const cl_int desc = argsort_order(node) == SortOrder::Descending ? 1 : 0;
  int64_t padded = 1;
  while (padded < a.ne[0]) padded *= 2;
  const cl_int n2 = static_cast<cl_int>(padded);
  const size_t rows = static_cast<size_t>(a.nrows());

  cl_ulong local_mem = 0;
  clGetDeviceInfo(runtime_of(ctx).device_id(ctx.device), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem,
                  &local_mem, nullptr);
  const size_t sort_bytes = static_cast<size_t>(padded) * (sizeof(cl_float) + sizeof(cl_int));
  if (padded <= kLocalSortMax && sort_bytes + 1024 <= local_mem) {
    cl_kernel k = kernel_of(ctx, kLayoutProgram, "argsort_local");
    set_args(ctx, k, ta.mem, ta.offset, ta.ne, ta.nb, td.mem, td.offset, td.nb, n2, desc);
    const size_t array_bytes = static_cast<size_t>(padded) * sizeof(cl_float);  // vals and idx each
    const std::string where = runtime_of(ctx).properties(ctx.device).name;
    check(clSetKernelArg(k, 9, array_bytes, nullptr), where, "clSetKernelArg");
    check(clSetKernelArg(k, 10, array_bytes, nullptr), where, "clSetKernelArg");
    launch_groups(ctx, k, group_size(ctx, k, std::min<size_t>(kMaxGroup, std::max<int64_t>(1, padded / 2))),
                  rows);
    return;
  }

  // Global scratch: n2 indices per row, one launch per (k, j) stage of the network.
  device::Scratch scratch(*ctx.pool, rows * static_cast<size_t>(padded) * sizeof(cl_int));
  const ClAddress idx = address_arg(ctx, scratch.data(), scratch.size());
  const cl_ulong idx_off = idx.offset;
  const cl_long n_init = static_cast<cl_long>(rows) * padded;
  cl_kernel init = kernel_of(ctx, kLayoutProgram, "argsort_init");
  set_args(ctx, init, idx.mem, idx_off, n2, n_init);
  launch(ctx, init, {static_cast<size_t>(n_init), 1, 1});
  const cl_long n_step = static_cast<cl_long>(rows) * (padded / 2);
  cl_kernel step = kernel_of(ctx, kLayoutProgram, "argsort_step");
  for (cl_int k = 2; k <= n2; k <<= 1) {
    for (cl_int j = k >> 1; j > 0; j >>= 1) {
      set_args(ctx, step, ta.mem, ta.offset, ta.ne, ta.nb, idx.mem, idx_off, n2, k, j, desc, n_step);
      launch(ctx, step, {static_cast<size_t>(n_step), 1, 1});
    }
  }
  const cl_long n_write = a.nelements();
  cl_kernel write = kernel_of(ctx, kLayoutProgram, "argsort_write");
  set_args(ctx, write, idx.mem, idx_off, n2, td.ne, td.mem, td.offset, td.nb, n_write);
  launch(ctx, write, {static_cast<size_t>(n_write), 1, 1});
}

}  // namespace

void register_reduce(device::OpLibrary& lib) {
  lib.set(Op::SumRows, {&supports_sum_rows, &run_sum_rows});
  lib.set(Op::Argsort, {&supports_argsort, &run_argsort});
}

}  // namespace tessera::opencl
