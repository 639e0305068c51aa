#include "tessera/graph.h"

#include <algorithm>
#include <cstdint>

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
  for (Tensor* t : g.nodes_) g.mark_visited(t);
  return g;
}

void Graph::expand(Tensor* output) {
  TESSERA_ASSERT(output != nullptr);
  visit(output);
  if (std::find(outputs_.begin(), outputs_.end(), output) == outputs_.end()) outputs_.push_back(output);
  output->flags |= kFlagOutput;
}

bool Graph::mark_visited(const Tensor* t) {
  if (2 * (visited_count_ + 1) > visited_.size()) {  // at most half full
    std::vector<const Tensor*> old(std::max<size_t>(1024, 2 * visited_.size()), nullptr);
    old.swap(visited_);
    visited_count_ = 0;
    for (const Tensor* u : old)
      if (u != nullptr) mark_visited(u);
  }
  const size_t mask = visited_.size() - 1;
  // Tensors are at least 8-byte aligned: mix the address (Fibonacci hashing) before masking.
  size_t i = static_cast<size_t>((reinterpret_cast<uintptr_t>(t) >> 3) * 0x9e3779b97f4a7c15ull >> 20) & mask;
  for (; visited_[i] != nullptr; i = (i + 1) & mask)
    if (visited_[i] == t) return false;
  visited_[i] = t;
  ++visited_count_;
  return true;
}

void Graph::visit(Tensor* root) {
  // Iterative post-order DFS so deep graphs (long chains) cannot overflow the stack.
  struct Frame {
    Tensor* t;
    int next;
  };
  if (!mark_visited(root)) return;
  std::vector<Frame> stack{{root, 0}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    // Sources first, then the view source (a view depends on what it views).
    Tensor* child = nullptr;
    while (f.next <= kMaxSources && child == nullptr) {
      Tensor* c = f.next < kMaxSources ? f.t->src[static_cast<size_t>(f.next)] : f.t->view_src;
      ++f.next;
      if (c != nullptr && mark_visited(c)) child = c;
    }
    if (child != nullptr) {
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
