// TEMPORARY placeholder until the planner lands: places every intermediate without reuse.
#include "tessera/allocator.h"

#include "core/check.h"
#include "tessera/context.h"

namespace tessera {

AllocationPlan plan_graph(const Graph& graph, const BufferType& type) {
  AllocationPlan plan;
  for (const Tensor* t : graph.nodes()) {
    if (t->data != nullptr || t->view_src != nullptr) continue;
    const size_t align = type.alignment();
    plan.offsets[t] = plan.peak;
    plan.peak += (type.alloc_size(*t) + align - 1) / align * align;
  }
  return plan;
}

void GraphAllocator::allocate(Graph& graph) {
  const AllocationPlan plan = plan_graph(graph, *type_);
  peak_ = plan.peak;
  if (!buffer_ || buffer_->size() < plan.peak) buffer_ = type_->allocate(plan.peak);
  for (Tensor* t : graph.nodes()) {
    auto it = plan.offsets.find(t);
    if (it != plan.offsets.end()) buffer_->place(*t, it->second);
  }
  for (Tensor* t : graph.nodes()) resolve_view_data(*t);
}

}  // namespace tessera
