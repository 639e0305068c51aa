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

// Plans every node that has no memory yet (views resolve through their source). A node may
// reuse a source's memory in place when the op allows it and nothing reads that source later.
// Outputs of the graph are never freed or overwritten.
AllocationPlan plan_graph(const Graph& graph, const BufferType& type);

class GraphAllocator {
 public:
  explicit GraphAllocator(BufferType& type) : type_(&type) {}
  // Plans and places the graph's intermediates, reusing (or growing) one buffer.
  void allocate(Graph& graph);
  size_t peak() const noexcept { return peak_; }
  Buffer* buffer() const noexcept { return buffer_.get(); }

 private:
  BufferType* type_;
  std::unique_ptr<Buffer> buffer_;
  size_t peak_ = 0;
};

}  // namespace tessera
