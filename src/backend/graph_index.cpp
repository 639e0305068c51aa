#include "backend/graph_index.h"

#include <algorithm>
#include <bit>

namespace tessera {
namespace {

size_t slot_of(const Tensor* t, size_t mask) noexcept {
  // Tensors are at least 8-byte aligned: drop the low bits, then spread the rest.
  const auto p = reinterpret_cast<uintptr_t>(t) >> 3;
  return static_cast<size_t>((p * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

}  // namespace

Ref GraphIndex::find(const Tensor* t) const noexcept {
  if (t == nullptr || table_.empty()) return kNoRef;
  for (size_t i = slot_of(t, mask_);; i = (i + 1) & mask_) {
    if (table_[i].key == t) return table_[i].ref;
    if (table_[i].key == nullptr) return kNoRef;
  }
}

Ref GraphIndex::insert(const Tensor* t, Ref r) {
  size_t i = slot_of(t, mask_);
  while (table_[i].key != nullptr && table_[i].key != t) i = (i + 1) & mask_;
  if (table_[i].key == nullptr) table_[i] = {t, r};
  return table_[i].ref;
}

Ref GraphIndex::ref_of(Tensor* t) {
  if (t == nullptr) return kNoRef;
  const Ref found = find(t);
  if (found != kNoRef) return found;
  // A source outside the graph: an extra leaf. Keep the table at most half full.
  if ((leafs_.size() + nodes_->size() + 1) * 2 > table_.size()) {
    std::vector<Slot> old = std::move(table_);
    table_.assign(old.size() * 2, Slot{nullptr, kNoRef});
    mask_ = table_.size() - 1;
    for (const Slot& s : old)
      if (s.key != nullptr) insert(s.key, s.ref);
  }
  leafs_.push_back(t);
  leaf_view_refs_.push_back(kNoRef);
  const Ref r = insert(t, leaf_ref(leafs_.size() - 1));
  const size_t j = leafs_.size() - 1;
  leaf_view_refs_[j] = ref_of(t->view_src);
  return r;
}

void GraphIndex::build(const Graph& graph) {
  nodes_ = &graph.nodes();
  leafs_.assign(graph.leafs().begin(), graph.leafs().end());
  const size_t n = nodes_->size() + leafs_.size();
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, n * 2));
  if (table_.size() != capacity) {
    table_.assign(capacity, Slot{nullptr, kNoRef});
    mask_ = capacity - 1;
  } else {
    std::fill(table_.begin(), table_.end(), Slot{nullptr, kNoRef});
  }
  for (size_t i = 0; i < nodes_->size(); ++i) insert((*nodes_)[i], static_cast<Ref>(i));
  for (size_t j = 0; j < leafs_.size(); ++j) insert(leafs_[j], leaf_ref(j));

  leaf_view_refs_.assign(leafs_.size(), kNoRef);
  for (size_t j = 0; j < graph.leafs().size(); ++j) leaf_view_refs_[j] = ref_of(leafs_[j]->view_src);
  node_refs_.resize(nodes_->size() * kSlots);
  for (size_t i = 0; i < nodes_->size(); ++i) {
    const Tensor* t = (*nodes_)[i];
    Ref* refs = &node_refs_[i * kSlots];
    for (int k = 0; k < kMaxSources; ++k) refs[k] = ref_of(t->src[static_cast<size_t>(k)]);
    refs[kMaxSources] = ref_of(t->view_src);
  }
}

}  // namespace tessera
