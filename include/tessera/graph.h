#pragma once
// A static compute graph: nodes in topological order, leafs (inputs/weights), outputs.
#include <initializer_list>
#include <span>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::initializer_list<Tensor*> outputs);
  explicit Graph(std::span<Tensor* const> outputs);

  // A sub-graph over an explicit node list (already in topological order); tensors that the
  // nodes read but that are not listed are treated as external inputs.
  static Graph from_nodes(std::vector<Tensor*> nodes, std::vector<Tensor*> outputs);

  // Adds `output` and everything it depends on (each tensor once); marks it as an output.
  void expand(Tensor* output);

  const std::vector<Tensor*>& nodes() const noexcept { return nodes_; }
  const std::vector<Tensor*>& leafs() const noexcept { return leafs_; }
  const std::vector<Tensor*>& outputs() const noexcept { return outputs_; }
  size_t size() const noexcept { return nodes_.size(); }

 private:
  void visit(Tensor* t);
  // Adds t to the visited set; false when it was there already.
  bool mark_visited(const Tensor* t);
  std::vector<Tensor*> nodes_;
  std::vector<Tensor*> leafs_;
  std::vector<Tensor*> outputs_;
  // The visited tensors: open addressing (linear probing) in a flat table, as a model's graph is
  // built for every token (a node-based set cost about 70 ns a tensor).
  std::vector<const Tensor*> visited_;
  size_t visited_count_ = 0;
};

}  // namespace tessera
