#pragma once
// Positions of a graph's tensors (node i, leaf j), and a graph's structure as a comparable key:
// what the scheduler's plan depends on, without the addresses and view offsets that change from
// one token's graph to the next.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/graph.h"

namespace tessera {

// Which tensor of a graph: node i (>= 0), leaf j (-2 - j), or none (-1).
using Ref = int32_t;
inline constexpr Ref kNoRef = -1;
inline constexpr bool is_node_ref(Ref r) noexcept { return r >= 0; }
inline constexpr bool is_leaf_ref(Ref r) noexcept { return r <= -2; }
inline constexpr size_t leaf_of(Ref r) noexcept { return static_cast<size_t>(-2 - r); }
inline constexpr Ref leaf_ref(size_t j) noexcept { return -2 - static_cast<Ref>(j); }

class GraphIndex {
 public:
  // Indexes the graph's nodes and leafs; sources outside the graph (a sub-graph made by
  // Graph::from_nodes) become extra leafs, in the order they are first read.
  void build(const Graph& graph);

  const std::vector<Tensor*>& nodes() const noexcept { return *nodes_; }
  const std::vector<Tensor*>& leafs() const noexcept { return leafs_; }
  Ref find(const Tensor* t) const noexcept;
  // Source k of node i (k == kMaxSources: its view source).
  Ref src(size_t node, int k) const noexcept { return node_refs_[node * kSlots + static_cast<size_t>(k)]; }
  Ref leaf_view_src(size_t leaf) const noexcept { return leaf_view_refs_[leaf]; }
  // The tensor holding r's memory (view sources are always roots: Context::new_view).
  Ref root(Ref r) const noexcept {
    const Ref v = is_node_ref(r)   ? src(static_cast<size_t>(r), kMaxSources)
                  : is_leaf_ref(r) ? leaf_view_src(leaf_of(r))
                                   : kNoRef;
    return v != kNoRef ? v : r;
  }
  Tensor* tensor(Ref r) const noexcept {
    return is_node_ref(r) ? (*nodes_)[static_cast<size_t>(r)] : leafs_[leaf_of(r)];
  }

  static constexpr size_t kSlots = kMaxSources + 1;  // sources, then the view source

 private:
  Ref insert(const Tensor* t, Ref r);
  Ref ref_of(Tensor* t);  // finds t, adding it as an extra leaf when the graph lacks it

  const std::vector<Tensor*>* nodes_ = nullptr;
  std::vector<Tensor*> leafs_;
  std::vector<Ref> node_refs_;       // kSlots per node
  std::vector<Ref> leaf_view_refs_;  // per leaf
  // Open addressing (linear probing) from tensor address to Ref; rebuilt for every graph, so
  // it is a flat array rather than a node-based map.
  struct Slot {
    const Tensor* key;
    Ref ref;
  };
  std::vector<Slot> table_;
  size_t mask_ = 0;
};

// A sequence of words and their hash; equal keys mean graphs with one structure.
class Signature {
 public:
  void clear() noexcept {
    words_.clear();
    hash_ = 0x84222325cbf29ce4ull;
  }
  void add(uint64_t w) noexcept {
    words_.push_back(w);
    hash_ = (hash_ ^ w) * 0x100000001b3ull;
    hash_ ^= hash_ >> 29;
  }
  uint64_t hash() const noexcept { return hash_; }
  bool operator==(const Signature& o) const noexcept { return hash_ == o.hash_ && words_ == o.words_; }

 private:
  std::vector<uint64_t> words_;
  uint64_t hash_ = 0x84222325cbf29ce4ull;
};

}  // namespace tessera
