// Graph memory planning by tensor lifetimes: one pass over the nodes in order, a best-fit free list
// with coalescing, and in-place reuse of a dying source's memory for elementwise ops.
#include "tessera/allocator.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>
#include <vector>

#include "core/check.h"
#include "tessera/context.h"

namespace tessera {
namespace {

Tensor* root_of(Tensor* t) {
  while (t->view_src != nullptr) t = t->view_src;
  return t;
}

size_t align_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

// Free ranges below `top_` (the end of the used region), kept coalesced: no two free ranges touch,
// and none touches top_ (releasing the highest range lowers top_ instead).
class FreeList {
 public:
  // Best fit: the smallest free range that holds `size` (the lowest on ties), else grow the top.
  size_t allocate(size_t size) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    if (best == free_.end()) {
      const size_t offset = top_;
      top_ += size;
      peak_ = std::max(peak_, top_);
      return offset;
    }
    const size_t offset = best->first, rest = best->second - size;
    free_.erase(best);
    if (rest > 0) free_.emplace(offset + size, rest);
    return offset;
  }

  void release(size_t offset, size_t size) {
    TESSERA_ASSERT(offset + size <= top_);
    auto next = free_.lower_bound(offset);
    TESSERA_ASSERT(next == free_.end() || offset + size <= next->first);  // no double free
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      TESSERA_ASSERT(prev->first + prev->second <= offset);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    if (next != free_.end() && offset + size == next->first) {
      size += next->second;
      free_.erase(next);
    }
    if (offset + size == top_)
      top_ = offset;
    else
      free_.emplace(offset, size);
  }

  size_t peak() const noexcept { return peak_; }

 private:
  std::map<size_t, size_t> free_;  // offset -> size
  size_t top_ = 0;
  size_t peak_ = 0;
};

struct Block {
  size_t offset;
  size_t size;  // aligned; 0 for an empty tensor (which takes no bytes)
};

class Planner {
 public:
  Planner(const Graph& graph, const BufferType& type) : graph_(graph), type_(type), align_(type.alignment()) {
    TESSERA_ASSERT(align_ > 0);
  }

  AllocationPlan run() {
    collect_lifetimes();
    // Leafs without memory (inputs of a descriptor-only context) first: they live throughout.
    for (Tensor* leaf : graph_.leafs())
      if (needs_memory(*leaf)) take(leaf, fresh(*leaf));
    const auto& nodes = graph_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      Tensor* node = nodes[i];
      if (needs_memory(*node)) {
        if (reuses_source(*node, i)) {
          Tensor* src = node->src[0];
          auto it = owned_.find(src);
          plan_.in_place[node] = src;
          plan_.offsets[node] = it->second.offset;
          owned_.emplace(node, it->second);
          owned_.erase(it);
        } else {
          take(node, fresh(*node));
        }
      }
      // Release what this node read (or viewed) for the last time, once its result has memory.
      for (Tensor* r : roots_read_by(*node))
        if (last_use_[r] == i) release(r);
      // A result nothing reads and nobody asked for is dead at once.
      if (node->view_src == nullptr && !last_use_.count(node)) release(node);
    }
    plan_.peak = free_.peak();
    return std::move(plan_);
  }

 private:
  static bool needs_memory(const Tensor& t) { return t.data == nullptr && t.view_src == nullptr; }

  // Distinct memory roots a node reads: its sources' roots, and its own root if it is a view
  // (a view keeps its source alive at least until it is made, even if nothing reads it).
  struct Roots {
    std::array<Tensor*, kMaxSources + 1> items{};
    size_t count = 0;
    Tensor* const* begin() const { return items.data(); }
    Tensor* const* end() const { return items.data() + count; }
    void add(Tensor* r) {
      if (std::find(begin(), end(), r) == end()) items[count++] = r;
    }
  };
  static Roots roots_read_by(const Tensor& node) {
    Roots roots;
    for (Tensor* s : node.src)
      if (s != nullptr) roots.add(root_of(s));
    if (node.view_src != nullptr) roots.add(root_of(node.view_src));
    return roots;
  }

