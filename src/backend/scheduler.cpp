// The scheduler works on mirrors: its own copy of each node, wired to the other mirrors, to the
// caller's leafs and to input copies. A plan (mirrors, assignment, splits, input copies, memory
// offsets) is built once per graph structure; a later graph of that structure only binds its
// leafs, view offsets and caller-placed memory to the plan's mirrors, then runs.
#include "tessera/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "backend/decompose.h"
#include "backend/graph_index.h"
#include "core/check.h"
#include "tessera/allocator.h"
#include "tessera/context.h"
#include "tessera/device.h"

namespace tessera {
namespace {

constexpr size_t kMaxPlans = 16;  // distinct shapes kept (prompt batches, padded KV lengths)
constexpr size_t kNone = SIZE_MAX;
constexpr int kViewSlot = kMaxSources;  // GraphIndex slot of the view source

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::string node_label(const Tensor& t) {
  std::string types;
  for (const Tensor* s : t.src)
    if (s != nullptr) types += fmt::format("{}{}", types.empty() ? "" : ",", name(s->type));
  return fmt::format("{} {} [{}]", op_name(t.op), t.name.empty() ? std::string("(unnamed)") : t.name, types);
}

uint64_t pack2(Ref a, Ref b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) | static_cast<uint64_t>(static_cast<uint32_t>(b))
                                                               << 32;
}

}  // namespace

// What compute() learns about the graph it is given, before it looks for a plan.
struct Scheduler::Described {
  GraphIndex index;
  Signature key;
  std::vector<size_t> leaf_owner;   // per leaf: the backend whose memory holds it
  std::vector<size_t> node_memory;  // per node: the backend owning memory the caller gave it, or kNone
  std::vector<size_t> node_pin;     // per node: the pinned backend, or kNone
  std::vector<Ref> outputs;
};

struct Scheduler::Plan {
  Signature key;
  std::vector<Tensor> mirrors;     // one per node of the graph, in its order
  std::deque<Tensor> copies;       // input copies, and views of them
  std::vector<size_t> backend;     // per node
  std::vector<uint8_t> is_output;  // per node: its memory outlives the graph
  std::vector<SchedulerSplit> splits;
  std::vector<Fallback> fallbacks;
  // Fused nodes whose backend lacks them run as the ops they are made of (decompose.h): per node
  // its decomposition's index, or kNone. The node's mirror then only holds the result.
  std::vector<size_t> decomposed;
  std::vector<std::unique_ptr<Decomposition>> decompositions;
  std::vector<Graph> graphs;  // per split: its mirrors (and decompositions' nodes)
  struct Input {
    Tensor* copy;
    Ref root;     // what is copied (a node's mirror or a leaf)
    size_t from;  // the backend whose memory holds it
    size_t wait;  // the split whose event orders the copy, or kNone
  };
  std::vector<std::vector<Input>> inputs;      // per split
  std::vector<std::unique_ptr<Event>> events;  // per split; null where nothing waits for it
  // Per compute, from the caller's graph: leafs read (slot kViewSlot: viewed), views' offsets,
  // memory the caller gave a node.
  struct LeafUse {
    Tensor* mirror;
    int slot;
    size_t leaf;
  };
  std::vector<LeafUse> leaf_uses;
  struct ViewBind {
    Tensor* view;
    Ref from;  // the caller's tensor holding the offset
  };
  std::vector<ViewBind> views;
  std::vector<size_t> caller_memory;
  struct Placement {
    Tensor* tensor;
    size_t arena;
    size_t offset;
  };
  std::vector<Placement> placements;
  std::vector<size_t> arena_bytes;          // per arena: what this plan needs
  std::vector<uint64_t> placed_generation;  // per arena: the buffer the placements refer to
};

