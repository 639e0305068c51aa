#include "device/backend.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/env.h"
#include "tessera/log.h"
#include "tessera/op_batch.h"

namespace tessera::device {
namespace {

constexpr int64_t kDefaultMinBatch = 32;
constexpr size_t kMaxPrepared = 16;  // split shapes kept (as the scheduler's plans)

int64_t env_min_batch() { return env_int_or("TESSERA_OFFLOAD_MIN_BATCH", kDefaultMinBatch, 0, INT64_MAX); }

bool env_checkpoints() { return env_flag("TESSERA_DEVICE_CHECKPOINTS"); }

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (t.data == nullptr) raise(ErrorCode::InvalidArgument, "{}: tensor {} has no memory", what, t.describe());
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    raise(ErrorCode::InvalidArgument, "{}: range [{}, {}) is outside tensor {} of {} bytes", what, offset,
          offset + size, t.describe(), t.nbytes());
}

char* root_data(const Tensor& t) { return static_cast<char*>(layout_root(t).data); }

bool in_host_memory(const Tensor& t) {
  const Tensor& root = t.view_src != nullptr ? *t.view_src : t;
  return root.buffer == nullptr || root.buffer->type().is_host();
}

// An event of a DeviceBackend; recorded on another kind of backend it waits for that backend.
class DeviceEvent final : public Event {
 public:
  DeviceEvent(Runtime& runtime, std::unique_ptr<StreamEvent> event)
      : runtime_(&runtime), event_(std::move(event)) {}
  void record(Backend& backend) override {
    auto* db = dynamic_cast<DeviceBackend*>(&backend);
    if (db != nullptr && &db->runtime() == runtime_) {
      runtime_->event_record(*event_, db->stream());
      on_stream_ = true;
    } else {
      backend.synchronize();  // a backend without streams: its work is done once this returns
      on_stream_ = false;
    }
  }
  void synchronize() override {
    if (on_stream_) runtime_->event_synchronize(*event_);
  }
  // Queues a wait on `stream`; false when there is nothing to wait for.
  bool enqueue_wait(Runtime& runtime, Stream& stream) {
    if (!on_stream_) return true;
    if (&runtime != runtime_) return false;
    runtime_->stream_wait_event(stream, *event_);
    return true;
  }

 private:
  Runtime* runtime_;
  std::unique_ptr<StreamEvent> event_;
  bool on_stream_ = false;
};

}  // namespace

DeviceBackend::DeviceBackend(Device& device, Runtime& runtime, int index, const OpLibrary& ops)
    : device_(&device),
      runtime_(&runtime),
      index_(index),
      ops_(&ops),
      stream_(runtime.create_stream(index)),
      pool_(make_device_pool(runtime, index)),
      min_batch_(env_min_batch()) {
  RawAllocator pinned;
  pinned.allocate = [&runtime, index](size_t size) { return runtime.host_alloc(index, size); };
  pinned.free = [&runtime, index](void* p) { runtime.host_free(index, p); };
  staging_ = std::make_unique<BestFitPool>(std::move(pinned));
  checkpoints_enabled_ = env_checkpoints();
  if (checkpoints_enabled_) checkpoint_hook_ = [this](const Tensor& node) { checkpoint(node); };
}

DeviceBackend::~DeviceBackend() {
  try {
    runtime_->stream_synchronize(*stream_);
  } catch (const Error& e) {
    log(LogLevel::Warn,
        fmt::format("{}: error from async work dropped at destruction: {}", name(), e.what()));
  }
  prepared_.clear();  // a library's captured graphs go before the stream
  checkpoints_.clear();
  spare_events_.clear();
  stream_.reset();  // no host function can touch the pools after this
  pool_.reset();
  staging_.reset();
}

std::string DeviceBackend::name() const { return runtime_->properties(index_).name; }

