// The qwen2 architecture (Qwen2, Qwen2.5): the llama decoder with biases on the Q, K and V
// projections and NEOX rope.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader&, Hparams&) {}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer_bias(il, l.bq, "attn_q", h.n_embd_q());
    p.add_layer_bias(il, l.bk, "attn_k", h.n_embd_kv());
    p.add_layer_bias(il, l.bv, "attn_v", h.n_embd_v_kv());
    p.add_gated_ffn(il);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Neox); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kQwen2Architecture{"qwen2", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
