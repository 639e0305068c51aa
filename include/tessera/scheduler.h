#pragma once
// Runs one graph over several backends: assigns each node a backend, cuts the graph into splits
// of consecutive nodes on one backend, copies split inputs between backends (ordered by events),
// and reports the placement.
//
// The scheduler computes its own copy of the graph: the caller's tensors are never written (their
// sources, data and everything else stay as built), and results are read through result(). What
// it decides for a graph (assignment, splits, input copies, memory offsets) is a plan, kept and
// reused for every later graph of the same structure: the same ops, types, shapes, strides, op
// parameters and wiring, with leafs in the same kind of memory. Data addresses and view offsets
// may differ (a token's graph reads other KV positions than the last one's), and the graphs may
// be built in fresh Contexts. A reused plan allocates nothing.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/buffer.h"
#include "tessera/graph.h"

namespace tessera {

// One run of consecutive nodes on one backend. Node positions are indices into graph.nodes().
struct SchedulerSplit {
  Backend* backend = nullptr;
  size_t first_node = 0;
  size_t n_nodes = 0;
  size_t computed = 0;        // nodes that are not views
  size_t inputs = 0;          // tensors copied in from other backends' memory
  size_t bytes_copied = 0;    // per compute
  size_t weights_copied = 0;  // of the inputs, model weights (kFlagWeight)
  size_t weight_bytes_copied = 0;
  size_t decomposed = 0;  // fused nodes (FLASH_ATTN_EXT) the backend lacks, run as their ops
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
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Pins a node to a backend (overrides the policy).
  void pin(const Tensor* node, Backend* backend);
  // Runs the graph: with a cached plan when one of the same structure ran before, else with a
  // new one. Leafs must have memory. Nodes the caller already gave memory are computed there;
  // every other node lives in the scheduler's buffers. Placement, in order of precedence: a pin;
  // views live with their memory; a node writing into existing memory runs where it is; a node
  // reading a leaf in a device's memory runs on that device; a node reading a model weight
  // (kFlagWeight) in host memory runs on the CPU unless a device wants_offload() it; any other
  // node follows the device that produced one of its inputs; else the CPU. A fused node its chosen
  // backend does not support runs there as the ops it is made of when the backend has them all
  // (FLASH_ATTN_EXT: MUL_MAT, SOFT_MAX, MUL_MAT per group of query rows; SchedulerSplit::decomposed);
  // any other node it does not support falls back to the CPU (listed in fallbacks()).
  void compute(const Graph& graph);
  // Plans the graph as compute would (and keeps the plan) and grows the buffers to its needs,
  // touching their memory, but runs nothing: reserving the largest graph up front keeps memory
  // flat when later graphs vary.
  void reserve(const Graph& graph);
  // The last computed graph's result for `node`, one of that graph's outputs (or a view of one):
  // a tensor whose memory holds the value until the next compute, readable with tensor_get.
  // A leaf is returned as it is. Throws Error for a tensor the last graph did not output.
  const Tensor& result(const Tensor& node) const;

  const std::vector<SchedulerSplit>& splits() const noexcept;
  const std::vector<Fallback>& fallbacks() const noexcept;
  // The backend that computed `node` of the last graph (nullptr for other tensors).
  Backend* backend_of(const Tensor* node) const noexcept;
  // Plans made, and computes that reused one.
  uint64_t plans_built() const noexcept { return plans_built_; }
  uint64_t plans_reused() const noexcept { return plans_reused_; }
  // Bytes of memory held for intermediates and input copies, over all backends.
  size_t buffer_bytes() const noexcept;
  // Per split: backend, node count, bytes copied; every node that fell back to the CPU and why;
  // the plan counters.
  std::string report() const;

 private:
  struct Plan;
  struct Arena {
    BufferType* type = nullptr;
    std::unique_ptr<Buffer> buffer;
    uint64_t generation = 0;  // bumped whenever the buffer is replaced
  };

  void describe(const Graph& graph);
  Plan* find_plan();
  std::unique_ptr<Plan> build_plan();
  void assign(Plan& plan);
  void cut_splits(Plan& plan);
  void plan_memory(Plan& plan);
  void bind(Plan& plan);
  void run(Plan& plan);
  size_t owner_of_memory(const Tensor& t) const;
  bool is_cpu(size_t backend) const noexcept { return backend + 1 == backends_.size(); }
  void grow(Arena& arena, size_t bytes);

  std::vector<Backend*> backends_;
  std::vector<size_t> arena_of_backend_;
  std::vector<Arena> arenas_;  // one per distinct buffer type, shared by every plan
  std::unordered_map<const Tensor*, size_t> pinned_;
  std::vector<std::unique_ptr<Plan>> plans_;  // most recently used first
  Plan* current_ = nullptr;                   // the plan of the last compute
  uint64_t plans_built_ = 0, plans_reused_ = 0;
  std::vector<char> staging_;
  // Per compute: the graph's index, signature and per-tensor facts (see scheduler.cpp).
  struct Described;
  std::unique_ptr<Described> now_;
};

}  // namespace tessera
