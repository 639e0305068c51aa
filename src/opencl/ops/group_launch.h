#pragma once
// Launches for kernels whose work-items cooperate inside a work-group (reductions in local
// memory): the grid is counted in work-groups, and the group size is a power of two that the
// kernel's local arrays (sized for kMaxGroup items) can hold.
#include <algorithm>
#include <array>
#include <cstddef>

#include "opencl/oplib.h"

namespace tessera::opencl {

inline constexpr size_t kMaxGroup = 256;

// The largest power of two <= min(want, kMaxGroup, what the device allows for k); at least 1.
inline size_t group_size(const device::OpContext& ctx, cl_kernel k, size_t want) {
  OpenClRuntime& rt = runtime_of(ctx);
  size_t device_max = 0;
  check(clGetKernelWorkGroupInfo(k, rt.device_id(ctx.device), CL_KERNEL_WORK_GROUP_SIZE, sizeof device_max,
                                 &device_max, nullptr),
        rt.properties(ctx.device).name, "clGetKernelWorkGroupInfo");
  const size_t limit = std::max<size_t>(1, std::min({want, kMaxGroup, device_max}));
  size_t g = 1;
  while (g * 2 <= limit) g *= 2;
  return g;
}

// The smallest power of two >= n (n >= 1).
inline size_t pow2_at_least(size_t n) {
  size_t g = 1;
  while (g < n) g *= 2;
  return g;
}

// Enqueues k as groups[0] x groups[1] x groups[2] work-groups of `local` items along dim 0.
inline void launch_groups(const device::OpContext& ctx, cl_kernel k, std::array<size_t, 3> groups,
                          size_t local) {
  if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0) return;
  OpenClRuntime& rt = runtime_of(ctx);
  const size_t global[3] = {groups[0] * local, groups[1], groups[2]};
  const size_t local3[3] = {local, 1, 1};
  check(clEnqueueNDRangeKernel(rt.queue(*ctx.stream), k, 3, nullptr, global, local3, 0, nullptr, nullptr),
        rt.properties(ctx.device).name, "clEnqueueNDRangeKernel");
}

}  // namespace tessera::opencl
