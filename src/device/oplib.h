#pragma once
// The op library interface: what a runtime implements to compute graph nodes on its devices.
// One entry per op (supports + run); a runtime fills the table one op family at a time
// (src/<runtime>/ops/<family>.cpp). Entries enqueue work on the context's stream and return
// without waiting; node memory and source memory are device addresses on the context's device.
// A DeviceBackend hands the library whole splits: prepare() turns one into an Executable (the
// default launches the entries node by node; a library may override it to fuse chains, and its
// executables may capture and replay graphs; executable.h).
// The library also owns the weight layout its kernels read (backend/weight_layout.h; device buffers
// store weights in it).
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "backend/weight_layout.h"
#include "device/executable.h"
#include "device/pool.h"
#include "device/runtime.h"
#include "tessera/op_types.h"
#include "tessera/tensor.h"

namespace tessera::device {

// What an op sees while it runs: the device, its stream, scratch memory, and deferred host checks.
struct OpContext {
  Runtime* runtime = nullptr;
  int device = 0;
  Stream* stream = nullptr;
  ScratchPool* pool = nullptr;     // op temporaries: Scratch s(*ctx.pool, bytes)
  ScratchPool* staging = nullptr;  // pinned host memory (check_async's copies)
  const Tensor* node = nullptr;
  // The backend's hook, called once each node's work is enqueued (per-node checkpoints), or null.
  const std::function<void(const Tensor&)>* enqueued = nullptr;

  // Copies `size` (<= 64) bytes at device address src once the work enqueued so far is done and
  // calls check(host copy) on the host, without blocking. An Error check throws surfaces at the
  // backend's next synchronize (or event wait), naming this op and node.
  void check_async(const void* src, size_t size, std::function<void(const void*)> check) const;
  // "OpenCL0: GET_ROWS (node ...)": how errors of this op are named.
  std::string label() const;
};

// Runs fn in stream order (Runtime::launch_host_func); an exception it throws becomes an Error
// whose message starts with `where`.
void launch_labeled_host_func(Runtime& runtime, Stream& stream, std::string where, std::function<void()> fn);

struct OpEntry {
  // nullptr = the op is not supported at all; else true when this node's types/layouts are.
  bool (*supports)(const Tensor& node) = nullptr;
  void (*run)(const OpContext& ctx, Tensor& node) = nullptr;
};

class OpLibrary {
 public:
  virtual ~OpLibrary() = default;
  // Prepares a split whose computed nodes this library supports into an executable, once per
  // shape (the backend caches it). The default launches the entries node by node.
  virtual std::unique_ptr<Executable> prepare(const SplitView& split) const;
  // Enqueues one node through its entry with ctx.node set to it, names errors after the node and
  // calls ctx.enqueued: what executables do for a node they do not fuse.
  void launch_node(const OpContext& ctx, Tensor& node) const;

  bool supports(const Tensor& node) const {
    const int i = static_cast<int>(node.op);
    if (i < 0 || i >= kOpCount) return false;
    const OpEntry& e = table_[static_cast<size_t>(i)];
    // A library refines core's op x type table: it may refuse a combination, never add one.
    return e.supports != nullptr && e.run != nullptr && op_types_defined(node) && e.supports(node);
  }
  // Enqueues node's computation; the caller checked supports(node).
  void run(const OpContext& ctx, Tensor& node) const { table_[static_cast<size_t>(node.op)].run(ctx, node); }
  void set(Op op, OpEntry entry) { table_[static_cast<size_t>(op)] = entry; }

  // How the kernels read weights: ggml's bytes (native_layout()) unless the library sets a layout
  // of its own, which it then owns (set it before devices are made from the library).
  const WeightLayout& weight_layout() const noexcept { return layout_ ? *layout_ : native_layout(); }
  void set_weight_layout(std::shared_ptr<const WeightLayout> layout) noexcept { layout_ = std::move(layout); }

 private:
  std::array<OpEntry, kOpCount> table_{};
  std::shared_ptr<const WeightLayout> layout_;
};

}  // namespace tessera::device
