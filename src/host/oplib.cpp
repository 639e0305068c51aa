#include "host/oplib.h"

#include "core/check.h"
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

void run(const device::OpContext& ctx, Tensor& node) {
  if (node.op == Op::None || is_view_op(node.op)) return;
  auto snapshot = std::make_shared<NodeSnapshot>(node);
  auto& runtime = static_cast<HostRuntime&>(*ctx.runtime);
  runtime.launch_kernel(*ctx.stream, [snapshot, label = ctx.label()](KernelWorkspace& ws) {
    if (ws.threads == nullptr) ws.threads = std::make_unique<cpu::ThreadPool>(cpu::hardware_threads());
    cpu::ComputeContext c;
    c.pool = ws.threads.get();
    c.n_threads = ws.threads->size();
    c.kernels = cpu::KernelSet::Fast;
    c.scratch = &ws.scratch;
    try {
      cpu::compute_node(c, snapshot->node);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", label, e.what()));
    }
  });
}

}  // namespace

std::shared_ptr<const device::OpLibrary> make_op_library() {
  auto lib = std::make_shared<device::OpLibrary>();
  lib->set_weight_format(device::WeightFormat::native());
  for (int i = 0; i < kOpCount; ++i) lib->set(static_cast<Op>(i), {&supports, &run});
  return lib;
}

}  // namespace tessera::host