std::string DeviceBackend::label(const Tensor& node) const {
  return fmt::format("{}: {} (node {})", name(), op_name(node.op), node.describe());
}

bool DeviceBackend::supports(const Tensor& op) const { return ops_->supports(op); }

bool DeviceBackend::wants_offload(const Tensor& op) const {
  const int64_t batch = op_batch_size(op);
  return batch > 0 && batch >= min_batch_;
}

void DeviceBackend::check_on_device(const Tensor& t, const char* what) const {
  const DeviceBuffer* b = device_buffer_of(t);
  if (b != nullptr && &b->runtime() == runtime_ && b->device_index() == index_ && t.data != nullptr) return;
  const Tensor& root = t.view_src != nullptr ? *t.view_src : t;
  raise(ErrorCode::InvalidArgument, "{}: {} {} is not in {} memory (it is in {})", name(), what, t.describe(),
        name(), root.buffer != nullptr ? root.buffer->type().name() : std::string("no buffer"));
}

// The split's shape signature: per tensor the graph reads from outside (in order of first use)
// its type, shape, strides and view source; per node its op, type, flags, shape, strides,
// parameters and sources by position; the outputs. Never addresses or view offsets.
DeviceBackend::Prepared& DeviceBackend::prepared_for(const Graph& graph, const SplitView& split) {
  split_index_.build(graph);
  const auto& nodes = split_index_.nodes();
  const auto& leafs = split_index_.leafs();
  key_.clear();
  key_.add(static_cast<uint64_t>(nodes.size()) | static_cast<uint64_t>(leafs.size()) << 32);
  auto add_shape = [&](const Tensor& t) {
    for (int64_t n : t.ne) key_.add(static_cast<uint64_t>(n));
    for (size_t n : t.nb) key_.add(n);
  };
  auto add_ref = [&](Ref r) { key_.add(static_cast<uint32_t>(r)); };
  for (size_t j = 0; j < leafs.size(); ++j) {
    key_.add(static_cast<uint64_t>(leafs[j]->type) | static_cast<uint64_t>(leafs[j]->flags) << 8);
    add_shape(*leafs[j]);
    add_ref(split_index_.leaf_view_src(j));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Tensor& n = *nodes[i];
    key_.add(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.type) << 8 |
             static_cast<uint64_t>(n.flags) << 16 | static_cast<uint64_t>(split.is_output(&n)) << 48);
    add_shape(n);
    if (!is_view_op(n.op))
      for (int32_t p : n.params) key_.add(static_cast<uint32_t>(p));
    for (int k = 0; k < static_cast<int>(GraphIndex::kSlots); ++k) add_ref(split_index_.src(i, k));
  }
  for (size_t i = 0; i < prepared_.size(); ++i)
    if (prepared_[i]->key == key_) {
      std::rotate(prepared_.begin(), prepared_.begin() + static_cast<std::ptrdiff_t>(i),
                  prepared_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return *prepared_.front();
    }
  // A new shape: every computed node must be supported before the library sees the split.
  for (Tensor* node : graph.nodes()) {
    if (node->op == Op::None || is_view_op(node->op) || node->nelements() == 0) continue;
    if (!ops_->supports(*node)) {
      std::string types;
      for (const Tensor* s : node->src)
        if (s != nullptr) types += fmt::format("{}{}", types.empty() ? "" : ", ", s->describe());
      raise(ErrorCode::Unsupported, "{}: op {} is not supported for node {} (sources: {})", name(),
            op_name(node->op), node->describe(), types);
    }
  }
  auto p = std::make_unique<Prepared>();
  p->key = key_;
  p->exe = ops_->prepare(split);
  ++stats_.prepared;
  prepared_.insert(prepared_.begin(), std::move(p));
  if (prepared_.size() > kMaxPrepared) prepared_.pop_back();
  return *prepared_.front();
}

