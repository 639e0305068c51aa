#pragma once
// Executable splits: an op library prepares a whole split (the nodes a DeviceBackend computes in one
// compute call) once per shape into an Executable, which a stream then launches. Preparing is where
// a library lowers the nodes, fuses chains it has kernels for, and chooses kernels; launching only
// binds the split's current addresses and enqueues. A library may also capture the launched work
// into a replayable graph (CUDA graphs, CANN's ACL graph mode) and replay it while the split's
// shapes repeat, as generation steps do. DeviceBackend caches executables by the split's shape
// signature (ops, types, shapes, strides, parameters and wiring; never addresses), so a shape seen
// before is not prepared again.
#include <cstddef>
#include <span>

#include "tessera/tensor.h"

namespace tessera::device {

struct OpContext;

// The nodes of one split, in order (views and no-ops included: a library skips them), and the
// nodes whose values are read after it (the graph's outputs). A node that is not an output and
// has no reader in the split is not needed after its readers ran, so a library may fuse it away.
struct SplitView {
  std::span<Tensor* const> nodes;
  std::span<Tensor* const> outputs;

  // True when t's value must be in its memory after the split (listed, or flagged kFlagOutput).
  bool is_output(const Tensor* t) const noexcept;
  // How many nodes of the split read t (as a source or through a view of it).
  size_t readers(const Tensor* t) const noexcept;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Enqueues the split's work on ctx.stream (ctx.node is null; set it per node for labels and
  // check_async). `split` has the shapes the executable was prepared for; addresses may differ.
  virtual void launch(const OpContext& ctx, const SplitView& split) = 0;
  // Optional graph capture: launches the split as launch() does while recording it into a graph
  // that replay() can run again; returns true when it did. The default records nothing, does
  // nothing and returns false, and the backend keeps calling launch().
  virtual bool capture(const OpContext& /*ctx*/, const SplitView& /*split*/) { return false; }
  // Runs the captured graph again with the split's current addresses (after capture() said true).
  virtual void replay(const OpContext& ctx, const SplitView& split) { launch(ctx, split); }
  // Nodes whose work another node's kernel does (0 without fusion): what --report shows.
  virtual size_t fused_nodes() const noexcept { return 0; }
};

}  // namespace tessera::device
