#include "tessera/graph.h"

#include <algorithm>

#include "tessera/error.h"

namespace tessera {

Graph::Graph(std::initializer_list<Tensor*> outputs) {
  for (Tensor* t : outputs) expand(t);
}

Graph::Graph(std::span<Tensor* const> outputs) {
  for (Tensor* t : outputs) expand(t);
}

Graph Graph::from_nodes(std::vector<Tensor*> nodes, std::vector<Tensor*> outputs) {
  Graph g;
  g.nodes_ = std::move(nodes);
  g.outputs_ = std::move(outputs);
  for (Tensor* t : g.nodes_) g.visited_.insert(t);
  return g;
}

void Graph::expand(Tensor* output) {
  TESSERA_ASSERT(output != nullptr);
  visit(output);
  if (std::find(outputs_.begin(), outputs_.end(), output) == outputs_.end()) outputs_.push_back(output);
  output->flags |= kFlagOutput;
}

void Graph::visit(Tensor* root) {
  // Iterative post-order DFS so deep graphs (long chains) cannot overflow the stack.
  struct Frame {
    Tensor* t;
    int next;
  };
  if (visited_.count(root)) return;
  std::vector<Frame> stack{{root, 0}};
  visited_.insert(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    // Sources first, then the view source (a view depends on what it views).
    Tensor* child = nullptr;
    while (f.next <= kMaxSources && child == nullptr) {
      Tensor* c = f.next < kMaxSources ? f.t->src[static_cast<size_t>(f.next)] : f.t->view_src;
      ++f.next;
      if (c != nullptr && !visited_.count(c)) child = c;
    }
    if (child != nullptr) {
      visited_.insert(child);
      stack.push_back({child, 0});
      continue;
    }
    Tensor* t = f.t;
    stack.pop_back();
    if (t->op == Op::None)
      leafs_.push_back(t);
    else
      nodes_.push_back(t);
  }
}

}  // namespace tessera