  void collect_lifetimes() {
    const size_t n = graph_.nodes().size() + graph_.leafs().size();
    last_use_.reserve(n);
    plan_.offsets.reserve(n);
    for (Tensor* leaf : graph_.leafs()) pinned_.insert(root_of(leaf));
    for (Tensor* out : graph_.outputs()) pinned_.insert(root_of(out));
    const auto& nodes = graph_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i]->flags & kFlagOutput) pinned_.insert(root_of(nodes[i]));
      for (Tensor* r : roots_read_by(*nodes[i])) last_use_[r] = i;
    }
  }

  Block fresh(const Tensor& t) {
    const size_t bytes = type_.alloc_size(t);
    if (bytes == 0) return {0, 0};
    const size_t size = align_up(bytes, align_);
    return {free_.allocate(size), size};
  }

  void take(Tensor* t, Block b) {
    plan_.offsets[t] = b.offset;
    owned_.emplace(t, b);
  }

  // Gives back the memory of a root this plan placed, unless it must outlive the graph.
  void release(Tensor* root) {
    if (pinned_.count(root)) return;
    auto it = owned_.find(root);
    if (it == owned_.end()) return;  // memory from elsewhere, or already handed on in place
    if (it->second.size > 0) free_.release(it->second.offset, it->second.size);
    owned_.erase(it);
  }

  // In place over src[0]: an elementwise-safe op, src[0] is this plan's own dying intermediate
  // (not a leaf, view, output or foreign memory), and both describe the same contiguous bytes.
  bool reuses_source(const Tensor& node, size_t step) const {
    Tensor* src = node.src[0];
    if (!op_runs_in_place(node.op) || src == nullptr || src->view_src != nullptr || src->op == Op::None)
      return false;
    if (pinned_.count(src) || !owned_.count(src)) return false;
    auto last = last_use_.find(src);
    if (last == last_use_.end() || last->second != step) return false;
    if (src->type != node.type || !src->same_shape(node) || !src->is_contiguous() || !node.is_contiguous())
      return false;
    if (src->nbytes() != node.nbytes() || type_.alloc_size(*src) < type_.alloc_size(node)) return false;
    // Another operand reading src's memory at other indices (a broadcast view of it) would see
    // values already overwritten; the very same tensor is read at the same index, which is fine.
    for (size_t k = 1; k < node.src.size(); ++k) {
      Tensor* s = node.src[k];
      if (s != nullptr && s != src && root_of(s) == src) return false;
    }
    return true;
  }

  const Graph& graph_;
  const BufferType& type_;
  const size_t align_;
  FreeList free_;
  AllocationPlan plan_;
  std::unordered_map<const Tensor*, size_t> last_use_;  // root -> last node index reading it
  std::unordered_set<const Tensor*> pinned_;            // roots never released
  std::unordered_map<const Tensor*, Block> owned_;      // roots holding memory of this plan
};

// Sets data for a view and every view it is a view of, from the root down.
void resolve_chain(Tensor* t) {
  std::vector<Tensor*> chain;
  for (Tensor* v = t; v->view_src != nullptr; v = v->view_src) chain.push_back(v);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) resolve_view_data(**it);
}

}  // namespace

bool op_runs_in_place(Op op) noexcept {
  switch (op) {
    // Elementwise: element i of the result depends on element i of src[0] only.
    case Op::Unary:
    case Op::LeakyRelu:
    case Op::Scale:
    case Op::Sqr:
    case Op::Clamp:
    case Op::Add:
    case Op::Mul:
    case Op::Div:
    // Row-wise, and every kernel reads a whole row before writing it (CPU: SOFT_MAX loads the row
    // into the result and works there; ROPE rotates from a copy of the row).
    case Op::SoftMax:
    case Op::Rope:
      return true;
    default:
      return false;
  }
}

AllocationPlan plan_graph(const Graph& graph, const BufferType& type) { return Planner(graph, type).run(); }

void GraphAllocator::allocate(Graph& graph) {
  // What this allocator placed before is planned afresh.
  if (buffer_ != nullptr) {
    auto forget = [&](Tensor* t) {
      if (t->view_src == nullptr && t->buffer == buffer_.get()) {
        t->data = nullptr;
        t->buffer = nullptr;
      }
    };
    for (Tensor* t : graph.leafs()) forget(t);
    for (Tensor* t : graph.nodes()) forget(t);
  }
  plan_ = plan_graph(graph, *type_);
  peak_ = plan_.peak;
  if (plan_.peak > type_->max_size())
    raise(ErrorCode::OutOfMemory,
          "{}: the graph needs a buffer of {:.1f} MiB, more than the {:.1f} MiB allowed", type_->name(),
          static_cast<double>(plan_.peak) / (1024.0 * 1024.0),
          static_cast<double>(type_->max_size()) / (1024.0 * 1024.0));
  if (buffer_ == nullptr || buffer_->size() < plan_.peak) {
    buffer_.reset();  // give the old memory back before taking more
    buffer_ = type_->allocate(plan_.peak);
  }
  auto place = [&](Tensor* t) {
    auto it = plan_.offsets.find(t);
    if (it != plan_.offsets.end()) buffer_->place(*t, it->second);
  };
  for (Tensor* t : graph.leafs()) place(t);
  for (Tensor* t : graph.nodes()) place(t);
  for (Tensor* t : graph.leafs()) resolve_chain(t);
  for (Tensor* t : graph.nodes()) resolve_chain(t);
}

}  // namespace tessera
