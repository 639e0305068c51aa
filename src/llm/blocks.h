#pragma once
// What an architecture's graph builder works with for one micro-batch (GraphBuild), and the
// blocks that architectures share: norms, attention over the KV cache, gated feed-forward.
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/llm/kv_cache.h"
#include "tessera/llm/model.h"
#include "tessera/ops.h"

namespace tessera::llm {

// Batch tokens [token, token + n) store their K/V in cells [cell, cell + n).
struct KvRun {
  int64_t token = 0, cell = 0, n = 0;
};

// One micro-batch's graph under construction. Input tensors have no memory yet: the Session
// places and fills them once the builder is done.
struct GraphBuild {
  GraphBuild(Context& c, Graph& g, const Model& m, KvCache& kv) : ctx(c), graph(g), model(m), cache(kv) {}

  Context& ctx;
  Graph& graph;
  const Model& model;
  KvCache& cache;
  int64_t n_tokens = 0;
  int64_t n_kv = 0;  // cells attended: [0, n_kv), padded so that shapes repeat between tokens
  std::vector<KvRun> runs;
  Tensor* tokens = nullptr;                        // I32 [n_tokens]
  Tensor* positions = nullptr;                     // I32 [n_tokens]
  std::vector<int32_t> out_rows;                   // batch rows whose logits are wanted, ascending
  Tensor* out_ids = nullptr;                       // I32 [out_rows] when a GET_ROWS selects them
  std::vector<std::pair<int32_t, Tensor*>> masks;  // (window, F32 [n_kv, n_tokens]); 0: no window

  // The KQ mask for a sliding window (0: none), made on first use.
  Tensor* kq_mask(int32_t window);
  // The rows of x ([n, n_tokens]) whose logits are wanted.
  Tensor* select_outputs(Tensor* x);
  // Names a node "what.il" (il < 0: "what") so that placement reports and errors are readable.
  static Tensor* named(Tensor* t, const char* what, int64_t il = -1);
};

// RMS_NORM(x) * weight.
Tensor* rms_norm(GraphBuild& b, Tensor* x, Tensor* weight, float eps, const char* what, int64_t il);
// NORM(x) * weight + bias (bias optional).
Tensor* layer_norm(GraphBuild& b, Tensor* x, Tensor* weight, Tensor* bias, float eps, const char* what,
                   int64_t il);

struct AttentionParams {
  ops::RopeParams rope;
  Tensor* freq_factors = nullptr;  // F32 [n_rot / 2] or nullptr
  float kq_scale = 1.0f;
  int32_t window = 0;  // sliding window in positions; 0: attend to the whole sequence
};

// Self-attention of layer il over x's normed input `cur` ([n_embd, n_tokens]): Q/K/V projections,
// ROPE at the batch positions, K/V stored at the batch's cells, softmax over the cache cells under
// the mask (K/V heads shared by groups of n_head / n_head_kv query heads), output projection.
Tensor* attention(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, const AttentionParams& p);

enum class FfnActivation { Silu, Gelu };
// down(act(gate cur) * up cur).
Tensor* gated_ffn(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, FfnActivation act);

// Re-ropes every layer's cached K by each cell's recorded shift (KvCache::seq_shift);
// `shifts` is I32 [n_cells].
void rope_shift_k(GraphBuild& b, Tensor* shifts, const ops::RopeParams& rope, Tensor* freq_factors);

}  // namespace tessera::llm
