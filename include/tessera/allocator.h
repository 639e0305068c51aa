#pragma once
// Graph memory planning: every intermediate tensor gets an offset in one buffer by lifetime.
#include <cstddef>
#include <memory>
#include <unordered_map>

#include "tessera/buffer.h"
#include "tessera/graph.h"

namespace tessera {

struct AllocationPlan {
  std::unordered_map<const Tensor*, size_t> offsets;          // byte offset of each planned tensor
  std::unordered_map<const Tensor*, const Tensor*> in_place;  // node -> source whose memory it reuses
  size_t peak = 0;                                            // bytes of buffer the plan needs
};

// Plans every node and leaf that has no memory yet (views resolve through their source), walking
// the nodes in order: a node's memory is taken before its sources are released, and a tensor is
// released after the last node that reads it or any view of it. Leafs and outputs (kFlagOutput or
// listed in graph.outputs(), and whatever they view) are never released. A node may reuse its
// src[0]'s memory in place when the op is elementwise-safe, the types, shapes and sizes match,
// both are contiguous, and nothing reads src[0] later. Offsets are multiples of the type's
// alignment and sizes come from BufferType::alloc_size; free space is reused best-fit.
AllocationPlan plan_graph(const Graph& graph, const BufferType& type);

// True when `op`'s kernels may write their result over src[0] (each element read before written).
bool op_runs_in_place(Op op) noexcept;

class GraphAllocator {
 public:
  explicit GraphAllocator(BufferType& type) : type_(&type) {}
  // Plans and places the graph's intermediates, reusing one buffer (replaced by a larger one when
  // a plan needs more; tensors placed in the old buffer lose their memory). Tensors this allocator
  // placed before are planned again, so allocating the same graph twice is fine. Views are then
  // resolved (views of views included). Throws Error(OutOfMemory) when the plan exceeds the
  // buffer type's max_size or the allocation fails.
  void allocate(Graph& graph);
  size_t peak() const noexcept { return peak_; }
  Buffer* buffer() const noexcept { return buffer_.get(); }
  // The plan of the last allocate().
  const AllocationPlan& plan() const noexcept { return plan_; }

 private:
  BufferType* type_;
  std::unique_ptr<Buffer> buffer_;
  AllocationPlan plan_;
  size_t peak_ = 0;
};

}  // namespace tessera