Scheduler::Scheduler(std::vector<Backend*> backends)
    : backends_(std::move(backends)), now_(std::make_unique<Described>()) {
  if (backends_.empty()) raise(ErrorCode::InvalidArgument, "Scheduler: no backends given");
  for (Backend* b : backends_)
    if (b == nullptr) raise(ErrorCode::InvalidArgument, "Scheduler: null backend");
  if (backends_.back()->device().kind() != DeviceKind::Cpu)
    raise(ErrorCode::InvalidArgument, "Scheduler: the last backend must be the CPU (got {})",
          backends_.back()->name());
  for (Backend* b : backends_) {
    BufferType* type = &b->device().buffer_type();
    auto it = std::find_if(arenas_.begin(), arenas_.end(), [&](const Arena& a) { return a.type == type; });
    if (it == arenas_.end()) {
      arenas_.push_back({type, nullptr, 0});
      it = arenas_.end() - 1;
    }
    arena_of_backend_.push_back(static_cast<size_t>(it - arenas_.begin()));
  }
}

Scheduler::~Scheduler() = default;

void Scheduler::pin(const Tensor* node, Backend* backend) {
  auto it = std::find(backends_.begin(), backends_.end(), backend);
  if (it == backends_.end())
    raise(ErrorCode::InvalidArgument, "Scheduler: pinned backend {} is not one of the scheduler's",
          backend != nullptr ? backend->name() : std::string("(null)"));
  pinned_[node] = static_cast<size_t>(it - backends_.begin());
}

// The backend owning a root's memory: host memory (or none: an allocating Context) is the CPU's.
size_t Scheduler::owner_of_memory(const Tensor& root) const {
  if (root.buffer == nullptr || root.buffer->type().is_host()) return backends_.size() - 1;
  for (size_t b = 0; b < backends_.size(); ++b)
    if (root.buffer->type().device() == &backends_[b]->device()) return b;
  raise(ErrorCode::InvalidArgument,
        "Scheduler: tensor {} lives in {} memory, which no scheduled backend owns", root.describe(),
        root.buffer->type().name());
}

// Everything a plan depends on goes into the key: per leaf its type, shape, strides, flags and
// whose memory it is in; per node its op, type, shape, strides, flags, parameters, sources (as
// positions), pin and caller-given memory; the outputs. Not addresses or view offsets.
void Scheduler::describe(const Graph& graph) {
  Described& d = *now_;
  d.index.build(graph);
  const auto& nodes = d.index.nodes();
  const auto& leafs = d.index.leafs();
  d.key.clear();
  d.key.add(pack2(static_cast<Ref>(nodes.size()), static_cast<Ref>(leafs.size())));
  auto add_shape = [&](const Tensor& t) {
    for (int64_t n : t.ne) d.key.add(static_cast<uint64_t>(n));
    for (size_t n : t.nb) d.key.add(n);
  };
  d.leaf_owner.resize(leafs.size());
  for (size_t j = 0; j < leafs.size(); ++j) {
    const Tensor& leaf = *leafs[j];
    const Tensor& root = leaf.view_src != nullptr ? *leaf.view_src : leaf;
    if (root.data == nullptr)
      raise(ErrorCode::InvalidArgument, "Scheduler: leaf {} has no memory (place inputs and weights first)",
            leaf.describe());
    d.leaf_owner[j] = owner_of_memory(root);
    d.key.add(static_cast<uint64_t>(leaf.type) | static_cast<uint64_t>(leaf.flags) << 8 |
              static_cast<uint64_t>(d.leaf_owner[j]) << 40);
    add_shape(leaf);
    d.key.add(static_cast<uint32_t>(d.index.leaf_view_src(j)));
  }
  d.node_memory.assign(nodes.size(), kNone);
  d.node_pin.assign(nodes.size(), kNone);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Tensor& n = *nodes[i];
    if (n.view_src == nullptr && n.data != nullptr) d.node_memory[i] = owner_of_memory(n);
    if (!pinned_.empty())
      if (auto it = pinned_.find(&n); it != pinned_.end()) d.node_pin[i] = it->second;
    d.key.add(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.type) << 8 |
              static_cast<uint64_t>(n.flags & 0xffff) << 16 | static_cast<uint64_t>(d.node_pin[i] + 1) << 32 |
              static_cast<uint64_t>(d.node_memory[i] + 1) << 48);
    add_shape(n);
    // A view is its shape, strides, source and offset; its parameters repeat them.
    if (!is_view_op(n.op))
      for (size_t p = 0; p < n.params.size(); p += 2)
        d.key.add(static_cast<uint64_t>(static_cast<uint32_t>(n.params[p])) |
                  static_cast<uint64_t>(static_cast<uint32_t>(n.params[p + 1])) << 32);
    d.key.add(pack2(d.index.src(i, 0), d.index.src(i, 1)));
    d.key.add(pack2(d.index.src(i, 2), d.index.src(i, 3)));
    d.key.add(static_cast<uint32_t>(d.index.src(i, kViewSlot)));
  }
  d.outputs.clear();
  for (const Tensor* out : graph.outputs()) {
    d.outputs.push_back(d.index.find(out));
    d.key.add(static_cast<uint32_t>(d.outputs.back()));
  }
}