void DeviceBackend::compute(Graph& graph) {
  const SplitView split{graph.nodes(), graph.outputs()};
  Prepared& p = prepared_for(graph, split);
  for (Tensor* node : graph.nodes()) {
    if (node->op == Op::None || is_view_op(node->op) || node->nelements() == 0) continue;
    check_on_device(*node, "result");
    for (const Tensor* s : node->src)
      if (s != nullptr) check_on_device(*s, "source");
  }
  OpContext ctx;
  ctx.runtime = runtime_;
  ctx.device = index_;
  ctx.stream = stream_.get();
  ctx.pool = pool_.get();
  ctx.staging = staging_.get();
  ctx.enqueued = checkpoints_enabled_ ? &checkpoint_hook_ : nullptr;
  stats_.fused_nodes = p.exe->fused_nodes();
  // The first run launches; the first repeat of the shape may capture; later repeats replay.
  if (p.captured) {
    p.exe->replay(ctx, split);
    ++stats_.replayed;
  } else if (p.runs == 1 && p.exe->capture(ctx, split)) {
    p.captured = true;
    ++stats_.captured;
  } else {
    p.exe->launch(ctx, split);
    ++stats_.launched;
  }
  ++p.runs;
}

void DeviceBackend::checkpoint(const Tensor& node) {
  Checkpoint c;
  if (!spare_events_.empty()) {
    c.event = std::move(spare_events_.back());
    spare_events_.pop_back();
  } else {
    c.event = runtime_->create_event(index_);
  }
  runtime_->event_record(*c.event, *stream_);
  c.label = label(node);
  checkpoints_.push_back(std::move(c));
}

void DeviceBackend::host_func(const Tensor* node, std::function<void()> fn) {
  launch_labeled_host_func(*runtime_, *stream_, node != nullptr ? label(*node) : name(), std::move(fn));
}

void DeviceBackend::release_after_stream(void* ptr, size_t size) {
  ScratchPool* pool = staging_.get();
  host_func(nullptr, [pool, ptr, size] { pool->release(ptr, size); });
}

void DeviceBackend::drain() noexcept {
  try {
    runtime_->stream_synchronize(*stream_);
  } catch (const Error& e) {
    log(LogLevel::Warn, fmt::format("{}: {}", name(), e.what()));
  }
}

void DeviceBackend::synchronize() {
  try {
    runtime_->stream_synchronize(*stream_);
  } catch (const Error& e) {
    std::string culprit;
    for (auto& c : checkpoints_)
      if (culprit.empty() && runtime_->event_query(*c.event) == EventStatus::Failed) culprit = c.label;
    for (auto& c : checkpoints_) spare_events_.push_back(std::move(c.event));
    checkpoints_.clear();
    if (!culprit.empty()) throw Error(e.code(), fmt::format("{} failed: {}", culprit, e.what()));
    throw;
  }
  for (auto& c : checkpoints_) spare_events_.push_back(std::move(c.event));
  checkpoints_.clear();
}

void DeviceBackend::set_async(Tensor& t, const void* src, size_t offset, size_t size) {
  check_range(t, offset, size, "set_async");
  if (size == 0) return;
  if (in_host_memory(t)) {
    tensor_set(t, src, offset, size);
    return;
  }
  check_on_device(t, "tensor");
  const WeightLayout& layout = ops_->weight_layout();
  const Tensor& root = layout_root(t);
  if (!layout.encodes(root)) {
    runtime_->copy_h2d_async(*stream_, static_cast<char*>(t.data) + offset, src, size);
    return;
  }
  // Encode into pinned staging now; the stream uploads it and gives the staging back.
  const size_t start = offset_in_root(t, offset, size);
  const auto spans = layout.spans(root, start, size);
  const size_t bytes = span_bytes(spans);
  char* host = static_cast<char*>(staging_->allocate(bytes));
  try {
    char* base = root_data(t);
    size_t pos = 0;
    if (!layout.encode_fills_spans()) {  // the spans' other bytes: read them first, in order
      for (const ImageSpan& sp : spans) {
        runtime_->copy_d2h_async(*stream_, host + pos, base + sp.offset, sp.size);
        pos += sp.size;
      }
      runtime_->stream_synchronize(*stream_);
    }
    layout.encode(root, start, size, src, ImageWindow(spans, host));
    pos = 0;
    for (const ImageSpan& sp : spans) {
      runtime_->copy_h2d_async(*stream_, base + sp.offset, host + pos, sp.size);
      pos += sp.size;
    }
  } catch (...) {
    drain();  // an enqueued piece may still read the staging
    staging_->release(host, bytes);
    throw;
  }
  release_after_stream(host, bytes);
}

