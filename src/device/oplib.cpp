#include "device/oplib.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "tessera/error.h"

namespace tessera::device {
namespace {

// Runs every computed node through its entry, in order.
class NodeByNode final : public Executable {
 public:
  NodeByNode(const OpLibrary& lib, const SplitView& split) : lib_(&lib) {
    for (size_t i = 0; i < split.nodes.size(); ++i) {
      const Tensor& n = *split.nodes[i];
      if (n.op != Op::None && !is_view_op(n.op) && n.nelements() > 0) computed_.push_back(i);
    }
  }
  void launch(const OpContext& ctx, const SplitView& split) override {
    for (size_t i : computed_) lib_->launch_node(ctx, *split.nodes[i]);
  }

 private:
  const OpLibrary* lib_;
  std::vector<size_t> computed_;
};

}  // namespace

bool SplitView::is_output(const Tensor* t) const noexcept {
  return (t->flags & kFlagOutput) != 0 || std::find(outputs.begin(), outputs.end(), t) != outputs.end();
}

size_t SplitView::readers(const Tensor* t) const noexcept {
  size_t n = 0;
  for (const Tensor* node : nodes) {
    bool reads = node->view_src == t;
    for (const Tensor* s : node->src) reads = reads || s == t;
    n += reads ? 1 : 0;
  }
  return n;
}

std::unique_ptr<Executable> OpLibrary::prepare(const SplitView& split) const {
  return std::make_unique<NodeByNode>(*this, split);
}

void OpLibrary::launch_node(const OpContext& ctx, Tensor& node) const {
  OpContext c = ctx;
  c.node = &node;
  try {
    run(c, node);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", c.label(), e.what()));
  }
  if (c.enqueued != nullptr) (*c.enqueued)(node);
}

void launch_labeled_host_func(Runtime& runtime, Stream& stream, std::string where, std::function<void()> fn) {
  runtime.launch_host_func(stream, [fn = std::move(fn), where = std::move(where)] {
    try {
      fn();
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", where, e.what()));
    } catch (const std::exception& e) {
      throw Error(ErrorCode::DeviceError, fmt::format("{}: {}", where, e.what()));
    }
  });
}

std::string OpContext::label() const {
  const std::string device_name = runtime->properties(device).name;
  if (node == nullptr) return device_name;
  return fmt::format("{}: {} (node {})", device_name, op_name(node->op), node->describe());
}

void OpContext::check_async(const void* src, size_t size, std::function<void(const void*)> check) const {
  TESSERA_ASSERT(size > 0 && size <= 64 && staging != nullptr);
  ScratchPool* pool = staging;
  void* host = pool->allocate(size);
  try {
    runtime->copy_d2h_async(*stream, host, src, size);
  } catch (...) {
    pool->release(host, size);
    throw;
  }
  launch_labeled_host_func(*runtime, *stream, label(), [host, size, pool, check = std::move(check)] {
    struct Release {
      ScratchPool* pool;
      void* ptr;
      size_t size;
      ~Release() { pool->release(ptr, size); }
    } release{pool, host, size};
    check(host);
  });
}

}  // namespace tessera::device