Scheduler::Plan* Scheduler::find_plan() {
  for (size_t i = 0; i < plans_.size(); ++i) {
    if (!(plans_[i]->key == now_->key)) continue;
    std::rotate(plans_.begin(), plans_.begin() + static_cast<std::ptrdiff_t>(i),
                plans_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    return plans_.front().get();
  }
  return nullptr;
}

void Scheduler::compute(const Graph& graph) {
  current_ = nullptr;
  describe(graph);
  Plan* plan = find_plan();
  if (plan != nullptr) {
    ++plans_reused_;
  } else {
    plans_.insert(plans_.begin(), build_plan());
    if (plans_.size() > kMaxPlans) plans_.pop_back();
    plan = plans_.front().get();
    ++plans_built_;
  }
  current_ = plan;
  bind(*plan);
  run(*plan);
}

void Scheduler::reserve(const Graph& graph) {
  current_ = nullptr;
  describe(graph);
  if (find_plan() == nullptr) {
    plans_.insert(plans_.begin(), build_plan());
    if (plans_.size() > kMaxPlans) plans_.pop_back();
    ++plans_built_;
  }
  // Resident now rather than page by page as later graphs first reach further into the buffers.
  for (Arena& a : arenas_)
    if (a.buffer != nullptr && a.type->is_host()) a.buffer->clear(0);
}

std::unique_ptr<Scheduler::Plan> Scheduler::build_plan() {
  const Described& d = *now_;
  const auto& nodes = d.index.nodes();
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  p.key = d.key;
  p.mirrors.resize(nodes.size());
  p.is_output.assign(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Tensor& m = p.mirrors[i];
    m = *nodes[i];
    for (int k = 0; k < static_cast<int>(GraphIndex::kSlots); ++k) {
      const Ref r = d.index.src(i, k);
      Tensor* t = r == kNoRef      ? nullptr
                  : is_node_ref(r) ? &p.mirrors[static_cast<size_t>(r)]
                                   : d.index.tensor(r);
      (k == kViewSlot ? m.view_src : m.src[static_cast<size_t>(k)]) = t;
    }
    if (m.view_src != nullptr) {
      p.views.push_back({&m, static_cast<Ref>(i)});
    } else if (d.node_memory[i] != kNone) {
      p.caller_memory.push_back(i);
    } else {
      m.data = nullptr;  // planned below
      m.buffer = nullptr;
    }
    if (m.flags & kFlagOutput) p.is_output[i] = 1;
  }
  for (Ref r : d.outputs)
    if (is_node_ref(r)) p.is_output[static_cast<size_t>(r)] = 1;
  // The planner and supports() see the mirrors with the caller's current memory.
  for (size_t i : p.caller_memory) {
    p.mirrors[i].data = nodes[i]->data;
    p.mirrors[i].buffer = nodes[i]->buffer;
  }
  assign(p);
  cut_splits(p);
  plan_memory(p);
  return plan;
}

void Scheduler::assign(Plan& p) {
  const Described& d = *now_;
  const size_t cpu = backends_.size() - 1;
  // The backend whose memory holds a source's bytes: its producer's, or its leaf's owner.
  auto owner = [&](Ref r) {
    const Ref root = d.index.root(r);
    return is_node_ref(root) ? p.backend[static_cast<size_t>(root)] : d.leaf_owner[leaf_of(root)];
  };
  p.backend.assign(p.mirrors.size(), cpu);
  p.decomposed.assign(p.mirrors.size(), kNone);
  // A fused node `b` lacks, as ops b runs (all of them), or null.
  auto decomposition = [&](size_t i, size_t b) -> std::unique_ptr<Decomposition> {
    if (p.mirrors[i].op != Op::FlashAttnExt) return nullptr;
    auto dec = Decomposition::flash_attn(p.mirrors[i], &p.mirrors[i]);
    for (const Tensor* n : dec->nodes())
      if (!is_view_op(n->op) && !backends_[b]->supports(*n)) return nullptr;
    return dec;
  };
  for (size_t i = 0; i < p.mirrors.size(); ++i) {
    const Tensor& m = p.mirrors[i];
    size_t chosen = kNone;
    const Ref view = d.index.src(i, kViewSlot);
    if (d.node_pin[i] != kNone) {
      chosen = d.node_pin[i];
    } else if (is_view_op(m.op)) {
      chosen = view != kNoRef ? owner(view) : cpu;  // views run nowhere; they live with their memory
    } else if (view != kNoRef || d.node_memory[i] != kNone) {
      // CPY writes into its destination, a caller-placed node into its memory: run there.
      chosen = view != kNoRef ? owner(view) : d.node_memory[i];
      if (!backends_[chosen]->supports(m))
        raise(ErrorCode::Unsupported,
              "Scheduler: {} must run on {} (it writes there), which does not support it", node_label(m),
              backends_[chosen]->name());
    } else {
      // 1. A device holding a leaf it reads (a weight, a KV cache).
      size_t preferred = kNone;
      bool host_weight = false;
      for (int k = 0; k < kMaxSources; ++k) {
        const Ref r = d.index.src(i, k);
        if (r == kNoRef || !is_leaf_ref(d.index.root(r))) continue;
        const size_t o = owner(r);
        if (!is_cpu(o)) {
          preferred = o;
        } else {
          const Tensor& s = *d.index.tensor(r);
          const Tensor& root = *d.index.tensor(d.index.root(r));
          host_weight = host_weight || ((s.flags | root.flags) & kFlagWeight) != 0;
        }
      }
      if (preferred == kNone && host_weight) {
        // 2. Weights in host memory: the CPU, unless a device finds the batch worth copying them.
        for (size_t b = 0; b < cpu && preferred == kNone; ++b)
          if (backends_[b]->supports(m) && backends_[b]->wants_offload(m)) preferred = b;
        if (preferred == kNone) preferred = cpu;
      }
      // 3. Stay on the device that produced an input (keeps activations on the device).
      for (int k = 0; k < kMaxSources && preferred == kNone; ++k) {
        const Ref r = d.index.src(i, k);
        if (r == kNoRef || !is_node_ref(d.index.root(r))) continue;
        if (!is_cpu(owner(r))) preferred = owner(r);
      }
      if (preferred == kNone || is_cpu(preferred)) {
        chosen = cpu;
      } else if (backends_[preferred]->supports(m)) {
        chosen = preferred;
      } else if (auto dec = decomposition(i, preferred)) {
        chosen = preferred;
        p.decomposed[i] = p.decompositions.size();
        p.decompositions.push_back(std::move(dec));
      } else {
        chosen = cpu;
        p.fallbacks.push_back(
            {node_label(m), fmt::format("{} does not support it", backends_[preferred]->name())});
      }
    }
    p.backend[i] = chosen;
  }
}

void Scheduler::cut_splits(Plan& p) {
  for (size_t i = 0; i < p.mirrors.size(); ++i) {
    const size_t b = p.backend[i];
    const bool view = is_view_op(p.mirrors[i].op);
    // View nodes compute nothing: they join whatever split is open.
    if (p.splits.empty() || (p.splits.back().backend != backends_[b] && !view)) {
      if (!p.splits.empty() && p.splits.back().computed == 0) {
        p.splits.back().backend = backends_[b];  // a split of views only takes the next backend
      } else {
        SchedulerSplit s;
        s.backend = backends_[b];
        s.first_node = i;
        p.splits.push_back(s);
      }
    }
    ++p.splits.back().n_nodes;
    if (!view) ++p.splits.back().computed;
  }
}

// Each split's intermediates are planned by lifetime in a region of its backend's arena, followed
// by its input copies; regions of one plan never overlap, and every plan shares the arenas.
void Scheduler::plan_memory(Plan& p) {
  const Described& d = *now_;
  const size_t n_nodes = p.mirrors.size();
  std::vector<size_t> backend_index(p.splits.size());
  std::vector<size_t> split_of(n_nodes);
  for (size_t s = 0; s < p.splits.size(); ++s) {
    const auto& split = p.splits[s];
    backend_index[s] =
        static_cast<size_t>(std::find(backends_.begin(), backends_.end(), split.backend) - backends_.begin());
    for (size_t i = split.first_node; i < split.first_node + split.n_nodes; ++i) split_of[i] = s;
  }
  // Values read outside their split, and the outputs, must outlive their split.
  std::vector<uint8_t> keep(p.is_output);
  for (size_t i = 0; i < n_nodes; ++i)
    for (int k = 0; k < kMaxSources; ++k) {
      const Ref root = d.index.root(d.index.src(i, k));
      if (is_node_ref(root) && split_of[static_cast<size_t>(root)] != split_of[i])
        keep[static_cast<size_t>(root)] = 1;
    }
  for (Ref r : d.outputs) {
    const Ref root = d.index.root(r);
    if (is_node_ref(root)) keep[static_cast<size_t>(root)] = 1;
  }

  std::vector<size_t> cursor(arenas_.size(), 0);
  std::vector<uint8_t> replaced(n_nodes * GraphIndex::kSlots, 0);
  std::vector<uint8_t> needs_event(p.splits.size(), 0);
  p.inputs.resize(p.splits.size());
  for (size_t s = 0; s < p.splits.size(); ++s) {
    auto& split = p.splits[s];
    const size_t b = backend_index[s];
    const size_t a = arena_of_backend_[b];
    BufferType& type = *arenas_[a].type;
    // Inputs from other backends' memory: copy each root once, view the copy as the source was.
    std::vector<std::pair<Ref, Tensor*>> root_copy, view_copy;
    auto find = [](std::vector<std::pair<Ref, Tensor*>>& list, Ref r) -> Tensor* {
      for (auto& [ref, t] : list)
        if (ref == r) return t;
      return nullptr;
    };
    for (size_t i = split.first_node; i < split.first_node + split.n_nodes; ++i) {
      Tensor& m = p.mirrors[i];
      if (is_view_op(m.op)) continue;
      for (int k = 0; k < kMaxSources; ++k) {
        const Ref r = d.index.src(i, k);
        if (r == kNoRef) continue;
        const Ref root = d.index.root(r);
        const size_t from =
            is_node_ref(root) ? p.backend[static_cast<size_t>(root)] : d.leaf_owner[leaf_of(root)];
        if (from == b) continue;
        Tensor* copy = find(root_copy, root);
        if (copy == nullptr) {
          const Tensor& src_root = *d.index.tensor(root);
          copy = &p.copies.emplace_back();
          copy->type = src_root.type;
          copy->ne = src_root.ne;
          copy->nb = contiguous_strides(src_root.type, src_root.ne);
          copy->name = src_root.name + "#" + split.backend->name();
          root_copy.push_back({root, copy});
          // The copy waits for the last split that ran on the backend it comes from.
          size_t wait = kNone;
          for (size_t t = s; t-- > 0;)
            if (backend_index[t] == from) {
              wait = t;
              needs_event[t] = 1;
              break;
            }
          p.inputs[s].push_back({copy, root, from, wait});
          ++split.inputs;
          split.bytes_copied += src_root.nbytes();
          if (is_leaf_ref(root) && (src_root.flags & kFlagWeight)) {
            ++split.weights_copied;
            split.weight_bytes_copied += src_root.nbytes();
          }
        }
        Tensor* replacement = copy;
        if (r != root) {
          replacement = find(view_copy, r);
          if (replacement == nullptr) {
            const Tensor& view = *d.index.tensor(r);
            replacement = &p.copies.emplace_back();
            replacement->type = view.type;
            replacement->ne = view.ne;
            replacement->nb = view.nb;
            replacement->view_src = copy;
            replacement->name = view.name + "#" + split.backend->name();
            view_copy.push_back({r, replacement});
            p.views.push_back({replacement, r});
          }
        }
        m.src[static_cast<size_t>(k)] = replacement;
        replaced[i * GraphIndex::kSlots + static_cast<size_t>(k)] = 1;
      }
    }

    std::vector<Tensor*> members, outs;
    for (size_t i = split.first_node; i < split.first_node + split.n_nodes; ++i) {
      members.push_back(&p.mirrors[i]);
      if (keep[i]) outs.push_back(&p.mirrors[i]);
      if (p.decomposed[i] == kNone) continue;
      // The decomposition reads the node's sources (input copies included) through its hub; the
      // mirror becomes an op-less node, planned before the ops that write its memory.
      Decomposition& dec = *p.decompositions[p.decomposed[i]];
      Tensor& m = p.mirrors[i];
      dec.hub().src = m.src;
      m.op = Op::None;
      m.src = {};
      dec.rebind();
      members.insert(members.end(), dec.nodes().begin(), dec.nodes().end());
      ++split.decomposed;
    }
    p.graphs.push_back(Graph::from_nodes(members, outs));
    const AllocationPlan memory = plan_graph(p.graphs.back(), type);
    const size_t base = align_up(cursor[a], type.alignment());
    // Mirrors and the decompositions' nodes; never a leaf or an input copy (they have memory).
    for (const auto& [t, offset] : memory.offsets)
      p.placements.push_back({const_cast<Tensor*>(t), a, base + offset});
    cursor[a] = base + memory.peak;
    for (const auto& in : p.inputs[s]) {
      const size_t offset = align_up(cursor[a], type.alignment());
      p.placements.push_back({in.copy, a, offset});
      cursor[a] = offset + type.alloc_size(*in.copy);
    }
  }
  for (size_t s = 0; s < p.splits.size(); ++s)
    p.events.push_back(needs_event[s] ? p.splits[s].backend->create_event() : nullptr);

  for (size_t i = 0; i < n_nodes; ++i)
    for (int k = 0; k < static_cast<int>(GraphIndex::kSlots); ++k) {
      const Ref r = d.index.src(i, k);
      if (is_leaf_ref(r) && !replaced[i * GraphIndex::kSlots + static_cast<size_t>(k)])
        p.leaf_uses.push_back(
            {p.decomposed[i] != kNone ? &p.decompositions[p.decomposed[i]]->hub() : &p.mirrors[i], k, leaf_of(r)});
    }
  p.arena_bytes = cursor;
  p.placed_generation.assign(arenas_.size(), 0);
  for (size_t a = 0; a < arenas_.size(); ++a) grow(arenas_[a], p.arena_bytes[a]);
}

void Scheduler::grow(Arena& arena, size_t bytes) {
  if (bytes == 0 || (arena.buffer != nullptr && arena.buffer->size() >= bytes)) return;
  // A growing arena (shapes still changing) takes some headroom so that it does not grow per token.
  const size_t size = arena.buffer == nullptr ? bytes : std::max(bytes, arena.buffer->size() / 4 * 5);
  if (bytes > arena.type->max_size())
    raise(ErrorCode::OutOfMemory,
          "{}: the graph needs a buffer of {:.1f} MiB, more than the {:.1f} MiB allowed", arena.type->name(),
          static_cast<double>(bytes) / (1024.0 * 1024.0),
          static_cast<double>(arena.type->max_size()) / (1024.0 * 1024.0));
  arena.buffer.reset();  // give the old memory back before taking more
  arena.buffer = arena.type->allocate(std::min(size, arena.type->max_size()));
  ++arena.generation;
}

void Scheduler::bind(Plan& p) {
  const Described& d = *now_;
  for (size_t a = 0; a < arenas_.size(); ++a) {
    if (p.arena_bytes[a] == 0 || p.placed_generation[a] == arenas_[a].generation) continue;
    for (const auto& pl : p.placements)
      if (pl.arena == a) arenas_[a].buffer->place(*pl.tensor, pl.offset);
    p.placed_generation[a] = arenas_[a].generation;
  }
  const auto& nodes = d.index.nodes();
  for (size_t i : p.caller_memory) {
    p.mirrors[i].data = nodes[i]->data;
    p.mirrors[i].buffer = nodes[i]->buffer;
  }
  const auto& leafs = d.index.leafs();
  for (const auto& use : p.leaf_uses)
    (use.slot == kViewSlot ? use.mirror->view_src : use.mirror->src[static_cast<size_t>(use.slot)]) =
        leafs[use.leaf];
  for (const auto& v : p.views) {
    v.view->view_offset = d.index.tensor(v.from)->view_offset;
    resolve_view_data(*v.view);
  }
  for (const auto& dec : p.decompositions) dec->rebind();
}

void Scheduler::run(Plan& p) {
  const Described& d = *now_;
  for (size_t s = 0; s < p.splits.size(); ++s) {
    Backend* backend = p.splits[s].backend;
    for (const auto& in : p.inputs[s]) {
      const Tensor& from =
          is_node_ref(in.root) ? p.mirrors[static_cast<size_t>(in.root)] : *d.index.tensor(in.root);
      Event* ev = in.wait != kNone ? p.events[in.wait].get() : nullptr;
      if (ev != nullptr) backend->wait(*ev);
      if (backend->copy_async(from, *in.copy)) continue;
      // Staged through host memory: the source must have finished producing it.
      if (ev != nullptr) ev->synchronize();
      backends_[in.from]->synchronize();
      staging_.resize(from.nbytes());
      tensor_get(from, staging_.data(), 0, staging_.size());
      backend->set_async(*in.copy, staging_.data(), 0, staging_.size());
      backend->synchronize();  // staging is reused by the next copy
    }
    backend->compute(p.graphs[s]);
    if (p.events[s] != nullptr) p.events[s]->record(*backend);
  }
  for (Backend* b : backends_) b->synchronize();
}

const Tensor& Scheduler::result(const Tensor& node) const {
  const Ref r = current_ != nullptr ? now_->index.find(&node) : kNoRef;
  if (is_leaf_ref(r)) return node;
  if (is_node_ref(r)) {
    const size_t i = static_cast<size_t>(r);
    const Ref root = now_->index.root(r);
    if (current_->is_output[i] || (is_node_ref(root) && current_->is_output[static_cast<size_t>(root)]))
      return current_->mirrors[i];
  }
  raise(ErrorCode::InvalidArgument, "Scheduler: {} is not an output of the last computed graph",
        node.describe());
}

Backend* Scheduler::backend_of(const Tensor* node) const noexcept {
  const Ref r = current_ != nullptr ? now_->index.find(node) : kNoRef;
  return is_node_ref(r) ? backends_[current_->backend[static_cast<size_t>(r)]] : nullptr;
}

const std::vector<SchedulerSplit>& Scheduler::splits() const noexcept {
  static const std::vector<SchedulerSplit> none;
  return current_ != nullptr ? current_->splits : none;
}

const std::vector<Fallback>& Scheduler::fallbacks() const noexcept {
  static const std::vector<Fallback> none;
  return current_ != nullptr ? current_->fallbacks : none;
}

size_t Scheduler::buffer_bytes() const noexcept {
  size_t total = 0;
  for (const Arena& a : arenas_)
    if (a.buffer != nullptr) total += a.buffer->size();
  return total;
}

std::string Scheduler::report() const {
  std::string out;
  const auto& all = splits();
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& s = all[i];
    out += fmt::format("split {}: {} — {} nodes ({} computed{}), {} inputs copied ({:.1f} KiB), {} weights\n",
                       i, s.backend->name(), s.n_nodes, s.computed,
                       s.decomposed > 0 ? fmt::format(", {} decomposed", s.decomposed) : std::string(),
                       s.inputs, static_cast<double>(s.bytes_copied) / 1024.0, s.weights_copied);
  }
  const auto& fb = fallbacks();
  if (fb.empty()) {
    out += "no CPU fallbacks\n";
  } else {
    out += fmt::format("{} nodes fell back to the CPU:\n", fb.size());
    for (const auto& f : fb) out += fmt::format("  {}: {}\n", f.node, f.reason);
  }
  out += fmt::format("plans: {} built, {} reused\n", plans_built_, plans_reused_);
  return out;
}

}  // namespace tessera
