// The qwen3 architecture (Qwen3 dense): the llama decoder with per-head RMS norms of Q and K
// before rope, head sizes from attention.key_length / value_length, and NEOX rope. And qwen3moe
// (Qwen3-MoE, e.g. Qwen3-30B-A3B): the same attention with a mixture-of-experts FFN in every layer
// (moe_ffn: softmax over the router's logits, the top expert_used_count renormalised), each expert
// expert_feed_forward_length wide (absent: feed_forward_length / expert_used_count, as llama.cpp).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader&, Hparams&) {}

void read_moe_hparams(const HparamReader& r, Hparams& h) {
  if (h.n_expert == 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} is required (and must be positive)",
          r.full("expert_count"));
  h.n_ff_exp = r.int_or("expert_feed_forward_length", h.n_ff / h.n_expert_used, 1, int64_t{1} << 20);
  if (h.n_ff_exp < 1)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} is 0", r.full("expert_feed_forward_length"));
}

// Every layer: attention with its Q/K norms, then a gated FFN or the experts.
void declare(WeightPlan& p, bool experts) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer(il, l.q_norm, "attn_q_norm", h.head_dim());
    p.add_layer(il, l.k_norm, "attn_k_norm", h.head_dim());
    if (experts)
      p.add_moe_ffn(il, h.n_ff_exp);
    else
      p.add_gated_ffn(il);
  }
}
void declare_weights(WeightPlan& p) { declare(p, false); }
void declare_moe_weights(WeightPlan& p) { declare(p, true); }

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Neox); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kQwen3Architecture{"qwen3", read_hparams, declare_weights, build, build_k_shift};
const Architecture kQwen3MoeArchitecture{"qwen3moe", read_moe_hparams, declare_moe_weights, build,
                                         build_k_shift};

}  // namespace tessera::llm