void DeviceBackend::get_async(const Tensor& t, void* dst, size_t offset, size_t size) {
  check_range(t, offset, size, "get_async");
  if (size == 0) return;
  if (in_host_memory(t)) {
    tensor_get(t, dst, offset, size);
    return;
  }
  check_on_device(t, "tensor");
  const WeightLayout& layout = ops_->weight_layout();
  const Tensor& root = layout_root(t);
  if (!layout.encodes(root)) {
    runtime_->copy_d2h_async(*stream_, dst, static_cast<const char*>(t.data) + offset, size);
    return;
  }
  // Download into pinned staging; a host function decodes it into dst in stream order.
  const size_t start = offset_in_root(t, offset, size);
  auto spans = std::make_shared<std::vector<ImageSpan>>(layout.spans(root, start, size));
  const size_t bytes = span_bytes(*spans);
  char* host = static_cast<char*>(staging_->allocate(bytes));
  try {
    const char* base = root_data(t);
    size_t pos = 0;
    for (const ImageSpan& sp : *spans) {
      runtime_->copy_d2h_async(*stream_, host + pos, base + sp.offset, sp.size);
      pos += sp.size;
    }
  } catch (...) {
    drain();
    staging_->release(host, bytes);
    throw;
  }
  ScratchPool* pool = staging_.get();
  // The root's descriptor as it is now: the caller may drop its tensors before the stream runs.
  auto desc = std::make_shared<Tensor>(root);
  desc->src = {};
  const WeightLayout* lp = &layout;
  host_func(nullptr, [=] {
    lp->decode(*desc, start, size, ImageWindow(*spans, host), dst);
    pool->release(host, bytes);
  });
}

bool DeviceBackend::copy_async(const Tensor& src, Tensor& dst) {
  if (src.type != dst.type || src.nbytes() != dst.nbytes() || src.data == nullptr) return false;
  const DeviceBuffer* to = device_buffer_of(dst);
  if (to == nullptr || &to->runtime() != runtime_ || to->device_index() != index_) return false;
  const size_t n = src.nbytes();
  if (n == 0) return true;
  if (in_host_memory(src)) {
    set_async(dst, src.data, 0, n);
    return true;
  }
  const DeviceBuffer* from = device_buffer_of(src);
  if (from == nullptr || &from->runtime() != runtime_) return false;
  if (ops_->weight_layout().encodes(layout_root(src)) && (src.view_src != nullptr || dst.view_src != nullptr))
    return false;
  const int sdev = from->device_index();
  if (sdev != index_ && !runtime_->can_access_peer(index_, sdev)) return false;
  runtime_->copy_d2d_async(*stream_, dst.data, sdev, src.data, n);
  return true;
}

std::unique_ptr<Event> DeviceBackend::create_event() {
  return std::make_unique<DeviceEvent>(*runtime_, runtime_->create_event(index_));
}

void DeviceBackend::wait(Event& event) {
  auto* de = dynamic_cast<DeviceEvent*>(&event);
  if (de != nullptr && de->enqueue_wait(*runtime_, *stream_)) return;
  event.synchronize();  // another runtime's or kind of event: the host waits
}

}  // namespace tessera::device
