#include "host/oplib.h"

#include "core/check.h"
#include "cpu/fused.h"
#include "cpu/kernels.h"
#include "cpu/thread_pool.h"
#include "host/runtime.h"
#include "tessera/cpu.h"
#include "tessera/error.h"

namespace tessera::host {
namespace {

// A node and its sources as they were when the op was enqueued: the kernel runs later, on the
// worker, and the caller may rewrite or drop its descriptors once compute returns.
struct NodeSnapshot {
  Tensor node;
  std::array<Tensor, kMaxSources> sources;

  explicit NodeSnapshot(const Tensor& n) : node(n) {
    for (size_t i = 0; i < kMaxSources; ++i)
      if (n.src[i] != nullptr) {
        sources[i] = *n.src[i];
        node.src[i] = &sources[i];
      }
  }
};

bool supports(const Tensor& node) { return cpu::supports_node(node); }

cpu::ComputeContext kernel_context(KernelWorkspace& ws) {
  if (ws.threads == nullptr) ws.threads = std::make_unique<cpu::ThreadPool>(cpu::hardware_threads());
  cpu::ComputeContext c;
  c.pool = ws.threads.get();
  c.n_threads = ws.threads->size();
  c.kernels = cpu::KernelSet::Fast;
  c.scratch = &ws.scratch;
  return c;
}

void run(const device::OpContext& ctx, Tensor& node) {
  if (node.op == Op::None || is_view_op(node.op)) return;
  auto snapshot = std::make_shared<NodeSnapshot>(node);
  auto& runtime = static_cast<HostRuntime&>(*ctx.runtime);
  runtime.launch_kernel(*ctx.stream, [snapshot, label = ctx.label()](KernelWorkspace& ws) {
    try {
      cpu::compute_node(kernel_context(ws), snapshot->node);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", label, e.what()));
    }
  });
}

// RMS_NORM then MUL by a weight row, as one kernel (cpu::run_rms_norm_mul), when nothing else
// reads the norm: its value is never written.
void run_rms_norm_mul(const device::OpContext& ctx, Tensor& norm, Tensor& mul) {
  auto n = std::make_shared<NodeSnapshot>(norm);
  auto m = std::make_shared<NodeSnapshot>(mul);
  m->node.src[0] = &n->node;
  device::OpContext c = ctx;
  c.node = &mul;
  auto& runtime = static_cast<HostRuntime&>(*ctx.runtime);
  runtime.launch_kernel(*ctx.stream, [n, m, label = c.label()](KernelWorkspace& ws) {
    try {
      cpu::run_rms_norm_mul(kernel_context(ws), n->node, m->node);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", label, e.what()));
    }
  });
  if (ctx.enqueued != nullptr) (*ctx.enqueued)(mul);
}

// A split as steps: single nodes through their entries, and fused chains (positions in the split).
class HostExecutable final : public device::Executable {
 public:
  HostExecutable(const device::OpLibrary& lib, const device::SplitView& split) : lib_(&lib) {
    const auto& nodes = split.nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Tensor& n = *nodes[i];
      if (n.op == Op::None || is_view_op(n.op) || n.nelements() == 0) continue;
      // The next computed node (views in between are only metadata) may fold this one in.
      size_t j = i + 1;
      while (j < nodes.size() && (nodes[j]->op == Op::None || is_view_op(nodes[j]->op))) ++j;
      if (j < nodes.size() && n.op == Op::RmsNorm && cpu::can_fuse_rms_norm_mul(n, *nodes[j]) &&
          !split.is_output(&n) && split.readers(&n) == 1) {
        steps_.push_back({i, j});
        ++fused_;
        i = j;
        continue;
      }
      steps_.push_back({i, kNone});
    }
  }
  void launch(const device::OpContext& ctx, const device::SplitView& split) override {
    for (const Step& s : steps_) {
      if (s.fused_into == kNone)
        lib_->launch_node(ctx, *split.nodes[s.node]);
      else
        run_rms_norm_mul(ctx, *split.nodes[s.node], *split.nodes[s.fused_into]);
    }
  }
  size_t fused_nodes() const noexcept override { return fused_; }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  struct Step {
    size_t node;
    size_t fused_into;  // kNone: the node alone
  };
  const device::OpLibrary* lib_;
  std::vector<Step> steps_;
  size_t fused_ = 0;
};

class HostOpLibrary final : public device::OpLibrary {
 public:
  std::unique_ptr<device::Executable> prepare(const device::SplitView& split) const override {
    return std::make_unique<HostExecutable>(*this, split);
  }
};

}  // namespace

std::shared_ptr<const device::OpLibrary> make_op_library() {
  auto lib = std::make_shared<HostOpLibrary>();
  for (int i = 0; i < kOpCount; ++i) lib->set(static_cast<Op>(i), {&supports, &run});
  return lib;
}

}  // namespace tessera::host
