#pragma once
// Runs one graph over several backends: assigns each node a backend, cuts the graph into splits
// of consecutive nodes on one backend, copies split inputs between backends (ordered by events),
// and reports the placement.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/allocator.h"
#include "tessera/backend.h"
#include "tessera/context.h"
#include "tessera/graph.h"

namespace tessera {

// The graph's tensors belong to the caller and may be gone by the time a report is read, so
// what a report needs is kept as counts and strings.
struct SchedulerSplit {
  Backend* backend = nullptr;
  std::vector<Tensor*> nodes;   // valid only while the graph lives
  std::vector<Tensor*> inputs;  // tensors copied in from other backends' memory (likewise)
  size_t computed = 0;          // nodes that are not views
  size_t bytes_copied = 0;
};

struct Fallback {
  std::string node;  // "OP name [source types]"
  std::string reason;
};

class Scheduler {
 public:
  // Backends in priority order; the last one must be able to run everything (the CPU).
  explicit Scheduler(std::vector<Backend*> backends);
  ~Scheduler();

  // Pins a node to a backend (overrides the policy).
  void pin(const Tensor* node, Backend* backend);
  // Assigns, splits, allocates intermediates in each backend's memory and runs the graph.
  // The graph's leafs must already have memory; outputs are readable with tensor_get afterwards.
  void compute(Graph& graph);

  const std::vector<SchedulerSplit>& splits() const noexcept { return splits_; }
  const std::vector<Fallback>& fallbacks() const noexcept { return fallbacks_; }
  Backend* backend_of(const Tensor* node) const noexcept;
  // Per split: backend, node count, bytes copied; then every node that fell back to the CPU and why.
  std::string report() const;

 private:
  void assign(const Graph& graph);
  void build_splits(const Graph& graph);
  Backend* owner_of_memory(const Tensor* t) const;

  std::vector<Backend*> backends_;
  std::unordered_map<const Tensor*, Backend*> pinned_;
  std::unordered_map<const Tensor*, Backend*> assigned_;
  std::vector<SchedulerSplit> splits_;
  std::vector<Fallback> fallbacks_;
  std::vector<std::unique_ptr<GraphAllocator>> allocators_;  // one per split
  std::vector<BufferType*> allocator_types_;
  std::vector<std::unique_ptr<Buffer>> input_buffers_;  // per split index: its input copies
  std::unique_ptr<Context> copies_;                     // descriptors of input copies
  std::unordered_map<const Tensor*, std::unordered_map<Tensor*, Tensor*>>
      replaced_;  // node -> (orig -> copy)
};

}  // namespace tessera
