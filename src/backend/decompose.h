#pragma once
// Fused ops as the ops they are made of, for a backend that lacks the fused kernel: the scheduler
// runs a decomposition in place of the node on that backend (scheduler.cpp). Its nodes belong to
// the plan, not to the caller's graph: they read the fused node's sources through a hub (a copy of
// the node whose sources the plan binds per compute like any mirror's) and write the node's own
// memory, so the nodes after it read the result where they always do.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/context.h"
#include "tessera/tensor.h"

namespace tessera {

class Decomposition {
 public:
  // The nodes to run in place of the fused node, in order (views included); the fused node itself
  // is not among them (see Scheduler: it becomes an op-less node holding the result).
  const std::vector<Tensor*>& nodes() const noexcept { return nodes_; }
  // The fused node as it was, with its sources: the plan writes the hub's sources (input copies,
  // the caller's leafs of this compute), then calls rebind().
  Tensor& hub() noexcept { return hub_; }
  // Points the nodes at the hub's current sources and resolves every view's address (call after
  // the hub's sources and the result have memory).
  void rebind();

  // FLASH_ATTN_EXT (ops.h) as MUL_MAT(K, Q), SCALE and TANH when soft-capping, SOFT_MAX with the
  // mask, scale, ALiBi and sinks, MUL_MAT(V^T, P), and a copy of the merged heads into the result, per
  // group of query rows whose KQ holds about `group_bytes` (at least 32 rows). softcap * tanh(s *
  // scale / softcap) is the fused op's definition: the tanh sees the scaled score, and the softmax
  // scales by softcap. V in ggml's rows is transposed once (CONT); the KV cache's transposed V
  // ([n_kv, D_v] per head, seen through a transposed view) is read in place. `result` is the
  // tensor the fused node's consumers read ([D_v, H, n_q, B] F32, contiguous).
  static std::unique_ptr<Decomposition> flash_attn(const Tensor& node, Tensor* result,
                                                   int64_t group_bytes = int64_t{4} << 20);

 private:
  // Node `node`'s source `slot` (kMaxSources: it is a view of) is the hub's source `from`; a view
  // sits `offset` bytes into it.
  struct Link {
    Tensor* node;
    int slot;
    int from;
    size_t offset;
  };
  Tensor* source(int from) const { return hub_.src[static_cast<size_t>(from)]; }
  Tensor* read(Tensor* node, int slot, int from);  // records a source link
  Tensor* viewed(Tensor* view, int from);          // records a view link
  Tensor* add(Tensor* node);                       // appends to nodes_

  Tensor hub_;
  Context ctx_;  // descriptors only
  std::vector<Tensor*> nodes_;
  std::vector<Link> links_;
};

}  // namespace tessera
