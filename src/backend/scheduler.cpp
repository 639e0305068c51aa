#include "tessera/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "core/check.h"
#include "tessera/buffer.h"
#include "tessera/device.h"

namespace tessera {
namespace {

const Tensor* root_of(const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; }

bool is_cpu(const Backend* b) { return b->device().kind() == DeviceKind::Cpu; }

std::string node_label(const Tensor& t) {
  std::string types;
  for (const Tensor* s : t.src)
    if (s != nullptr) types += fmt::format("{}{}", types.empty() ? "" : ",", name(s->type));
  return fmt::format("{} {} [{}]", op_name(t.op), t.name.empty() ? std::string("(unnamed)") : t.name, types);
}

}  // namespace

Scheduler::Scheduler(std::vector<Backend*> backends) : backends_(std::move(backends)) {
  if (backends_.empty()) raise(ErrorCode::InvalidArgument, "Scheduler: no backends given");
  for (Backend* b : backends_)
    if (b == nullptr) raise(ErrorCode::InvalidArgument, "Scheduler: null backend");
  if (!is_cpu(backends_.back()))
    raise(ErrorCode::InvalidArgument, "Scheduler: the last backend must be the CPU (got {})",
          backends_.back()->name());
}

Scheduler::~Scheduler() = default;

void Scheduler::pin(const Tensor* node, Backend* backend) {
  if (std::find(backends_.begin(), backends_.end(), backend) == backends_.end())
    raise(ErrorCode::InvalidArgument, "Scheduler: pinned backend {} is not one of the scheduler's",
          backend != nullptr ? backend->name() : std::string("(null)"));
  pinned_[node] = backend;
}

Backend* Scheduler::backend_of(const Tensor* node) const noexcept {
  auto it = assigned_.find(node);
  return it == assigned_.end() ? nullptr : it->second;
}

// The backend whose memory holds t's bytes: its producer's backend for nodes, the device that owns
// the buffer for leafs (host memory belongs to the CPU).
Backend* Scheduler::owner_of_memory(const Tensor* t) const {
  const Tensor* root = root_of(t);
  if (root->op != Op::None) {
    if (Backend* b = backend_of(root)) return b;
  }
  if (root->buffer == nullptr || root->buffer->type().is_host()) return backends_.back();
  for (Backend* b : backends_)
    if (root->buffer->type().device() == &b->device()) return b;
  raise(ErrorCode::InvalidArgument,
        "Scheduler: tensor {} lives in {} memory, which no scheduled backend owns", root->describe(),
        root->buffer->type().name());
}

void Scheduler::assign(const Graph& graph) {
  assigned_.clear();
  fallbacks_.clear();
  Backend* cpu = backends_.back();
  for (Tensor* node : graph.nodes()) {
    Backend* chosen = nullptr;
    if (auto it = pinned_.find(node); it != pinned_.end()) {
      chosen = it->second;
    } else if (is_view_op(node->op)) {
      chosen = owner_of_memory(node);  // views run nowhere; they live with their memory
    } else if (node->view_src != nullptr) {
      chosen = owner_of_memory(node);  // CPY writes into its destination's memory
      if (!chosen->supports(*node))
        raise(ErrorCode::Unsupported,
              "Scheduler: {} must run on {} (it writes there), which does not support it", node_label(*node),
              chosen->name());
    } else {
      // 1. Where its weights live.
      Backend* preferred = nullptr;
      for (const Tensor* s : node->src) {
        if (s == nullptr || root_of(s)->op != Op::None) continue;
        Backend* owner = owner_of_memory(s);
        if (!is_cpu(owner)) preferred = owner;
      }
      // 2. Stay on the device that produced an input (keeps activations on the device).
      if (preferred == nullptr) {
        for (const Tensor* s : node->src) {
          if (s == nullptr || root_of(s)->op == Op::None) continue;
          Backend* owner = owner_of_memory(s);
          if (!is_cpu(owner)) {
            preferred = owner;
            break;
          }
        }
      }
      // 3. A device that wants to run it even though its weights are in host memory.
      if (preferred == nullptr) {
        for (Backend* b : backends_)
          if (!is_cpu(b) && b->supports(*node) && b->wants_offload(*node)) {
            preferred = b;
            break;
          }
      }
      if (preferred != nullptr && preferred->supports(*node)) {
        chosen = preferred;
      } else {
        chosen = cpu;
        if (preferred != nullptr)
          fallbacks_.push_back({node_label(*node), fmt::format("{} does not support it", preferred->name())});
      }
    }
    assigned_[node] = chosen;
  }
}

void Scheduler::build_splits(const Graph& graph) {
  splits_.clear();
  for (Tensor* node : graph.nodes()) {
    Backend* b = assigned_.at(node);
    // View nodes compute nothing: they join whatever split is open.
    if (splits_.empty() || (splits_.back().backend != b && !is_view_op(node->op))) {
      if (!splits_.empty() && std::all_of(splits_.back().nodes.begin(), splits_.back().nodes.end(),
                                          [](const Tensor* t) { return is_view_op(t->op); })) {
        splits_.back().backend = b;  // a split of views only takes the next backend
      } else {
        splits_.push_back({b, {}, {}, 0, 0});
      }
    }
    splits_.back().nodes.push_back(node);
    if (!is_view_op(node->op)) ++splits_.back().computed;
  }
}

void Scheduler::compute(Graph& graph) {
  assign(graph);
  build_splits(graph);

  // Which split computes each node, to find values used outside their split.
  std::unordered_map<const Tensor*, size_t> split_of;
  for (size_t i = 0; i < splits_.size(); ++i)
    for (const Tensor* n : splits_[i].nodes) split_of[n] = i;
  std::unordered_set<const Tensor*> used_elsewhere(graph.outputs().begin(), graph.outputs().end());
  for (size_t i = 0; i < splits_.size(); ++i)
    for (const Tensor* n : splits_[i].nodes)
      for (const Tensor* s : n->src) {
        if (s == nullptr) continue;
        const Tensor* r = root_of(s);
        auto it = split_of.find(r);
        if (it != split_of.end() && it->second != i) used_elsewhere.insert(r);
      }

  // Allocate each split's intermediates in its backend's memory.
  if (allocators_.size() < splits_.size()) {
    allocators_.resize(splits_.size());
    allocator_types_.resize(splits_.size(), nullptr);
  }
  for (size_t i = 0; i < splits_.size(); ++i) {
    auto& split = splits_[i];
    std::vector<Tensor*> outs;
    for (Tensor* n : split.nodes)
      if (used_elsewhere.count(n)) outs.push_back(n);
    Graph sub = Graph::from_nodes(split.nodes, outs);
    BufferType& type = split.backend->device().buffer_type();
    if (!allocators_[i] || allocator_types_[i] != &type) {
      allocators_[i] = std::make_unique<GraphAllocator>(type);
      allocator_types_[i] = &type;
    }
    allocators_[i]->allocate(sub);
  }

  // Inputs each split reads from another backend's memory: copy the whole root, view it alike.
  copies_ = std::make_unique<Context>();
  if (input_buffers_.size() < splits_.size()) input_buffers_.resize(splits_.size());
  replaced_.clear();
  struct Copy {
    Tensor* from;
    Tensor* to;
    Backend* source;
  };
  std::vector<std::vector<Copy>> copies(splits_.size());
  for (size_t i = 0; i < splits_.size(); ++i) {
    auto& split = splits_[i];
    std::unordered_map<const Tensor*, Tensor*> root_copy;
    size_t total = 0;
    std::vector<std::pair<Tensor*, size_t>> placed;
    BufferType& type = split.backend->device().buffer_type();
    for (Tensor* n : split.nodes) {
      if (is_view_op(n->op)) continue;
      for (Tensor* s : n->src) {
        if (s == nullptr) continue;
        Backend* owner = owner_of_memory(s);
        if (owner == split.backend) continue;
        Tensor* root = const_cast<Tensor*>(root_of(s));
        if (!root_copy.count(root)) {
          Tensor* c = copies_->new_tensor(root->type, std::span<const int64_t>(root->ne.data(), 4));
          c->name = root->name + "#" + split.backend->name();
          root_copy[root] = c;
          const size_t align = type.alignment();
          placed.push_back({c, total});
          total += (type.alloc_size(*c) + align - 1) / align * align;
          copies[i].push_back({root, c, owner});
          split.inputs.push_back(root);
          split.bytes_copied += root->nbytes();
        }
      }
    }
    if (!placed.empty()) {
      // Kept across computes: a graph per token reuses the same memory.
      auto& buffer = input_buffers_[i];
      if (!buffer || &buffer->type() != &type || buffer->size() < total) buffer = type.allocate(total);
      for (auto& [c, offset] : placed) buffer->place(*c, offset);
    }
    // Rewrite the split's sources to the copies (restored after the run).
    for (Tensor* n : split.nodes) {
      if (is_view_op(n->op)) continue;
      for (auto& s : n->src) {
        if (s == nullptr) continue;
        auto it = root_copy.find(root_of(s));
        if (it == root_copy.end()) continue;
        Tensor* replacement = it->second;
        if (s->view_src != nullptr) {
          replacement = copies_->new_view(it->second, s->type, s->ne, s->nb, s->view_offset);
        }
        replaced_[n][replacement] = s;
        s = replacement;
      }
    }
  }

  // Run the splits in order; each waits (by event) for the backends whose results it copies.
  std::vector<std::unique_ptr<Event>> done(splits_.size());
  auto restore = [&] {
    for (auto& [node, map] : replaced_) {
      Tensor* n = const_cast<Tensor*>(node);
      for (auto& s : n->src)
        if (s != nullptr)
          if (auto it = map.find(s); it != map.end()) s = const_cast<Tensor*>(it->second);
    }
  };
  try {
    std::unordered_map<Backend*, Event*> last_event;
    std::vector<char> staging;
    for (size_t i = 0; i < splits_.size(); ++i) {
      auto& split = splits_[i];
      for (const Copy& c : copies[i]) {
        Event* ev = last_event.count(c.source) ? last_event[c.source] : nullptr;
        if (ev != nullptr) split.backend->wait(*ev);
        if (split.backend->copy_async(*c.from, *c.to)) continue;
        // Staged through host memory: the source must have finished producing it.
        if (ev != nullptr) ev->synchronize();
        c.source->synchronize();
        staging.resize(c.from->nbytes());
        tensor_get(*c.from, staging.data(), 0, staging.size());
        split.backend->set_async(*c.to, staging.data(), 0, staging.size());
        split.backend->synchronize();  // staging is reused by the next copy
      }
      Graph sub = Graph::from_nodes(split.nodes, {});
      split.backend->compute(sub);
      done[i] = split.backend->create_event();
      done[i]->record(*split.backend);
      last_event[split.backend] = done[i].get();
    }
    for (Backend* b : backends_) b->synchronize();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

std::string Scheduler::report() const {
  std::string out;
  for (size_t i = 0; i < splits_.size(); ++i) {
    const auto& s = splits_[i];
    out += fmt::format("split {}: {} — {} nodes ({} computed), {} inputs copied ({:.1f} KiB)\n", i,
                       s.backend->name(), s.nodes.size(), s.computed, s.inputs.size(),
                       static_cast<double>(s.bytes_copied) / 1024.0);
  }
  if (fallbacks_.empty()) {
    out += "no CPU fallbacks\n";
  } else {
    out += fmt::format("{} nodes fell back to the CPU:\n", fallbacks_.size());
    for (const auto& f : fallbacks_) out += fmt::format("  {}: {}\n", f.node, f.reason);
  }
  return out;
}

}  // namespace tessera
